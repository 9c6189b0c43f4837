"""What every rank runs for `collbench doctor`: rounds of groups that pull the nodes apart.

The method, in full: docs/architecture.md#collbench-bench-doctor-rounds-py.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from collbench.bench.datacheck import fill_ones_window, ones_window, torch_dtype
from collbench.bench.resume import attempt, set_aside
from collbench.bench.runner import Measured, Runner
from collbench.bench.session import RankLog, Session, repeat_of
from collbench.core.bandwidth import busbw_gbps
from collbench.core.collectives import REGISTRY
from collbench.core.collectives.base import IN_PLACE, OUT_OF_PLACE
from collbench.core.doctor_plan import CircleRounds, Layout, halves, pair_plan
from collbench.core.doctor_spec import GEMM, GPU_PAIR
from collbench.core.dtypes import DTYPES
from collbench.core.errors import SpecError
from collbench.core.stats import combine_ranks, median
from collbench.store.rank_status import RankStatus
from collbench.store.rows import DoctorGroup
from collbench.store.rundir import load_rows

ALL_REDUCE, SENDRECV = "all_reduce", "sendrecv"
# Test hook: ranks count as nodes of this many ranks each ("HOST~n0", "HOST~n1", ...), so the
# doctor's multi-node rounds run on one host in tests that have no namespaces.
TEST_NODE_SIZE_VAR = "COLLBENCH_TEST_DOCTOR_NODE_SIZE"
# Test hook: "RANK:SECONDS" makes that rank reach each arrival-timed collective this late (a
# straggler: its host busy elsewhere between collectives).
TEST_LATE_RANK_VAR = "COLLBENCH_TEST_DOCTOR_LATE_RANK"
# A one-node doctor's gemm burn-in: every GPU at once, BURN_IN_S seconds of bf16 matmuls of
# BURN_IN_SIZE cubed, then timed.
BURN_IN_S, BURN_IN_SIZE = 10.0, 8192


def arrival_waits(
    run: Callable[[], None], synchronize: Callable[[], None], iters: int, rank: int
) -> list[float]:
    """Each of `iters` blocking collectives' host wait: synchronize, stamp, run, synchronize,
    stamp (`rank` reaches each late by TEST_LATE_RANK_VAR's "RANK:SECONDS" when it is named)."""
    late_rank, _, seconds = os.environ.get(TEST_LATE_RANK_VAR, "").partition(":")
    delay_s = float(seconds) if late_rank.strip() == str(rank) and seconds else 0.0
    waits = []
    for _ in range(iters):
        synchronize()
        if delay_s:
            time.sleep(delay_s)
        started = time.perf_counter()
        run()
        synchronize()
        waits.append(time.perf_counter() - started)
    return waits


SPLIT_GROUP, NEW_GROUP = "split_group", "new_group"


class StageGroups:
    """This rank's group of the round that runs now, made when a round needs one and
    destroyed when another round starts (or at close)."""

    def __init__(self, dist: Any, rank: int) -> None:
        self.dist, self.rank = dist, rank
        self.method: str | None = None
        self.seconds: dict[str, float] = {}  # stage -> seconds spent making its groups
        self.made: dict[str, int] = {}  # stage -> groups made (every time they were made)
        self._key: tuple[str, int] | None = None
        self._pg: Any = None

    def enter(self, stage: str, round_index: int, members: Sequence[Sequence[int]]) -> Any:
        """This rank's group among `members` (None: the rank is in none of them), made
        once for consecutive steps of the same round."""
        key = (stage, round_index)
        if key == self._key:
            return self._pg
        self.close()
        started = time.perf_counter()
        self._pg, self.method = make_groups(self.dist, self.rank, members)
        elapsed = time.perf_counter() - started
        self.seconds[stage] = self.seconds.get(stage, 0.0) + elapsed
        self.made[stage] = self.made.get(stage, 0) + len(members)
        self._key = key
        return self._pg

    def close(self) -> None:
        """Destroy the current round's group (every member does so at the same step)."""
        if self._pg is not None:
            self.dist.destroy_process_group(self._pg)
        self._key, self._pg = None, None

    def record(self) -> dict[str, Any]:
        """What meta.json keeps (doctor.group_setup)."""
        return {
            "method": self.method,
            "seconds": {stage: round(value, 6) for stage, value in self.seconds.items()},
            "groups": dict(self.made),
            "total_s": round(sum(self.seconds.values()), 6),
        }


def make_groups(dist: Any, rank: int, members: Sequence[Sequence[int]]) -> tuple[Any, str]:
    """This rank's process group among the disjoint `members` lists (None when it is in
    none) and how they were made (SPLIT_GROUP or NEW_GROUP). Every rank must call it."""
    lists = [list(group) for group in members]
    if _can_split(dist):
        # a RuntimeError is raised alike on every rank before any communication: the
        # backend cannot split (an RCCL or a plugin without ncclCommSplit)
        with contextlib.suppress(RuntimeError):
            return dist.split_group(split_ranks=lists), SPLIT_GROUP
    mine = None
    for group in lists:
        made = dist.new_group(group)
        if rank in group:
            mine = made
    return mine, NEW_GROUP


def _can_split(dist: Any) -> bool:
    """split_group exists and the world group has a bound device (it refuses otherwise)."""
    if not hasattr(dist, "split_group"):
        return False
    try:
        default = dist.distributed_c10d._get_default_group()
    except (AttributeError, RuntimeError, ValueError):
        return False
    return getattr(default, "bound_device_id", None) is not None


@dataclass(frozen=True)
class PlannedGroup:
    """One group of a round: who takes part (its process group is made when the round
    runs: StageGroups)."""

    label: str
    hosts: tuple[str, ...]
    ranks: tuple[int, ...]
    collective: str
    pairs: tuple[tuple[int, int], ...] = ()  # send/recv: the rank pairs (none: `ranks`)


@dataclass(frozen=True)
class Round:
    stage: str
    round_index: int
    groups: tuple[PlannedGroup, ...]
    description: str


class DoctorSession(Session):
    """One rank's doctor, after the process group is up."""

    def run(self, status: RankStatus, log: RankLog) -> int:
        from collbench.bench.provenance import rank_identity

        spec, env = self.job.spec, self.env
        me = rank_identity(self.torch, self.device, env.rank)
        node_size = int(os.environ.get(TEST_NODE_SIZE_VAR) or 0)
        if node_size > 0:
            me["host"] = f"{me['host']}~n{env.rank // node_size}"
        identities = self._gather({**me, "address": _own_address(env)})
        self.layout = Layout.from_hosts([identity["host"] for identity in identities])
        self._agree(self._local_problems(world_size=2))  # any world size runs, even 1
        self.size_bytes = spec.max_bytes
        self.skipped = _skipped(self.layout, env.world_size, spec.doctor.bisect, self.device.type)
        self.total_wrong = 0
        self.level_results = []
        self.groups = StageGroups(self.dist, env.rank)
        self.runner = Runner(spec, self.device, self.timer)  # its barrier and gather
        self.doctor_meta = self._nodes(identities)
        self.kept, self.replayed = self._earlier_rows(), []
        steps = self._steps()
        pending = next((step for step in steps if not self._replay(*step)), None)
        if self.replayed:
            log.write(f"attempt {attempt()}: {len(self.level_results)} round(s) kept, resuming")
        extra = {"doctor": self.doctor_meta}
        self.writer = self._start(identities, extra=extra, kept=len(self.replayed))
        for row in self.replayed if self.writer is not None else ():
            self.writer.append(row, sync=False)  # rows.jsonl was set aside: the kept again
        self.rows_written = len(self.replayed)
        self.builder = self._row_builder(identities)
        for planned, repeat in itertools.chain([pending] if pending else [], steps):
            self._step(status, log, planned, repeat)
        self.groups.close()
        if self.layout.nodes == 1 and GEMM not in self.skipped:
            self.doctor_meta[GEMM] = self._burn_in(log)
        if self.writer is not None:
            doctor = {**self.doctor_meta, "group_setup": self.groups.record()}
            self._complete(self.writer, self.rows_written, self.total_wrong, doctor=doctor)
        log.write(f"doctor done: {len(self.level_results)} round(s), {self.rows_written} row(s)")
        return self.total_wrong

    def _steps(self) -> Iterator[tuple[Round, int]]:
        """(round, repeat) in the order they run: every round once per repeat (in passes),
        then each bisection level as often as the repeats (it reads their results)."""
        fixed = list(self._rounds())  # planned once; groups are made as each round runs
        repeats = self.job.spec.doctor.repeats
        for repeat in range(repeats):
            yield from ((planned, repeat) for planned in fixed)
        if "bisect" not in self.skipped:
            for planned in self._bisect():
                yield from ((planned, repeat) for repeat in range(repeats))

    def _earlier_rows(self) -> list[Any]:
        """A requeued job's rows from its earlier attempt, on every rank (rank 0 reads them
        and sets the file aside); [] on a first attempt or when they cannot be read."""
        if not attempt():
            return []
        found: list[Any] = [[]]
        if self.env.rank == 0:
            with contextlib.suppress(SpecError):  # then every round is measured again
                found = [load_rows(Path(self.job.run_dir), warn=False)]
            set_aside(Path(self.job.run_dir))
        self.dist.broadcast_object_list(found, src=0)
        return found[0]

    def _replay(self, planned: Round, repeat: int) -> bool:
        """Keep one repeat of a round from the earlier attempt's rows when they hold all its
        groups, in order, on the same hosts and ranks (its results then count as measured);
        False: it is measured, and so is every round after it."""
        rows, groups = self.kept[: len(planned.groups)], planned.groups
        key = (planned.stage, planned.round_index, repeat)
        ours = [(*key, g.label, list(g.hosts), list(g.ranks)) for g in groups]
        theirs = [
            (r.stage, r.round_index, r.repeat_index, r.group, r.group_hosts, r.group_ranks)
            for r in rows
        ]
        if not rows or theirs != ours:
            self.kept = []
            return False
        del self.kept[: len(rows)]
        self.replayed += rows
        self.level_results.append(
            [self._busbw(g, r.time_us) for g, r in zip(groups, rows, strict=True)]
        )
        self.total_wrong += sum(row.n_wrong or 0 for row in rows)
        return True

    def _step(self, status: RankStatus, log: RankLog, planned: Round, repeat: int):
        """Run one repeat of a round and keep its results (bisection reads its level's)."""
        text = planned.description + repeat_of(repeat, self.job.spec.doctor.repeats)
        status.step(len(self.level_results), text)
        pg = self._enter_groups(planned, log)
        started = time.perf_counter()
        results = self._run_round(planned, repeat, pg)
        self.level_results.append(results)
        log.write(f"{text}: {time.perf_counter() - started:.3f} s")

    def _burn_in(self, log: RankLog) -> dict[str, Any]:
        """Every GPU of the node at once: the gemm burn-in, each rank's TFLOP/s gathered."""
        from collbench.bench.gemm import GemmBench

        size = BURN_IN_SIZE
        self.runner.barrier()
        timing = GemmBench(str(self.device), "bf16").measure((size,) * 3, 1, 5, 20, BURN_IN_S)
        tflops = round(2 * size**3 / timing.time_us / 1e6, 1)
        log.write(f"gemm burn-in: {BURN_IN_S:g} s, then {tflops} TFLOP/s")
        shape = f"{size}x{size}x{size} bf16"
        return {"shape": shape, "seconds": BURN_IN_S, "tflops": self._gather(tflops)}

    def _enter_groups(self, planned: Round, log: RankLog) -> Any:
        """This rank's process group for the round (None: the world, or in no group)."""
        members = [g.ranks for g in planned.groups if g.collective == ALL_REDUCE]
        if not members or members == [tuple(range(self.env.world_size))]:
            self.groups.close()
            return None
        before = self.groups.seconds.get(planned.stage, 0.0)
        pg = self.groups.enter(planned.stage, planned.round_index, members)
        spent = self.groups.seconds.get(planned.stage, 0.0) - before
        if spent:
            log.write(
                f"{planned.stage}: {len(members)} group(s) by {self.groups.method}: {spent:.3f} s"
            )
        return pg

    def _nodes(self, identities: list[dict[str, Any]]) -> dict[str, Any]:
        """What meta.json records of the nodes (extra["doctor"])."""
        addresses: dict[str, str | None] = {}
        for identity in identities:
            addresses.setdefault(identity["host"], identity.get("address"))
        return {
            "hosts": list(self.layout.hosts),
            "addresses": addresses,
            "ranks_per_host": {host: list(r) for host, r in self.layout.ranks_per_host.items()},
            "skipped": self.skipped,
            "size_bytes": self.size_bytes,
            "shuffle_rounds": self.job.spec.doctor.shuffle_rounds,
            "repeats": self.job.spec.doctor.repeats,
        }

    level_results: list  # each repeat's busbw per group, in order (bisection reads them)

    # -- planning -------------------------------------------------------------------------

    def _rounds(self) -> Iterator[Round]:
        """Every round of one pass in order (bisection comes after the passes)."""
        layout, world = self.layout, self.env.world_size
        if world >= 2 and "full" not in self.skipped:
            everyone = PlannedGroup("all", layout.hosts, tuple(range(world)), ALL_REDUCE)
            yield Round("full", 0, (everyone,), "doctor full all-reduce")
        if world == 1:  # one rank: its all-reduce is a local copy, still timed (GPU path)
            alone = PlannedGroup(f"node {layout.hosts[0]}", layout.hosts, (0,), ALL_REDUCE)
            yield Round("intra", 0, (alone,), "doctor intra-node all-reduce (one rank)")
        elif "intra" not in self.skipped:
            groups = [
                self._all_reduce_group(f"node {host}", layout.ranks_per_host[host])
                for host in layout.hosts
            ]
            yield Round("intra", 0, tuple(g for g in groups if g), "doctor intra-node all-reduce")
        if GPU_PAIR not in self.skipped:  # each pair of local ranks, every node at once
            rounds = CircleRounds(layout.max_local)
            for index, local_pairs in enumerate(rounds):
                groups = tuple(  # local rank i with local rank j on every node that has both
                    PlannedGroup(f"{host} {r[i]}<->{r[j]}", (host,), (r[i], r[j]), SENDRECV)
                    for host, r in layout.ranks_per_host.items()
                    for i, j in local_pairs
                    if j < len(r)
                )
                text = f"doctor GPU-pair round {index + 1}/{len(rounds)}"
                yield Round(GPU_PAIR, index, groups, text)
        if "rail" not in self.skipped:
            rails = [
                self._all_reduce_group(f"rail {index}", layout.rail(index))
                for index in range(layout.max_local)
            ]
            yield Round("rail", 0, tuple(g for g in rails if g), "doctor per-rail all-reduce")
        if "pair" not in self.skipped:
            plan = pair_plan(layout.nodes, self.job.spec.doctor)  # circle, or sampled
            for stage, rounds in (("pair", plan.circle), ("shuffle", plan.shuffle)):
                for index, pairs in enumerate(rounds):
                    text = f"doctor {stage} round {index + 1}/{len(rounds)}"
                    yield Round(stage, index, self._pair_groups(pairs), text)

    def _all_reduce_group(self, label: str, ranks: tuple[int, ...]) -> PlannedGroup | None:
        """A group of these ranks (its process group is made when its round runs)."""
        if len(ranks) < 2:
            return None
        host_of = self.layout.host_of
        hosts = tuple(dict.fromkeys(host_of[rank] for rank in ranks))
        return PlannedGroup(label, hosts, tuple(ranks), ALL_REDUCE)

    def _pair_groups(self, node_pairs: list[tuple[int, int]]) -> tuple[PlannedGroup, ...]:
        groups = []
        for a, b in node_pairs:
            host_a, host_b = self.layout.hosts[a], self.layout.hosts[b]
            pairs = tuple(self.layout.pair_ranks(host_a, host_b))
            ranks = tuple(sorted(rank for pair in pairs for rank in pair))
            label = f"{host_a}<->{host_b}"
            groups.append(PlannedGroup(label, (host_a, host_b), ranks, SENDRECV, pairs=pairs))
        return tuple(groups)

    def _bisect(self) -> Iterator[Round]:
        """Halves of the node set at once; recurse into the slower half while the halves
        differ by more than the fleet tolerance and the slower one still splits in two.
        Each level is judged on the median of its repeats (the caller runs them after the
        yield and appends them to level_results)."""
        current = self.layout.hosts
        tolerance = self.job.spec.doctor.fleet_tolerance_pct / 100
        level = 1
        while len(current) >= 2:
            parts = halves(current)
            groups = [
                self._all_reduce_group(f"bisect L{level} {tag}", self.layout.ranks_of(part))
                for tag, part in zip("ab", parts, strict=True)
            ]
            if not all(groups):
                return
            text = f"doctor bisection level {level}: {len(parts[0])} + {len(parts[1])} node(s)"
            done = len(self.level_results)
            yield Round("bisect", level, tuple(groups), text)
            measured = self.level_results[done:]
            busbw = [median([results[half] for results in measured]) or 0.0 for half in (0, 1)]
            slower = 0 if busbw[0] <= busbw[1] else 1
            if busbw[slower] >= busbw[1 - slower] * (1 - tolerance):
                return
            current = parts[slower]
            level += 1

    def _busbw(self, group: PlannedGroup, time_us: float) -> float:
        return busbw_gbps(group.collective, len(group.ranks), self.size_bytes, time_us)

    # -- measuring ------------------------------------------------------------------------

    def _run_round(self, planned: Round, repeat: int, pg: Any) -> list[float]:
        """Run a round's groups at once, each group's busbw; every rank gets every group's
        figures back: [batch s, wrong, iters samples s, iters arrival waits s]."""
        rank, iters = self.env.rank, self.job.spec.iters
        mine = next((group for group in planned.groups if rank in group.ranks), None)
        self.runner.barrier()
        figures = [0.0] * (2 + 2 * iters)  # a rank in no group of the round
        if mine is not None:
            if mine.collective == ALL_REDUCE:
                figures = self._measure_all_reduce(mine, pg)
            else:
                figures = self._measure_pair(mine)
        table = self.runner.gather(figures)
        results = []
        for group in planned.groups:
            members = table[list(group.ranks)]
            measured, last, rank_time_s = self._combine(group, members)
            results.append(self._busbw(group, measured.stats.time_us))
            self.total_wrong += measured.n_wrong or 0
            if self.writer is not None:
                self._write(planned, group, measured, (rank_time_s, last), repeat)
        return results

    def _measure_all_reduce(self, group: PlannedGroup, pg: Any) -> list[float]:
        torch, dist, spec = self.torch, self.dist, self.job.spec
        geometry = self._geometry(ALL_REDUCE, len(group.ranks))
        # Zeros stay zeros however often they are summed (ones would overflow at scale).
        tensor = torch.zeros(geometry.send_elems, dtype=self._dtype(), device=self.device)

        run = partial(dist.all_reduce, tensor, group=pg)
        batch_s, samples_s = self._timed(run)
        # Arrivals on a one-element all-reduce of the same group: lateness is the host's,
        # not the message's, and the stage's bandwidth is not paid twice.
        ping_tensor = torch.zeros(1, dtype=self._dtype(), device=self.device)
        ping = partial(dist.all_reduce, ping_tensor, group=pg)
        waits_s = arrival_waits(ping, self.timer.synchronize, spec.iters, self.env.rank)
        wrong = 0
        if spec.check:
            # ones from a window of at most the dtype's exact count of members per element
            # (bf16 rounds a sum of 257 ones to 256): the expected sum is exact at any size
            dtype, size = DTYPES[spec.dtype], len(group.ranks)
            fill_ones_window(torch, tensor, group.ranks.index(self.env.rank), size, dtype)
            run()
            self.timer.synchronize()
            expected = torch.full_like(tensor, ones_window(dtype, size))
            wrong = int((tensor != expected).sum().item())
        return [batch_s, float(wrong), *samples_s, *waits_s]

    def _measure_pair(self, group: PlannedGroup) -> list[float]:
        torch, dist, spec, rank = self.torch, self.dist, self.job.spec, self.env.rank
        peer = next(
            b if a == rank else a for a, b in (group.pairs or (group.ranks,)) if rank in (a, b)
        )
        geometry = self._geometry(SENDRECV, 2)
        send = torch.zeros(geometry.send_elems, dtype=self._dtype(), device=self.device)
        recv = torch.zeros(geometry.recv_elems, dtype=self._dtype(), device=self.device)
        # Batched so NCCL posts both sides together; one by one they can deadlock.
        ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]

        def run() -> None:
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        batch_s, samples_s = self._timed(run)
        wrong = 0
        if spec.check:
            send.fill_(_mark(rank))
            run()
            self.timer.synchronize()
            wrong = int((recv != _mark(peer)).sum().item())
        return [batch_s, float(wrong), *samples_s, *samples_s]  # arrival waits: the samples

    def _timed(self, run: Any) -> tuple[float, list[float]]:
        for _ in range(self.job.spec.warmup):
            run()
        self.timer.synchronize()
        return self.timer.time_batch(run, self.job.spec.iters)

    def _combine(self, group: PlannedGroup, members: Any) -> tuple[Measured, list[int], list]:
        """The group's figures across its ranks, how often each rank came last (the
        shortest wait: the others waited for it) and each rank's own time (all-reduce: its
        median arrival wait; send/recv: its batch)."""
        iters = self.job.spec.iters
        samples, waits = members[:, 2 : 2 + iters], members[:, 2 + iters :]
        stats = combine_ranks(members[:, 0], samples, self.job.spec.rank_stat)
        wrong = int(members[:, 1].sum()) if self.job.spec.check else None
        last = np.bincount(waits.argmin(axis=0), minlength=len(group.ranks)).tolist()
        own = members[:, 0] if group.collective == SENDRECV else waits
        rank_time_s = [float(median(list(row)) or 0.0) for row in own.reshape(len(own), -1)]
        geometry = self._geometry(group.collective, len(group.ranks))
        return Measured(geometry, stats, wrong), last, rank_time_s

    def _write(
        self,
        planned: Round,
        group: PlannedGroup,
        measured: Measured,
        per_rank: tuple[list[float], list[int]],
        repeat: int,
    ) -> None:
        placement = IN_PLACE if group.collective == ALL_REDUCE else OUT_OF_PLACE
        row = self.builder.build_doctor(
            group.collective,
            placement,
            measured,
            DoctorGroup(
                stage=planned.stage,
                label=group.label,
                round_index=planned.round_index,
                hosts=group.hosts,
                ranks=group.ranks,
                rank_time_us=tuple(value * 1e6 for value in per_rank[0]),
                rank_last_count=tuple(per_rank[1]),
            ),
            repeat=repeat,
        )
        self.writer.append(row)
        self.rows_written += 1
        if self.sink is not None:
            self.sink.row(row)

    def _geometry(self, collective: str, group_size: int) -> Any:
        elem_bytes = DTYPES[self.job.spec.dtype].elem_bytes
        return REGISTRY[collective].geometry(self.size_bytes, elem_bytes, group_size, 0)

    def _dtype(self) -> Any:
        return torch_dtype(DTYPES[self.job.spec.dtype])


