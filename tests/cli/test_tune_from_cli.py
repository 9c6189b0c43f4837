"""collbench tune from through its command line: run directories measured under different
knobs (with per-iteration samples) in, tune.json / best.env / nccl_tuner.conf out; the
refusals (differing world size, an existing --out, RUN without --from) are one line and exit 2.

The tests call the console-script entry point in this process (the same argument parsing,
error lines and exit codes, without a Python start per call)."""

import json

import pytest

from collbench.analysis.tune.tuner_conf_rules import SIZE_MAX, parse_tuner_conf
from tests.helpers import collbench
from tests.rows import make_row, write_run
from tests.unit.tune.tuner_plugin import lookup, uncovered

# small, medium and large bands (analysis.bands): two sizes each
SIZES = (1024, 4096, 1 << 17, 1 << 20, 1 << 24, 1 << 26)
RING = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
TREE = {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}


def _write(path, times_us, knobs=None, world_size=2, iters=20, spread=0.01, versions=None):
    """A run of all_reduce on nccl; `times_us` maps size -> time (per-iteration samples
    spread around it)."""
    env = dict(knobs or {})
    rows = [
        make_row(
            run_id=path.name,
            backend="nccl",
            size_bytes=size,
            time_us=time_us,
            world_size=world_size,
            iters=iters,
            knobs={"env": env},
            time_us_samples=[time_us * (1 + spread * (i % 5 - 2)) for i in range(iters)],
        )
        for size, time_us in times_us.items()
    ]
    meta = {"run_id": path.name, "timing_method": "perf_counter", "knobs": {"env": env}}
    meta.update({"versions": versions} if versions else {})
    return str(write_run(path, rows, meta))


def _times(factor_by_band=(1.0, 1.0, 1.0)):
    """time_us per size: proportional to the size, times the band's factor."""
    band = {1024: 0, 4096: 0, 1 << 17: 1, 1 << 20: 1, 1 << 24: 2, 1 << 26: 2}
    return {size: 10.0 + size / 1e4 * factor_by_band[band[size]] for size in SIZES}


@pytest.fixture
def ring_wins_large(tmp_path):
    """The default, and NCCL_ALGO=Ring 30% faster at large sizes (the same elsewhere)."""
    base = _write(tmp_path / "base", _times())
    ring = _write(tmp_path / "ring", _times((1.0, 1.0, 0.7)), RING)
    return base, ring


