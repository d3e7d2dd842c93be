"""The fault suite's numbers: one line per injected fault, printed at the end of every run."""

from __future__ import annotations

import pytest

SUMMARY: list[str] = []  # filled by the tests, in the order they ran


@pytest.fixture
def report() -> list[str]:
    """Append one summary line per fault; shown in the terminal summary whatever -s says."""
    return SUMMARY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not SUMMARY:
        return
    terminalreporter.write_sep("=", "fault injection: effects per flow")
    for line in SUMMARY:
        terminalreporter.write_line(line)
