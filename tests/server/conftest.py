"""Report the server replies that could not be schema-validated (../shared absent)."""

from __future__ import annotations

import pytest

from tests.server.wire import UNCHECKED, schema_missing_reason


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    reason = schema_missing_reason()
    if reason is None or not UNCHECKED:
        return
    terminalreporter.write_sep("=", "schema checks that did not run", yellow=True)
    terminalreporter.write_line(reason)
    counts = ", ".join(f"{method}: {n}" for method, n in sorted(UNCHECKED.items()))
    terminalreporter.write_line(f"{sum(UNCHECKED.values())} replies unvalidated ({counts})")