def test_faster_setting_wins_its_band_and_files_have_the_issues_keys(ring_wins_large, tmp_path):
    out = tmp_path / "tuned"
    done = collbench("tune", "from", *ring_wins_large, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "default is best" in done.stdout
    assert f"# Wrote: {out / 'nccl_tuner.conf'}" in done.stdout
    document = json.loads((out / "tune.json").read_text())
    assert [set(item) >= {"knobs", "status", "error"} for item in document["settings"]] == [
        True,
        True,
    ]
    assert {item["status"] for item in document["settings"]} == {"ok"}
    keys = {"collective", "min_bytes", "max_bytes", "knobs", "busbw_gbps"}
    keys |= {"baseline_busbw_gbps", "gain", "confident"}
    assert all(keys <= set(item) for item in document["best"])
    # the ranges end where the winner changes: the default up to 1 MiB, Ring from 16 MiB
    assert [item["band"] for item in document["best"]] == ["1 KiB .. 1 MiB", "16 MiB .. 64 MiB"]
    small, large = document["best"]
    assert large["knobs"] == RING
    assert large["confident"] is True
    assert large["gain"] > 0.2
    assert small["knobs"] == {} and small["default_is_best"]
    env = (out / "best.env").read_text()
    # measured on all-reduce alone: NCCL_ALGO is set for it alone (issue 40 item 1)
    assert "export NCCL_ALGO=allreduce:ring" in env and "export NCCL_PROTO=Simple" in env
    assert "NCCL_ALGO=Ring was measured for all_reduce on 1 node(s)" in env


def test_tuner_conf_parses_and_covers_every_size(ring_wins_large, tmp_path):
    out = tmp_path / "tuned"
    assert collbench("tune", "from", *ring_wins_large, "--out", str(out)).returncode == 0
    rules = parse_tuner_conf((out / "nccl_tuner.conf").read_text())
    assert uncovered(rules, "allreduce", 1, 2) == []
    large = lookup(rules, "allreduce", 1 << 26, 1, 2)
    assert (large.algorithm, large.protocol) == ("ring", "simple")
    assert lookup(rules, "allreduce", SIZE_MAX, 1, 2) is not None
    assert all(rule.channels >= 0 for rule in rules)


@pytest.mark.parametrize("nccl, refused", [("2.21.5", True), ("2.25.1", False)])
def test_channels_are_bounded_by_the_nccl_the_runs_recorded(tmp_path, nccl, refused):
    """NCCL before 2.25.1 runs at most 32 channels and cuts a larger count in silence: the
    conf's --channels 64 would run 32 (issue 40 item 5)."""
    runs = [
        _write(tmp_path / name, _times(), knobs, versions={"nccl": nccl})
        for name, knobs in [("base", None), ("ring", RING)]
    ]
    done = collbench("tune", "from", *runs, "--channels", "64", "--out", str(tmp_path / "out"))
    assert done.returncode == (2 if refused else 0), done.stderr
    limit = f"--channels: 64 is more than NCCL {nccl}'s most, 32"
    assert (limit in done.stderr) is refused


def test_default_is_best_when_nothing_wins(tmp_path):
    base = _write(tmp_path / "base", _times())
    tree = _write(tmp_path / "tree", _times((1.2, 1.2, 1.2)), TREE)
    out = tmp_path / "tuned"
    done = collbench("tune", "from", base, tree, "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [item["knobs"] for item in document["best"]] == [{}]  # one range: no crossover
    assert all(item["gain"] == 0.0 for item in document["best"])
    env = (out / "best.env").read_text().splitlines()
    assert not [line for line in env if line.startswith("export ")]
    # NCCL's plugin must name a pair where the default is best; the slower Tree cannot stand in
    assert "collbench: warning: nccl_tuner.conf not written" in done.stderr
    assert not (out / "nccl_tuner.conf").exists()


def test_runs_of_different_world_size_are_refused(tmp_path):
    base = _write(tmp_path / "base", _times())
    ring = _write(tmp_path / "ring", _times((1.0, 1.0, 0.7)), RING, world_size=4)
    out = tmp_path / "tuned"
    done = collbench("tune", "from", base, ring, "--out", str(out))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("collbench: error:")
    assert "world_size" in done.stderr
    assert not out.exists()


def test_existing_non_empty_out_is_refused(ring_wins_large, tmp_path):
    out = tmp_path / "tuned"
    out.mkdir()
    (out / "keep.txt").write_text("mine\n")
    done = collbench("tune", "from", *ring_wins_large, "--out", str(out))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--out" in done.stderr
    assert sorted(path.name for path in out.iterdir()) == ["keep.txt"]


def test_runs_given_to_tune_run_are_refused(ring_wins_large, tmp_path):
    """RUN... is read only by tune from: runs given to tune run are a mistake, not a launch."""
    done = collbench("tune", "run", *ring_wins_large, "--out", str(tmp_path / "tuned"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "unexpected extra argument" in done.stderr
    assert not (tmp_path / "tuned").exists()


def test_unwritable_tuner_conf_is_a_warning_and_the_rest_is_written(tmp_path):
    """An imported log records no channel count: without --channels no nccl_tuner.conf."""
    base = _write(tmp_path / "base", _times())
    ring = _write(tmp_path / "ring", _times((0.7, 0.7, 0.7)), RING)
    for path in (base, ring):  # as `collbench import nccl-tests` records it
        meta = json.loads((tmp_path / path / "meta.json").read_text())
        meta["source"] = "nccl-tests"
        (tmp_path / path / "meta.json").write_text(json.dumps(meta))
    out = tmp_path / "tuned"
    done = collbench("tune", "from", base, ring, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "collbench: warning: nccl_tuner.conf not written" in done.stderr
    assert "--channels" in done.stderr
    assert sorted(path.name for path in out.iterdir()) == ["best.env", "tune.json"]
    again = collbench("tune", "from", base, ring, "--out", str(tmp_path / "t2"), "--channels", "8")
    assert again.returncode == 0, again.stderr
    rules = parse_tuner_conf((tmp_path / "t2" / "nccl_tuner.conf").read_text())
    assert {rule.channels for rule in rules} == {8}
