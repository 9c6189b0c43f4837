"""The report in a real headless Chromium: it loads without console messages, every chart
is a decoded, non-empty image, and a screenshot has something on it. Skipped without
Debian's `chromium` (installed by .ci/install-schedulers)."""

import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from tests.cli.test_analysis_cli import write_run
from tests.helpers import collbench
from tests.rows import make_row
from tests.rows import write_run as write_run_dir

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,  # a real headless browser
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="chromium not on PATH (apt-get install chromium; .ci/install-schedulers does)",
    ),
]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "nccl-tests"
# Appended to a copy of the report only: the product itself carries no script.
PROBE = (
    "<script>window.addEventListener('load', () => { const all = [...document.images];"
    " document.body.dataset.loaded = all.filter(i => i.complete && i.naturalWidth > 0)"
    ".length + '/' + all.length; });</script>"
)


def _chromium(tmp_path, page, *flags):
    return subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            *flags,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _loaded(tmp_path, page):
    """'loaded/all' images as the browser saw them, and its console lines."""
    probed = page.with_name("probed-" + page.name)
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    done = _chromium(tmp_path, probed, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    consoles = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    marker = done.stdout.split('data-loaded="', 1)[1].split('"', 1)[0]
    return marker, consoles


def _screenshot_is_not_blank(tmp_path, page, width, height):
    shot = tmp_path / f"{page.stem}.png"
    done = _chromium(
        tmp_path,
        page,
        f"--screenshot={shot}",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    image = Image.open(shot).convert("L")
    assert image.size == (width, height)
    assert len(image.getcolors(maxcolors=256 * 256) or range(256)) > 50  # not a blank page


def _write_probe_run(path):
    """An overlap-probe run as `collbench overlap` writes it (kind "overlap" rows)."""
    meta = {
        "run_id": path.name,
        "timing_method": "perf_counter",
        "backend": "gloo",
        "state": "completed",
        "command_line": ["collbench", "overlap", "-c", "all_reduce"],
        "hosts": ["box"],
        "versions": {"torch": "2.13.0"},
    }
    rows = []
    for size in (2**16, 2**18, 2**20, 2**22):
        for ratio in (0.5, 1.0, 2.0):
            comm = 200.0 + size / 1e3
            comp, both = ratio * comm, max(comm, ratio * comm) * 1.3
            rows.append(
                make_row(
                    kind="overlap",
                    run_id=path.name,
                    placement="in_place",
                    size_bytes=size,
                    time_us=comm,
                    busbw_gbps=size / comm / 1e3,
                    compute_ratio=ratio,
                    t_comm_us=comm,
                    t_comp_us=comp,
                    t_both_us=both,
                    overlap_pct=max(0.0, 100 - 100 * (both - comp) / comm),
                    compute_slowdown=0.1 * ratio,
                    comm_slowdown=0.4 / ratio,
                    compute_dtype="float32",
                    compute_streams=1,
                    probe_timing="perf_counter+future_callback",
                )
            )
    return write_run_dir(path, rows, meta)


def test_the_browser_check_can_fail(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text(
        '<html><body><img src="data:image/png;base64,AAAA">'
        '<script>console.error("deliberate")</script></body></html>'
    )
    marker, consoles = _loaded(tmp_path, page)
    assert marker == "0/1" and consoles


def test_report_loads_cleanly_with_every_chart(tmp_path):
    base = write_run(tmp_path / "base", {2**k: 20.0 + 2**k / 5e3 for k in range(3, 23)})
    tuned = write_run(tmp_path / "tuned", {2**k: 15.0 + 2**k / 8e3 for k in range(3, 23)})
    report = tmp_path / "report.html"
    done = collbench("report", str(base), str(tuned), "--out", str(report))
    assert done.returncode == 0, done.stderr
    marker, consoles = _loaded(tmp_path, report)
    assert marker == "3/3" and consoles == []  # busbw, latency, tuned / base
    _screenshot_is_not_blank(tmp_path, report, 1200, 1800)


def test_imported_log_with_overlap_probes_loads_cleanly(tmp_path):
    imported = tmp_path / "imported"
    done = collbench(
        "import",
        "nccl-tests",
        str(FIXTURES / "current_all_gather_2node.log"),
        "--out",
        str(imported),
    )
    assert done.returncode == 0, done.stderr
    sweep = write_run(
        tmp_path / "sweep",
        {2**k: 30.0 + 2**k / 4e3 for k in range(10, 23)},
        collective="all_gather",
    )
    probes = _write_probe_run(tmp_path / "probes")
    report = tmp_path / "mixed.html"
    done = collbench("report", str(imported), str(sweep), str(probes), "--out", str(report))
    assert done.returncode == 0, done.stderr
    charts = int(done.stdout.rsplit("(", 1)[1].split()[0])
    assert charts >= 4  # busbw per placement + the two overlap charts
    marker, consoles = _loaded(tmp_path, report)
    assert marker == f"{charts}/{charts}" and consoles == []
    _screenshot_is_not_blank(tmp_path, report, 1400, 3000)


def test_labelled_comparison_with_a_topology_and_an_import_loads_cleanly(tmp_path):
    imported = tmp_path / "mi300x"
    done = collbench(
        "import", "nccl-tests", str(FIXTURES / "rccl_hipevt_all_reduce.log"), "--out", str(imported)
    )
    assert done.returncode == 0, done.stderr
    base = write_run(tmp_path / "base", {2**k: 20.0 + 2**k / 5e3 for k in range(3, 23)})
    tuned = write_run(tmp_path / "tuned", {2**k: 15.0 + 2**k / 8e3 for k in range(3, 23)})
    report = tmp_path / "labelled.html"
    done = collbench(
        "report",
        str(base),
        str(tuned),
        str(imported),
        *("--label", "base=stock", "--label", "tuned=NCCL tuned", "--label", "mi300x=MI300X"),
        *("--title", "Tuning review", "--topology", "cpu-local", "--out", str(report)),
    )
    assert done.returncode == 0, done.stderr
    charts = int(done.stdout.rsplit("(", 1)[1].split()[0])
    marker, consoles = _loaded(tmp_path, report)
    assert marker == f"{charts}/{charts}" and consoles == []
    _screenshot_is_not_blank(tmp_path, report, 1200, 4000)
