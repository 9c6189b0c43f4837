"""How often `collbench tune` calls a false winner, by repeats per setting (README, "collbench
tune"; the default of `tune run --repeats`).

An A/A tune: every setting is the same environment (a knob the backend does not read, e.g.
NCCL_MAX_NCHANNELS on gloo), so any winner is a false one. Each tune runs with --repeats
MAX (fresh processes, interleaved); for R = 1 .. MAX, every choice of R of those repeats per
setting is decided again by tune's own selection (analysis.tune_select), and the share of
size ranges where a knob setting replaced the default is the false-winner rate. Disjoint
choices are counted apart (independent); all choices (overlapping, correlated) give a
steadier figure.

    python benchmarks/tune_aa_rates.py --tunes 3 --repeats 6
    python benchmarks/tune_aa_rates.py --tunes 3 --repeats 6 -- -b 1K -e 16M -f 4
    python benchmarks/tune_aa_rates.py --reuse DIR1 DIR2 ...   # tunes already run
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KNOB = "NCCL_MAX_NCHANNELS=2,4,8"  # 3 settings beside the default, none read by gloo
SWEEP = ["-c", "all_reduce", "-b", "1K", "-e", "16M", "-f", "4", "--nproc", "2"]


def run_tune(out: Path, repeats: int, extra: list[str]) -> None:
    argv = [sys.executable, "-m", "collbench", "tune", "run", "--knob", KNOB, *SWEEP, *extra]
    argv += ["--repeats", str(repeats), "--no-choices", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"tune failed ({done.returncode}): {done.stderr[-2000:]}")


def outcomes_of(tune_dir: Path):
    """Per setting: (setting, {repeat: rows}) from the tune's run directories."""
    from collbench.core.tune_grid import Setting
    from collbench.store.load import load_run

    document = json.loads((tune_dir / "tune.json").read_text())
    found = []
    for entry in document["settings"]:
        by_repeat = {
            repeat: tuple(load_run(tune_dir / run_dir).sweep_rows)
            for repeat, run_dir in enumerate(entry["run_dirs"])
        }
        found.append((Setting.from_mapping(entry["knobs"]), by_repeat))
    return found


def false_winners(settings, chosen: tuple[int, ...]) -> tuple[int, int]:
    """(ranges where a knob setting won, ranges) deciding on the repeats `chosen` only."""
    from dataclasses import replace

    from collbench.analysis.tune.select import SettingOutcome, select_best

    outcomes = []
    for setting, by_repeat in settings:
        rows = tuple(
            replace(row, repeat=index)
            for index, repeat in enumerate(chosen)
            for row in by_repeat[repeat]
        )
        outcomes.append(SettingOutcome(setting, rows))
    records = select_best(outcomes)
    return sum(not record.default_is_best for record in records), len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tunes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--reuse", nargs="*", type=Path, default=None)
    parser.add_argument("extra", nargs="*", help="more sweep options, after --")
    args = parser.parse_args()
    dirs = list(args.reuse or [])
    if not dirs:
        root = Path(tempfile.mkdtemp(prefix="tune-aa-"))
        for index in range(args.tunes):
            begun = time.monotonic()
            run_tune(root / f"tune-{index}", args.repeats, args.extra)
            took = time.monotonic() - begun
            print(f"tune {index + 1}/{args.tunes}: {root / f'tune-{index}'} ({took:.0f} s)")
            dirs.append(root / f"tune-{index}")
    tunes = [outcomes_of(path) for path in dirs]
    most = min(len(by_repeat) for settings in tunes for _, by_repeat in settings)
    print(f"{len(tunes)} A/A tunes, {len(tunes[0])} settings each, {most} repeats each")
    print("R  disjoint: false winners / ranges   all choices: false winners / ranges")
    for repeats in range(1, most + 1):
        disjoint = [tuple(range(start, start + repeats)) for start in range(0, most, repeats)]
        disjoint = [chosen for chosen in disjoint if chosen[-1] < most]
        every = list(itertools.combinations(range(most), repeats))
        counts = []
        for choices in (disjoint, every):
            hits = total = 0
            for settings in tunes:
                for chosen in choices:
                    won, ranges = false_winners(settings, chosen)
                    hits, total = hits + won, total + ranges
            counts.append(f"{hits:3d} / {total:3d} = {hits / max(total, 1):6.1%}")
        print(f"{repeats}  {counts[0]:>34}   {counts[1]:>34}")


if __name__ == "__main__":
    main()
