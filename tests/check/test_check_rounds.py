"""`mrtr check` on states minted after round 1, replays seen through an effects probe, stdio
retries on the process that minted a state, and the verdict fixes of #30."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from mrtr.check import Finding, Options, Report, run
from mrtr.check._basic import MISSING, judge_header
from mrtr.check._probe import Exchange
from tests.check.defects import App
from tests.transports.conftest import LiveServer


def check(options: Options) -> Report:
    return asyncio.run(asyncio.wait_for(run(options), 120))


def of(report: Report, rule: str, subject: str | None = None) -> list[Finding]:
    return [f for f in report.findings if f.rule == rule
            and (subject is None or f.subject == subject)]


@pytest.mark.parametrize("defect, rule", [("late-plain-state", "sealed.integrity"),
                                          ("late-unverified", "sealed.tamper")])
def test_a_state_first_minted_on_round_2_is_tested_and_fails(defect: str, rule: str) -> None:
    with LiveServer(App(defect)) as server:
        report = check(Options(server.url, allow_tools=["book"], only=["sealed"]))
    failed = [f for f in of(report, rule, "book") if f.status == "fail"]
    assert failed and all("round 3 state" in f.detail for f in failed), report.findings
    assert report.exit_code() == 1
    with LiveServer(App()) as server:  # the clean twin: every round-3 probe is rejected
        clean = check(Options(server.url, allow_tools=["book"], only=["sealed"]))
    assert not [f for f in clean.findings if f.status in ("fail", "warn")], clean.findings
    assert any("round 3 state" in f.detail for f in of(clean, "sealed.tamper", "book"))


def test_a_signed_token_with_a_readable_payload_is_forged_not_called_opaque() -> None:
    """`<base64url JSON>.<mac>` (the TypeScript SDK codec's and a JWT's shape) is not opaque:
    its payload is rewritten with the old MAC kept, so a server that never checks the MAC
    fails sealed.integrity, and one that does passes it on the forgery, not on "opaque"."""
    with LiveServer(App("late-unverified")) as server:
        report = check(Options(server.url, allow_tools=["book"], only=["sealed.integrity"]))
    round3 = [f for f in of(report, "sealed.integrity", "book") if "round 3" in f.detail]
    assert [f.status for f in round3] == ["fail"], report.findings
    assert "a token with a readable payload" in round3[0].detail
    with LiveServer(App()) as server:
        clean = check(Options(server.url, allow_tools=["book"], only=["sealed.integrity"]))
    details = [f.detail for f in of(clean, "sealed.integrity", "book")]
    assert details and all(d.endswith("rejected (error -32602)") for d in details), details


def test_replay_with_an_effects_probe_tells_a_rerun_from_a_stored_outcome() -> None:
    options = dict(allow_tools=["book"], only=["sealed.replay"], effects_probe="effects")
    with LiveServer(App()) as server:  # re-runs a replayed final round (like a restart)
        rerun = of(check(Options(server.url, **options)), "sealed.replay", "book")  # type: ignore[arg-type]
    assert [f.status for f in rerun] == ["warn"] and "ran again" in rerun[0].detail
    assert "1 -> 2" in rerun[0].detail and "idempotent" not in rerun[0].detail
    with LiveServer(App(once=True)) as server:  # stores the outcome of a final round
        stored = of(check(Options(server.url, **options)), "sealed.replay", "book")  # type: ignore[arg-type]
    assert [f.status for f in stored] == ["info"] and "no new effect" in stored[0].detail
    with LiveServer(App()) as server:
        blind = of(check(Options(server.url, allow_tools=["book"], only=["sealed.replay"])),
                   "sealed.replay", "book")
    assert "look alike" in blind[0].detail and "--effects-probe" in blind[0].detail


def test_stdio_per_process_key_is_a_fail_found_on_the_minting_process() -> None:
    command = f"{sys.executable} -m tests.check.defects --stdio process-key"
    report = check(Options(command, stdio=True, allow_tools=["book"],
                           only=["stateless.fresh-connection"]))
    verdicts = of(report, "stateless.fresh-connection", "book")
    assert [f.status for f in verdicts] == ["pass", "fail"], verdicts
    assert "process that minted its state" in verdicts[1].detail
    assert "answers may not fit" not in verdicts[1].detail


def test_header_rules_check_the_error_code_and_allow_the_missing_header_carve_out() -> None:
    def ex(status: int, body: dict[str, object]) -> Exchange:
        return Exchange(response={"jsonrpc": "2.0", "id": 1, **body}, status=status)
    session = ex(400, {"error": {"code": -32600, "message": "Bad Request: Missing session ID"}})
    assert judge_header(MISSING, session).status == "warn"  # the carve-out, read as 2025
    assert "Missing session ID" in judge_header(MISSING, session).detail
    assert judge_header("Mcp-Method contradicting the body", session).status == "fail"
    assert judge_header(MISSING, ex(400, {"error": {"code": -32020, "message": "x"}})).status \
        == "pass"
    assert judge_header(MISSING, ex(200, {"result": {"tools": []}})).status == "pass"
    assert judge_header("Mcp-Method contradicting the body",
                        ex(200, {"result": {"tools": []}})).status == "fail"


def test_a_2025_only_server_gets_skips_not_knock_on_fails() -> None:
    """The defects server with discovery removed: only the discovery FAIL, 2026 rules skip."""
    app = App()
    app.server.handle = _no_discover(app.server.handle)  # type: ignore[method-assign]
    with LiveServer(app) as server:
        report = check(Options(server.url, call_tools=True, get_timeout=1.0))
    assert {f.rule for f in report.findings if f.status == "fail"} == {"stateless.discover"}
    skipped = of(report, "sealed.tamper") + of(report, "shape.result-type")
    assert all(f.status == "skip" and "does not speak 2026-07-28" in f.detail for f in skipped)


def _no_discover(handle):  # type: ignore[no-untyped-def]
    from tests.check.defects import Rejected

    def wrapped(message, connection):  # type: ignore[no-untyped-def]
        if message.get("method") == "server/discover":
            raise Rejected(-32601, "Method not found", 404)
        return handle(message, connection)
    return wrapped


def test_unknown_tool_as_is_error_is_a_warning_and_a_hanging_get_costs_the_short_timeout(
) -> None:
    app = App()
    real = app.server.call

    def call(params, connection):  # type: ignore[no-untyped-def]
        if params.get("name") == "mrtr-check-no-such-tool":
            return {"content": [{"type": "text", "text": "Unknown tool"}], "isError": True}
        return real(params, connection)
    app.server.call = call  # type: ignore[method-assign]
    with LiveServer(app) as server:
        report = check(Options(server.url, only=["shape.error-codes"]))
    assert {f.status for f in of(report, "shape.error-codes")} == {"warn", "pass"}
    assert report.exit_code() == 0 and report.exit_code("warn") == 1


def test_a_get_held_open_costs_the_short_get_timeout_not_the_request_timeout() -> None:
    with LiveServer(App("open-get")) as server:
        started = time.monotonic()
        report = check(Options(server.url, only=["transport.get"], get_timeout=1.0,
                               timeout=10.0))
        elapsed = time.monotonic() - started
    (found,) = of(report, "transport.get")
    assert found.status == "warn" and "still open after 1 s" in found.detail, found
    assert elapsed < 5, elapsed
