"""Two "nodes" on one box: network namespaces (each run under its own hostname) joined by
a veth pair, optionally rate-shaped with `tc tbf` on both ends. Needs root, `ip`,
`unshare` (and `tc` for shaping); `reason_to_skip` says what is missing.

`two_nodes_two_links` joins them twice instead, by a `fast` and a (shaped) `slow` link named
alike in both namespaces, so that GLOO_SOCKET_IFNAME=fast|slow is a real choice of fabric
for `collbench tune` (`tune_pair`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

NODE_ADDRS = ("10.203.0.1", "10.203.0.2")
# two_nodes_two_links: one subnet per link, so each link is a route of its own.
LINK_SUBNETS = {"fast": "10.204.0", "slow": "10.204.1"}


def reason_to_skip(shaping: bool = False) -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    tools = ("ip", "unshare", "tc") if shaping else ("ip", "unshare")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    return f"missing {', '.join(missing)}" if missing else None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _shape(netns: str, link: str, rate_mbit: float) -> None:
    """tbf on one end of a link; shape both ends, or one direction runs unshaped."""
    # A bucket of a few packets: big bursts would flatter short transfers.
    tbf = ["tbf", "rate", f"{rate_mbit}mbit", "burst", "32kb", "latency", "100ms"]
    subprocess.run(
        ["ip", "netns", "exec", netns, "tc", "qdisc", "add", "dev", link, "root", *tbf],
        check=True,
        capture_output=True,
        timeout=10,
    )


@dataclass(frozen=True)
class Node:
    netns: str
    link: str
    addr: str
    host: str


@contextmanager
def two_nodes(rate_mbit: float | None = None) -> Iterator[list[Node]]:
    """Two namespaces joined by a veth pair; with rate_mbit, both ends shaped by tbf."""
    tag = f"{os.getpid() % 100000}"
    nodes = [Node(f"cbn{tag}-{i}", f"cbv{tag}{i}", NODE_ADDRS[i], f"cbnode{i}") for i in range(2)]
    try:
        for node in nodes:
            _ip("netns", "add", node.netns)
        _ip("link", "add", nodes[0].link, "type", "veth", "peer", "name", nodes[1].link)
        for node in nodes:
            _ip("link", "set", node.link, "netns", node.netns)
            _ip("-n", node.netns, "addr", "add", f"{node.addr}/24", "dev", node.link)
            _ip("-n", node.netns, "link", "set", node.link, "up")
            _ip("-n", node.netns, "link", "set", "lo", "up")
            if rate_mbit is not None:
                _shape(node.netns, node.link, rate_mbit)
        yield nodes
    finally:
        for node in nodes:
            subprocess.run(["ip", "netns", "delete", node.netns], capture_output=True, timeout=10)


def torchrun_pair(
    nodes: list[Node], out: Path, sweep_args: list[str], port: int, timeout_s: float = 240
) -> list[tuple[int, str, str]]:
    """One `collbench sweep --launcher torchrun` per node (one rank each), rendezvous at
    node 0; returns each node's (exit code, stdout, stderr)."""
    procs = []
    # node 1 first, node 0 a few seconds later: on a loaded machine node 0 (which checks that
    # --out is new) can start after node 1 has begun
    for node_rank, node in reversed(list(enumerate(nodes))):
        time.sleep(3 if node_rank == 0 else 0)
        command = [
            sys.executable,
            "-m",
            "collbench",
            "sweep",
            "--launcher",
            "torchrun",
            "--nnodes",
            "2",
            "--node-rank",
            str(node_rank),
            "--nproc-per-node",
            "1",
            "--master-addr",
            nodes[0].addr,
            "--master-port",
            str(port),
            *sweep_args,
            "--out",
            str(out),
        ]
        wrapped = [
            "ip",
            "netns",
            "exec",
            node.netns,
            "unshare",
            "--uts",
            "sh",
            "-c",
            f'hostname {node.host} && exec "$@"',
            "sh",
            *command,
        ]
        env = {**os.environ, "GLOO_SOCKET_IFNAME": node.link}
        procs.append(
            subprocess.Popen(
                wrapped, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
        )
    procs.reverse()  # node 0's first
    outputs = [proc.communicate(timeout=timeout_s) for proc in procs]
    return [
        (proc.returncode, stdout, stderr)
        for proc, (stdout, stderr) in zip(procs, outputs, strict=True)
    ]


@dataclass(frozen=True)
class LinkedNode:
    """A namespace "node" with one address per link; the links are named alike on every node."""

    netns: str
    host: str
    addrs: dict[str, str]


@contextmanager
def two_nodes_two_links(slow_mbit: float = 200) -> Iterator[list[LinkedNode]]:
    """Two namespaces joined by two veth pairs, each end called `fast` or `slow` inside its
    namespace (10.204.0.x/24 and 10.204.1.x/24); `slow` is shaped by tbf at slow_mbit on
    both ends, `fast` is not."""
    tag = f"{os.getpid() % 100000}"
    nodes = [
        LinkedNode(
            f"cbl{tag}-{i}",
            f"cbnode{i}",
            {link: f"{subnet}.{i + 1}" for link, subnet in LINK_SUBNETS.items()},
        )
        for i in range(2)
    ]
    try:
        for node in nodes:
            _ip("netns", "add", node.netns)
            _ip("-n", node.netns, "link", "set", "lo", "up")
        for link in LINK_SUBNETS:
            _join(nodes, link, tag)
        for node in nodes:
            _shape(node.netns, "slow", slow_mbit)
        yield nodes
    finally:
        for node in nodes:
            subprocess.run(["ip", "netns", "delete", node.netns], capture_output=True, timeout=10)


def _join(nodes: list[LinkedNode], link: str, tag: str) -> None:
    """One veth pair between the nodes, created under names unique in the root namespace
    (where both ends are born) and renamed `link` once each end is in its own namespace."""
    ends = [f"cb{link[0]}{tag}{i}" for i in range(2)]
    _ip("link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
    for node, end in zip(nodes, ends, strict=True):
        _ip("link", "set", end, "netns", node.netns)
        _ip("-n", node.netns, "link", "set", end, "name", link)
        _ip("-n", node.netns, "addr", "add", f"{node.addrs[link]}/24", "dev", link)
        _ip("-n", node.netns, "link", "set", link, "up")


def collbench_pair(
    nodes: list[LinkedNode],
    out: Path,
    words: list[str],
    args: list[str],
    port: int,
    env: dict[str, str],
    timeout_s: float = 240,
) -> list[tuple[int, str, str]]:
    """`collbench WORDS... --launcher torchrun ARGS` once per node (one rank each, under the node's
    hostname), rendezvous at node 0's `fast` address. GLOO_SOCKET_IFNAME comes from `env`
    only, never from the caller's environment: which interface runs is the test's choice.
    Returns each node's (exit code, stdout, stderr)."""
    base = {key: value for key, value in os.environ.items() if key != "GLOO_SOCKET_IFNAME"}
    procs = []
    # node 1 first, node 0 a few seconds later: on a loaded machine node 0 (which checks that
    # --out is new) can start after node 1 has made its first setting's folder there
    for node_rank, node in reversed(list(enumerate(nodes))):
        time.sleep(3 if node_rank == 0 else 0)
        command = [
            sys.executable,
            "-m",
            "collbench",
            *words,
            "--launcher",
            "torchrun",
            "--nnodes",
            "2",
            "--node-rank",
            str(node_rank),
            "--nproc-per-node",
            "1",
            "--master-addr",
            nodes[0].addrs["fast"],
            "--master-port",
            str(port),
            *args,
            "--out",
            str(out),
        ]
        procs.append(
            subprocess.Popen(
                _as_node(node.netns, node.host, command),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**base, **env},
            )
        )
    procs.reverse()
    try:
        outputs = [proc.communicate(timeout=timeout_s) for proc in procs]
    finally:
        for proc in procs:  # a node left waiting for its peer must not outlive the test
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [
        (proc.returncode, stdout, stderr)
        for proc, (stdout, stderr) in zip(procs, outputs, strict=True)
    ]


def tune_pair(
    nodes: list[LinkedNode],
    out: Path,
    tune_args: list[str],
    port: int,
    env: dict[str, str],
    timeout_s: float = 240,
) -> list[tuple[int, str, str]]:
    """`collbench tune` on both nodes of two_nodes_two_links (see collbench_pair); the tune
    sets GLOO_SOCKET_IFNAME per setting, `env` is the environment its baseline measures."""
    return collbench_pair(nodes, out, ["tune", "run"], tune_args, port, env, timeout_s)


def _as_node(netns: str, host: str, command: list[str]) -> list[str]:
    """`command` inside the namespace under its own hostname (a UTS namespace of its own)."""
    return [
        "ip",
        "netns",
        "exec",
        netns,
        "unshare",
        "--uts",
        "sh",
        "-c",
        f'hostname {host} && exec "$@"',
        "sh",
        *command,
    ]
