"""`mrtr check` against real servers: mrtr's own fixture, a server with planted defects (HTTP and
stdio), and the CLI's outputs and exit codes."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrtr.check import Options, Report, run
from mrtr.cli import main
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from tests.check.defects import DEFECTS, App
from tests.transports.conftest import LiveServer, free_port

ROOT = Path(__file__).resolve().parents[2]
# defect -> the rules it FAILs over HTTP (a SHOULD rule only WARNs: unbound-args)
BROKEN = {"connection-keyed": {"stateless.fresh-connection"}, "unsigned": {"sealed.integrity"},
          "unbound-args": set(), "no-result-type": {"shape.result-type"},
          "buffered-sse": set(), "push": {"stateless.no-push"},
          "late-plain-state": {"sealed.integrity"},
          # the MAC is never checked: a flipped MAC and a rewritten payload both pass
          "late-unverified": {"sealed.tamper", "sealed.integrity"},
          "process-key": set(),  # one process: only visible over stdio or across replicas
          "open-get": set()}
WARNED = {"unbound-args": "sealed.bound-arguments", "buffered-sse": "transport.sse-buffering",
          "open-get": "transport.get"}


def check(options: Options) -> Report:
    return asyncio.run(asyncio.wait_for(run(options), 120))


def statuses(report: Report, status: str) -> set[str]:
    return {f.rule for f in report.findings if f.status == status}


def test_every_defect_is_named_and_nothing_else_fails() -> None:
    assert set(BROKEN) == set(DEFECTS)
    for defect, rules in BROKEN.items():
        with LiveServer(App(defect)) as server:
            report = check(Options(server.url, call_tools=True))
        assert statuses(report, "fail") == rules, (defect, report.findings)
        if defect in WARNED:
            assert WARNED[defect] in statuses(report, "warn"), (defect, report.findings)


def test_the_clean_twin_passes_every_rule_expiry_included() -> None:
    app = App(ttl=0.5)
    with LiveServer(app) as server:
        report = check(Options(server.url, call_tools=True, wait=1.0))
    assert not statuses(report, "fail") | statuses(report, "warn"), report.findings
    for rule in ("sealed.tamper", "sealed.integrity", "sealed.bound-arguments",
                 "sealed.bound-tool", "sealed.expiry", "stateless.fresh-connection",
                 "transport.sse-buffering", "transport.headers", "dual-era.initialize"):
        assert rule in statuses(report, "pass"), rule
    assert "sealed.replay" in statuses(report, "info")


def test_tools_are_only_called_when_allowed() -> None:
    app = App()
    with LiveServer(app) as server:
        report = check(Options(server.url))
        assert app.server.calls == 0
        assert "sealed.tamper" in statuses(report, "skip")
        check(Options(server.url, allow_tools=["echo"]))
        assert app.server.calls == 1


def test_budget_and_unreachable_servers_end_in_a_report() -> None:
    with LiveServer(App()) as server:
        report = check(Options(server.url, call_tools=True, max_requests=4))
    assert report.requests == 4
    assert "sealed.tamper" in statuses(report, "skip")
    gone = check(Options(f"http://127.0.0.1:{free_port()}/mcp", timeout=2))
    assert "stateless.discover" in statuses(gone, "fail")
    assert gone.unreachable and gone.exit_code() == 3
    assert main(["check", f"http://127.0.0.1:{free_port()}/mcp", "--timeout", "2"]) == 3


@pytest.mark.parametrize("module", ["examples.bookings", "examples.conformance.server"])
def test_mrtr_own_fixtures_pass(module: str) -> None:
    app = importlib.import_module(module).app
    with LiveServer(McpApp(Dispatcher(app))) as server:
        report = check(Options(server.url + "/mcp", call_tools=True, max_requests=500))
    assert not statuses(report, "fail") | statuses(report, "warn"), report.findings
    assert {"sealed.tamper", "sealed.bound-arguments", "stateless.fresh-connection",
            "transport.origin", "dual-era.initialize"} <= statuses(report, "pass")


@pytest.mark.parametrize("defects", [[], ["no-result-type"]], ids=["clean", "no-result-type"])
def test_stdio_targets(defects: list[str]) -> None:
    command = [sys.executable, "-m", "tests.check.defects", "--stdio", *defects]
    report = check(Options(" ".join(command), stdio=True, call_tools=True))
    assert statuses(report, "fail") == ({"shape.result-type"} if defects else set())
    assert "sealed.tamper" in statuses(report, "pass")
    assert "stateless.fresh-connection" in statuses(report, "pass")
    assert "transport.origin" in statuses(report, "skip")


@pytest.fixture
def defective() -> Iterator[str]:
    with LiveServer(App("unsigned")) as server:
        yield server.url


def test_cli_exit_codes_and_formats(defective: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    sarif = tmp_path / "check.sarif"
    assert main(["check", defective, "--call-tools", "--format", "sarif",
                 "--output", str(sarif)]) == 1
    doc = json.loads(sarif.read_text())
    assert doc["version"] == "2.1.0"
    results = doc["runs"][0]["results"]
    assert {r["ruleId"] for r in results if r["level"] == "error"} == {"sealed.integrity"}
    rules = {r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    assert "sealed.integrity" in rules
    assert main(["check", defective, "--call-tools", "--skip", "sealed.integrity",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert not out["failed"] and all(f["rule"] != "sealed.integrity" for f in out["findings"])
    assert main(["check", defective, "--only", "transport"]) == 0
    table = capsys.readouterr().out
    assert "PASS  transport.origin" in table and "sealed" not in table


def test_cli_dry_run_sends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    assert main(["check", url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "sealed.tamper: nothing: tools are called only with --call-tools" in out
    assert "transport.body-limit: one oversized tools/list body" in out


@pytest.mark.parametrize("argv, message", [
    (["check", "not-a-url"], "is not an http(s) URL"),
    (["check", "http://127.0.0.1:9/mcp", "--only", "sealed.nope"], "unknown rule"),
    (["check", "http://127.0.0.1:9/mcp", "--max-requests", "0"], "must be positive"),
    (["check", "http://127.0.0.1:9/mcp", "--answers", "/nonexistent.json"], "cannot read"),
])
def test_cli_usage_errors_exit_2(argv: list[str], message: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
