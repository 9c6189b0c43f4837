"""How the doctor's pure parts scale with the fleet: plan, verdict, text, doctor.json, report.

Builds a synthetic doctor run in memory (the store's DoctorRow, 8 ranks per node, every
stage but bisect, 3 repeats, one node at a tenth of the others' pair bandwidth) for each
node count, each in a fresh process, and prints per size: the pair rounds the plan asks
for, rows, the seconds of plan / diagnose / render / doctor.json / report section, the
process's peak memory, and whether the slow node was named. Row building is not timed (a
real run loads them from the store). A measurement, not a test (tests check correctness).

    python benchmarks/doctor_scale.py                      # 256 1024 4096 nodes, --pairs auto
    python benchmarks/doctor_scale.py --nodes 1024 --pairs all
    python benchmarks/doctor_scale.py --quick              # 64 and 256 nodes, seconds
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

RANKS_PER_NODE = 8
SIZE_BYTES = 256 * 1024**2
HEALTHY_GBPS, SLOW_FACTOR = 40.0, 0.1


def _row(template: dict, **columns) -> object:
    from collbench.store.rows import DoctorRow

    return DoctorRow(**{**template, **columns})


def synthetic_rows(nodes: int, pairs: str, repeats: int, seed: int = 1) -> tuple[list, dict]:
    """The rows of a doctor run on `nodes` nodes (node 'n{nodes // 3}' slow) and meta's
    doctor entry. Pair busbw: healthy 40 GB/s with 3% noise; any pair with the slow node 4."""
    from collbench.core.doctor_plan import Layout, pair_plan
    from collbench.core.doctor_spec import DoctorSpec

    hosts = [f"n{index:05d}" for index in range(nodes)]
    layout = Layout.from_hosts([host for host in hosts for _ in range(RANKS_PER_NODE)])
    slow = hosts[nodes // 3]
    rng = random.Random(seed)
    plan = pair_plan(nodes, DoctorSpec(pairs=pairs, repeats=repeats))
    template = _template()

    def noisy(value: float) -> float:
        return value * math.exp(rng.gauss(0.0, 0.03))

    def row(stage, group, gbps, group_hosts, ranks, round_index=0, repeat=0):
        collective = "sendrecv" if stage in ("pair", "shuffle") else "all_reduce"
        factor = 1.0 if collective == "sendrecv" else 2 * (len(ranks) - 1) / len(ranks)
        algbw = gbps / factor
        return _row(
            template,
            collective=collective,
            op=None if collective == "sendrecv" else "sum",
            world_size=len(ranks),
            nodes=len(group_hosts),
            time_us=SIZE_BYTES / algbw / 1e3,
            algbw_gbps=algbw,
            busbw_gbps=gbps,
            stage=stage,
            group=group,
            round_index=round_index,
            group_hosts=list(group_hosts),
            group_ranks=list(ranks),
            repeat=repeat,
        )

    rows = []
    for repeat in range(repeats):
        everyone = tuple(range(nodes * RANKS_PER_NODE))
        rows.append(row("full", "all", noisy(4.0), hosts, everyone, repeat=repeat))
        for host in hosts:
            ranks = layout.ranks_per_host[host]
            rows.append(row("intra", f"node {host}", noisy(100.0), [host], ranks, repeat=repeat))
        for rail in range(RANKS_PER_NODE):
            rows.append(
                row("rail", f"rail {rail}", noisy(30.0), hosts, layout.rail(rail), 0, repeat)
            )
        for stage, rounds in (("pair", plan.circle), ("shuffle", plan.shuffle)):
            for index, node_pairs in enumerate(rounds):
                for a, b in node_pairs:
                    pair = (hosts[a], hosts[b])
                    gbps = HEALTHY_GBPS * (SLOW_FACTOR if slow in pair else 1.0)
                    ranks = layout.ranks_of(pair)
                    rows.append(
                        row(stage, "<->".join(pair), noisy(gbps), pair, ranks, index, repeat)
                    )
    meta = {
        "hosts": hosts,
        "addresses": {host: f"10.0.{i // 256}.{i % 256}" for i, host in enumerate(hosts)},
        "ranks_per_host": {host: list(ranks) for host, ranks in layout.ranks_per_host.items()},
        "skipped": {"bisect": "not asked for (--bisect)"},
    }
    return rows, meta


def _template() -> dict:
    return dict(
        run_id="doctor-scale",
        timestamp_utc="2025-01-01T00:00:00.000000Z",
        backend="nccl",
        dtype="float32",
        root=-1,
        size_bytes=SIZE_BYTES,
        count=SIZE_BYTES // 4,
        ranks_per_node=RANKS_PER_NODE,
        placement="out_of_place",
        warmup=5,
        iters=20,
        time_us_p50=None,
        time_us_p95=None,
        time_us_min=None,
        time_us_max=None,
        time_cv=None,
        n_wrong=0,
        topology=None,
        knobs={},
        time_us_samples=[],
        rank_time_us=None,
        rank_last_count=None,
    )


def one(nodes: int, pairs: str, repeats: int) -> dict:
    """Measure one fleet size in this process."""
    from collbench.analysis.doctor.expect import FLEET, Expectation
    from collbench.analysis.doctor.verdicts import diagnose
    from collbench.core.doctor_plan import Layout, pair_plan
    from collbench.core.doctor_spec import DoctorSpec
    from collbench.render.doctor_text import doctor_json, render_doctor
    from collbench.render.report.doctor_section import doctor_section
    from collbench.store.doctor_report import DoctorReport
    from collbench.store.load import Run
    from collbench.store.meta import RunMeta

    spec = DoctorSpec(pairs=pairs, repeats=repeats)
    started = time.perf_counter()
    layout = Layout.from_hosts([f"n{i:05d}" for i in range(nodes) for _ in range(RANKS_PER_NODE)])
    plan = pair_plan(layout.nodes, spec)
    for rounds in (plan.circle, plan.shuffle):
        for node_pairs in rounds:
            for a, b in node_pairs:
                layout.pair_ranks(layout.hosts[a], layout.hosts[b])
    figures = {"plan_s": time.perf_counter() - started, "pair_rounds": plan.rounds}
    rows, meta = synthetic_rows(nodes, pairs, repeats)
    figures["rows"] = len(rows)
    expectation = Expectation(FLEET, {}, spec.tolerance_pct)
    started = time.perf_counter()
    diagnosis = diagnose(rows, spec, expectation, meta)
    figures["diagnose_s"] = time.perf_counter() - started
    started = time.perf_counter()
    text = render_doctor(diagnosis, expectation)
    figures["render_s"], figures["text_chars"] = time.perf_counter() - started, len(text)
    started = time.perf_counter()
    content = doctor_json(diagnosis, "doctor-scale", expectation)
    encoded = json.dumps(content)
    figures["json_s"], figures["json_bytes"] = time.perf_counter() - started, len(encoded)
    started = time.perf_counter()
    run = Run("doctor-scale", RunMeta.from_dict({"doctor": meta}), rows)
    section = doctor_section(run, "scale", DoctorReport.from_dict(content, "doctor.json"))
    figures["report_s"] = time.perf_counter() - started
    figures["report_charts"] = len(section.charts)
    slow = f"n{nodes // 3:05d}"
    named = [item.hosts for item in diagnosis.findings]
    figures["slow_node_found"] = named == [(slow,)]
    figures["findings"] = len(named)
    figures["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--pairs", default="auto", choices=("auto", "all", "sampled"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="64 and 256 nodes")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        figures = one(args.one, args.pairs, args.repeats)
        print(json.dumps(figures))
        if not figures["slow_node_found"]:
            sys.exit(f"the slow node was not found alone at {args.one} nodes")
        return
    sizes = [64, 256] if args.quick else args.nodes
    header = (
        "nodes pairs rounds rows plan_s diagnose_s render_s json_s report_s total_s "
        "peak_MiB text_chars json_MB found"
    )
    print(header)
    for nodes in sizes:
        command = [sys.executable, str(Path(__file__).resolve()), "--one", str(nodes)]
        command += ["--pairs", args.pairs, "--repeats", str(args.repeats)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        f = json.loads(done.stdout.strip().splitlines()[-1])
        total = sum(f[key] for key in ("plan_s", "diagnose_s", "render_s", "json_s", "report_s"))
        print(
            f"{nodes} {args.pairs} {f['pair_rounds']} {f['rows']} {f['plan_s']:.2f} "
            f"{f['diagnose_s']:.2f} {f['render_s']:.2f} {f['json_s']:.2f} {f['report_s']:.2f} "
            f"{total:.2f} {f['peak_mib']:.0f} {f['text_chars']} {f['json_bytes'] / 1e6:.2f} "
            f"{f['slow_node_found']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
