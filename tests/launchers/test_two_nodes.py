"""A real two-"node" torchrun job: two network namespaces (each with its own hostname) joined
by a veth pair, one torchrun per node, rendezvous across the veth (MASTER_ADDR is not
localhost). Needs root, `ip` and `unshare`; skipped elsewhere."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import meta_of, rows_of

SWEEP = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "64K", "-n", "5", "-w", "1"]
NODE_ADDRS = ("10.203.0.1", "10.203.0.2")


def _reason_to_skip():
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in ("ip", "unshare") if shutil.which(tool) is None]
    return f"missing {', '.join(missing)}" if missing else None


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def two_nodes():
    reason = _reason_to_skip()
    if reason:
        pytest.skip(reason)
    names = [f"cbn{os.getpid()}-{i}" for i in range(2)]
    links = [f"cbv{os.getpid() % 100000}{i}" for i in range(2)]
    try:
        for name in names:
            _ip("netns", "add", name)
        _ip("link", "add", links[0], "type", "veth", "peer", "name", links[1])
        for name, link, addr in zip(names, links, NODE_ADDRS, strict=True):
            _ip("link", "set", link, "netns", name)
            _ip("-n", name, "addr", "add", f"{addr}/24", "dev", link)
            _ip("-n", name, "link", "set", link, "up")
            _ip("-n", name, "link", "set", "lo", "up")
        yield list(zip(names, links, strict=True))
    finally:
        for name in names:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10)


def test_torchrun_across_two_namespaces(tmp_path, two_nodes):
    out = tmp_path / "run"  # one directory both "nodes" see, like a shared filesystem
    procs = []
    for node_rank, (netns, link) in enumerate(two_nodes):
        host = f"cbnode{node_rank}"
        command = [sys.executable, "-m", "collbench", "sweep", "--launcher", "torchrun",
                   "--nnodes", "2", "--node-rank", str(node_rank), "--nproc-per-node", "1",
                   "--master-addr", NODE_ADDRS[0], "--master-port", "29561", *SWEEP,
                   "--timeout", "60", "--out", str(out)]
        wrapped = ["ip", "netns", "exec", netns, "unshare", "--uts", "sh", "-c",
                   f'hostname {host} && exec "$@"', "sh", *command]
        env = {**os.environ, "GLOO_SOCKET_IFNAME": link}
        procs.append(subprocess.Popen(wrapped, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env))
    outputs = [proc.communicate(timeout=240) for proc in procs]
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr
    assert "# Collective: all_gather" in outputs[0][0]  # node 0 prints the table
    assert "# Collective" not in outputs[1][0]
    rows = rows_of(out)
    assert rows and all(row["n_wrong"] == 0 for row in rows)
    assert {(r["world_size"], r["nodes"], r["ranks_per_node"]) for r in rows} == {(2, 2, 1)}
    meta = meta_of(out)
    assert meta["hosts"] == ["cbnode0", "cbnode1"] and meta["launcher"] == "torchrun"
    assert meta["rendezvous"].startswith(f"{NODE_ADDRS[0]}:29561 ")
    assert [rank["host"] for rank in meta["ranks"]] == ["cbnode0", "cbnode1"]
    assert sorted(p.name for p in (out / "logs").iterdir()) == [
        "rank-00000.log", "rank-00001.log", "torchrun-node-0.log", "torchrun-node-1.log"]
