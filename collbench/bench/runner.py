"""The measure loop one rank runs for one (collective, size, placement)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collbench.bench.datacheck import Pattern, count_wrong, fill, torch_dtype
from collbench.core.collectives import REGISTRY, Collective, Geometry, RankContext
from collbench.core.collectives.base import IN_PLACE
from collbench.core.dtypes import DTYPES
from collbench.core.spec import SweepSpec
from collbench.core.stats import TimeStats, combine_ranks

_REDUCE_OPS = {"sum": "SUM", "prod": "PRODUCT", "min": "MIN", "max": "MAX", "avg": "AVG"}
# Test hook: the rank named here adds 1 to one received element before the data check,
# so tests can prove a wrong result reaches the row and the exit status end to end.
CORRUPT_RANK_VAR = "COLLBENCH_TEST_CORRUPT_RANK"
# Test hook: `all_gather` (or `all_gather:NAME=VALUE`, only while the rank's environment
# has NAME=VALUE) makes every rank refuse that collective when it starts it, as NCCL's
# enqueue refuses a collective its NCCL_ALGO/NCCL_PROTO leave nothing for; so a gloo tune
# can show a setting that fails in one collective only.
REFUSE_COLLECTIVE_VAR = "COLLBENCH_TEST_REFUSE_COLLECTIVE"


@dataclass(frozen=True)
class Measured:
    """One measurement, combined across ranks (identical on every rank)."""

    geometry: Geometry
    stats: TimeStats
    n_wrong: int | None


@dataclass
class Bound:
    """One collective at one size, with its buffers, ready to run on this rank."""

    collective: Collective
    geometry: Geometry
    send: Any
    recv: Any
    # run(async_op=False): one operation (see Collective.bind).
    run: Callable[..., Any]
    dtype: Any = None  # its core.dtypes.DType
    op: str = "sum"  # its reduction (unused where the collective does not reduce)


class Runner:
    """Measures steps of a sweep on this rank; every rank calls `measure` in lockstep."""

    def __init__(self, spec: SweepSpec, device: Any, timer: Any) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.spec, self.device, self.timer = torch, dist, spec, device, timer
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.dtype = DTYPES[spec.dtypes[0]]  # a Step without a dtype: overlap probes
        self._corrupt = os.environ.get(CORRUPT_RANK_VAR) == str(self.rank)

    def measure(
        self, collective: str, size_bytes: int, placement: str, dtype: str = "", op: str = ""
    ) -> Measured:
        """One step, in `dtype` with `op` ("": the spec's first, as a Step without them)."""
        bound = self.prepare(collective, size_bytes, placement, dtype, op)
        for _ in range(self.spec.warmup):
            bound.run()
        self.timer.synchronize()
        self.barrier()
        batch_s, samples_s = self.timer.time_batch(bound.run, self.spec.iters)
        wrong = self.check(bound, bound.run) if self.spec.check else 0
        geometry = bound.geometry
        del bound
        table = self.gather([batch_s, float(wrong), *samples_s])
        stats = combine_ranks(table[:, 0], table[:, 2:], self.spec.rank_stat)
        n_wrong = int(table[:, 1].sum()) if self.spec.check else None
        return Measured(geometry, stats, n_wrong)

    def prepare(
        self, collective: str, size_bytes: int, placement: str, dtype: str = "", op: str = ""
    ) -> Bound:
        """Buffers and the bound operation for one step."""
        _refuse_for_test(collective)
        coll = REGISTRY[collective]
        kind = DTYPES[dtype] if dtype else self.dtype
        op = op or self.spec.ops[0]
        geometry = coll.geometry(size_bytes, kind.elem_bytes, self.world_size, self.rank)
        options = {"dtype": torch_dtype(kind), "device": self.device}
        if placement == IN_PLACE:
            shared = self.torch.zeros(max(geometry.send_elems, geometry.recv_elems), **options)
            send = shared[geometry.inplace_send_offset :][: geometry.send_elems]
            recv = shared[geometry.inplace_recv_offset :][: geometry.recv_elems]
        else:
            send = self.torch.zeros(geometry.send_elems, **options)
            recv = self.torch.zeros(geometry.recv_elems, **options)
        reduce_op = getattr(self.dist.ReduceOp, _REDUCE_OPS[op]) if coll.reduces else None
        context = RankContext(self.dist, self.rank, self.world_size, reduce_op)
        return Bound(coll, geometry, send, recv, coll.bind(send, recv, context), kind, op)

    def check(self, bound: Bound, operate: Callable[[], None]) -> int:
        """Fill the inputs with the check pattern, run `operate` (one complete operation on
        bound's buffers, however it is scheduled) and count the wrong elements."""
        coll, geometry, recv = bound.collective, bound.geometry, bound.recv
        pattern = Pattern(bound.dtype, bound.op if coll.reduces else None, self.world_size)
        fill(self.torch, bound.send, pattern, self.rank)
        self.timer.synchronize()
        self.barrier()
        operate()
        self.timer.synchronize()
        if self._corrupt and recv.numel():
            recv[0] += 1
        return count_wrong(
            self.torch, recv, coll.expected(geometry, self.rank, self.world_size), pattern
        )

    def barrier(self) -> None:
        if self.device.type == "cuda":
            self.dist.barrier(device_ids=[self.device.index])
        else:
            self.dist.barrier()

    def gather(self, values: list[float]) -> Any:
        """Every rank's `values` (same length on each), as a (ranks, len) numpy array."""
        torch = self.torch
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        gathered = [torch.empty_like(mine) for _ in range(self.world_size)]
        self.dist.all_gather(gathered, mine)
        return torch.stack(gathered).cpu().numpy()


def _refuse_for_test(collective: str) -> None:
    """REFUSE_COLLECTIVE_VAR's test hook (see there): a RuntimeError worded like NCCL's."""
    hook = os.environ.get(REFUSE_COLLECTIVE_VAR)
    if not hook:
        return
    name, _, condition = hook.partition(":")
    variable, _, value = condition.partition("=")
    if name == collective and (not condition or os.environ.get(variable) == value):
        raise RuntimeError(
            f"No algorithm/protocol available for function {collective} "
            f"({REFUSE_COLLECTIVE_VAR}={hook})"
        )
