"""What NCCL chose, read back from its debug output (collbench.analysis.imports.nccl_choice).

No line here was captured from a GPU. Each sample is written to the format string in NCCL's
(or RCCL's) source at the tag named beside it, with the prefix of src/debug.cc
(`host:pid:tid [cudaDev] NCCL INFO `).
"""

from __future__ import annotations

import json

import pytest

from collbench.analysis.imports.nccl_choice import (
    ALGORITHMS,
    COPY_ENGINE,
    HIERARCHICAL_CE,
    MSCCL,
    MSCCLPP,
    ONE_RANK,
    PROTOCOLS,
    SYMMETRIC,
    debug_env,
    parse_choices,
    summarize,
)
from collbench.core.errors import SpecError

RANK0 = "gpu-node1:4242:4242 [0] NCCL INFO "
RANK1 = "gpu-node1:4243:4243 [1] NCCL INFO "


def coll(prefix: str, op: str, count: int, dtype: int, nranks: int, tail: str = "") -> str:
    """A COLL line: ncclEnqueueCheck's INFO(NCCL_COLL, "%s: opCount %lx sendbuff %p ...")
    (NCCL v2.20.5-1 .. v2.30.7-1 src/enqueue.cc, unchanged; RCCL appends `tail`)."""
    return (
        f"{prefix}{op}: opCount 1f sendbuff 0x7f3a40000000 recvbuff 0x7f3a48000000 "
        f"count {count} datatype {dtype} op 0 root 0 comm 0x55d0c8f0a2b0 "
        f"[nranks={nranks}] stream 0x55d0c8e1f4a0{tail}"
    )


def only(lines: list[str], world_size: int | None = None):
    (choice,) = parse_choices(lines, world_size)
    return choice


def test_v2_24_line_gives_names_and_channels() -> None:
    # v2.24.3-1 src/enqueue.cc:678 (same through v2.30.7-1 src/enqueue.cc:822):
    # "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
    choice = only(
        [RANK0 + "AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}"]
    )
    assert (choice.collective, choice.logged_bytes, choice.size_bytes) == (
        "all_reduce",
        4194304,
        4194304,
    )
    assert (choice.algorithm, choice.protocol, choice.channels) == ("ring", "simple", 16)
    assert (choice.line_number, choice.stream, choice.log_format) == (1, "gpu-node1:4242", "2.24")


def test_v2_24_channels_count_from_lo_to_hi() -> None:
    # A task placed after another in the same plan starts at a later channel.
    line = RANK0 + "ReduceScatter: 65536 Bytes -> Algo PAT proto LL channel{Lo..Hi}={3..4}"
    choice = only([line], world_size=8)
    assert (choice.algorithm, choice.protocol, choice.channels) == ("pat", "ll", 2)


def test_v2_24_all_gather_bytes_are_per_rank() -> None:
    # v2.24+ prints task->count * ncclTypeSize: the per-rank send count of an all-gather,
    # whereas collbench's size (nccl-tests') is the whole receive buffer.
    line = RANK0 + "AllGather: 1048576 Bytes -> Algo RING proto LL128 channel{Lo..Hi}={0..7}"
    assert only([line], world_size=4).size_bytes == 4 * 1048576
    unknown = only([line])
    assert unknown.size_bytes is None
    (summary,) = summarize([unknown])
    assert (summary.size_bytes, summary.size_is_logged) == (1048576, True)


def test_v2_24_line_paired_with_its_coll_line() -> None:
    lines = [
        coll(RANK0, "AllGather", 262144, 7, 4),  # float32
        RANK0 + "AllGather: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..7}",
    ]
    choice = only(lines)
    assert (choice.count, choice.dtype, choice.nranks) == (262144, "float32", 4)
    assert choice.size_bytes == 4 * 1048576
    assert choice.line_number == 2


def test_v2_23_numeric_ids_and_total_bytes() -> None:
    # v2.23.4-1 src/enqueue.cc:1855: "%s: %ld Bytes -> Algo %d proto %d time %f"; the bytes are
    # ncclTypeSize * ncclFuncMaxSendRecvCount: already the whole all-gather buffer.
    choice = only([RANK0 + "AllGather: 8388608 Bytes -> Algo 6 proto 2 time 57.312000"])
    assert (choice.collective, choice.size_bytes) == ("all_gather", 8388608)
    assert (choice.algorithm, choice.protocol, choice.channels) == ("pat", "simple", None)
    assert choice.log_format == "2.23"


