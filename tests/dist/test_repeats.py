"""`--repeats`: one real 2-rank gloo sweep measures every step once per repeat, in the same
rank processes, interleaved (repeat 0 of every size, then repeat 1, ...)."""

import pytest

from collbench.core.units import format_size
from collbench.store.load import load_run
from collbench.store.rows import ROW_COLUMNS, median_over_repeats
from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rows_of

SWEEP = ("sweep", "-c", "all_reduce", "-b", "1K", "-e", "4K", "-w", "1", "-n", "3", "-g", "2")


@pytest.mark.slow
def test_repeats_write_every_row_once_per_repeat_interleaved(tmp_path):
    once, repeated = tmp_path / "once", tmp_path / "repeated"
    done = collbench(*SWEEP, "--repeats", "1", "--out", str(once), "--quiet")
    assert done.returncode == 0, done.stderr
    done = collbench(*SWEEP, "--repeats", "3", "--out", str(repeated))
    assert done.returncode == 0, done.stderr

    single = rows_of(once)
    assert single and {row["repeat"] for row in single} == {0}
    rows = rows_of(repeated)
    assert len(rows) == 3 * len(single)
    assert all(tuple(row) == ROW_COLUMNS for row in rows)
    points = [(row["size_bytes"], row["placement"]) for row in single]
    assert [row["repeat"] for row in rows] == [r for r in range(3) for _ in points]
    assert [(row["size_bytes"], row["placement"]) for row in rows] == points * 3
    assert all(row["n_wrong"] == 0 for row in rows)
    # one set of rank processes measured all three repeats: each rank's log has one start
    # line (its pid) and the steps of every repeat
    for rank in range(2):
        log = (repeated / "logs" / f"rank-{rank:05d}.log").read_text()
        assert log.count(", pid ") == 1, log
        assert all(f"(repeat {r}/3)" in log for r in (1, 2, 3)), log
    meta = meta_of(repeated)
    assert (meta["state"], meta["rows"], meta["spec"]["repeats"]) == ("completed", len(rows), 3)
    headings = [line for line in done.stdout.splitlines() if line.startswith("# Repeat")]
    assert headings == ["# Repeat 1 of 3", "# Repeat 2 of 3", "# Repeat 3 of 3"]
    # one table and one Peak line for the collective, over the repeats: report's figure
    # (the best size of the median repeats), not one per repeat
    peaks = [line for line in done.stdout.splitlines() if line.startswith("# Peak bus")]
    best = max(median_over_repeats(load_run(repeated).rows), key=lambda row: row.busbw_gbps)
    assert peaks == [
        f"# Peak bus bandwidth   : {best.busbw_gbps:.2f} GB/s at {best.size_bytes} B "
        f"({format_size(best.size_bytes)}, {best.placement})"
    ]
