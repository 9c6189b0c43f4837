"""The ranks' agreement before joining (bench/agreement.py): pure judgements on facts, and
the exchange through a real torch store (HashStore, threads as ranks)."""

import threading
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest
import torch.distributed as dist

from collbench.bench.agreement import (
    Placement,
    RankFacts,
    Verdict,
    disagreement,
    exchange,
    judge,
    places_by_host,
    shared_gpus,
)
from collbench.core.errors import RunFailed, SpecError

GPUS = tuple(f"GPU-{i}" for i in range(8))


def _facts(host="node1", backend="nccl", devices=GPUS, local_rank=0, **changes):
    facts = RankFacts(
        host=host,
        backend=backend,
        device_count=len(devices),
        devices=devices,
        torch="2.5.1+cu124",
        nccl="2.21.5",
        collbench="0.1.0",
        plan="abc",
        local_rank=local_rank,
    )
    return replace(facts, **changes)


def _node(host, ranks_on_node, first_local=0, devices=GPUS, **changes):
    return [
        _facts(host, devices=devices, local_rank=first_local + i, **changes)
        for i in range(ranks_on_node)
    ]


def test_agreeing_ranks_pass():
    facts = _node("node1", 8) + _node("node2", 8)
    assert disagreement(facts) is None
    assert judge(facts) == Verdict()


def test_a_node_that_resolved_gloo_is_named_with_its_ranks():
    facts = _node("node1", 4) + _node("node2", 4, backend="gloo", devices=(), plan="def")
    line = disagreement(facts)
    assert line is not None and "\n" not in line
    assert "backend: nccl on node1 (4 ranks), gloo on node2 (4 ranks)" in line
    # GPU counts and gloo's default sizes follow from the backend: not findings of their own
    assert "GPUs visible" not in line and "measurement plan" not in line
    verdict = judge(facts)
    with pytest.raises(RunFailed, match="the ranks disagree before joining: backend"):
        verdict.raise_error()


@pytest.mark.parametrize(
    "field, value, shown",
    [
        ("torch", "2.4.0+cu121", "torch version: 2.5.1+cu124 on node1, node2, node3 and 1 more"),
        ("nccl", "2.18.1", "NCCL/RCCL version: 2.21.5 on node1"),
        ("collbench", "0.0.9", "collbench version: 0.1.0"),
        ("devices", GPUS[:7], "GPUs visible: 8 on node1, node2, node3 and 1 more host(s) (32"),
    ],
)
def test_each_fact_that_differs_is_named(field, value, shown):
    facts = [f for host in ("node1", "node2", "node3", "node4") for f in _node(host, 8)]
    odd = _node("node5", 8)
    odd = [replace(f, **{field: value}) for f in odd]
    if field == "devices":
        odd = [replace(f, device_count=len(value)) for f in odd]
    line = disagreement(facts + odd)
    assert shown in line and "node5 (8 ranks)" in line, line


def test_a_different_plan_is_named_by_digest():
    facts = _node("node1", 2) + _node("node2", 2, plan="0123456789abcdef")
    line = disagreement(facts)
    assert "measurement plan (sizes, counts, knobs): digest abc on node1 (2 ranks), " in line
    assert "digest 01234567 on node2 (2 ranks)" in line


def test_one_odd_rank_is_named_by_rank():
    facts = _node("node1", 3)
    facts[2] = replace(facts[2], torch="2.3.0")
    assert "2.3.0 on node1 (rank 2)" in disagreement(facts)


def test_many_hosts_are_summarised():
    facts = [_facts(f"n{i}", backend="gloo" if i % 2 else "nccl") for i in range(20)]
    line = disagreement(facts)
    assert "n0, n2, n4 and 7 more host(s) (10 ranks)" in line


@pytest.mark.parametrize(
    "visible, ranks, refused",
    [
        (8, 8, False),
        (8, 9, True),  # --nproc-per-node 9
        (7, 8, True),  # a node with a GPU missing
        (1, 1, False),
    ],
)
def test_more_local_ranks_than_gpus_is_refused_naming_host_and_counts(visible, ranks, refused):
    facts = _node("gpu7", ranks, devices=GPUS[:visible])
    message = shared_gpus(facts, [f.local_rank for f in facts])
    if not refused:
        assert message is None
        return
    assert message.startswith(f"gpu7: {ranks} ranks on {visible} visible GPU(s): ranks 0, ")
    assert f"start at most {visible} rank(s) on this host" in message
    verdict = judge(facts)
    assert verdict.usage
    with pytest.raises(SpecError, match="gpu7: "):
        verdict.raise_error()


def test_one_gpu_per_task_is_no_sharing():
    """Slurm --gpus-per-task=1: each rank sees one GPU of its own (index 0 for all)."""
    facts = [_facts("node1", devices=(gpu,), local_rank=i) for i, gpu in enumerate(GPUS)]
    assert judge(facts) == Verdict()