def test_v2_20_unnamed_line_takes_its_collective_from_the_coll_line() -> None:
    # v2.20.5-1 src/enqueue.cc:1498 (v2.22.3-1 :1613, RCCL rocm-6.2.2 :1575):
    # "%ld Bytes -> Algo %d proto %d time %f"; nBytes = count * size * nRanks for
    # reduce-scatter (ncclInfoSetDerived, src/include/info.h:88).
    lines = [
        coll(RANK0, "ReduceScatter", 262144, 6, 4),  # float16: 262144 * 2 * 4 bytes
        RANK0 + "2097152 Bytes -> Algo 1 proto 0 time 21.500000",
        RANK0 + "512 Bytes -> Algo 0 proto 0 time 8.000000",  # no COLL line for it
    ]
    paired, unpaired = parse_choices(lines)
    assert (paired.collective, paired.size_bytes, paired.dtype) == (
        "reduce_scatter",
        2097152,
        "float16",
    )
    assert (paired.algorithm, paired.protocol, paired.log_format) == ("ring", "ll", "2.20")
    assert (unpaired.collective, unpaired.size_bytes, unpaired.algorithm) == (None, 512, "tree")


def test_interleaved_ranks_pair_within_their_own_process() -> None:
    # Only rank 0 prints TUNING lines; every rank prints COLL lines into the same stream.
    lines = [
        coll(RANK1, "AllReduce", 100, 7, 2),  # 400 bytes, rank 1's call
        coll(RANK0, "AllReduce", 256, 7, 2),  # 1024 bytes, rank 0's call
        RANK0 + "400 Bytes -> Algo 1 proto 0 time 5.000000",  # not rank 1's call
        RANK0 + "1024 Bytes -> Algo 0 proto 0 time 6.000000",
    ]
    first, second = parse_choices(lines)
    assert (first.collective, first.count) == (None, None)
    assert (second.collective, second.count, second.stream) == ("all_reduce", 256, "gpu-node1:4242")


@pytest.mark.parametrize(
    "prefix",
    [
        "[2025-03-12 10:11:12] gpu-node1:4242:4250 [0] NCCL INFO ",  # v2.26 NCCL_DEBUG_TIMESTAMP_LEVELS
        "[rank0]:gpu-node1:4242:4250 [0] NCCL INFO ",  # torchrun's per-rank prefix
        "[1,0]<stdout>:gpu-node1:4242:4250 [0] NCCL INFO ",  # mpirun --tag-output
        "0: gpu-node1:4242:4250 [0] NCCL INFO ",  # srun -l
    ],
)
def test_launcher_and_timestamp_prefixes(prefix: str) -> None:
    choice = only(
        [prefix + "Broadcast: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\r\n"]
    )
    assert (choice.collective, choice.algorithm, choice.channels) == ("broadcast", "ring", 1)
    assert choice.stream == "gpu-node1:4242"


def test_line_without_host_prefix() -> None:
    choice = only(["NCCL INFO Reduce: 64 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}"])
    assert (choice.collective, choice.stream) == ("reduce", None)


def test_unrelated_and_unknown_lines_are_skipped() -> None:
    lines = [
        "",
        "gpu-node1:4242:4242 [0] NCCL INFO NCCL version 2.24.3+cuda12.6",
        # v2.18.6-1 src/graph/tuning.cc:309-333, the table TUNING prints at init
        RANK0 + "  Algorithm   |                            Tree                  |",
        RANK0 + "    AllReduce |     6.8/  12.5 |    13.9/  24.0 |    40.0/ 120.0 |",
        # v2.30.7-1 src/enqueue.cc:2313 and the dev branch's "Best tuning" line
        RANK0 + "AllReduce: tuner chunk size 1048576 exceeds buffer max 524288, clamping",
        RANK0 + "Best tuning, algorithm, RING, protocol, SIMPLE",
        # TRACE lines repeat INFO ones in debug builds (v2.20.5-1 src/enqueue.cc:1499)
        "gpu-node1:4242:4242 [0] 12.345000 topoGetAlgoInfo:1499 NCCL TRACE 1024 Bytes -> Algo 1 proto 2 time 3.000000",
        "\ngpu-node1:4242:4242 [0] enqueue.cc:1 NCCL WARN Error : no algorithm/protocol available",
        RANK0 + "AllReduce: 4194304 Bytes -> Algo RI",  # cut short
        # a number int() refuses (over 4,300 digits): once a ValueError traceback
        RANK0
        + "AllReduce: 8 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0.."
        + "9" * 5000
        + "}",
        RANK0 + "AllReduce: " + "8" * 5000 + " Bytes -> Algo 1 proto 2 time 3.0",
        coll(RANK0, "Send", 1024, 7, 2),  # p2p: the tuner never decides it
        "step 10 loss 2.31",
    ]
    assert parse_choices(lines) == []


