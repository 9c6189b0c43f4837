"""One rank's measurement once its process group is up (`Session`); rank 0 writes meta.json, rows.

The method, in full: docs/architecture.md#collbench-bench-session-py.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from collbench.bench import capacity
from collbench.bench.distributed import rendezvous_bind, single_host, torch_backend
from collbench.bench.rank_env import RunEnv
from collbench.bench.resume import attempt, kept_steps, resumed_meta
from collbench.core.errors import SpecError
from collbench.core.knobs import SHARED_GPU_NOTE, knob_env, own_env, shared_gpu
from collbench.store.job import Job
from collbench.store.meta import RunMeta
from collbench.store.rank_status import RankStatus
from collbench.store.rows import RowBuilder, utc_now
from collbench.store.rundir import (
    ResultWriter,
    prepare_run_dir,
    update_meta,
    write_meta,
    write_parquet,
)
from collbench.store.sink import RowSink

# Held by rank 0 while it appends a row or finishes the run, and by the thread that finishes
# a run whose launcher vanished (bench/worker.py): that thread's rows.parquet is then the
# whole of rows.jsonl, and its `orphaned` never lands over a `completed`.
WRITE_LOCK = threading.Lock()
# Set for ranks whose launcher writes a completed run's rows.parquet (launchers/forked.py:
# it imports pandas while the ranks start, so rank 0 does not import it at the end).
PARQUET_BY_LAUNCHER_VAR = "COLLBENCH_PARQUET_BY_LAUNCHER"


class RankLog:
    """A few lines per rank in its log (logs/rank-NNNNN.log): where it ran and each step's
    wall time. Only for ranks a launching collbench watches, whose output is that log file;
    a rank started by hand writes nothing but the table (rank 0) and errors."""

    def __init__(self, rank: int, enabled: bool) -> None:
        self.rank, self.enabled = rank, enabled

    def write(self, text: str) -> None:
        if self.enabled:
            print(f"{utc_now()} collbench rank {self.rank}: {text}", file=sys.stderr, flush=True)


class Session:
    """One rank's sweep, after the process group is up."""

    def __init__(self, job: Job, env: RunEnv, device: Any, sink: RowSink | None) -> None:
        import torch
        import torch.distributed as dist

        from collbench.bench.timing import make_timer

        self.torch, self.dist = torch, dist
        self.job, self.env, self.device, self.sink = job, env, device, sink
        self.timer = make_timer(torch, device, job.spec)

    def run(self, status: RankStatus, log: RankLog) -> int:
        from collbench.bench.provenance import rank_identity
        from collbench.bench.runner import Runner

        spec, env = self.job.spec, self.env
        identities = self._gather(rank_identity(self.torch, self.device, env.rank))
        runner = Runner(spec, self.device, self.timer)
        probe, probe_problem = self._probe(runner)
        self._agree(self._local_problems() or probe_problem)
        steps = spec.steps()
        kept, total_wrong = self._kept(steps)
        if kept:
            log.write(f"attempt {attempt()}: {kept} of {len(steps)} steps kept, resuming")
        writer = self._start(identities, kept=kept)
        builder = self._row_builder(identities)
        for index, step in enumerate(steps[kept:], start=kept):
            status.step(index, _describe(step) + repeat_of(step.repeat, spec.repeats))
            started = time.perf_counter()
            if step.kind == "overlap":
                result = probe.measure(step)
                row = builder.build_probe(
                    step.collective, step.placement, result, probe.clock.method, step.repeat
                )
            else:
                result = runner.measure(
                    step.collective, step.size_bytes, step.placement, step.dtype, step.op
                )
                row = builder.build(
                    step.collective, step.placement, result, step.repeat, step.dtype, step.op
                )
            total_wrong += result.n_wrong or 0
            log.write(
                f"step {index + 1}/{len(steps)}{repeat_of(step.repeat, spec.repeats)} "
                f"{_describe(step)}: {time.perf_counter() - started:.3f} s "
                "(warm-up, timed iterations, check)"
            )
            if writer is not None:
                with WRITE_LOCK:
                    writer.append(row, sync=True)  # a finished size is on disk
                if self.sink is not None:
                    self.sink.row(row)
        if writer is not None:
            self._complete(writer, len(steps), total_wrong)
        return total_wrong

    def _start(
        self, identities: list[dict[str, Any]], extra: dict[str, Any] | None = None, kept: int = 0
    ) -> ResultWriter | None:
        """Rank 0 opens rows.jsonl and writes meta.json (with `extra` keys; a requeued job's
        with its attempts); others: None."""
        if self.env.rank != 0:
            return None
        writer = ResultWriter(self.job.run_dir)
        meta = self._meta(identities, extra or {})
        if attempt():
            meta = resumed_meta(self.job.run_dir, meta, kept)
        write_meta(self.job.run_dir, meta)
        if self.sink is not None:
            self.sink.start(meta)
        return writer

    def _complete(self, writer: ResultWriter, rows: int, total_wrong: int, **fields: Any) -> None:
        """Rank 0 closes rows.jsonl and marks the run completed (`fields`: more meta.json keys)."""
        with WRITE_LOCK:
            writer.close()
            if not os.environ.get(PARQUET_BY_LAUNCHER_VAR):
                write_parquet(self.job.run_dir)
            update_meta(
                self.job.run_dir,
                state="completed",
                finished_utc=utc_now(),
                rows=rows,
                n_wrong_total=total_wrong,
                **fields,
            )

    def _kept(self, steps: list[Any]) -> tuple[int, int]:
        """(steps an earlier attempt of this requeued job measured, their #wrong), on every
        rank (bench/resume.py); (0, 0) on a first attempt."""
        if not attempt():
            return 0, 0
        found: tuple[int, int] | str | None = None
        if self.env.rank == 0:
            try:
                found = kept_steps(Path(self.job.run_dir), steps)
            except SpecError as error:
                found = str(error)
        found = self._gather(found)[0]
        if isinstance(found, str):
            raise SpecError.from_message(found)
        return found

    def _row_builder(self, identities: list[dict[str, Any]]) -> RowBuilder:
        """What builds every row, its knobs the environment's and collbench's own settings."""
        spec, world_size = self.job.spec, self.env.world_size
        settings = {
            "rank_stat": spec.rank_stat,
            "check": spec.check,
            "timing": self.timer.method,
            "launcher": self.job.launcher,
            **({"collbench_env": own} if (own := own_env()) else {}),
        }
        knobs = {"env": knob_env(), "settings": settings}
        nodes = len({identity["host"] for identity in identities})
        return RowBuilder(self.job.run_id, spec, world_size, nodes, knobs, topology=spec.topology)

    def _probe(self, runner: Any) -> tuple[Any, str | None]:
        """The overlap probe (None without --overlap), or why it cannot run on this rank."""
        from collbench.bench.overlap.clock import CpuProbeClock, CudaProbeClock
        from collbench.bench.overlap.probe import OverlapProbe

        overlap = self.job.spec.overlap
        if overlap is None:
            return None, None
        torch, device = self.torch, self.device
        clock = CudaProbeClock(torch, device) if device.type == "cuda" else CpuProbeClock(torch)
        try:
            probe = OverlapProbe(runner, clock, overlap)
        except SpecError as error:
            return None, str(error)
        return probe, probe.problem()

    def _local_problems(self, world_size: int | None = None) -> str | None:
        """This rank's reason the sweep cannot run here, checked before any allocation
        (`world_size`: the one its buffers are sized for; None: the job's)."""
        spec, env = self.job.spec, self.env
        world_size = world_size or env.world_size
        try:
            capacity.check_world_size(spec, env.world_size)
            if self.device.type == "cuda":
                free_bytes, _ = self.torch.cuda.mem_get_info(self.device)
                capacity.check_memory(spec, world_size, 1, free_bytes, "GPU")
            else:
                available = capacity.host_memory_available()
                capacity.check_memory(spec, world_size, env.local_world_size, available, "host")
            # The local launcher prepared the directory; a rank of someone else's job does.
            if env.rank == 0 and not self.job.dir_prepared:
                prepare_run_dir(Path(self.job.run_dir), self.job.run_id)
        except SpecError as error:
            return str(error)
        return None

    def _agree(self, problem: str | None) -> None:
        """Every rank stops together if any rank found a problem (no one left waiting)."""
        problems = [p for p in self._gather(problem) if p]
        if problems:
            raise SpecError.from_message(problems[0])

    def _gather(self, value: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.env.world_size
        self.dist.all_gather_object(gathered, value)
        return gathered

    def _meta(self, identities: list[dict[str, Any]], extra: dict[str, Any]) -> RunMeta:
        from collbench.bench.provenance import git_sha, nccl_conf_files, versions

        spec, env = self.job.spec, self.env
        hosts = sorted({identity["host"] for identity in identities})
        return RunMeta(
            run_id=self.job.run_id,
            state="running",
            started_utc=utc_now(),
            command_line=self.job.command_line,
            launcher=self.job.launcher,
            backend=spec.backend,
            world_size=env.world_size,
            nodes=len(hosts),
            ranks_per_node=env.world_size // max(1, len(hosts)),
            hosts=hosts,
            ranks=identities,
            timing_method=self.timer.method,
            versions=versions(self.torch, spec.backend),
            git_sha=git_sha(),
            knobs=knob_env(),
            nccl_conf_files=nccl_conf_files(os.environ, os.environ.get("HOME")),
            spec=spec.to_dict(),
            topology=spec.topology,
            extra={
                "torch_backend": torch_backend(spec.backend),
                "cwd": os.getcwd(),
                "rank_env": env.source,
                "rendezvous": f"{env.master_addr}:{env.master_port} ({env.rendezvous})",
                "rendezvous_bind": _bound(env),
                **({"shared_gpu": SHARED_GPU_NOTE} if shared_gpu() else {}),
                **extra,
            },
        )


def _bound(env: RunEnv) -> str:
    """Where rank 0's rendezvous store listens, as meta.json records it."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return "torchrun agent"
    bind = rendezvous_bind(str(env.master_addr), single_host(env))
    return f"{bind or '*'}:{env.master_port}"


def _describe(step: Any) -> str:
    """A step as the status files and hang reports name it."""
    text = f"{step.collective} {step.size_bytes} B {step.placement}"
    if step.kind == "overlap":
        text += f" overlap ratio {step.ratio:g}" if step.ratio is not None else " overlap"
    return text


def repeat_of(repeat: int, repeats: int) -> str:
    """' (repeat 2/3)' in a rank log's step line when the run repeats, else ''."""
    return f" (repeat {repeat + 1}/{repeats})" if repeats > 1 else ""
