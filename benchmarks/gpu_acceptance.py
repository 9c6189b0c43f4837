"""The GPU acceptance kit (issues 27, 40): what a person with a GPU node runs first,
writing one JSON file of figures held against expected ranges, and one archive of it all.

    python benchmarks/gpu_acceptance.py --out kit-h100                # on the GPU node
    python benchmarks/gpu_acceptance.py --budget 540 --out kit-lease  # a short lease
    python benchmarks/gpu_acceptance.py --plan --budget 540           # what fits, 1 and 8 GPUs
    python benchmarks/gpu_acceptance.py --dry-run --out /tmp/k        # CPU: the CPU parts
    python benchmarks/gpu_acceptance.py --only sweep_all,gemm_bf16 --out kit2

From a checkout it needs no install (it puts the checkout on the path, for its commands
too); the machine needs torch and collbench's dependencies, no network. Every step runs the
real CLI (`python -m collbench ...`) in fresh processes, its output kept under OUT/logs, its
run directories under OUT/runs and NCCL's debug logs under OUT/nccl-debug, and records its
figures, its checks (figure, value, expected, ok) and a status: pass, fail, not applicable
(too few GPUs to prove anything, or a GPU part in a dry run; the reason in its note) or skip
(not run: over the --budget). On fewer GPUs than a multi-rank step needs, it runs in the
shared-GPU test mode (COLLBENCH_SHARED_GPU=1, 2-4 ranks sharing the GPUs) where its point
survives that: its record's test_mode says so and its figures are not judged. Steps run most
informative first; --budget SECONDS runs those whose ESTIMATED time still fits. Expected
ranges are public 8x H100 SXM (DGX H100) figures, "to confirm": judged only on such a node
(8 GPUs named H100, each rank its own), recorded with ok = null elsewhere. The steps, and
the Kit and Step they record with: gpu_acceptance_steps.py.

--dry-run (CI runs it: tests/cli/test_gpu_acceptance_kit.py): runs every step's CPU part on
gloo with small sizes; GPU-only parts are `not applicable` with the reason. OUT/acceptance.json
is the summary, OUT/acceptance.tar.gz everything measured. Exit status: 0 when no step
failed, 1 otherwise, 2 for bad options.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import sys
import tarfile
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("collbench") is None:  # a checkout, not installed: use it
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # fmt: skip

from gpu_acceptance_steps import FAIL, NA, PASS, RANGES_SOURCE, SKIP, STEPS, Kit, KitStep, Step  # noqa: E402

STATUSES = (PASS, FAIL, NA, SKIP)
PLAN_GPUS = (1, 8)  # the machines --plan shows


def detect(dry_run: bool) -> tuple[int, str]:
    """(GPUs, device name); the dry run uses 3 CPU ranks, an odd world size."""
    if dry_run:
        import platform

        return 3, platform.processor() or platform.machine() or "cpu"
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_acceptance: no GPU visible; use --dry-run on a CPU host")
    return torch.cuda.device_count(), torch.cuda.get_device_name(0)


def plan(gpus: int, budget: float | None, chosen: Sequence[str]) -> list[tuple[KitStep, str]]:
    """What a run on `gpus` GPUs does with each chosen step within `budget` seconds (None: no
    limit), by the steps' estimates."""
    used, lines = 0, []
    for step in (step for step in STEPS if step.name in chosen):
        cost, mode = step.estimate[gpus > 1], step.test_mode(gpus)
        if step.not_applicable(gpus):
            lines.append((step, f"not applicable: {step.not_applicable(gpus)}"))
        elif budget is not None and used + cost > budget:
            lines.append((step, f"skip: ~{cost} s would end past the budget"))
        else:
            used += cost
            lines.append((step, f"runs{f' in test mode ({mode})' if mode else ''}, ~{cost} s (done by ~{used} s)"))  # fmt: skip
    return lines


def print_plan(budget: float | None, chosen: Sequence[str]) -> None:
    limit = f"within {budget:g} s" if budget is not None else "with no budget"
    for gpus in PLAN_GPUS:
        print(f"# plan on {gpus} GPU(s), {limit} (times are ESTIMATES, not measured):")
        for step, what in plan(gpus, budget, chosen):
            print(f"#   {step.name:<18} {what}")


