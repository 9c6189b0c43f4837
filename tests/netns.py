"""Two "nodes" on one box: network namespaces (each run under its own hostname) joined by
a veth pair, optionally rate-shaped with `tc tbf` on both ends. Needs root, `ip`,
`unshare` (and `tc` for shaping); `reason_to_skip` says what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

NODE_ADDRS = ("10.203.0.1", "10.203.0.2")


def reason_to_skip(shaping: bool = False) -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    tools = ("ip", "unshare", "tc") if shaping else ("ip", "unshare")
    missing = [tool for tool in tools if shutil.which(tool) is None]
    return f"missing {', '.join(missing)}" if missing else None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


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
                # A bucket of a few packets: big bursts would flatter short transfers.
                subprocess.run(
                    [
                        "ip",
                        "netns",
                        "exec",
                        node.netns,
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        node.link,
                        "root",
                        "tbf",
                        "rate",
                        f"{rate_mbit}mbit",
                        "burst",
                        "32kb",
                        "latency",
                        "100ms",
                    ],
                    check=True,
                    capture_output=True,
                    timeout=10,
                )
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
    for node_rank, node in enumerate(nodes):
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
    outputs = [proc.communicate(timeout=timeout_s) for proc in procs]
    return [
        (proc.returncode, stdout, stderr)
        for proc, (stdout, stderr) in zip(procs, outputs, strict=True)
    ]
