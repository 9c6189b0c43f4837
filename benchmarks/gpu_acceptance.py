"""The GPU acceptance kit (issue 27): what a person with one GPU node runs first (~30 min),
writing one JSON file of figures held against expected ranges.

    python benchmarks/gpu_acceptance.py --out kit-h100          # on the GPU node
    python benchmarks/gpu_acceptance.py --dry-run --out /tmp/k  # CPU: the plan, CPU parts
    python benchmarks/gpu_acceptance.py --only sweep_all,gemm_bf16 --out kit2

Every step runs the real CLI (`python -m collbench ...`) in fresh processes, its output kept
under OUT/logs and its run directories under OUT/runs, and records its figures, its checks
(figure, value, expected, ok) and a status: pass, fail or skip. Expected ranges are public
8x H100 SXM (DGX H100) figures, "to confirm": they are judged only on such a node (8 GPUs
named H100), recorded with ok = null elsewhere. The steps, and the Kit and Step they
record with: gpu_acceptance_steps.py.

--dry-run (CI runs it: tests/cli/test_gpu_acceptance_kit.py): prints the plan, then runs
every step's CPU part on gloo with small sizes (a few minutes at most on 2 cores); GPU-only
parts are `skip` with the reason. Exit status: 0 when no step failed, 1 otherwise, 2 for bad
options.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from gpu_acceptance_steps import FAIL, PASS, RANGES_SOURCE, SKIP, STEPS, Kit, Step


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
