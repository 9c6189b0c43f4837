"""collbench report, the document: synthetic runs in, HTML / Markdown out (no browser)."""

import base64
import io
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image

from collbench.render.report.build import build_report, render_html, render_markdown
from tests.rows import make_row, make_run

SIZES = [2**k for k in range(3, 25, 1)]


def _sweep_rows(name, alpha_us=20.0, busbw_gbps=5.0, collective="all_reduce"):
    rows = []
    for size in SIZES:
        time_us = alpha_us + size / (busbw_gbps * 1e3)
        rows.append(
            make_row(
                run_id=name,
                collective=collective,
                placement="in_place",
                size_bytes=size,
                time_us=time_us,
                busbw_gbps=size / time_us / 1e3,
            )
        )
    return rows


def _probe_rows(name):
    rows = []
    for size in (2**16, 2**20, 2**22):
        for ratio in (0.5, 1.0, 2.0):
            comm, comp = 100.0 + size / 1e4, ratio * (100.0 + size / 1e4)
            both = max(comm, comp) * 1.2
            rows.append(
                make_row(
                    kind="overlap",
                    run_id=name,
                    placement="in_place",
                    size_bytes=size,
                    time_us=comm,
                    compute_ratio=ratio,
                    t_comm_us=comm,
                    t_comp_us=comp,
                    t_both_us=both,
                    overlap_pct=max(0.0, 100 - 100 * (both - comp) / comm),
                    compute_slowdown=0.1,
                    comm_slowdown=-0.05,
                    compute_dtype="float32",
                    compute_streams=1,
                    probe_timing="perf_counter+future_callback",
                )
            )
    return rows


def _run(name, rows, **meta):
    return make_run(
        f"/results/{name}",
        rows,
        **{
            "run_id": name,
            "backend": "gloo",
            "state": "completed",
            "versions": {"torch": "2.13.0"},
            **meta,
        },
    )


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources, self.headings, self.texts = [], [], []
        self._in_heading = False

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs)["src"])
        self._in_heading = tag in ("h1", "h2", "h3")
        if tag in ("link", "script"):
            raise AssertionError(f"the report must not load or run anything: <{tag}>")

    def handle_data(self, data):
        self.texts.append(data)
        if self._in_heading:
            self.headings.append(data)

    def handle_endtag(self, tag):
        self._in_heading = False


def _parse(text):
    parser = _Images()
    parser.feed(text)
    return parser


def _png_size(data):
    image = Image.open(io.BytesIO(data))
    image.verify()
    return Image.open(io.BytesIO(data)).size


@pytest.mark.slow
def test_html_is_one_file_with_inline_charts_and_sections():
    runs = [
        _run("base", _sweep_rows("base")),
        _run("tuned", _sweep_rows("tuned", 10, 8)),
        _run("probe", _probe_rows("probe")),
    ]
    document = build_report(runs)
    parsed = _parse(render_html(document))
    # busbw + latency for the overlaid collective, tuned / base, overlap % + times for the probes
    assert len(parsed.sources) == len(document.charts) == 5
    for source in parsed.sources:
        assert source.startswith("data:image/png;base64,")
        width, height = _png_size(base64.b64decode(source.split(",", 1)[1]))
        assert width >= 600 and height >= 300
    assert {
        "Summary",
        "all_reduce (in_place)",
        "Overlap probes: all_reduce (probe)",
        "Compare: tuned against base (the baseline)",
        "Provenance",
        "base",
        "tuned",
        "probe",
    } <= set(parsed.headings)


def test_summary_and_regimes_carry_the_fit():
    document = build_report([_run("base", _sweep_rows("base", alpha_us=20.0, busbw_gbps=5.0))])
    (row,) = document.summary.rows
    cells = dict(zip(document.summary.header, row, strict=True))
    assert cells["run"] == "base" and cells["sizes"] == len(SIZES)
    assert cells["ranks / nodes"] == "2 / 1"
    assert float(cells["fitted peak busbw (GB/s)"]) == pytest.approx(5.0, rel=0.02)
    assert float(cells["latency alpha (us)"].split()[0]) == pytest.approx(20.0, rel=0.05)
    assert cells["fit quality"] in ("good", "fair")
    (regimes,) = document.sections[0].tables
    assert regimes.rows[0][0] == "base"


def test_provenance_text_is_escaped():
    run = _run(
        "x", _sweep_rows("x"), command_line=["collbench", "sweep", "<script>"], hosts=["a&b"]
    )
    text = render_html(build_report([run]))
    assert "<script>" not in text and "&lt;script&gt;" in text and "a&amp;b" in text


@pytest.mark.slow
def test_markdown_links_the_pngs_it_returns():
    document = build_report([_run("base", _sweep_rows("base")), _run("p", _probe_rows("p"))])
    text, images = render_markdown(document, "report_files")
    assert len(images) == len(document.charts)
    for name, data in images.items():
        assert f"]({name})" in text and name.startswith("report_files/")
        assert _png_size(data)[0] >= 600
    assert "| run | collective |" in text and "## Provenance" in text


def test_charts_are_not_blank():
    document = build_report([_run("base", _sweep_rows("base"))])
    assert document.charts  # the loop below checks nothing when there are none
    for chart in document.charts:
        pixels = np.asarray(Image.open(io.BytesIO(chart.png)).convert("L"), dtype=float)
        assert pixels.std() > 10, chart.name  # something was drawn, not an empty canvas


@pytest.mark.slow
def test_an_overlap_run_gets_its_own_summary_instead_of_an_empty_table():
    document = build_report([_run("probe", _probe_rows("probe"))])
    assert document.summary.rows == []
    ratios = [row[2] for row in document.overlap_summary.rows]
    assert ratios == ["0.5", "1", "2"] and all(row[3] == 3 for row in document.overlap_summary.rows)
    parsed = _parse(render_html(document))
    assert "no sweep rows: nothing to fit" in "".join(parsed.texts)
    assert "Overlap probes" in parsed.headings
    assert build_report([_run("base", _sweep_rows("base"))]).overlap_summary is None


def test_imported_run_provenance_names_the_log_and_leaves_out_the_unknown():
    run = _run(
        "imp",
        _sweep_rows("imp"),
        source="nccl-tests",
        command_line=None,
        imported_from=["/logs/a3.txt"],
        imported_utc="2026-01-01T00:00:00Z",
        knobs={"env": {"NCCL_ALGO": "Ring"}, "settings": {"imported": True}},
    )
    fields = dict(build_report([run]).provenance[0][1].rows)
    assert fields["source"] == "nccl-tests import"
    assert fields["imported from"] == "/logs/a3.txt" and fields["command line"] == "-"
    assert fields["knobs (environment)"] == '{"NCCL_ALGO": "Ring"}'
    assert "launcher" not in fields and "started / finished" not in fields
    assert "None" not in "".join(str(value) for value in fields.values())
