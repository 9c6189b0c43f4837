"""N "nodes" on one box, joined as a full mesh: one network namespace per node (each run under
its own hostname), one veth per node pair, optionally rate-shaped with `tc tbf`.

Every node has a stable /32 (10.205.0.K+1) on `node`, one end of a veth whose other end
(`node-peer`) stays in the same namespace: this kernel has no `dummy` link type, and an
address on a veth that is up is as good a local address. Every node pair has its own veth,
called `p<peer index>` inside each namespace, with a host route to the peer's /32 through it.
So GLOO_SOCKET_IFNAME=node gives every peer the same address for a node, and the traffic
between two nodes crosses exactly their pair's veth: shaping that veth (both ends) slows one
pair, shaping all of one node's pair veths slows that node. Needs root, `ip`, `unshare` and
`tc`; `tests.netns.reason_to_skip(shaping=True)` says what is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO

from tests.netns import _as_node, _ip, _shape

MESH_SUBNET = "10.205.0"
NODE_IFACE = "node"  # carries the node's /32; GLOO_SOCKET_IFNAME
NODE_IFACE_PEER = "node-peer"  # the other end of that veth, up, in the same namespace


@dataclass(frozen=True)
class MeshNode:
    """One namespace "node" of the mesh."""

    index: int
    netns: str
    host: str
    addr: str
    iface: str = NODE_IFACE

    def link_to(self, peer: int) -> str:
        """This node's end of the veth to node `peer`."""
        return f"p{peer}"


def pair_rates_mbit(
    n_nodes: int,
    node_mbit: dict[int, float] | None = None,
    pair_mbit: dict[tuple[int, int], float] | None = None,
) -> dict[tuple[int, int], float]:
    """The tbf rate of every shaped pair veth, keyed (i, j) with i < j: a node's rate applies
    to all its pairs, a pair's to that pair; where both apply the lower one wins."""
    rates: dict[tuple[int, int], float] = {}

    def lower(pair: tuple[int, int], rate_mbit: float) -> None:
        low, high = sorted(pair)
        if low == high or not 0 <= low < high < n_nodes:
            raise ValueError(f"pair {pair} is not two distinct nodes of 0..{n_nodes - 1}")
        rates[(low, high)] = min(rate_mbit, rates.get((low, high), rate_mbit))

    for node, rate_mbit in (node_mbit or {}).items():
        for peer in range(n_nodes):
            if peer != node:
                lower((node, peer), rate_mbit)
    for pair, rate_mbit in (pair_mbit or {}).items():
        lower(pair, rate_mbit)
    return rates


@contextmanager
def mesh(
    n_nodes: int = 4,
    node_mbit: dict[int, float] | None = None,
    pair_mbit: dict[tuple[int, int], float] | None = None,
) -> Iterator[list[MeshNode]]:
    """`n_nodes` namespaces (hosts cbmesh0.., addresses 10.205.0.1..) joined as a full mesh;
    node_mbit shapes all of a node's pair veths, pair_mbit one pair's veth, both ends (tbf).
    Every namespace is deleted on the way out, whatever happened."""
    if not 2 <= n_nodes <= 50:
        raise ValueError(f"n_nodes {n_nodes} must be in 2..50")
    rates = pair_rates_mbit(n_nodes, node_mbit, pair_mbit)
    tag = f"{os.getpid() % 100000}"
    nodes = [
        MeshNode(index, f"cbm{tag}-{index}", f"cbmesh{index}", f"{MESH_SUBNET}.{index + 1}")
        for index in range(n_nodes)
    ]
    try:
        for node in nodes:
            _ip("netns", "add", node.netns)
            _ip("-n", node.netns, "link", "set", "lo", "up")
            _self_link(node, tag)
        for first in nodes:
            for second in nodes[first.index + 1 :]:
                _pair_link(first, second, tag, rates.get((first.index, second.index)))
        yield nodes
    finally:
        for node in nodes:
            subprocess.run(["ip", "netns", "delete", node.netns], capture_output=True, timeout=10)


