"""A real two-"node" torchrun job: two network namespaces (each with its own hostname) joined
by a veth pair, one torchrun per node, rendezvous across the veth (MASTER_ADDR is not
localhost). Needs root, `ip` and `unshare`; skipped elsewhere."""

import pytest

from tests.helpers import meta_of, rows_of
from tests.netns import NODE_ADDRS, reason_to_skip, torchrun_pair, two_nodes

pytestmark = pytest.mark.slow  # network namespaces and a real two-node torchrun job

SWEEP = [
    "-c",
    "all_reduce,all_gather",
    "-b",
    "1K",
    "-e",
    "64K",
    "-n",
    "5",
    "-w",
    "1",
    "--timeout",
    "60",
    "--repeats",
    "1",
    "--topology",  # recorded by every rank under torchrun, as under the local launcher
    "dgx-h100",
]


def test_torchrun_across_two_namespaces(tmp_path):
    reason = reason_to_skip()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "run"  # one directory both "nodes" see, like a shared filesystem
    with two_nodes() as nodes:
        results = torchrun_pair(nodes, out, SWEEP, port=29561)
    for code, _, stderr in results:
        assert code == 0, stderr
    assert "# Collective: all_gather" in results[0][1]  # node 0 prints the table
    assert "# Collective" not in results[1][1]
    rows = rows_of(out)
    assert rows and all(row["n_wrong"] == 0 for row in rows)
    assert {(r["world_size"], r["nodes"], r["ranks_per_node"]) for r in rows} == {(2, 2, 1)}
    assert {r["topology"] for r in rows} == {"dgx-h100"}
    meta = meta_of(out)
    assert meta["hosts"] == ["cbnode0", "cbnode1"] and meta["launcher"] == "torchrun"
    assert meta["rendezvous"].startswith(f"{NODE_ADDRS[0]}:29561 ")
    assert [rank["host"] for rank in meta["ranks"]] == ["cbnode0", "cbnode1"]
    assert sorted(p.name for p in (out / "logs").iterdir()) == [
        "rank-00000.log",
        "rank-00001.log",
        "torchrun-node-0.log",
        "torchrun-node-1.log",
    ]
