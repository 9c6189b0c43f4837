"""The report in a real headless Chromium: it loads without console messages, every chart
is a decoded, non-empty image, and a screenshot has something on it. Skipped without
Debian's `chromium` (installed by .ci/install-schedulers)."""

import shutil
import subprocess

import pytest
from PIL import Image

from tests.cli.test_analysis_cli import write_run
from tests.helpers import collbench

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not on PATH "
                                "(apt-get install chromium; .ci/install-schedulers does)")
# Appended to a copy of the report only: the product itself carries no script.
PROBE = ("<script>window.addEventListener('load', () => { const all = [...document.images];"
         " document.body.dataset.loaded = all.filter(i => i.complete && i.naturalWidth > 0)"
         ".length + '/' + all.length; });</script>")


def _chromium(tmp_path, page, *flags):
    return subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", *flags,
         page.as_uri()], capture_output=True, text=True, timeout=120)


def _loaded(tmp_path, page):
    probed = page.with_name("probed-" + page.name)
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    done = _chromium(tmp_path, probed, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    consoles = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    marker = done.stdout.split('data-loaded="', 1)[1].split('"', 1)[0]
    return marker, consoles


def test_the_browser_check_can_fail(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text('<html><body><img src="data:image/png;base64,AAAA">'
                    '<script>console.error("deliberate")</script></body></html>')
    marker, consoles = _loaded(tmp_path, page)
    assert marker == "0/1" and consoles


def test_report_loads_cleanly_with_every_chart(tmp_path):
    base = write_run(tmp_path / "base", {2 ** k: 20.0 + 2 ** k / 5e3 for k in range(3, 23)})
    tuned = write_run(tmp_path / "tuned", {2 ** k: 15.0 + 2 ** k / 8e3 for k in range(3, 23)})
    report = tmp_path / "report.html"
    done = collbench("report", str(base), str(tuned), "--out", str(report))
    assert done.returncode == 0, done.stderr
    marker, consoles = _loaded(tmp_path, report)
    assert marker == "2/2" and consoles == []
    shot = tmp_path / "shot.png"
    done = _chromium(tmp_path, report, f"--screenshot={shot}", "--window-size=1200,1800")
    assert done.returncode == 0 and shot.exists()
    image = Image.open(shot).convert("L")
    assert image.size == (1200, 1800)
    assert len(image.getcolors(maxcolors=256 * 256) or range(256)) > 50  # not a blank page
