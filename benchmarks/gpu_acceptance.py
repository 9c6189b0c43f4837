"""The GPU acceptance kit (issue 27): what a person with one GPU node runs first (~30 min),
writing one JSON file of figures held against expected ranges.

    python benchmarks/gpu_acceptance.py --out kit-h100          # on the GPU node
    python benchmarks/gpu_acceptance.py --dry-run --out /tmp/k  # CPU: the plan, CPU parts
    python benchmarks/gpu_acceptance.py --only sweep_all,gemm_bf16 --out kit2

Every step runs the real CLI (`python -m collbench ...`) in fresh processes, its output kept
under OUT/logs and its run directories under OUT/runs, and records its figures, its checks
(figure, value, expected, ok) and a status: pass, fail or skip. Expected ranges are public
8x H100 SXM (DGX H100) figures, "to confirm": they are judged only on such a node (8 GPUs
named H100), recorded with ok = null elsewhere. The steps: gpu_acceptance_steps.py.

--dry-run (CI runs it: tests/cli/test_gpu_acceptance_kit.py): prints the plan, then runs
every step's CPU part on gloo with small sizes (a few minutes at most on 2 cores); GPU-only
parts are `skip` with the reason. Exit status: 0 when no step failed, 1 otherwise, 2 for bad
options.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PASS, FAIL, SKIP = "pass", "fail", "skip"
RANGES_SOURCE = "8x H100 SXM (public DGX H100 figures), to confirm"
# A step's commands may not run longer than this each (a hang is a failed step, not a hung kit).
COMMAND_TIMEOUT_S = 1800.0


@dataclass
class Done:
    """One finished command: its exit code, output and the run directory it was given."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    run_dir: Path | None


@dataclass
class Step:
    """One step's record in the JSON."""

    name: str
    what: str
    status: str = PASS
    note: str | None = None
    commands: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def check(
        self,
        figure: str,
        value: Any,
        expected: Any,
        ok: bool | None,
        source: str | None = None,
    ) -> bool | None:
        """Record one check; ok None: recorded, not judged (e.g. a range for another node)."""
        self.checks.append(
            {"figure": figure, "value": value, "expected": expected, "ok": ok, "source": source}
        )
        if ok is False:
            self.status = FAIL
        return ok

    def within(self, figure: str, value: float | None, low: float, high: float, judged: bool):
        """A figure against [low, high] (RANGES_SOURCE), judged only where `judged`."""
        ok = None if not judged or value is None else low <= value <= high
        return self.check(figure, value, [low, high], ok, RANGES_SOURCE)

    def code_is(self, done: Done, *codes: int) -> bool:
        return bool(self.check("exit code", done.code, list(codes), done.code in codes))

    def skip(self, why: str) -> None:
        self.status, self.note = SKIP, why