def test_symmetric_and_copy_engine_paths() -> None:
    lines = [
        # v2.27.3-1 src/enqueue.cc:1432
        RANK0
        + "AllReduce [Symmetric]: 65536 Bytes -> Kernel AllReduce_AGxLL_R nchannels 16 nthreads 512",
        # v2.28.9-1 src/scheduler/symmetric_sched.cc:229
        RANK0
        + "AllGather [Symmetric]: 4096 Bytes -> Kernel AllGather_LL nchannels 4 nthreads 256 nWorks 1",
        # v2.29.7-1 src/enqueue.cc:1555, v2.30.7-1 src/ce_coll.cc:1431,1435
        RANK0
        + "AllGather [Copy Engine]: 1048576 Bytes -> cudaMemcpy; CE synchronization with NVLS",
        RANK0 + "AllGather [Hierarchical CE]: 1048576 Bytes -> RMA proxy + CE",
    ]
    sym_ar, sym_ag, ce, hier = parse_choices(lines, world_size=8)
    assert (sym_ar.algorithm, sym_ar.kernel, sym_ar.channels, sym_ar.protocol) == (
        SYMMETRIC,
        "AllReduce_AGxLL_R",
        16,
        None,
    )
    assert (sym_ag.size_bytes, sym_ag.channels) == (8 * 4096, 4)
    assert (ce.algorithm, ce.channels, ce.size_bytes) == (COPY_ENGINE, None, 8 * 1048576)
    assert hier.algorithm == HIERARCHICAL_CE


def test_one_rank_collective_is_a_local_copy() -> None:
    # nRanks == 1: ncclLaunchOneRank, no tuner (v2.24.3-1 src/enqueue.cc:2137).
    choice = only([coll(RANK0, "AllReduce", 1024, 9, 1)])  # bfloat16
    assert (choice.algorithm, choice.protocol, choice.channels) == (ONE_RANK, None, None)
    assert (choice.size_bytes, choice.dtype, choice.log_format) == (2048, "bfloat16", "coll")


def test_rccl_lines() -> None:
    lines = [
        # RCCL rocm-6.2.2 src/enqueue.cc:2132, COLL line with " task %d globalrank %d"
        coll(RANK0, "AllReduce", 1048576, 7, 8, tail=" task 0 globalrank 0"),
        RANK0 + "4194304 Bytes -> Algo 1 proto 2 time 40.125000",  # src/enqueue.cc:1575
        # src/misc/msccl/msccl_lifecycle.cc:406 (mscclFuncNames) and :531
        coll(RANK0, "mscclFuncAllReduce", 2048, 7, 8, tail=" task 0 globalrank 0"),
        coll(RANK0, "mscclpp_ncclAllGather", 512, 7, 8),
    ]
    rccl, msccl, mscclpp = parse_choices(lines)
    assert (rccl.collective, rccl.algorithm, rccl.protocol, rccl.nranks) == (
        "all_reduce",
        "ring",
        "simple",
        8,
    )
    assert (msccl.collective, msccl.algorithm, msccl.size_bytes) == ("all_reduce", MSCCL, 8192)
    assert (mscclpp.collective, mscclpp.algorithm, mscclpp.size_bytes) == (
        "all_gather",
        MSCCLPP,
        8 * 2048,
    )


@pytest.mark.parametrize("algo_id, name", list(enumerate(ALGORITHMS)))
def test_algorithm_ids_follow_nccl_common_h(algo_id: int, name: str) -> None:
    # NCCL_ALGO_TREE 0 .. NCCL_ALGO_PAT 6 (v2.23.4-1 src/include/nccl_common.h:55-61)
    assert (
        only([RANK0 + f"AllReduce: 8 Bytes -> Algo {algo_id} proto 1 time 1.0"]).algorithm == name
    )


