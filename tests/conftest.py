"""Suite-wide hooks: say loudly how many tests skipped because ../shared/data is absent."""

from __future__ import annotations

import signal

import pytest

from tests.helpers import SHARED_DATA, SHARED_DATA_ABSENT


def _skip_reason(report: pytest.TestReport) -> str:
    """The message of a skipped test's report ("Skipped: ..."), or "" when it has none."""
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """A line of its own, even without -ra: a run without the real logs checked less than it
    seems to."""
    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if SHARED_DATA_ABSENT in _skip_reason(report)
    ]
    if skipped:
        terminalreporter.write_sep(
            "=",
            f"{SHARED_DATA_ABSENT}: {len(skipped)} tests skipped ({SHARED_DATA} holds the real logs)",
            yellow=True,
            bold=True,
        )


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _stop_signals_given_back():
    """Every test leaves SIGINT, SIGTERM and SIGHUP as it found them: a handler left ignored
    would be inherited by every process a later test starts (its ranks would ignore their
    launcher's SIGTERM)."""
    saved = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    yield
    changed = [
        signum.name for signum, handler in saved.items() if signal.getsignal(signum) != handler
    ]
    for signum, handler in saved.items():
        signal.signal(signum, handler)
    assert not changed, f"the test left {', '.join(changed)} changed"
