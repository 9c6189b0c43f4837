"""`collbench fit` on a run whose curve is still linear (issue 30, item 1): "poor", with the
reasons and no absurd figure, in the table and in --json; and knobs by name, not by a hash
(item 6)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from collbench.cli import app
from tests.rows import make_row, write_run

FOUR = [1 << 10, 1 << 12, 1 << 14, 1 << 16]


def _fit(*args: str):
    done = CliRunner().invoke(app, ["fit", *args])
    assert done.exit_code == 0, done.output
    return done.output


def _run(path: Path, times, knobs=None, sizes=FOUR, **columns) -> Path:
    knobs = {"env": {}} if knobs is None else knobs
    rows = [
        make_row(size_bytes=size, time_us=time_us, knobs=knobs, **columns)
        for size, time_us in zip(sizes, times, strict=True)
    ]
    return write_run(path, rows, {"run_id": path.name})


def test_a_still_linear_four_point_run_is_poor_and_says_why(tmp_path):
    run = _run(tmp_path / "lin", [50.3, 50.0, 49.8, 49.9])
    text = _fit(str(run), "--predict", "1M")
    (summary,) = [line for line in text.splitlines() if line.startswith("  alpha ")]
    assert (
        summary
        == "  alpha 50 us [49.24, 50.76]   peak busbw not determined   n_half not determined"
    )
    (quality,) = [line for line in text.splitlines() if "fit quality" in line]
    assert quality.startswith("  fit quality poor: r2 -0.00013 on all 4 points (log time)")
    assert (
        "peak busbw not determined: the largest sizes (up to 64 KiB) are latency-bound" in quality
    )
    # before: 'peak busbw 1.911e+08 GB/s [0, inf]', 'n_half 8900.2 GiB', 'fit quality fair'
    assert not re.search(r"e\+\d|inf\]|GiB|fit quality fair", text)
    assert "1 MiB     unknown     unknown" in text
    (group,) = json.loads(_fit(str(run), "--json", "--predict", "1M"))
    assert group["quality"]["verdict"] == "poor"
    assert group["busbw_peak_gbps"] is None and group["n_half_bytes"] is None
    assert group["busbw_peak_gbps_ci"] == [None, None]
    reasons = group["quality"]["not_determined"]
    assert reasons["busbw_peak_gbps"] in group["quality"]["notes"]
    assert set(reasons) == {"busbw_peak_gbps", "n_half_bytes"}
    assert group["predictions"][0]["busbw_gbps"] is None
    assert group["alpha_us"] > 0 and group["busbw_at_max_bytes_gbps"] > 0  # kept: determined


def test_the_json_keys_stay_the_same_for_a_good_and_a_poor_fit(tmp_path):
    sizes = [2**k for k in range(10, 31)]
    good = _run(tmp_path / "good", [10.0 + size / 20e3 for size in sizes], sizes=sizes)
    poor = _run(tmp_path / "poor", [50.3, 50.0, 49.8, 49.9])
    (fitted,) = json.loads(_fit(str(good), "--json"))
    (unfitted,) = json.loads(_fit(str(poor), "--json"))
    assert fitted["quality"]["verdict"] == "good" and fitted["busbw_peak_gbps"] > 0
    assert fitted["quality"]["not_determined"] == {}
    assert list(fitted) == list(unfitted) and list(fitted["quality"]) == list(unfitted["quality"])


def test_the_group_header_names_the_knobs_not_a_hash(tmp_path):
    times = [10.0 + size / 20e3 for size in FOUR]
    tuned = {"env": {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"}, "settings": {"check": True}}
    first = _run(tmp_path / "tuned", times, knobs=tuned)
    second = _run(tmp_path / "plain", times, knobs={"env": {}}, run_id="plain")
    text = _fit(str(first), str(second))
    headers = [line for line in text.splitlines() if line.startswith("all_reduce |")]
    assert sorted(header.split(" | ")[6] for header in headers) == [
        "knobs NCCL_ALGO=Ring NCCL_PROTO=Simple",  # sorted by name, as given in no order
        "knobs default",
    ]
    assert not re.search(r"knobs [0-9a-f]{12}\b", text)  # before: 'knobs eeeeadd216d0'
    digests = {
        group["knobs_digest"] for group in json.loads(_fit(str(first), str(second), "--json"))
    }
    assert len(digests) == 2 and all(re.fullmatch(r"[0-9a-f]{12}", d) for d in digests)


def test_groups_that_differ_only_in_settings_say_which(tmp_path):
    times = [10.0 + size / 20e3 for size in FOUR]
    env = {"NCCL_ALGO": "Ring"}
    mean = _run(tmp_path / "mean", times, {"env": env, "settings": {"rank_stat": "mean"}})
    worst = _run(
        tmp_path / "max", times, {"env": env, "settings": {"rank_stat": "max"}}, run_id="max"
    )
    text = _fit(str(mean), str(worst))
    knobs = sorted(line.split(" | ")[6] for line in text.splitlines() if " | knobs " in line)
    assert knobs == [
        "knobs NCCL_ALGO=Ring (rank_stat=max)",
        "knobs NCCL_ALGO=Ring (rank_stat=mean)",
    ]