def run_steps(kit: Kit, steps: Sequence[KitStep], budget: float | None) -> dict:
    """Run the steps in order (a crash in one is that step's failure), each only where it
    proves anything (on too few GPUs: in the test mode, where its point survives it) and,
    with a budget, while its estimate fits the time left: the JSON, rewritten to
    OUT/acceptance.json after every step (a lease that ends mid-step keeps the steps done)."""
    records, started_all = [], time.perf_counter()
    for kit_step in steps:
        mode = None if kit.dry_run else kit_step.test_mode(kit.gpus)
        step = Step(kit_step.name, kit_step.what, test_mode=mode)
        print(f"== {step.name}: {step.what}{f' [test mode: {mode}]' if mode else ''}", flush=True)
        started = time.perf_counter()
        cost = kit_step.estimate[kit.gpus > 1]
        if not kit.dry_run and kit_step.not_applicable(kit.gpus):
            step.not_applicable(kit_step.not_applicable(kit.gpus))
        elif budget is not None and started - started_all + cost > budget:
            step.skip(f"over the budget: ~{cost} s (estimated), {budget - (started - started_all):.0f} s left")  # fmt: skip
        else:
            try:
                kit_step.body(replace(kit, gpus=kit_step.gpus, shared=True) if mode else kit, step)
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
        document = summary(kit, budget, records)
        (kit.out / "acceptance.json").write_text(json.dumps(document, indent=2) + "\n")
    return summary(kit, budget, records)


def summary(kit: Kit, budget: float | None, records: list[dict]) -> dict:
    counts = {status: sum(r["status"] == status for r in records) for status in STATUSES}
    import collbench

    return {
        "kit": "collbench GPU acceptance (issues 27, 40)",
        "dry_run": kit.dry_run,
        "host": socket.gethostname(),
        "device": kit.device,
        "gpus": kit.gpus,
        "budget_s": budget,
        "collbench": collbench.__version__,
        "ranges": RANGES_SOURCE,
        "ranges_judged": kit.judged,
        "summary": counts,
        "steps": records,
    }


def archive(out: Path) -> Path:
    """OUT/acceptance.tar.gz: everything under OUT (summary, logs, rows, NCCL debug logs,
    choices, tune directories), one file to carry off a lent machine."""
    path = out / "acceptance.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for item in sorted(out.iterdir()):
            if item != path:
                tar.add(item, arcname=f"{out.name}/{item.name}")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="new or empty directory (not with --plan)")
    parser.add_argument("--dry-run", action="store_true", help="CPU: plan + CPU parts (gloo)")
    parser.add_argument("--only", help="comma list of step names (default: all)")
    parser.add_argument("--budget", type=float, metavar="SECONDS", help="run, most informative first, the steps whose estimate fits")  # fmt: skip
    parser.add_argument("--plan", action="store_true", help="print what runs on 1 and 8 GPUs within --budget (estimates), run nothing")  # fmt: skip
    args = parser.parse_args(argv)
    names = [step.name for step in STEPS]
    chosen = [name.strip() for name in args.only.split(",")] if args.only else names
    unknown = [name for name in chosen if name not in names]
    if unknown:
        parser.error(
            f"--only: unknown step(s) {', '.join(unknown)}; choose from {', '.join(names)}"
        )
    if args.budget is not None and not args.budget > 0:
        parser.error(f"--budget: {args.budget:g} is not a positive number of seconds")
    if args.plan:
        print_plan(args.budget, chosen)
        return 0
    if args.out is None:
        parser.error("--out is required (but with --plan)")
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"--out: {args.out} is not empty")
    args.out.mkdir(parents=True, exist_ok=True)
    gpus, device = detect(args.dry_run)
    kit = Kit(args.out.absolute(), args.dry_run, gpus, device)
    print(f"# {'dry run: CPU parts on gloo' if kit.dry_run else device + f' x{gpus}'}")
    print_plan(args.budget, chosen)
    document = run_steps(kit, [step for step in STEPS if step.name in chosen], args.budget)
    path = kit.out / "acceptance.json"
    print(f"# {document['summary']} -> {path}, everything in {archive(kit.out)}")
    return 1 if document["summary"][FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
