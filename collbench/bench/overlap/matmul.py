"""The overlap probe's compute: one matmul shape, repeated to fill a target time."""

from __future__ import annotations

from typing import Any

from collbench.bench.datacheck import torch_dtype
from collbench.core.dtypes import DTYPES
from collbench.core.errors import SpecError
from collbench.core.overlap import MAX_SQUARE

# Smallest square matmul tried when sizing the compute (MAX_SQUARE is the largest).
MIN_SQUARE = 32


class MatmulKernel:
    """(M x K) @ (K x N) matmuls in one dtype, on the current stream or spread round robin
    over `streams` side streams (GPU only), each writing its own output buffer."""

    def __init__(self, torch: Any, device: Any, dtype_name: str, streams: int = 1) -> None:
        self.torch, self.device, self.dtype_name = torch, device, dtype_name
        self.dtype = torch_dtype(DTYPES[dtype_name])
        if streams > 1 and device.type != "cuda":
            raise SpecError(
                "--compute-streams",
                streams,
                "needs a GPU (CUDA streams); on CPU the compute runs on the main thread, use 1",
            )
        self._side = (
            [torch.cuda.Stream(device=device) for _ in range(streams)] if streams > 1 else []
        )
        self.shape: tuple[int, int, int] | None = None
        self.batch = 1
        self._a = self._b = None
        self._out: list[Any] = []

    def set_shape(self, shape: tuple[int, int, int], batch: int = 1) -> None:
        """Allocate the operands for an (M, N, K) matmul, `batch` of them at once (a
        batched matmul) when batch > 1 (no-op if already that shape)."""
        if shape == self.shape and batch == self.batch:
            return
        m, n, k = shape
        torch = self.torch
        # Free the previous shape's tensors first: the capacity check (bench/capacity.py,
        # probe_operand_bytes) counts one set of A, B and the outputs, never two.
        self._a = self._b = None
        self._out = []
        self.shape = None
        lead = (batch,) if batch > 1 else ()
        # Random operands (zeros would let some kernels take shortcuts), drawn on the device:
        # an 8192 x 8192 draw on the host takes seconds.
        generator = torch.Generator(device=self.device).manual_seed(1234)
        kind = {"dtype": self.dtype, "device": self.device}
        self._a = torch.randn(*lead, m, k, generator=generator, **kind)
        self._b = torch.randn(*lead, k, n, generator=generator, **kind)
        self._out = [torch.empty(*lead, m, n, **kind) for _ in range(max(1, len(self._side)))]
        self.shape, self.batch = shape, batch

    @property
    def flop_per_matmul(self) -> int:
        m, n, k = self.shape
        return 2 * self.batch * m * n * k

    def check_supported(self) -> str | None:
        """Why this dtype cannot multiply matrices on this device, or None."""
        torch = self.torch
        try:
            probe = torch.ones(2, 2, dtype=self.dtype, device=self.device)
            torch.mm(probe, probe)
        except (RuntimeError, TypeError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else "unsupported"
            return (
                f"--compute-dtype: {self.dtype_name!r} cannot run a matmul on "
                f"{self.device.type} ({reason})"
            )
        return None

    def run(self, reps: int) -> None:
        """Enqueue `reps` matmuls (CPU: run them)."""
        mm = self.torch.bmm if self.batch > 1 else self.torch.mm
        a, b = self._a, self._b
        if not self._side:
            out = self._out[0]
            for _ in range(reps):
                mm(a, b, out=out)
            return
        cuda = self.torch.cuda
        current = cuda.current_stream(self.device)
        for stream in self._side:
            stream.wait_stream(current)
        for index in range(reps):
            slot = index % len(self._side)
            with cuda.stream(self._side[slot]):
                mm(a, b, out=self._out[slot])
        for stream in self._side:
            current.wait_stream(stream)


def square_ladder(device_type: str) -> list[int]:
    """Square sizes tried from the largest down when no --matmul-shape is given."""
    largest = MAX_SQUARE.get(device_type, MAX_SQUARE["cpu"])
    return [largest >> halvings for halvings in range((largest // MIN_SQUARE).bit_length())]
