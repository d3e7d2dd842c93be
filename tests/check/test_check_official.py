"""`mrtr check` against a server built with the official `mcp` 1.x SDK from PyPI (2025-only):
the report must be truthful (no 2026-07-28 discovery, a 2025 session served) and the run must
not crash, over HTTP and over stdio."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mrtr.check import Options, Report, run
from tests.client.test_interop_mcp1 import SERVER, http_server, mcp1_python

pytestmark = pytest.mark.slow
__all__ = ["http_server", "mcp1_python"]  # fixtures used by name below


def check(options: Options) -> Report:
    return asyncio.run(asyncio.wait_for(run(options), 120))


def by_rule(report: Report) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in report.findings:
        out.setdefault(f.rule, set()).add(f.status)
    return out


def test_official_sdk_server_over_http(http_server: str) -> None:
    report = check(Options(http_server, call_tools=True))
    rules = by_rule(report)
    assert rules["stateless.discover"] == {"fail"}
    assert rules["dual-era.initialize"] == {"pass"}
    assert report.failed


def test_official_sdk_server_over_stdio(mcp1_python: Path) -> None:
    report = check(Options(f"{mcp1_python} {SERVER}", stdio=True, call_tools=True))
    rules = by_rule(report)
    assert rules["stateless.discover"] == {"fail"}
    assert rules["dual-era.initialize"] == {"pass"}
    assert rules["transport.origin"] == {"skip"}
