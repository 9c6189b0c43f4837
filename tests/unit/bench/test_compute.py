"""The overlap probe's compute kernel on CPU (the CUDA streams path runs on a lent GPU)."""

import pytest
import torch

from collbench.bench.overlap.matmul import MatmulKernel, square_ladder
from collbench.core.errors import SpecError

CPU = torch.device("cpu")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_kernel_multiplies_in_its_dtype(dtype):
    kernel = MatmulKernel(torch, CPU, dtype)
    assert kernel.check_supported() is None
    kernel.set_shape((64, 32, 16))
    assert kernel.flop_per_matmul == 2 * 64 * 32 * 16
    kernel.run(3)
    out = kernel._out[0]
    assert out.shape == (64, 32) and out.dtype == getattr(torch, dtype)
    expected = (kernel._a.double() @ kernel._b.double()).to(out.dtype)
    assert torch.allclose(out.double(), expected.double(), rtol=0.05, atol=0.5)
    assert kernel._a.abs().sum() > 0  # random operands, not zeros


def test_same_shape_keeps_its_operands():
    kernel = MatmulKernel(torch, CPU, "float32")
    kernel.set_shape((8, 8, 8))
    first = kernel._a
    kernel.set_shape((8, 8, 8))
    assert kernel._a is first
    kernel.set_shape((16, 8, 8))
    assert kernel._a.shape == (16, 8)


def test_several_streams_need_a_gpu():
    with pytest.raises(SpecError, match="--compute-streams: 2 needs a GPU"):
        MatmulKernel(torch, CPU, "float32", streams=2)


def test_square_ladder_halves_from_the_device_maximum():
    assert square_ladder("cuda") == [8192, 4096, 2048, 1024, 512, 256, 128, 64, 32]
    assert square_ladder("cpu") == [1024, 512, 256, 128, 64, 32]
