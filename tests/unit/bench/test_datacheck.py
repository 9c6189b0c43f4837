"""The data check against an independent computation of what each collective must produce.

No process group: the ranks' inputs are generated here, the collective's result is computed
with plain torch in float64, and count_wrong must find exactly the elements we break.
"""

import pytest
import torch

from collbench.bench.datacheck import Pattern, count_wrong, fill, torch_dtype
from collbench.core.collectives import REGISTRY
from collbench.core.dtypes import DTYPES

REDUCE = {
    "sum": lambda t: t.sum(0),
    "prod": lambda t: t.prod(0),
    "min": lambda t: t.min(0).values,
    "max": lambda t: t.max(0).values,
    "avg": lambda t: t.sum(0) / t.shape[0],
}


def _inputs(pattern, n, elems, dtype):
    inputs = []
    for rank in range(n):
        tensor = torch.zeros(elems, dtype=dtype)
        fill(torch, tensor, pattern, rank)
        inputs.append(tensor)
    return inputs


def _simulate(name, inputs, rank, op, geometry):
    """What rank's receive buffer holds after a correct collective."""
    n = len(inputs)
    stacked = torch.stack([t.double() for t in inputs])
    reduced = REDUCE[op](stacked) if op else None
    if name in ("all_reduce", "reduce"):
        out = reduced
    elif name == "reduce_scatter":
        chunk = geometry.recv_elems
        out = reduced[rank * chunk : (rank + 1) * chunk]
    elif name == "all_gather":
        out = torch.cat([inputs[p].double() for p in range(n)])
    elif name == "broadcast":
        out = inputs[0].double()
    elif name == "all_to_all":
        chunk = geometry.count
        out = torch.cat([inputs[p][rank * chunk : (rank + 1) * chunk].double() for p in range(n)])
    else:  # sendrecv
        out = inputs[(rank - 1) % n].double()
    return out.to(inputs[0].dtype)


CASES = [
    (name, dtype, op, n)
    for name in REGISTRY
    for dtype in ("float32", "bfloat16", "float16", "int8", "uint8", "int64")
    for op in (("sum", "prod", "min", "max") if REGISTRY[name].reduces else (None,))
    for n in (1, 2, 3, 5)
    if n >= REGISTRY[name].min_world_size
]


@pytest.mark.parametrize("name, dtype_name, op, n", CASES)
def test_correct_result_has_no_wrong_and_one_flip_is_caught(name, dtype_name, op, n):
    coll = REGISTRY[name]
    dtype = DTYPES[dtype_name]
    pattern = Pattern(dtype, op, n)
    geometry = coll.geometry(3000 * n * dtype.elem_bytes, dtype.elem_bytes, n, 0)
    inputs = _inputs(pattern, n, geometry.send_elems, torch_dtype(dtype))
    for rank in range(n):
        geometry = coll.geometry(3000 * n * dtype.elem_bytes, dtype.elem_bytes, n, rank)
        recv = _simulate(name, inputs, rank, op, geometry)
        blocks = coll.expected(geometry, rank, n)
        assert count_wrong(torch, recv, blocks, pattern) == 0
        if blocks:
            recv[len(recv) // 2] += 1
            assert count_wrong(torch, recv, blocks, pattern) == 1


@pytest.mark.parametrize("n", [2, 3, 7])
def test_inputs_differ_between_ranks_so_misrouting_is_caught(n):
    """all_gather with two ranks' chunks swapped must fail the check."""
    coll = REGISTRY["all_gather"]
    dtype = DTYPES["bfloat16"]
    pattern = Pattern(dtype, None, n)
    geometry = coll.geometry(512 * n * 2, 2, n, 0)
    inputs = _inputs(pattern, n, geometry.send_elems, torch.bfloat16)
    swapped = torch.cat([inputs[1], inputs[0], *inputs[2:]])
    assert count_wrong(torch, swapped, coll.expected(geometry, 0, n), pattern) > 0


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16", "int8", "float32"])
# 3000 ranks build 3000 patterns per case (~0.5 s each, 16 cases): outside the fast loop
@pytest.mark.parametrize("n", [2, 9, 63, 64, 100, 300, pytest.param(3000, marks=pytest.mark.slow)])
@pytest.mark.parametrize("op", ["sum", "min", "max", "prod"])
def test_patterns_stay_exact_at_any_world_size(dtype_name, op, n):
    """Every input and every partial result fits the dtype's exact integers."""
    dtype = DTYPES[dtype_name]
    pattern = Pattern(dtype, op, n)
    index = torch.arange(0, 2 * n + 50)
    stacked = torch.stack([pattern.values(torch, rank, index) for rank in range(n)])
    assert int(stacked.max()) <= dtype.exact_limit
    if op == "sum":
        assert int(stacked.sum(0).max()) <= dtype.exact_limit
        assert torch.equal(pattern.reduced(torch, index), stacked.sum(0))
        # ranks differ: no two ranks send identical buffers
        assert len({tuple(row.tolist()) for row in stacked}) > 1


def test_avg_tolerance_accepts_rounding_and_catches_a_missing_rank():
    n = 3
    dtype = DTYPES["bfloat16"]
    pattern = Pattern(dtype, "avg", n)
    index = torch.arange(0, 256)
    inputs = [pattern.values(torch, rank, index).to(torch.bfloat16) for rank in range(n)]
    premul = sum((x.double() / n).to(torch.bfloat16).double() for x in inputs).to(torch.bfloat16)
    from collbench.core.collectives.base import Block

    block = [Block(0, 256, 0, None)]
    assert count_wrong(torch, premul, block, pattern) == 0
    missing = (sum(x.double() for x in inputs[:2]) / n).to(torch.bfloat16)
    assert count_wrong(torch, missing, block, pattern) == 256
