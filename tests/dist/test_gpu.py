"""The NCCL/RCCL path: world size 1 on one GPU (run where a GPU is lent; skipped elsewhere)."""

import pytest

from tests.helpers import collbench, meta_of, rows_of

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU"),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_nccl_sweep_on_one_gpu(tmp_path, dtype):
    out = tmp_path / "run"
    done = collbench("sweep", "--backend", "auto", "--nproc", "1", "-c",
                     "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all",
                     "-b", "8", "-e", "256M", "-d", dtype, "--out", str(out))
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    rows = rows_of(out)
    assert rows and all(row["n_wrong"] == 0 for row in rows)
    assert {row["backend"] for row in rows} <= {"nccl", "rccl"}
    meta = meta_of(out)
    assert meta["timing_method"] == "cuda_events"
    assert meta["versions"][meta["backend"]]
    assert "cuda" in meta["ranks"][0]["device"]
