"""The Markdown report shows what a run recorded literally, as the HTML report does."""

import pytest

from collbench.render.report.build import build_report, render_markdown
from tests.unit.render.report.test_report_doc import _run, _sweep_rows


@pytest.mark.slow
def test_markdown_escapes_hosts_knobs_and_command_lines():
    run = _run(
        "x",
        _sweep_rows("x"),
        command_line=["collbench", "sweep", "<script>alert(1)</script>", "a|b"],
        hosts=["a&b", "![pwn](http://evil/x.png)"],
        knobs={"env": {"NCCL_ALGO": "<img src=x onerror=alert(1)>"}},
    )
    text, _ = render_markdown(build_report([run]), "r_files")
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "<img" not in text and "&lt;img" in text
    assert "a&amp;b" in text and "a&b" not in text
    assert "![pwn]" not in text and "\\!\\[pwn\\]" in text
    assert "a\\|b" in text  # a | inside a cell does not end it
    provenance = text.split("## Provenance", 1)[1]
    for line in provenance.splitlines():
        if line.startswith("|") and "---" not in line:
            assert len(line.replace("\\|", "").split("|")) == 4, line  # two cells, no more