@dataclass(frozen=True)
class Kit:
    """Where and how the steps run."""

    out: Path
    dry_run: bool
    gpus: int  # the ranks that are "every GPU" (dry run: CPU ranks)
    device: str  # the GPU's name, or the CPU's
    collbench: tuple[str, ...] = (sys.executable, "-m", "collbench")

    @property
    def judged(self) -> bool:
        """Whether the expected ranges apply here: 8 GPUs named H100."""
        return not self.dry_run and self.gpus == 8 and "H100" in self.device

    @property
    def backend(self) -> list[str]:
        return ["--backend", "gloo"] if self.dry_run else ["--backend", "auto"]

    def run(
        self, step: Step, label: str, args: Sequence[str], env: dict[str, str] | None = None
    ) -> Done:
        """`collbench ARGS` (with --out OUT/runs/STEP-LABEL unless ARGS has --out)."""
        run_dir = None
        args = list(args)
        if "--out" not in args and args[0] in ("sweep", "overlap", "doctor", "tune", "gemm"):
            run_dir = self.out / "runs" / f"{step.name}-{label}"
            args += ["--out", str(run_dir)]
        elif "--out" in args:
            run_dir = Path(args[args.index("--out") + 1])
        return self.command(step, label, [*self.collbench, *args], env, run_dir)

    def command(
        self,
        step: Step,
        label: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        run_dir: Path | None = None,
    ) -> Done:
        """Run argv to completion, its output into OUT/logs/STEP-LABEL.log."""
        started = time.perf_counter()
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                env={**os.environ, **(env or {})},
            )
            code, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as error:
            code, stdout, stderr = 124, str(error.stdout or ""), f"timed out: {error}"
        seconds = time.perf_counter() - started
        log = self.out / "logs" / f"{step.name}-{label}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {shlex.join(argv)}\n# env {env or {}}\n{stdout}\n{stderr}")
        step.commands.append(
            {
                "label": label,
                "argv": shlex.join(argv),
                "env": env or {},
                "exit_code": code,
                "seconds": round(seconds, 2),
                "log": str(log),
            }
        )
        return Done(code, stdout, stderr, seconds, run_dir)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a run's rows.jsonl or gemm.jsonl ([] if it is not there)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def detect(dry_run: bool) -> tuple[int, str]:
    """(GPUs, device name); the dry run uses 3 CPU ranks, an odd world size."""
    if dry_run:
        import platform

        return 3, platform.processor() or platform.machine() or "cpu"
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_acceptance: no GPU visible; use --dry-run on a CPU host")
    return torch.cuda.device_count(), torch.cuda.get_device_name(0)


def run_steps(kit: Kit, steps: Sequence[tuple[str, str, Callable[[Kit, Step], None]]]) -> dict:
    """Run every step (a crash in one is that step's failure), the JSON document."""
    records = []
    for name, what, body in steps:
        step = Step(name, what)
        print(f"== {name}: {what}", flush=True)
        started = time.perf_counter()
        try:
            body(kit, step)
        except Exception as error:  # noqa: BLE001 - a broken step is a failed step
            step.status, step.note = FAIL, f"{type(error).__name__}: {error}"
        step.seconds = round(time.perf_counter() - started, 2)
        print(f"   {step.status} ({step.seconds:.0f} s){': ' + step.note if step.note else ''}")
        for item in step.checks:
            if item["ok"] is False:
                print(
                    f"   FAILED {item['figure']} = {item['value']!r}, expected {item['expected']}"
                )
        records.append(asdict(step))
    counts = {status: sum(r["status"] == status for r in records) for status in (PASS, FAIL, SKIP)}
    import collbench

    return {
        "kit": "collbench GPU acceptance (issue 27)",
        "dry_run": kit.dry_run,
        "host": socket.gethostname(),
        "device": kit.device,
        "gpus": kit.gpus,
        "collbench": collbench.__version__,
        "ranges": RANGES_SOURCE,
        "ranges_judged": kit.judged,
        "summary": counts,
        "steps": records,
    }


def main(argv: Sequence[str] | None = None) -> int:
    from gpu_acceptance_steps import STEPS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="new or empty directory")
    parser.add_argument("--dry-run", action="store_true", help="CPU: plan + CPU parts (gloo)")
    parser.add_argument("--only", help="comma list of step names (default: all)")
    args = parser.parse_args(argv)
    names = [name for name, _, _ in STEPS]
    chosen = [name.strip() for name in args.only.split(",")] if args.only else names
    unknown = [name for name in chosen if name not in names]
    if unknown:
        parser.error(
            f"--only: unknown step(s) {', '.join(unknown)}; choose from {', '.join(names)}"
        )
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"--out: {args.out} is not empty")
    args.out.mkdir(parents=True, exist_ok=True)
    gpus, device = detect(args.dry_run)
    kit = Kit(args.out.absolute(), args.dry_run, gpus, device)
    print(f"# plan ({'dry run: CPU parts on gloo' if kit.dry_run else device + f' x{gpus}'}):")
    for name, what, _ in STEPS:
        print(f"#   {name}: {what}{'' if name in chosen else ' (not chosen)'}")
    document = run_steps(kit, [step for step in STEPS if step[0] in chosen])
    path = kit.out / "acceptance.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"# {document['summary']} -> {path}")
    return 1 if document["summary"][FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
