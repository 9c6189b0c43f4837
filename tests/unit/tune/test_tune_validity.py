"""Which collectives NCCL can run under a setting's NCCL_ALGO/NCCL_PROTO: the table read from
NCCL 2.30.7's src/graph/tuning.cc (analysis/tune/validity.py), per collective, with the
per-collective `allreduce:tree` form (NCCL 2.24+) read as NCCL's parseList reads it."""

import pytest

from collbench.analysis.tune.validity import (
    per_collective_hint,
    runnable_pairs,
    skip_reason,
    split_collectives,
)

THREE = ("all_reduce", "all_gather", "reduce_scatter")


@pytest.mark.parametrize(
    ("knobs", "runs"),
    [
        ({"NCCL_ALGO": "Tree"}, {"all_reduce"}),
        ({"NCCL_ALGO": "Ring"}, {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}),
        ({"NCCL_ALGO": "PAT"}, {"all_gather", "reduce_scatter"}),
        ({"NCCL_ALGO": "NVLS"}, {"all_reduce", "all_gather", "reduce_scatter"}),
        ({"NCCL_ALGO": "NVLSTree"}, {"all_reduce"}),
        ({"NCCL_ALGO": "CollNetDirect"}, {"all_reduce", "all_gather", "reduce_scatter"}),
        ({"NCCL_ALGO": "CollNetChain"}, {"all_reduce"}),
        ({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"}, set()),  # NVLS: Simple only
        ({"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}, {"all_reduce"}),
        (
            {"NCCL_ALGO": "NVLS,Ring", "NCCL_PROTO": "LL"},
            {"all_reduce", "all_gather"} | {"reduce_scatter", "broadcast"},
        ),
        ({"NCCL_ALGO": "^Ring"}, {"all_reduce", "all_gather", "reduce_scatter"}),
        (
            {"NCCL_ALGO": "ring;allreduce:tree"},
            {"all_reduce", "all_gather"} | {"reduce_scatter", "broadcast"},
        ),
        ({"NCCL_ALGO": "allgather:tree"}, {"all_reduce", "reduce_scatter", "broadcast"}),
        ({"NCCL_PROTO": "LL"}, {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}),
        (
            {"NCCL_BUFFSIZE": "4194304"},
            {"all_reduce", "all_gather"} | {"reduce_scatter", "broadcast"},
        ),
    ],
)
def test_what_nccl_runs_per_collective(knobs, runs):
    governed = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
    assert {name for name in governed if skip_reason(knobs, name) is None} == runs


def test_pairs_are_the_table_intersected_with_the_knobs():
    assert runnable_pairs({"NCCL_ALGO": "Tree,NVLS"}, "all_reduce") == [
        ("tree", "ll"),
        ("tree", "ll128"),
        ("tree", "simple"),
        ("nvls", "simple"),
    ]
    assert runnable_pairs({"NCCL_ALGO": "Tree,NVLS"}, "all_gather") == [("nvls", "simple")]
    assert runnable_pairs({"NCCL_PROTO": "LL"}, "reduce") == [("ring", "ll")]


def test_collectives_nccl_algo_does_not_govern_are_never_skipped():
    assert runnable_pairs({"NCCL_ALGO": "Tree"}, "all_to_all") is None
    assert skip_reason({"NCCL_ALGO": "Tree"}, "sendrecv") is None


def test_reasons_name_what_nccl_runs_in_its_own_words():
    assert skip_reason({"NCCL_ALGO": "Tree"}, "all_gather") == (
        "NCCL runs all_gather only with Ring, PAT, NVLS, CollNetDirect"
    )
    assert skip_reason({"NCCL_ALGO": "tree"}, "broadcast") == "NCCL runs broadcast only with Ring"
    assert skip_reason({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL,LL128"}, "all_reduce") == (
        "NCCL runs NVLS for all_reduce only with Simple"
    )


def test_split_keeps_order_and_the_hint_gives_the_per_collective_form():
    knobs = {"NCCL_ALGO": "Tree"}
    kept, skipped = split_collectives(knobs, THREE)
    assert kept == ("all_reduce",)
    assert [item.to_dict()["collective"] for item in skipped] == ["all_gather", "reduce_scatter"]
    hint = per_collective_hint(knobs, kept, skipped)
    assert hint is not None and "NCCL_ALGO=allreduce:tree" in hint
    assert "all_gather, reduce_scatter" in hint


def test_no_hint_where_it_would_not_help():
    # already per collective, or NCCL_PROTO is what leaves nothing, or nothing is skipped
    for knobs in (
        {"NCCL_ALGO": "allgather:tree"},
        {"NCCL_ALGO": "NVLS", "NCCL_PROTO": "LL"},
        {"NCCL_ALGO": "Ring"},
    ):
        kept, skipped = split_collectives(knobs, THREE)
        assert per_collective_hint(knobs, kept, skipped) is None, knobs