def test_gloo_ranks_share_no_gpu():
    facts = _node("cpu1", 16, backend="gloo", devices=())
    assert shared_gpus(facts, list(range(16))) is None


@pytest.mark.parametrize(
    "hosts, places",
    [
        (["a", "a", "b", "b"], [(0, 2, 0), (1, 2, 0), (0, 2, 1), (1, 2, 1)]),
        (["a", "b", "a", "b"], [(0, 2, 0), (0, 2, 1), (1, 2, 0), (1, 2, 1)]),  # round robin
        (["b", "a", "a"], [(0, 1, 0), (0, 2, 1), (1, 2, 1)]),
        (["solo"], [(0, 1, 0)]),
    ],
)
def test_local_rank_derived_by_host_grouping(hosts, places):
    assert places_by_host(hosts) == [Placement(*place) for place in places]


def test_derived_local_ranks_reach_every_rank_and_catch_sharing():
    """No variable gave a local rank: each would have said 0 and all used GPU 0."""
    facts = [_facts(host, local_rank=None) for host in ("a", "b", "a", "b")]
    verdict = judge(facts)
    assert verdict.error is None
    assert [verdict.placement(rank) for rank in range(4)] == places_by_host(["a", "b", "a", "b"])
    crowded = [_facts("a", devices=GPUS[:2], local_rank=None) for _ in range(3)]
    assert "a: 3 ranks on 2 visible GPU(s): ranks 0, 2 would share" in judge(crowded).error


def test_verdict_round_trips():
    verdict = Verdict("x", True, ("a", "b"), (0, 1, 0))
    assert msgspec.json.decode(msgspec.json.encode(verdict), type=Verdict) == verdict
    facts = _facts()
    assert msgspec.json.decode(msgspec.json.encode(facts), type=RankFacts) == facts


def _exchange_all(facts, store=None):
    store = store or dist.HashStore()
    results = [None] * len(facts)

    def run(rank):
        try:
            results[rank] = exchange(store, rank, len(facts), facts[rank], 20.0)
        except Exception as error:  # noqa: BLE001
            results[rank] = error

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(len(facts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def test_exchange_through_a_real_store_gives_every_rank_the_same_verdict():
    facts = _node("node1", 3)
    facts[1] = replace(facts[1], backend="gloo")
    results = _exchange_all(facts)
    assert len({result.error for result in results}) == 1
    assert "backend: nccl on node1 (2 ranks), gloo on node1 (rank 1)" in results[0].error


def test_exchange_names_ranks_that_never_came():
    store = dist.HashStore()
    with pytest.raises(RunFailed, match=r"rank\(s\) 1, 2 of 3 never reached the rendezvous"):
        exchange(store, 0, 3, _facts(), 0.3)


def test_the_shared_gpu_test_mode_makes_each_rank_a_host_and_shares_no_gpu(monkeypatch):
    """COLLBENCH_SHARED_GPU=1 (issue 40 item 3): 2 ranks on a 1-GPU host are two hosts, so
    the agreement does not refuse them and NCCL (NCCL_HOSTID) takes each for a node."""
    from collbench.bench.provenance import rank_host

    crowded = [_facts("gpu1", devices=GPUS[:1], local_rank=rank) for rank in range(2)]
    assert "gpu1: 2 ranks on 1 visible GPU(s)" in judge(crowded).error
    monkeypatch.setenv("COLLBENCH_SHARED_GPU", "1")
    hosts = [rank_host(rank) for rank in range(2)]
    assert hosts[1] == hosts[0].replace("~r0", "~r1") and hosts[0].endswith("~r0")
    apart = [replace(fact, host=host) for fact, host in zip(crowded, hosts, strict=True)]
    assert judge(apart).error is None
    monkeypatch.setenv("COLLBENCH_SHARED_GPU", "yes")  # only "1" turns it on
    assert "~" not in rank_host(1)


def test_the_plan_digest_counts_a_topology_file_by_content_not_path(tmp_path):
    """torchrun nodes started from different directories name the same topology file by
    different absolute paths: the same plan (issue 40 item 8); another content is not."""
    from collbench.bench.agreement import plan_digest
    from collbench.core.spec import SweepSpec

    text = (Path(__file__).parents[3] / "topologies" / "dgx-h100.yaml").read_text()
    paths = [tmp_path / "a" / "fabric.yaml", tmp_path / "b" / "fabric.yaml", tmp_path / "c.yaml"]
    for path, body in zip(paths, [text, text, text + "\n# another fabric\n"], strict=True):
        path.parent.mkdir(exist_ok=True)
        path.write_text(body)
    digests = [plan_digest(SweepSpec(topology=("mine", str(path)))) for path in paths]
    assert digests[0] == digests[1] != digests[2]