def _mark(rank: int) -> int:
    """The value a rank sends in the pair check: small enough for every dtype."""
    return rank % 64 + 1


def _skipped(layout: Layout, world_size: int, bisect: bool, device: str) -> dict[str, str]:
    """Stages this layout (on `device`'s type) cannot run, and why (meta.json records them;
    doctor prints them)."""
    skipped = {}
    if layout.nodes == 1 and device != "cuda":
        skipped[GEMM] = "no GPU: the burn-in loads GPUs"
    if layout.max_local < 2:
        skipped[GPU_PAIR] = "one rank per node: no two local ranks to pair"
    if layout.max_local < 2 and world_size > 1:
        skipped["intra"] = "one rank per node: no intra-node group to measure"
    if layout.nodes < 2 and "intra" not in skipped and world_size > 1:
        # one stage per distinct group: on one node the intra-node group is every rank
        skipped["full"] = "one node: the intra-node stage measures the same ranks"
    if layout.nodes < 2:
        why = "one node: needs two or more"
        skipped.update(pair=f"{why} nodes", shuffle=f"{why} nodes", rail=f"{why} nodes")
    elif layout.max_local < 2:
        skipped["rail"] = "one rank per node: the only rail is the full all-reduce"
    if not bisect:
        skipped["bisect"] = "not asked for (--bisect)"
    elif layout.nodes < 2 or world_size < 4:
        skipped["bisect"] = "needs two or more nodes and two ranks per half"
    return skipped


def _own_address(env: Any) -> str | None:
    """The address this rank's host uses towards the rendezvous host (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((str(env.master_addr), int(env.master_port or 9)))
            return str(probe.getsockname()[0])
    except (OSError, ValueError):
        return None
