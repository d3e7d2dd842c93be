"""`mrtr check` against a server built with the official `mcp` 1.x SDK from PyPI (2025-only),
over HTTP and stdio: every verdict matches a recorded expectation file
(tests/check/expected/*.json: rule -> statuses and, for skips and failures, why), so there
are no knock-on FAILs and no 10 s stalls. Set MRTR_RECORD_EXPECTED=1 to re-record after a
deliberate change (then read the diff)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from mrtr.check import Options, Report, run
from tests.client.test_interop_mcp1 import SERVER, http_server, mcp1_python

pytestmark = pytest.mark.slow
__all__ = ["http_server", "mcp1_python"]  # fixtures used by name below
EXPECTED = Path(__file__).with_name("expected")


def check(options: Options) -> tuple[Report, float]:
    started = time.monotonic()
    report = asyncio.run(asyncio.wait_for(run(options), 120))
    return report, time.monotonic() - started


def verdicts(report: Report) -> dict[str, dict[str, list[str]]]:
    """rule -> status -> sorted details (pass details are left out: they name counts)."""
    out: dict[str, dict[str, list[str]]] = {}
    for f in report.findings:
        details = out.setdefault(f.rule, {}).setdefault(f.status, [])
        if f.status != "pass" and f.detail not in details:
            details.append(f.detail)
    return {r: {s: sorted(d) for s, d in v.items()} for r, v in out.items()}


def matches(name: str, report: Report) -> None:
    path = EXPECTED / f"{name}.json"
    seen = verdicts(report)
    if os.environ.get("MRTR_RECORD_EXPECTED"):
        path.write_text(json.dumps(seen, indent=2, sort_keys=True) + "\n")
    assert seen == json.loads(path.read_text()), json.dumps(seen, indent=2)


def test_official_sdk_server_over_http(http_server: str) -> None:
    report, seconds = check(Options(http_server, call_tools=True))
    matches("mcp1-http", report)
    assert seconds < 8, seconds  # no 10 s stall (the GET probe has its own short timeout)


def test_official_sdk_server_over_stdio(mcp1_python: Path) -> None:
    report, seconds = check(Options(f"{mcp1_python} {SERVER}", stdio=True, call_tools=True))
    matches("mcp1-stdio", report)
    assert seconds < 8, seconds
