"""The GPU acceptance kit's steps (gpu_acceptance.py runs them): where they run (Kit), what one
records (Step), and one function per step, each with its GPU run and its dry-run (CPU, gloo,
small sizes) part. Expected ranges: 8x H100 SXM, public DGX H100 figures, to confirm (issue
27)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from collbench.core.collectives import REGISTRY
from collbench.core.knobs import SHARED_GPU_VAR

# not applicable: the step cannot prove anything here (too few GPUs, no GPU in a dry run);
# skip: it was not run (over the --budget).
PASS, FAIL, NA, SKIP = "pass", "fail", "not applicable", "skip"
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
    test_mode: str | None = None  # ran with ranks sharing GPUs (SHARED_GPU_VAR): never judged
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

    def not_applicable(self, why: str) -> None:
        self.status, self.note = NA, why


@dataclass(frozen=True)
class Kit:
    """Where and how the steps run."""

    out: Path
    dry_run: bool
    gpus: int  # the ranks that are "every GPU" (dry run: CPU ranks)
    device: str  # the GPU's name, or the CPU's
    shared: bool = False  # the step's `gpus` ranks share the node's GPUs (SHARED_GPU_VAR=1)
    collbench: tuple[str, ...] = (sys.executable, "-m", "collbench")

    @property
    def judged(self) -> bool:
        """Whether the expected ranges apply here: 8 GPUs named H100, each rank its own."""
        return not self.dry_run and not self.shared and self.gpus == 8 and "H100" in self.device

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
        env = {**(env or {}), **({SHARED_GPU_VAR: "1"} if self.shared else {})}  # never inherited
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                env={**{k: v for k, v in os.environ.items() if k != SHARED_GPU_VAR}, **env},
            )
            code, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as error:
            code, stdout, stderr = 124, str(error.stdout or ""), f"timed out: {error}"
        seconds = time.perf_counter() - started
        log = self.out / "logs" / f"{step.name}-{label}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {shlex.join(argv)}\n# env {env}\n{stdout}\n{stderr}")
        step.commands.append(
            {
                "label": label,
                "argv": shlex.join(argv),
                "env": env,
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


ALL_COLLECTIVES = tuple(REGISTRY)
# busbw (GB/s) at 1 GiB on 8x H100 SXM: all-reduce 400-480 with NVLS, ~360 without; all-gather
# and reduce-scatter 330-380 (issue 27; nccl-tests figures published for DGX H100).
BUSBW_1G = {"all_reduce": (340.0, 480.0), "all_gather": (330.0, 380.0), "reduce_scatter": (330.0, 380.0)}  # fmt: skip
# An 8 B all-reduce: nccl-tests (and a CUDA graph) 8-15 us; torch's eager per-call path 15-40.
LATENCY_8B_US = {"cuda_graph": (5.0, 15.0), "cuda_events": (10.0, 40.0)}
GEMM_BF16_TFLOPS = (600.0, 750.0)  # 8192..16384 square, H100 SXM dense bf16
TF32_SPEEDUP = (2.0, 20.0)  # fp32 with TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 over without
BLOCKED_OVERLAP_PCT = (0.0, 10.0)  # TORCH_NCCL_BLOCKING_WAIT=1: nothing can overlap


def _small(kit: Kit, gpu: str) -> str:
    """The largest size: `gpu`, 64 MiB when ranks share a GPU (sockets), 64 KiB on CPU."""
    return "64K" if kit.dry_run else "64M" if kit.shared else gpu


def _sweep_args(kit: Kit, collectives: str, max_bytes: str, ranks: int | None = None) -> list[str]:
    quick = ["-f", "8", "-w", "1", "-n", "3"] if kit.dry_run else []  # a few sizes, iterations
    return [
        "-c", collectives, "-b", "8", "-e", max_bytes, "-g", str(ranks or kit.gpus),
        "--repeats", "1", *quick, *kit.backend,
    ]  # fmt: skip


def _largest(rows: list[dict], collective: str) -> dict | None:
    """The largest size's row (out of place where the backend has it, as nccl-tests
    reports busbw), None if the collective has no rows."""
    mine = [r for r in rows if r["collective"] == collective]
    key = lambda r: (r["size_bytes"], r["placement"] == "out_of_place")  # noqa: E731
    return max(mine, key=key) if mine else None


def _figure(value: float | None) -> float | None:
    """Four significant digits (a CPU's TFLOP/s are small, not zero)."""
    return None if value is None else float(f"{value:.4g}")


def sweep_all(kit: Kit, step: Step) -> None:
    env = None if kit.dry_run else _nccl_debug(kit, "sweep_all")  # NCCL's version, rings, ...
    done = kit.run(step, "sweep", ["sweep", *_sweep_args(kit, ",".join(ALL_COLLECTIVES), _small(kit, "1G"))], env)  # fmt: skip
    step.code_is(done, 0)
    rows = read_jsonl(done.run_dir / "rows.jsonl")
    wrong = sum(row["n_wrong"] or 0 for row in rows)
    step.check("n_wrong total", wrong, 0, bool(rows) and wrong == 0)
    for name in ALL_COLLECTIVES:
        row = _largest(rows, name)
        step.figures[f"busbw_gbps {name} at {row['size_bytes'] if row else '-'} B"] = row and round(
            row["busbw_gbps"], 2
        )
        if name in BUSBW_1G and not kit.dry_run and not kit.shared:
            step.within(f"busbw {name} at 1 GiB", row and row["busbw_gbps"], *BUSBW_1G[name], kit.judged)  # fmt: skip


def _nccl_debug(kit: Kit, name: str) -> dict[str, str]:
    """NCCL's INFO lines into OUT/nccl-debug/NAME.HOST.PID.log (they go into the archive)."""
    folder = kit.out / "nccl-debug"
    folder.mkdir(parents=True, exist_ok=True)
    return {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": str(folder / f"{name}.%h.%p.log")}


def graph_latency(kit: Kit, step: Step) -> None:
    """Item 12: the same small all-reduces timed eagerly and as CUDA-graph replays."""
    if kit.dry_run:
        done = kit.run(step, "refused", ["sweep", *_sweep_args(kit, "all_reduce", "1K"), "--cuda-graph"])  # fmt: skip
        step.code_is(done, 2)
        step.check("one-line refusal", done.stderr.strip(), "--cuda-graph ... gloo", "--cuda-graph" in done.stderr and done.stderr.count("\n") == 1)  # fmt: skip
        step.note = "CPU part: --cuda-graph refused on gloo; the timing needs a GPU"
        return
    times = {}
    for method, extra in (("cuda_events", []), ("cuda_graph", ["--cuda-graph"])):
        done = kit.run(step, method, ["sweep", *_sweep_args(kit, "all_reduce", "1M"), *extra])
        step.code_is(done, 0)
        meta = json.loads((done.run_dir / "meta.json").read_text())
        step.check(f"{method}: timing_method", meta["timing_method"], method, meta["timing_method"] == method)  # fmt: skip
        rows = read_jsonl(done.run_dir / "rows.jsonl")
        small = [r["time_us"] for r in rows if r["size_bytes"] == 8]
        times[method] = min(small) if small else None
        step.within(f"{method}: 8 B all_reduce time_us", times[method], *LATENCY_8B_US[method], kit.judged)  # fmt: skip
        step.check(f"{method}: n_wrong", sum(r["n_wrong"] or 0 for r in rows), 0, all(not r["n_wrong"] for r in rows))  # fmt: skip
    if None not in times.values():
        ratio = times["cuda_graph"] / times["cuda_events"]
        step.check("graph / eager at 8 B", round(ratio, 3), "< 1", ratio < 1)


def avg_odd_world(kit: Kit, step: Step) -> None:
    ranks = 6 if kit.gpus >= 6 else 3
    if kit.gpus < ranks:
        return step.not_applicable(f"needs {ranks} GPUs, this node has {kit.gpus}")
    dtypes = ("bfloat16",) if kit.dry_run else ("bfloat16", "float16")
    for dtype in dtypes:
        args = _sweep_args(kit, "all_reduce,reduce_scatter", _small(kit, "256M"), ranks)
        done = kit.run(step, dtype, ["sweep", *args, "-d", dtype, "-o", "avg"])
        step.code_is(done, 0)
        rows = read_jsonl(done.run_dir / "rows.jsonl")
        wrong = sum(row["n_wrong"] or 0 for row in rows)
        step.check(f"{dtype} avg at {ranks} ranks: n_wrong", wrong, 0, bool(rows) and wrong == 0)


def corrupt_rank(kit: Kit, step: Step) -> None:
    env = {"COLLBENCH_TEST_CORRUPT_RANK": "1"}
    done = kit.run(step, "corrupt", ["sweep", *_sweep_args(kit, "all_reduce", "1K")], env)
    step.code_is(done, 3)


def too_many_ranks_refusal(gpus: int) -> str:
    """What launchers/local.py's refusal says (the GPU count; it names no host)."""
    return f"exceeds the {gpus} GPU(s) visible on this host"


def too_many_ranks(kit: Kit, step: Step) -> None:
    if kit.dry_run:
        return step.not_applicable("counts GPUs: needs a GPU node")
    args = _sweep_args(kit, "all_reduce", "1K", kit.gpus + 1)
    done = kit.run(step, "refused", ["sweep", *args])
    step.code_is(done, 2)
    said = too_many_ranks_refusal(kit.gpus)
    step.check("the refusal names the GPUs", said in done.stderr, True, said in done.stderr)


def nccl_choices(kit: Kit, step: Step) -> None:
    """NCCL's algorithm/protocol per size, from its debug output, parsed by collbench."""
    if kit.dry_run:
        return step.not_applicable("NCCL's debug output: needs a GPU node")
    from collbench.core.spec import SweepSpec
    from collbench.run.tune.choices import choices_env, collect_choices

    folder = kit.out / "runs" / "nccl_choices"
    folder.mkdir(parents=True, exist_ok=True)
    spec = SweepSpec(collectives=("all_reduce", "all_gather", "reduce_scatter"), min_bytes=8, max_bytes=1024**2 * (64 if kit.shared else 1024), factor=4.0, repeats=1, iters=5)  # fmt: skip
    env = choices_env(folder, os.environ)
    args = ["sweep", *spec.to_args(), "-g", str(kit.gpus), "--out", str(folder / "run")]
    step.code_is(kit.run(step, "sweep", args, env), 0)
    lines = collect_choices(folder, "default", folder / "choices.jsonl", spec)
    choices = read_jsonl(folder / "choices.jsonl")
    step.figures["choice lines"] = lines
    for name in spec.collectives:
        mine = [c for c in choices if c["collective"] == name]
        step.figures[name] = sorted({(c["size_bytes"], c["algorithm"], c["protocol"]) for c in mine})  # fmt: skip
        sizes = {c["size_bytes"] for c in mine}
        step.check(f"{name}: sizes with a choice", len(sizes), len(spec.sizes()), len(sizes) >= len(spec.sizes()) - 1)  # fmt: skip


def _mean_overlap(run_dir: Path, min_bytes: int = 0) -> float | None:
    rows = [r for r in read_jsonl(run_dir / "rows.jsonl") if r["size_bytes"] >= min_bytes]
    return round(statistics.fmean(r["overlap_pct"] for r in rows), 2) if rows else None


def overlap_channels(kit: Kit, step: Step) -> None:
    """Item 1 and the knobs: overlap by size, as NCCL comes, with NCCL_MAX_NCHANNELS=4 and
    with NCCL_MAX_CTAS=4 (fewer SMs for NCCL, more for the matmul)."""
    settings = {"default": []} if kit.dry_run else {
        "default": [], "max_nchannels_4": ["--knob", "NCCL_MAX_NCHANNELS=4"],
        "max_ctas_4": ["--knob", "NCCL_MAX_CTAS=4"],
    }  # fmt: skip
    for label, knobs in settings.items():
        args = ["overlap", *_sweep_args(kit, "all_reduce", _small(kit, "256M")), "-f", "32"]
        done = kit.run(step, label, [*args, "--compute-ratio", "1,2", *knobs])
        step.code_is(done, 0)
        rows = read_jsonl(done.run_dir / "rows.jsonl")
        step.figures[label] = {
            f"{r['size_bytes']} B x{r['compute_ratio']:g}": round(r["overlap_pct"], 1) for r in rows
        }
        if rows and not kit.dry_run:
            timing = {r["probe_timing"] for r in rows}
            step.check(f"{label}: probe timing", sorted(timing), ["cuda_events_two_streams_held"], timing == {"cuda_events_two_streams_held"})  # fmt: skip


def overlap_blocking(kit: Kit, step: Step) -> None:
    """Item 2: TORCH_NCCL_BLOCKING_WAIT=1 refused for probes, warned when allowed, ~0%."""
    env = {"TORCH_NCCL_BLOCKING_WAIT": "1"}
    args = ["overlap", *_sweep_args(kit, "all_reduce", "64M"), "-b", "1M", "-f", "8"]
    if kit.dry_run:  # the refusal and the warning come before any GPU is needed
        args = [*args[: args.index("--backend")], "--backend", "nccl", "--print"]
    refused = kit.run(step, "refused", args, env)
    step.code_is(refused, 2)
    step.check("refusal names the variable", "TORCH_NCCL_BLOCKING_WAIT" in refused.stderr, True, "TORCH_NCCL_BLOCKING_WAIT" in refused.stderr)  # fmt: skip
    allowed = kit.run(step, "allowed", [*args, "--allow-blocking-env"], env)
    warned = "warning" in allowed.stderr and "TORCH_NCCL_BLOCKING_WAIT=1" in allowed.stderr
    step.check("warned when allowed", warned, True, warned)
    if kit.dry_run:
        step.note = "CPU part: refusal and warning at the command line (--print)"
        return
    step.code_is(allowed, 0)
    value = _mean_overlap(allowed.run_dir)
    step.within("mean overlap_pct under BLOCKING_WAIT", value, *BLOCKED_OVERLAP_PCT, True)


def _tune(kit: Kit, step: Step, label: str, collectives: str, knobs: list[str], env=None):
    args = ["tune", "run", *knobs, *_sweep_args(kit, collectives, _small(kit, "1G")), "-f", "8"]
    done = kit.run(step, label, [*args, *(["--no-choices"] if kit.dry_run else [])], env)
    step.code_is(done, 0)
    path = done.run_dir / "tune.json" if done.run_dir else None
    result = json.loads(path.read_text()) if path and path.exists() else {"settings": []}
    settings = {s["label"]: {"status": s["status"], "rows": s["rows"], "error": s["error"]} for s in result["settings"]}  # fmt: skip
    step.figures[f"{label}: settings"] = settings
    step.figures[f"{label}: best"] = [
        {k: best.get(k) for k in ("collective", "min_bytes", "max_bytes", "label", "gain_pct")}
        for best in result.get("best", [])
    ]
    return settings


def tune_algo_proto(kit: Kit, step: Step) -> None:
    if kit.dry_run:
        return step.not_applicable(
            "NCCL_ALGO x NCCL_PROTO: needs NCCL (tune_ring_tree runs the CPU part)"
        )
    knobs = ["--knob", "NCCL_ALGO=Ring,NVLS,Tree", "--knob", "NCCL_PROTO=Simple,LL,LL128"]
    settings = _tune(kit, step, "all_reduce", "all_reduce", knobs)
    ok = [label for label, s in settings.items() if s["status"] == "ok"]
    step.check("settings completed", len(ok), f">= 1 of {len(settings)}", len(ok) > 1)


def tune_ring_tree(kit: Kit, step: Step) -> None:
    """Tree exists for all-reduce only: its all-gather must fail alone, all-reduce kept."""
    # gloo ignores NCCL_ALGO: the rank's test hook refuses all-gather under Tree, as NCCL does.
    env = {"COLLBENCH_TEST_REFUSE_COLLECTIVE": "all_gather:NCCL_ALGO=Tree"} if kit.dry_run else None
    settings = _tune(kit, step, "ring_tree", "all_reduce,all_gather", ["--knob", "NCCL_ALGO=Ring,Tree"], env)  # fmt: skip
    tree = settings.get("NCCL_ALGO=Tree")
    step.check("Tree's all_reduce rows kept", tree and tree["rows"], "> 0", bool(tree and tree["rows"]))  # fmt: skip


TUNER_EXAMPLE_VAR = "COLLBENCH_TUNER_EXAMPLE"


def build_tuner_plugin(kit: Kit, step: Step) -> str | None:
    """NCCL's example tuner plugin compiled from its source (TUNER_EXAMPLE_VAR: the folder
    with plugin.c, NCCL >= 2.27.5's plugins/tuner/example or ext-tuner/example), as its
    Makefile builds it: the library, or None with the reason in the step's figures."""
    source = Path(os.environ.get(TUNER_EXAMPLE_VAR) or "/nonexistent")
    compiler = shutil.which("cc") or shutil.which("gcc")
    why = None
    if not (source / "plugin.c").is_file():
        why = (
            f"not built: no plugin source (set {TUNER_EXAMPLE_VAR} to NCCL's plugins/tuner/example)"
        )
    elif compiler is None:
        why = "not built: no C compiler (cc, gcc)"
    else:
        library = kit.out / "tuner" / "libnccl-tuner-example.so"
        library.parent.mkdir(parents=True, exist_ok=True)
        argv = [compiler, "-fPIC", "-shared", f"-I{source}", f"-I{source / 'nccl'}", "-o", str(library), str(source / "plugin.c")]  # fmt: skip
        done = kit.command(step, "build_tuner_plugin", argv)
        if done.code == 0:
            step.figures["tuner plugin"] = f"built from {source}"
            return str(library)
        why = f"not built: {compiler} exited {done.code} (see its log)"
    step.figures["tuner plugin"] = why
    return None


def tune_verify(kit: Kit, step: Step) -> None:
    """tune verify on tune_ring_tree's result: the default, best.env and nccl_tuner.conf
    through NCCL's example tuner plugin (built here), side by side."""
    plugin = build_tuner_plugin(kit, step)
    if kit.dry_run:
        return step.not_applicable("tune verify measures NCCL's settings: needs NCCL on 2+ GPUs")
    tuned = kit.out / "runs" / "tune_ring_tree-ring_tree"
    if not (tuned / "tune.json").is_file():
        return step.skip("tune_ring_tree wrote no tune.json here (not chosen, or over the budget)")
    env = {"NCCL_TUNER_PLUGIN": plugin} if plugin else None
    done = kit.run(step, "verify", ["tune", "verify", str(tuned), "-g", str(kit.gpus)], env)
    step.code_is(done, 0)
    path = done.run_dir / "verify.json" if done.run_dir else None
    result = json.loads(path.read_text()) if path and path.exists() else {}
    step.figures["settings"] = {s["label"]: s["status"] for s in result.get("settings", [])}
    step.figures["lines"] = result.get("lines", [])
    step.figures["warnings"] = result.get("warnings", [])
    if plugin is None:
        step.note = (
            f"nccl_tuner.conf not verified: the tuner plugin was {step.figures['tuner plugin']}"
        )


def doctor(kit: Kit, step: Step, nodes: int) -> None:
    ranks = kit.gpus if not kit.dry_run else 4 if nodes > 1 else 2
    env = {"COLLBENCH_TEST_DOCTOR_NODE_SIZE": str(ranks // nodes)} if nodes > 1 else None
    size = ["--size", "1M"] if kit.dry_run else []
    done = kit.run(step, f"{nodes}-nodes", ["doctor", "-g", str(ranks), *kit.backend, *size], env)
    codes = (0, 5, 6) if kit.dry_run or kit.shared else (0, 6)  # a loaded/shared one may flag
    step.code_is(done, *codes)
    path = done.run_dir / "doctor.json" if done.run_dir else None
    report = json.loads(path.read_text()) if path and path.exists() else {}
    step.check("doctor.json written", bool(report), True, bool(report))
    step.figures.update({k: report[k] for k in ("verdict", "summary", "nodes", "stages") if k in report})  # fmt: skip
    if nodes == 1 and done.run_dir:  # its gemm burn-in prices stragglers (it takes 2+ GPUs)
        pooled = not kit.dry_run and not kit.shared and kit.gpus >= 2
        job = ["-T", "hgx-h200", "--model", "llama3-8b", "--global-batch", "1024", "--nodes", "128"]
        priced = kit.run(
            step, "mfu-skew", ["mfu", *job, "--skew-from", str(done.run_dir), "--json"]
        )
        step.figures["mfu --skew-from: stderr"] = priced.stderr.strip()[-400:]
        if step.code_is(priced, 0 if pooled else 2) and pooled:
            fabric = json.loads(priced.stdout)["fabrics"][0]
            step.figures["mfu --skew-from: straggler_s"] = fabric["breakdown"]["straggler_s"]
            said = [
                text for text in fabric["assumptions"] + fabric["warnings"] if "straggler" in text
            ]
            step.figures["mfu --skew-from: said"] = said
        else:  # the refusal names why: no burn-in on a CPU; in the test mode each rank is a
            # host of its own (two one-rank nodes: no node check, so no burn-in)
            why = "no GPU: the burn-in loads GPUs" if kit.dry_run else "not a one-node doctor run"
            step.check("mfu --skew-from refusal", priced.stderr.strip(), why, why in priced.stderr)


def gemm_bf16(kit: Kit, step: Step) -> None:
    square = "64:128" if kit.dry_run else "1024:16384"
    done = kit.run(step, "square", ["gemm", "--square", square, "--dtype", "bf16", *_gemm_device(kit)])  # fmt: skip
    step.code_is(done, 0)
    for row in read_jsonl(done.run_dir / "gemm.jsonl"):
        step.figures[f"{row['shape']} TFLOP/s"] = _figure(row["tflops"])
        if row["m"] >= 8192:
            step.within(f"bf16 {row['shape']} TFLOP/s", row["tflops"], *GEMM_BF16_TFLOPS, kit.judged)  # fmt: skip


def gemm_tf32(kit: Kit, step: Step) -> None:
    shape = "128x128x128" if kit.dry_run else "8192x8192x8192"
    tflops = {}
    for label, env in (("fp32", {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "0"}), ("tf32_override", {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"})):  # fmt: skip
        done = kit.run(step, label, ["gemm", "--shape", shape, "--dtype", "fp32", *_gemm_device(kit)], env)  # fmt: skip
        step.code_is(done, 0)
        rows = read_jsonl(done.run_dir / "gemm.jsonl")
        tflops[label] = rows[0]["tflops"] if rows else None
        step.figures[f"{label} TFLOP/s"] = _figure(tflops[label])
        step.figures[f"{label} meta.gemm"] = _meta_gemm(done.run_dir)
    if None not in tflops.values():
        speedup = tflops["tf32_override"] / tflops["fp32"]
        step.within("TF32 override speedup", round(speedup, 2), *TF32_SPEEDUP, not kit.dry_run)


def gemm_long(kit: Kit, step: Step) -> None:
    """A minute of load at one shape, then timed: the sustained (power-capped) rate, held
    against the catalog's sustained H100 rate (burst fraction x matmul_sustained), and,
    where the gemm records them (NVML), clocks and power. (The time is the warm-up's, not
    a count's: 40000 timed matmuls ran past 280 s on an H200.)"""
    if kit.dry_run:
        return step.not_applicable(
            "gemm_bf16 runs the same command on CPU; the long run needs a GPU"
        )
    args = ["gemm", "--shape", "8192x8192x8192", "--dtype", "bf16", "--warmup-seconds", "60", "-n", "200"]  # fmt: skip
    done = kit.run(step, "long", args)
    step.code_is(done, 0)
    rows = read_jsonl(done.run_dir / "gemm.jsonl")
    step.figures["TFLOP/s"] = rows and _figure(rows[0]["tflops"])
    step.figures["meta.gemm"] = _meta_gemm(done.run_dir)
    if rows:
        step.figures["of the catalog's sustained H100 rate"] = round(rows[0]["tflops"] / _sustained_tflops(), 3)  # fmt: skip
        step.within("sustained bf16 TFLOP/s", rows[0]["tflops"], *GEMM_BF16_TFLOPS, kit.judged)


def _sustained_tflops() -> float:
    """What the MFU estimate prices a large bf16 GEMM at on dgx-h100 (its matmul_fraction:
    the burst share at the sustained clock), in TFLOP/s."""
    from collbench.analysis.model.gemm_model import matmul_fraction
    from collbench.topologies.loader import load_topology

    gpu = load_topology("dgx-h100").accelerator
    return gpu.peak_bf16_tflops * matmul_fraction(gpu)


# The dgxc Nemotron-4 15B recipe's GEMMs (TP 4, seq 4096, micro-batch 4; README, Validation
# against published runs): the shape model prices them at the sustained clock
# (accelerator.matmul_sustained, from a published H200 measurement). Measured / model near 1
# on an H100 node confirms it; far from 1 corrects it.
GEMM_MODEL_RATIO = (0.9, 1.1)
NEMOTRON_15B_GEMMS = ["--model", "nemotron4-15b", "--tp", "4", "--seq", "4096", "--micro-batch", "4"]  # fmt: skip
TINY_GEMMS = ["--layers", "2", "--hidden", "256", "--heads", "4", "--vocab", "512", "--seq", "128"]  # fmt: skip


def gemm_workload(kit: Kit, step: Step) -> None:
    """A workload's GEMMs measured against the shape model the MFU estimate prices them
    with (dry run: a tiny model on the CPU, the ratio recorded, not judged)."""
    shapes = TINY_GEMMS if kit.dry_run else NEMOTRON_15B_GEMMS
    label = "tiny" if kit.dry_run else "nemotron4-15b"
    done = kit.run(step, label, ["gemm", *shapes, "-T", "dgx-h100", *_gemm_device(kit)])
    step.code_is(done, 0)
    rows = read_jsonl(done.run_dir / "gemm.jsonl") if done.run_dir else []
    ratios = [row["tflops"] / _model_tflops(row) for row in rows]
    step.check("rows measured", len(rows), ">= 1", bool(rows))
    if ratios:
        step.figures["measured/model per shape"] = {
            f"{row['op']} {row['pass_name']} {row['shape']}": round(ratio, 3)
            for row, ratio in zip(rows, ratios, strict=True)
        }
        median = round(statistics.median(ratios), 3)
        step.figures["measured/model (median)"] = median
        step.within("measured/model (median)", median, *GEMM_MODEL_RATIO, kit.judged)


def _model_tflops(row: dict) -> float:
    """What the shape model gives the row's GEMM on dgx-h100 (bf16), in TFLOP/s."""
    from collbench.analysis.model.gemm_model import Gemm, gemm_time
    from collbench.topologies.loader import load_topology

    accelerator = load_topology("dgx-h100").accelerator
    gemm = Gemm(row["op"], row["pass_name"], row["m"], row["n"], row["k"], row.get("batch", 1))
    priced = gemm_time(gemm, accelerator, accelerator.peak_bf16_tflops * 1e12)
    return gemm.flops / priced.time_s / 1e12


def _gemm_device(kit: Kit) -> list[str]:
    return ["--device", "cpu", "-w", "1", "-n", "3"] if kit.dry_run else []


def _meta_gemm(run_dir: Path | None) -> object:
    path = run_dir / "meta.json" if run_dir else None
    return json.loads(path.read_text()).get("gemm") if path and path.exists() else None


def pytest_gpu(kit: Kit, step: Step) -> None:
    """Every `pytest -m gpu` test, multi-rank ones on every visible GPU."""
    if kit.dry_run:
        return step.not_applicable("pytest -m gpu: needs a GPU")
    root = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", str(root / "tests")]  # fmt: skip
    done = kit.command(step, "pytest", argv)
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error)", tail)}
    step.figures.update(counts, summary=tail)
    step.check("failed", counts.get("failed", 0) + counts.get("error", 0), 0, done.code == 0)


class KitStep(NamedTuple):
    """A step as the kit plans it: `gpus`, the fewest GPUs on which it proves anything (a
    single rank takes NCCL's shortcut: no algorithm choice, no TUNING line, no rank 1);
    `estimate`, ESTIMATED seconds on 1 GPU (test mode for a multi-rank step) and on 8
    (H100-class, commands' start-up included), for --budget and --plan, not measured;
    `unshared`, why its point does not survive ranks sharing a GPU (None: on fewer GPUs
    its `gpus` ranks share them in the test mode, SHARED_GPU_VAR=1)."""

    name: str
    what: str
    body: Callable[[Kit, Step], None]
    gpus: int
    estimate: tuple[int, int]
    unshared: str | None = None

    def test_mode(self, gpus: int) -> str | None:
        """How its ranks share `gpus` GPUs, too few for it, if its point survives that."""
        if gpus < self.gpus <= 4 and self.unshared is None:
            return f"{SHARED_GPU_VAR}=1, {self.gpus} ranks on {gpus} GPU(s), figures not judged"
        return None

    def not_applicable(self, gpus: int) -> str | None:
        """Why it proves nothing on `gpus` GPUs (None: it runs, maybe in the test mode)."""
        if gpus >= self.gpus or self.test_mode(gpus):
            return None
        why = f"no test mode: {self.unshared}" if self.unshared else "fewer prove nothing"
        return f"needs {self.gpus} GPUs, this node has {gpus}; {why}"


_CONTENDED = "mean nothing when ranks sharing a GPU contend for its SMs"


# Most informative first: --budget runs them in this order while they fit.
STEPS = (
    KitStep("sweep_all", "all seven collectives to 1 GiB, #wrong 0, busbw at 1 GiB", sweep_all, 2, (60, 90)),
    KitStep("nccl_choices", "NCCL's algorithm/protocol per size, NCCL_DEBUG parsed", nccl_choices, 2, (40, 60)),
    KitStep("too_many_ranks", "more ranks than GPUs refused, naming the GPU count", too_many_ranks, 1, (10, 10)),
    KitStep("corrupt_rank", "a corrupted rank's result gives exit 3", corrupt_rank, 2, (20, 20)),
    KitStep("graph_latency", "8 B..1 MiB all-reduce eager vs --cuda-graph (nccl-tests -G)", graph_latency, 1, (40, 45)),
    KitStep("gemm_bf16", "gemm square 1024..16384 bf16", gemm_bf16, 1, (60, 60)),
    KitStep("tune_ring_tree", "tune Ring/Tree over all-reduce + all-gather (Tree: all-reduce only)", tune_ring_tree, 2, (90, 120)),
    KitStep("tune_verify", "tune verify: default, best.env and nccl_tuner.conf via NCCL's example tuner plugin", tune_verify, 2, (60, 90)),
    KitStep("overlap_channels", "overlap by size: default, NCCL_MAX_NCHANNELS=4, NCCL_MAX_CTAS=4", overlap_channels, 2, (0, 150), f"overlap and channel effects {_CONTENDED}"),
    KitStep("doctor_one_node", "doctor on this node (intra stage)", lambda kit, step: doctor(kit, step, 1), 2, (60, 60)),
    KitStep("gemm_workload", "Nemotron-4 15B's GEMMs against the sustained-clock shape model", gemm_workload, 1, (45, 45)),
    KitStep("gemm_tf32", "gemm fp32 with and without TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", gemm_tf32, 1, (30, 30)),
    KitStep("avg_odd_world", "bf16/fp16 avg at 6 ranks (a world size NCCL's 1/n rounds at)", avg_odd_world, 3, (45, 60)),
    KitStep("overlap_blocking", "TORCH_NCCL_BLOCKING_WAIT=1: refused, warned when allowed, ~0%", overlap_blocking, 2, (0, 60), f"overlap figures {_CONTENDED}"),
    KitStep("tune_algo_proto", "tune Ring/NVLS/Tree x Simple/LL/LL128 on all-reduce", tune_algo_proto, 2, (240, 300)),
    KitStep("doctor_four_nodes", "doctor with 4 test 'nodes' (COLLBENCH_TEST_DOCTOR_NODE_SIZE)", lambda kit, step: doctor(kit, step, 4), 4, (90, 90)),
    KitStep("gemm_long", "a minute of bf16 gemm, then timed: the sustained rate (clocks, power)", gemm_long, 1, (90, 90)),
    KitStep("pytest_gpu", "pytest -m gpu, multi-rank tests on every visible GPU", pytest_gpu, 1, (240, 420)),
)  # fmt: skip
