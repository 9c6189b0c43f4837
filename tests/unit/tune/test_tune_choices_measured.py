"""choices.jsonl holds only the collectives and sizes the sweep measured: collbench's own
control collectives (the barrier's all-reduce, the gathers of timings and identities, a
data check's small reductions) reach NCCL too and print the same debug lines.

The lines are written to NCCL 2.24's formats (COLL: src/enqueue.cc ncclEnqueueCheck;
TUNING: "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"), no GPU here."""

import json

from collbench.core.spec import SweepSpec
from collbench.run.tune.choices import collect_choices

PREFIX = "gpu0:11:11 [0] NCCL INFO "
FLOAT32, FLOAT64, UINT8 = 7, 8, 1


def _call(op: str, count: int, dtype: int, logged: int, algo: str) -> list[str]:
    """One call as rank 0 logs it: its COLL line, then the TUNING line of what NCCL chose."""
    return [
        f"{PREFIX}{op}: opCount 1f sendbuff 0x7f3a40000000 recvbuff 0x7f3a48000000 "
        f"count {count} datatype {dtype} op 0 root 0 comm 0x55d0c8f0a2b0 [nranks=2] "
        "stream 0x55d0c8e1f4a0",
        f"{PREFIX}{op}: {logged} Bytes -> Algo {algo} proto LL channel{{Lo..Hi}}={{0..1}}",
    ]


def _log(folder):
    lines = [f"{PREFIX}NCCL version 2.24.3+cuda12.4"]
    lines += _call("AllReduce", 1, UINT8, 1, "RING")  # barrier
    lines += _call("AllReduce", 256, FLOAT32, 1024, "TREE")  # measured: all_reduce 1 KiB
    lines += _call("AllReduce", 2, FLOAT32, 8, "RING")  # a small reduction of collbench's
    lines += _call("AllGather", 512, FLOAT32, 2048, "RING")  # measured: all_gather 4 KiB
    lines += _call("AllGather", 256, FLOAT64, 2048, "RING")  # timings gathered, float64
    lines += _call("Broadcast", 256, FLOAT32, 1024, "RING")  # not a tuned collective
    (folder / "nccl-gpu0-11.log").write_text("\n".join(lines) + "\n")


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_only_the_measured_collectives_and_sizes_are_kept(tmp_path):
    _log(tmp_path)
    spec = SweepSpec(
        collectives=("all_reduce", "all_gather"), min_bytes=1024, max_bytes=4096, factor=4.0
    )
    out = tmp_path / "choices.jsonl"
    assert collect_choices(tmp_path, "abc", out, spec) == 2
    kept = [
        (line["collective"], line["size_bytes"], line["algorithm"], line["count"])
        for line in _read(out)
    ]
    # the float64 gather of timings has the measured all-gather's size: its type tells it
    assert kept == [("all_gather", 4096, "ring", 1), ("all_reduce", 1024, "tree", 1)]


def test_without_a_spec_every_call_is_listed(tmp_path):
    """The filter is what drops them: unfiltered, the control collectives are there."""
    _log(tmp_path)
    out = tmp_path / "choices.jsonl"
    assert collect_choices(tmp_path, "abc", out) == 5
    lines = {(line["collective"], line["size_bytes"]): line["count"] for line in _read(out)}
    assert lines[("all_reduce", 1)] == 1 and lines[("broadcast", 1024)] == 1
    assert lines[("all_gather", 4096)] == 2  # the gather of timings counted with it


def test_sizes_come_from_the_passs_rows_when_the_spec_leaves_them_to_the_backend(tmp_path):
    """No --max-bytes: the spec's sizes are the backend's default, known to the ranks; the
    pass's run directory (folder/run) says which sizes it measured. Without one, nothing
    can be said to be measured, and nothing is kept."""
    _log(tmp_path)
    spec = SweepSpec(collectives=("all_reduce", "all_gather"), min_bytes=1024)
    out = tmp_path / "choices.jsonl"
    assert collect_choices(tmp_path, "abc", out, spec) == 0