@pytest.mark.parametrize("proto_id, name", list(enumerate(PROTOCOLS)))
def test_protocol_ids_follow_nccl_common_h(proto_id: int, name: str) -> None:
    # NCCL_PROTO_LL 0, LL128 1, SIMPLE 2 (v2.12.12-1 devcomm.h:25 .. v2.30.7-1 nccl_tuner.h:38)
    assert (
        only([RANK0 + f"AllReduce: 8 Bytes -> Algo 1 proto {proto_id} time 1.0"]).protocol == name
    )


@pytest.mark.parametrize(
    "algo, expected",
    [
        ("COLLNET_DIRECT", "collnet_direct"),  # ncclAlgoToString
        ("CollNetChain", "collnet_chain"),  # ncclAlgoStr
        ("NVLSTree", "nvls_tree"),
        ("Unknown", "unknown"),  # ncclAlgoToString's default
    ],
)
def test_algorithm_words(algo: str, expected: str) -> None:
    line = RANK0 + f"AllReduce: 8 Bytes -> Algo {algo} proto Simple channel{{Lo..Hi}}={{0..0}}"
    assert (only([line]).algorithm, only([line]).protocol) == (expected, "simple")


def test_unknown_algorithm_id_is_kept_as_printed() -> None:
    assert only([RANK0 + "AllReduce: 8 Bytes -> Algo 9 proto 7 time 1.0"]).algorithm == "9"


def test_summarize_counts_each_choice_and_flags_mixed_sizes() -> None:
    line = (
        RANK0 + "AllReduce: {size} Bytes -> Algo {algo} proto SIMPLE channel{{Lo..Hi}}={{0..{hi}}}"
    )
    lines = [
        line.format(size=1024, algo="TREE", hi=1),
        line.format(size=1024, algo="TREE", hi=1),
        line.format(size=1024, algo="RING", hi=3),
        line.format(size=64, algo="TREE", hi=0),
    ]
    small, large = summarize(parse_choices(lines))
    assert (small.size_bytes, small.mixed) == (64, False)
    assert large.mixed
    assert [(used.algorithm, used.channels, used.count) for used in large.used] == [
        ("tree", 2, 2),
        ("ring", 4, 1),
    ]
    data = json.loads(json.dumps([summary.to_dict() for summary in (small, large)]))
    assert data[1]["mixed"] is True and data[1]["used"][0]["count"] == 2


def test_choice_to_dict_is_json() -> None:
    choice = only([coll(RANK0, "AllReduce", 4, 7, 1)])
    assert json.loads(json.dumps(choice.to_dict()))["algorithm"] == ONE_RANK


@pytest.mark.parametrize(
    "version, subsys",
    [
        (None, "COLL,TUNING"),  # unknown: the broadest setting
        ((2, 18, 6), "COLL,TUNING"),  # prints nothing either way (TUNING is silent before 2.20)
        ((2, 22, 3), "COLL,TUNING"),  # the TUNING line names no collective
        ((2, 23, 4), "TUNING"),
        ((2, 30, 7), "TUNING"),
    ],
)
def test_debug_env_per_version(version, subsys: str) -> None:
    assert debug_env(version) == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": subsys}


def test_debug_env_file_template() -> None:
    env = debug_env((2, 24, 3), debug_file="/runs/r1/nccl.%h.%p.log")
    assert env["NCCL_DEBUG_FILE"] == "/runs/r1/nccl.%h.%p.log"
    with pytest.raises(SpecError, match="NCCL_DEBUG_FILE"):
        debug_env(None, debug_file=" ")


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({"NCCL_DEBUG": "TRACE"}, ("TRACE", "INIT,BOOTSTRAP,ENV,TUNING")),
        ({"NCCL_DEBUG": "info"}, ("INFO", "INIT,BOOTSTRAP,ENV,TUNING")),
        ({"NCCL_DEBUG": "WARN"}, ("INFO", "TUNING")),
        ({"NCCL_DEBUG_SUBSYS": "INIT,ENV"}, ("INFO", "INIT,ENV,TUNING")),
        ({"NCCL_DEBUG_SUBSYS": "init,tuning"}, ("INFO", "init,tuning")),
        ({"NCCL_DEBUG_SUBSYS": "^TUNING"}, ("INFO", "ALL")),
        ({"NCCL_DEBUG_SUBSYS": "^TUNING,NET"}, ("INFO", "^NET")),
        ({"NCCL_DEBUG_SUBSYS": "ALL"}, ("INFO", "ALL")),
    ],
)
def test_debug_env_widens_what_the_user_asked_for(environ: dict, expected: tuple) -> None:
    env = debug_env((2, 24, 3), environ=environ)
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == expected