def _self_link(node: MeshNode, tag: str) -> None:
    """The veth that carries the node's /32, both ends in its namespace and up."""
    ends = [f"cbs{tag}n{node.index}{side}" for side in "ab"]
    _ip("link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
    for end, name in zip(ends, (NODE_IFACE, NODE_IFACE_PEER), strict=True):
        _ip("link", "set", end, "netns", node.netns)
        _ip("-n", node.netns, "link", "set", end, "name", name)
        _ip("-n", node.netns, "link", "set", name, "up")
    _ip("-n", node.netns, "addr", "add", f"{node.addr}/32", "dev", NODE_IFACE)


def _pair_link(first: MeshNode, second: MeshNode, tag: str, rate_mbit: float | None) -> None:
    """One veth between two nodes (born under names unique in the root namespace, renamed
    p<peer> inside each), a host route to the peer's /32 through it, tbf on both ends."""
    ends = [f"cb{tag}x{first.index}y{second.index}{side}" for side in "ab"]
    _ip("link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
    for node, peer, end in ((first, second, ends[0]), (second, first, ends[1])):
        link = node.link_to(peer.index)
        _ip("link", "set", end, "netns", node.netns)
        _ip("-n", node.netns, "link", "set", end, "name", link)
        _ip("-n", node.netns, "link", "set", link, "up")
        route = ["route", "add", f"{peer.addr}/32", "dev", link, "src", node.addr]
        _ip("-n", node.netns, *route)
        if rate_mbit is not None:
            _shape(node.netns, link, rate_mbit)


def link_bytes(node: MeshNode, link: str) -> tuple[int, int]:
    """(received, sent) bytes on one of the node's links, from its kernel counters."""
    counters = []
    for direction in ("rx_bytes", "tx_bytes"):
        done = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                node.netns,
                "cat",
                f"/sys/class/net/{link}/statistics/{direction}",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
        counters.append(int(done.stdout))
    return counters[0], counters[1]


def node_command(
    nodes: list[MeshNode], node: MeshNode, command_args: list[str], port: int
) -> list[str]:
    """`collbench COMMAND --launcher torchrun` for one node (one rank), rendezvous at node 0."""
    return [
        sys.executable,
        "-m",
        "collbench",
        command_args[0],
        "--launcher",
        "torchrun",
        "--nnodes",
        str(len(nodes)),
        "--node-rank",
        str(node.index),
        "--nproc-per-node",
        "1",
        "--master-addr",
        nodes[0].addr,
        "--master-port",
        str(port),
        *command_args[1:],
    ]


@dataclass
class MeshRun:
    """One collbench per node, started by `start_nodes`; `ended_at` (time.monotonic) fills in
    as `wait` sees each node end."""

    nodes: list[MeshNode]
    procs: list[subprocess.Popen]
    logs: list[tuple[IO[str], IO[str]]]  # each node's stdout and stderr, in temporary files
    ended_at: dict[int, float] = field(default_factory=dict)

    def rank_pid(self, index: int, timeout_s: float = 90) -> int:
        """The pid of node `index`'s rank (the `--launcher none` process torchrun started),
        found among the namespace's processes once it exists."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for pid in _netns_pids(self.nodes[index].netns):
                if _is_rank(pid):
                    return pid
            if self.procs[index].poll() is not None:
                raise AssertionError(f"node {index} ended before its rank started")
            time.sleep(0.2)
        raise AssertionError(f"node {index}'s rank did not start in {timeout_s} s")

    def wait(
        self, timeout_s: float, skip: frozenset[int] = frozenset()
    ) -> list[tuple[int | None, str, str]]:
        """Wait for every node not in `skip` (up to timeout_s in all), then kill whatever is
        left; each node's (exit code, stdout, stderr), code None for a node that had to be
        killed. Output goes to temporary files, so no pipe fills up while the nodes run."""
        deadline = time.monotonic() + timeout_s
        waiting = [index for index in range(len(self.procs)) if index not in skip]
        while waiting and time.monotonic() < deadline:
            for index in list(waiting):
                if self.procs[index].poll() is not None:
                    self.ended_at[index] = time.monotonic()
                    waiting.remove(index)
            time.sleep(0.1)
        codes = [proc.poll() for proc in self.procs]
        self.kill()
        return [(code, *self.output(index)) for index, code in enumerate(codes)]

    def output(self, index: int) -> tuple[str, str]:
        """Node `index`'s stdout and stderr so far."""
        texts = []
        for stream in self.logs[index]:
            stream.seek(0)
            texts.append(stream.read())
        return texts[0], texts[1]

    def kill(self) -> None:
        """Continue and kill every process left in the nodes' namespaces, then the nodes."""
        for node in self.nodes:
            for pid in _netns_pids(node.netns):
                _signal(pid, signal.SIGCONT)
                _signal(pid, signal.SIGKILL)
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


@contextmanager
def start_nodes(
    nodes: list[MeshNode],
    command_args: list[str],
    port: int,
    extra_env: dict[str, str] | None = None,
) -> Iterator[MeshRun]:
    """Start `collbench COMMAND_ARGS --launcher torchrun` on every node (see node_command),
    under the node's hostname, GLOO_SOCKET_IFNAME=node; everything left is killed on exit."""
    base = {key: value for key, value in os.environ.items() if key != "GLOO_SOCKET_IFNAME"}
    env = {**base, "GLOO_SOCKET_IFNAME": NODE_IFACE, **(extra_env or {})}
    run = MeshRun(nodes, [], [])
    try:
        for node in nodes:
            command = _as_node(node.netns, node.host, node_command(nodes, node, command_args, port))
            logs = (tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+"))
            run.logs.append(logs)
            run.procs.append(
                subprocess.Popen(command, stdout=logs[0], stderr=logs[1], text=True, env=env)
            )
        yield run
    finally:
        run.kill()
        for logs in run.logs:
            for stream in logs:
                stream.close()


def run_nodes(
    nodes: list[MeshNode],
    command_args: list[str],
    port: int,
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
    stop_node: int | None = None,
) -> list[tuple[int | None, str, str]]:
    """Run `collbench COMMAND_ARGS --launcher torchrun` on every node (one rank each, node 0
    the rendezvous) and return each node's (exit code, stdout, stderr); a node still running
    after timeout_s is killed and gets code None. With stop_node, that node's rank is
    SIGSTOPped as soon as it exists, the others are waited for, then it is killed."""
    with start_nodes(nodes, command_args, port, extra_env) as run:
        skip: frozenset[int] = frozenset()
        if stop_node is not None:
            os.kill(run.rank_pid(stop_node), signal.SIGSTOP)
            skip = frozenset({stop_node})
        return run.wait(timeout_s, skip)


def _netns_pids(netns: str) -> list[int]:
    done = subprocess.run(
        ["ip", "netns", "pids", netns], capture_output=True, text=True, timeout=10
    )
    return [int(word) for word in done.stdout.split()]


def _is_rank(pid: int) -> bool:
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return False
    # `python [-u] -m collbench ... --rank-env torch`: torchrun's own argv holds the same
    # words after `-m torch.distributed.run`, so the first module run must be collbench.
    if b"-m" not in argv or b"--rank-env" not in argv:
        return False
    module = argv.index(b"-m") + 1
    return module < len(argv) and argv[module] == b"collbench"


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass
