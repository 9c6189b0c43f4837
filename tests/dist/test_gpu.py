"""The NCCL/RCCL path: world size 1 on one GPU (run where a GPU is lent; skipped elsewhere)."""

import pytest

from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,  # real NCCL ranks
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU"),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_nccl_sweep_on_one_gpu(tmp_path, dtype):
    out = tmp_path / "run"
    done = collbench(
        "sweep",
        "--backend",
        "auto",
        "--nproc",
        "1",
        "-c",
        "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all",
        "-b",
        "8",
        "-e",
        "256M",
        "-d",
        dtype,
        "--repeats",
        "1",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    rows = rows_of(out)
    assert rows and all(row["n_wrong"] == 0 for row in rows)
    assert {row["backend"] for row in rows} <= {"nccl", "rccl"}
    meta = meta_of(out)
    assert meta["timing_method"] == "cuda_events"
    assert meta["versions"][meta["backend"]]
    assert "cuda" in meta["ranks"][0]["device"]


@pytest.mark.parametrize("streams", [1, 2])
def test_overlap_probe_on_one_gpu(tmp_path, streams):
    out = tmp_path / "run"
    done = collbench(
        "overlap",
        "--nproc",
        "1",
        "-c",
        "all_reduce,all_gather",
        "-b",
        "1M",
        "-e",
        "256M",
        "-f",
        "16",
        "--compute-ratio",
        "0.5,1,2",
        "--compute-streams",
        str(streams),
        "--repeats",
        "1",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    rows = rows_of(out)
    assert len(rows) == 2 * 3 * 3
    for row in rows:
        assert row["kind"] == "overlap" and row["n_wrong"] == 0
        assert row["probe_timing"] == "cuda_events_two_streams_held"
        assert row["compute_dtype"] == "bfloat16" and row["compute_streams"] == streams
        assert 0 <= row["overlap_pct"] <= 100
        assert row["t_comm_during_us"] is not None and row["compute_tflops"] > 0
        # events on one device clock: the pair's span holds both of its parts
        assert row["t_both_us"] >= max(row["t_comp_during_us"], row["t_comm_during_us"]) * 0.99
