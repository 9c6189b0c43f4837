"""The avg tolerance and the sum-of-ones window against NCCL's arithmetic, simulated on CPU.

NCCL's avg for half/bfloat16/float: every input is multiplied by (T)float(1.0/n), rounded
to T, and the products are summed with a rounding to T at every hop (ring: n - 1 hops along
one chunk's path, in the ring's rank order). torch's CPU bfloat16/float16 arithmetic rounds
each product and each sum to the type in the same way, so the simulation is that
arithmetic, in ring orders (random permutations) and in a pairwise tree.
"""

import random

import pytest
import torch

from collbench.bench.datacheck import (
    Pattern,
    avg_relative_bound,
    count_wrong,
    fill_ones_window,
    ones_window,
)
from collbench.core.collectives.base import Block
from collbench.core.dtypes import DTYPES

ELEMS = 2048


def _scale(n, dtype):
    """NCCL's scalar: the double 1.0/n, cast to float, then to the type."""
    return torch.tensor(1.0 / n, dtype=torch.float64).to(torch.float32).to(dtype)


def _ring_avg(inputs, order):
    """inputs (n, elems) in the type, premultiplied and summed hop by hop in `order`."""
    pre = inputs * _scale(inputs.shape[0], inputs.dtype)
    total = pre[order[0]].clone()
    for rank in order[1:]:
        total = total + pre[rank]  # rounded to the type at every hop
    return total


def _tree_avg(inputs):
    pre = list(inputs * _scale(inputs.shape[0], inputs.dtype))
    while len(pre) > 1:
        pre = [pre[i] + pre[i + 1] if i + 1 < len(pre) else pre[i] for i in range(0, len(pre), 2)]
    return pre[0]


def _relative_error(got, exact):
    return ((got.double() - exact).abs() / exact.abs().clamp(min=1)).max().item()


def test_bound_by_hand_for_bfloat16_at_six_ranks():
    # 1/6 = 1.010101...b x 2^-3; 8 significant bits round up to 1.0101011b x 2^-3.
    scale = 0.1669921875
    assert float(_scale(6, torch.bfloat16)) == scale
    rounding_of_scale = 6 * scale - 1  # 2^-9
    unit = 2.0**-8
    expected = rounding_of_scale + (1 + rounding_of_scale) * ((1 + unit) ** 6 - 1)
    assert avg_relative_bound(DTYPES["bfloat16"], 6) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_powers_of_two_round_no_scale(dtype_name, n):
    """1/n is exact for n a power of two: only the n roundings remain."""
    unit = 2.0 ** -(DTYPES[dtype_name].exact_limit.bit_length() - 1)
    assert avg_relative_bound(DTYPES[dtype_name], n) == pytest.approx((1 + unit) ** n - 1)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_bound_grows_past_the_old_fixed_four_eps(dtype_name):
    dtype = DTYPES[dtype_name]
    eps = torch.finfo(getattr(torch, dtype_name)).eps
    assert avg_relative_bound(dtype, 6) < 4 * eps < avg_relative_bound(dtype, 12)
    assert avg_relative_bound(dtype, 24) > avg_relative_bound(dtype, 12)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
@pytest.mark.parametrize("n", [6, 12, 24])
def test_simulated_nccl_avg_of_the_check_pattern_passes(dtype_name, n):
    """The data check's own pattern, reduced as NCCL would in several ring orders and a
    tree: count_wrong finds nothing wrong; one element off by one is caught, and so is a
    rank's missing contribution, except where that share (~1/n) is inside the bound
    (bfloat16 at 24 ranks: ~4% against ~10%)."""
    dtype, torch_type = DTYPES[dtype_name], getattr(torch, dtype_name)
    pattern = Pattern(dtype, "avg", n)
    index = torch.arange(ELEMS)
    inputs = torch.stack([pattern.values(torch, rank, index) for rank in range(n)]).to(torch_type)
    block = [Block(0, ELEMS, 0, None)]
    shuffler = random.Random(n)
    for _ in range(4):
        ring = list(range(n))
        shuffler.shuffle(ring)
        for start in range(0, n, max(1, n // 4)):  # each chunk starts at another rank
            order = ring[start:] + ring[:start]
            assert count_wrong(torch, _ring_avg(inputs, order), block, pattern) == 0
    assert count_wrong(torch, _tree_avg(inputs), block, pattern) == 0
    corrupted = _ring_avg(inputs, list(range(n)))
    corrupted[ELEMS // 2] += 1
    assert count_wrong(torch, corrupted, block, pattern) == 1
    scaled = inputs * _scale(n, torch_type)
    missing = scaled[1].clone()
    for rank in range(2, n):
        missing = missing + scaled[rank]
    found = count_wrong(torch, missing, block, pattern)
    assert found == 0 if (dtype_name, n) == ("bfloat16", 24) else found > 0


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
@pytest.mark.parametrize("n", [6, 12, 24, 48])
def test_bound_holds_for_inputs_that_round_one_way(dtype_name, n):
    """Every rank sending the same value c makes every hop round the same way: the worst
    realistic case. The error stays inside the bound; at 48 ranks it is past 4 eps."""
    torch_type = getattr(torch, dtype_name)
    limit = DTYPES[dtype_name].exact_limit
    values = torch.arange(1, min(200, limit // 2), dtype=torch.float64)
    inputs = values.to(torch_type).expand(n, -1)
    error = _relative_error(_ring_avg(inputs, list(range(n))), values)
    assert error <= avg_relative_bound(DTYPES[dtype_name], n)
    if n == 48:
        assert error > 4 * torch.finfo(torch_type).eps  # the old fixed tolerance fails it


@pytest.mark.parametrize("n", [6, 12, 24])
def test_bound_holds_for_random_inputs_in_random_rings(n):
    generator = torch.Generator().manual_seed(n)
    for dtype_name in ("bfloat16", "float16"):
        torch_type, limit = getattr(torch, dtype_name), DTYPES[dtype_name].exact_limit
        for _ in range(5):
            values = torch.randint(1, max(2, limit // n), (n, ELEMS), generator=generator)
            order = torch.randperm(n, generator=generator).tolist()
            got = _ring_avg(values.to(torch_type), order)
            exact = values.double().sum(0) / n
            assert _relative_error(got, exact) <= avg_relative_bound(DTYPES[dtype_name], n)


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16", "int8", "float32"])
@pytest.mark.parametrize("group_size", [1, 3, 255, 256, 257, 300, 1000])
def test_sum_of_ones_window_is_exact_at_any_group_size(dtype_name, group_size):
    """The doctor's all-reduce check: each element sums exactly ones_window ones, summed
    in the type in ring order; every member sends a one somewhere."""
    dtype = DTYPES[dtype_name]
    torch_type = getattr(torch, dtype_name)
    elems = 2 * group_size + 7
    inputs = []
    for member in range(group_size):
        tensor = torch.zeros(elems, dtype=torch_type)
        fill_ones_window(torch, tensor, member, group_size, dtype)
        assert tensor.sum() > 0 or elems < group_size
        inputs.append(tensor)
    total = inputs[0].clone()
    for tensor in inputs[1:]:
        total = total + tensor
    expected = ones_window(dtype, group_size)
    assert expected == min(group_size, dtype.exact_limit)
    assert torch.equal(total, torch.full_like(total, expected))


def test_all_ones_is_not_exact_past_256_in_bfloat16():
    """Why the window: 300 ones summed hop by hop in bfloat16 stop at 256."""
    total = torch.zeros(1, dtype=torch.bfloat16)
    for _ in range(300):
        total = total + torch.ones(1, dtype=torch.bfloat16)
    assert float(total) == 256.0
