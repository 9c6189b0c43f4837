"""Rank-dependent input patterns with exactly known results, and the wrong-element count.

Rank r's input element g holds v(r, g), a small integer chosen so that every partial
result of the reduction stays exactly representable in the dtype (floats included), for
any reduction order. Where that is impossible (e.g. a bfloat16 sum over more than 256
ranks) floats are compared with a tolerance of n ulps; integers wrap identically in any
order, so they are always exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.collectives.base import Block
from collbench.dtypes import DType

# Elements processed at a time, so checking an 8 GiB buffer needs little extra memory.
CHUNK_ELEMS = 1 << 22
_RANK_STRIDE = 131  # not 1 mod any modulus used, so a one-element shift is caught
_MIN_MAX_SPREAD = 16
_PROD_TWOS = 3


@dataclass(frozen=True)
class Pattern:
    """The input pattern for one (dtype, op, world size)."""

    dtype: DType
    op: str | None  # None for data-movement collectives
    world_size: int

    def _params(self) -> tuple[int, int]:
        budget = self.dtype.exact_limit // self.world_size
        rank_mod = min(self.world_size, max(1, budget // 2))
        pos_mod = max(1, min(4096, budget - (rank_mod - 1)))
        return rank_mod, pos_mod

    def exact(self) -> bool:
        """Whether every reduction result is exact (else floats get a tolerance)."""
        if not self.dtype.is_float or self.op in (None, "min", "max", "prod"):
            return True
        rank_mod, pos_mod = self._params()
        largest = self.world_size * (rank_mod - 1 + pos_mod)
        return self.op == "sum" and largest <= self.dtype.exact_limit

    def _min_max_modulus(self) -> int:
        return max(1, min(self.world_size, self.dtype.exact_limit - _MIN_MAX_SPREAD))

    def values(self, torch, rank: int, index):
        """v(rank, index) as int64 for an int64 tensor of element indices."""
        if self.op is None:
            modulus = _movement_modulus(self.dtype.exact_limit)
            return (rank * _RANK_STRIDE + index) % modulus + 1
        if self.op in ("sum", "avg"):
            rank_mod, pos_mod = self._params()
            return (rank % rank_mod) + (index % pos_mod) + 1
        if self.op == "prod":
            twos = min(self.world_size, _PROD_TWOS)
            return torch.where((rank + index) % self.world_size < twos, 2, 1)
        # min / max
        return (rank + index) % self._min_max_modulus() + (index % _MIN_MAX_SPREAD) + 1

    def reduced(self, torch, index):
        """The reduction over all ranks of v(., index), float64 (avg) or int64."""
        n = self.world_size
        if self.op in ("sum", "avg"):
            rank_mod, pos_mod = self._params()
            # sum over r < n of (r % rank_mod), in closed form
            tail = n % rank_mod
            rank_part = (n // rank_mod) * rank_mod * (rank_mod - 1) // 2 + tail * (tail - 1) // 2
            total = rank_part + n * ((index % pos_mod) + 1)
            return total.double() / n if self.op == "avg" else total
        if self.op == "prod":
            return torch.full_like(index, 2 ** min(n, _PROD_TWOS))
        spread = index % _MIN_MAX_SPREAD + 1
        if self.op == "min":
            return spread
        return spread + self._min_max_modulus() - 1


def _movement_modulus(exact_limit: int) -> int:
    """A prime no larger than the exact-integer limit: distinct ranks give distinct values."""
    for limit, prime in ((127, 127), (256, 251), (2048, 2039)):
        if exact_limit <= limit:
            return prime
    return 65521


def fill(torch, tensor, pattern: Pattern, rank: int) -> None:
    """Write rank's pattern into a 1-D tensor, chunk by chunk."""
    for start in range(0, tensor.numel(), CHUNK_ELEMS):
        stop = min(start + CHUNK_ELEMS, tensor.numel())
        index = torch.arange(start, stop, device=tensor.device, dtype=torch.int64)
        tensor[start:stop].copy_(pattern.values(torch, rank, index).to(tensor.dtype))


def count_wrong(torch, recv, blocks: list[Block], pattern: Pattern) -> int:
    """Elements of recv that differ from what the blocks say they must hold."""
    wrong = 0
    for block in blocks:
        for start in range(0, block.length, CHUNK_ELEMS):
            length = min(CHUNK_ELEMS, block.length - start)
            index = torch.arange(block.in_offset + start, block.in_offset + start + length,
                                 device=recv.device, dtype=torch.int64)
            if block.source_rank is None:
                expected = pattern.reduced(torch, index)
            else:
                expected = pattern.values(torch, block.source_rank, index)
            got = recv[block.out_start + start : block.out_start + start + length]
            wrong += _mismatches(torch, got, expected, pattern)
    return wrong


def _mismatches(torch, got, expected, pattern: Pattern) -> int:
    if pattern.exact():
        # Casting the exact result to the dtype is what a correct collective produces
        # (rounding is monotone, so min/max commute with it; integers wrap alike).
        return int((got != expected.to(got.dtype)).sum().item())
    tolerance = torch.finfo(got.dtype).eps * pattern.world_size
    reference = expected.double()
    error = (got.double() - reference).abs()
    return int((error > tolerance * reference.abs().clamp(min=1)).sum().item())
