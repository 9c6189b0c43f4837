"""Rank-dependent input patterns with exactly known results, and the wrong-element count.

The method, in full: docs/architecture.md#collbench-bench-datacheck-py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from collbench.core.collectives.base import Block
from collbench.core.dtypes import DType

# Elements processed at a time, so checking an 8 GiB buffer needs little extra memory.
CHUNK_ELEMS = 1 << 22
_RANK_STRIDE = 131  # not 1 mod any modulus used, so a one-element shift is caught
_MIN_MAX_SPREAD = 16
_PROD_TWOS = 3
_SPARSE_POS_MOD = 7


@dataclass(frozen=True)
class Pattern:
    """The input pattern for one (dtype, op, world size)."""

    dtype: DType
    op: str | None  # None for data-movement collectives
    world_size: int

    def _dense(self) -> tuple[int, int] | None:
        """(rank modulus, position modulus) when every rank can contribute exactly."""
        budget = self.dtype.exact_limit // self.world_size
        if budget < 4:
            return None
        rank_mod = min(self.world_size, budget // 2)
        return rank_mod, min(4096, budget - (rank_mod - 1))

    def _sparse_active(self) -> int:
        """Ranks contributing to each element when not all of them can (the rest send 0)."""
        return max(1, self.dtype.exact_limit // (_SPARSE_POS_MOD + 1))

    def _min_max_modulus(self) -> int:
        return max(1, min(self.world_size, self.dtype.exact_limit - _MIN_MAX_SPREAD))

    def values(self, torch, rank: int, index):
        """v(rank, index) as int64 for an int64 tensor of element indices."""
        if self.op is None:
            modulus = _movement_modulus(self.dtype.exact_limit)
            return (rank * _RANK_STRIDE + index) % modulus + 1
        if self.op in ("sum", "avg"):
            dense = self._dense()
            if dense:
                rank_mod, pos_mod = dense
                return (rank % rank_mod) + (index % pos_mod) + 1
            active = (rank + index) % self.world_size < self._sparse_active()
            return torch.where(active, (rank % 2) + (index % _SPARSE_POS_MOD) + 1, 0)
        if self.op == "prod":
            twos = min(self.world_size, _PROD_TWOS)
            return torch.where((rank + index) % self.world_size < twos, 2, 1)
        # min / max
        return (rank + index) % self._min_max_modulus() + (index % _MIN_MAX_SPREAD) + 1

    def reduced(self, torch, index):
        """The reduction over all ranks of v(., index), float64 (avg) or int64."""
        n = self.world_size
        if self.op in ("sum", "avg"):
            total = self._sum(torch, index)
            return total.double() / n if self.op == "avg" else total
        if self.op == "prod":
            return torch.full_like(index, 2 ** min(n, _PROD_TWOS))
        spread = index % _MIN_MAX_SPREAD + 1
        return spread if self.op == "min" else spread + self._min_max_modulus() - 1

    def _sum(self, torch, index):
        n = self.world_size
        dense = self._dense()
        if dense:
            rank_mod, pos_mod = dense
            # sum over r < n of (r % rank_mod), in closed form
            tail = n % rank_mod
            rank_part = (n // rank_mod) * rank_mod * (rank_mod - 1) // 2 + tail * (tail - 1) // 2
            return rank_part + n * ((index % pos_mod) + 1)
        # Active ranks for element g form the cyclic window [s, s + m) with s = -g mod n;
        # each adds (r % 2) + (g % P) + 1. Odd ranks in [a, b) number b//2 - a//2.
        active = self._sparse_active()
        start = (-index) % n
        end = start + active
        odd = torch.clamp(end, max=n) // 2 - start // 2 + torch.clamp(end - n, min=0) // 2
        return active * ((index % _SPARSE_POS_MOD) + 1) + odd


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
            first = block.in_offset + start
            index = torch.arange(first, first + length, device=recv.device, dtype=torch.int64)
            if block.source_rank is None:
                expected = pattern.reduced(torch, index)
            else:
                expected = pattern.values(torch, block.source_rank, index)
            got = recv[block.out_start + start : block.out_start + start + length]
            wrong += _mismatches(torch, got, expected, pattern)
    return wrong


def _mismatches(torch, got, expected, pattern: Pattern) -> int:
    if pattern.op != "avg":  # every other result is exact
        # Casting the exact result to the dtype is what a correct collective produces
        # (rounding is monotone, so min/max commute with it; integers wrap alike).
        return int((got != expected.to(got.dtype)).sum().item())
    # avg: the sum is exact, then divided (gloo), or each input pre-scaled by 1/n rounded to
    # the dtype and summed with a rounding at every hop (NCCL): avg_relative_bound.
    tolerance = avg_relative_bound(pattern.dtype, pattern.world_size)
    reference = expected.double()
    error = (got.double() - reference).abs()
    return int((error > tolerance * reference.abs().clamp(min=1)).sum().item())


def avg_relative_bound(dtype: DType, world_size: int) -> float:
    """Largest relative error of a correct avg of non-negative inputs over `world_size` ranks.

    NCCL computes avg of a float type as a sum of inputs premultiplied by s = 1/n rounded to
    the type (through double and float: `(T)float(1.0/n)`), rounding the product and the
    partial sum at every hop: a ring adds n - 1 times along one chunk's path, and no
    algorithm (tree, NVLS, CollNet) adds more often along one path. With u the unit roundoff
    (half an eps) and d = |n*s - 1| the rounding of 1/n, the error relative to the exact
    mean is at most d + (1 + d) * ((1 + u)**n - 1): one rounding for the product, n - 1 for
    the additions (Higham, recursive summation of non-negative terms). A sum, then one
    division (gloo) stays inside it. The bound grows with n: at bfloat16 it is ~3.3 eps at 6
    ranks, ~6.4 at 12, ~12.8 at 24, so a fixed 4 eps would fail correct results."""
    bits = dtype.exact_limit.bit_length() - 1  # the significand's: exact_limit is 2**bits
    unit = 2.0**-bits
    n = max(1, world_size)
    scale = Fraction(1 / n)  # the double 1.0/n: float64's scale; narrower types go via float
    if bits <= _FLOAT_BITS:
        scale = _round_to_bits(_round_to_bits(scale, _FLOAT_BITS), bits)
    scale_error = float(abs(n * scale - 1))
    return scale_error + (1 + scale_error) * math.expm1(n * math.log1p(unit))


_FLOAT_BITS = 24


def _round_to_bits(value: Fraction, bits: int) -> Fraction:
    """`value` (> 0) rounded to nearest-even with `bits` significant bits (no exponent limit:
    1/n for any world size is far from a type's underflow)."""
    exponent = math.floor(math.log2(value))
    while Fraction(2) ** exponent > value:  # log2 of a Fraction is a float: correct it
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= value:
        exponent += 1
    step = Fraction(2) ** (exponent - bits + 1)
    return round(value / step) * step


def ones_window(dtype: DType, group_size: int) -> int:
    """How many members of a group contribute a one to each element of a sum-of-ones check
    (bench/doctor_rounds.py's all-reduce check), and so the exact result: every member while the
    count is exact in the dtype, else exact_limit of them. A bfloat16 sum of 257 ones is not
    257: past 256 adding 1 rounds back (257 -> 256), so ones from every rank of a large
    group would be compared with a value no correct reduction produces."""
    return min(group_size, dtype.exact_limit)


def fill_ones_window(torch, tensor, member: int, group_size: int, dtype: DType) -> None:
    """Member `member`'s input to a sum-of-ones check: element g holds 1 when the member is
    in the cyclic window of ones_window members starting at g (every member sends ones to
    some elements, zeros to the rest), so each element sums to exactly ones_window ones, in
    any order, with every partial sum exact."""
    window = ones_window(dtype, group_size)
    for start in range(0, tensor.numel(), CHUNK_ELEMS):
        stop = min(start + CHUNK_ELEMS, tensor.numel())
        index = torch.arange(start, stop, device=tensor.device, dtype=torch.int64)
        ones = (member - index) % group_size < window
        tensor[start:stop].copy_(ones.to(tensor.dtype))


def torch_dtype(dtype: DType) -> Any:
    """torch's element type for a collbench dtype."""
    import torch

    return getattr(torch, dtype.name)
