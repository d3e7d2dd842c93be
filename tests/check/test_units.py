"""The pure parts of `mrtr check`: generated values, tamper variants, folding, rule catalogue."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mrtr.check import RULES, Finding, Report, as_table
from mrtr.check._flows import Flow
from mrtr.check._probe import Exchange
from mrtr.check._rules import rule
from mrtr.check._sealed import _encode_like, _replace, next_question, readable, variants, verdict
from mrtr.check._values import answer, arguments, other_arguments

DOCS = Path(__file__).resolve().parents[2] / "docs" / "check.md"


def test_arguments_follow_the_schema() -> None:
    schema = {"type": "object", "required": ["n", "kind", "when", "flag", "tags"],
              "properties": {"n": {"type": "integer", "minimum": 3},
                             "kind": {"enum": ["a", "b"]}, "when": {"type": "string",
                                                                    "format": "date"},
                             "flag": {"type": "boolean"},
                             "tags": {"type": "array", "minItems": 1,
                                      "items": {"type": "string"}},
                             "optional": {"type": "string"}}}
    args = arguments(schema)
    assert args == {"n": 4, "kind": "a", "when": "2026-07-28", "flag": True,
                    "tags": ["mrtr-check"]}
    other = other_arguments(schema, args)
    assert other is not None and other != args and other["n"] == 5


def test_other_arguments_none_when_nothing_can_change() -> None:
    assert other_arguments({"properties": {"k": {"const": 1}}}, {"k": 1}) is None
    assert other_arguments({}, {}) is None


def test_answers_by_kind() -> None:
    form = {"method": "elicitation/create", "params": {"requestedSchema": {
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}
    assert answer(form) == {"action": "accept", "content": {"name": "mrtr-check"}}
    assert answer({"method": "elicitation/create", "params": {"mode": "url"}}) == {
        "action": "accept"}
    assert answer({"method": "roots/list"}) == {"roots": []}
    assert answer({"method": "sampling/createMessage"})["role"] == "assistant"  # type: ignore[index]
    assert answer({"method": "x/unknown"}) is None


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
               min_size=1, max_size=200))
def test_variants_always_differ(state: str) -> None:
    assert all(v != state for v in variants(state).values())


def test_readable_states_are_forged_in_their_own_encoding() -> None:
    claims = {"tool": "t", "args": {"city": "Oslo"}}
    plain = json.dumps(claims)
    token = base64.urlsafe_b64encode(plain.encode()).decode().rstrip("=")
    assert readable(token) == claims and readable(plain) == claims
    assert readable("not.a-state") is None
    forged, hit = _replace(claims, {"city": "Oslo"}, {"city": "Rome"})
    assert hit and forged["args"] == {"city": "Rome"}
    again = _encode_like(token, json.dumps(forged))
    assert readable(again) == forged and "=" not in again
    assert _encode_like(plain, "{}") == "{}"


def test_table_folds_agreeing_findings_and_keeps_failures() -> None:
    findings = [Finding("sealed.tamper", "pass", "flipped: rejected", "a"),
                Finding("sealed.tamper", "pass", "truncated: rejected", "b"),
                Finding("sealed.integrity", "fail", "accepted", "a"),
                Finding("sealed.integrity", "pass", "opaque", "b")]
    text = as_table(Report("http://x/mcp", findings, 9))
    assert "2 pass over 2 tools" in text
    assert "FAIL  sealed.integrity [a]  accepted" in text and "fix: Seal the state" in text
    assert "9 requests sent" in text
    assert "sealed.tamper    [a]" in as_table(Report("x", findings, 9), verbose=True)


def test_catalogue_ids_are_unique_and_documented() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    text = DOCS.read_text()
    missing = [i for i in ids if f"`{i}`" not in text]
    assert not missing, f"docs/check.md does not list {missing}"


def test_a_tool_with_an_mcp_header_argument_is_chosen_for_the_param_probe() -> None:
    from mrtr.check import Options
    from mrtr.check._run import _param_tool
    from tests.check.defects import _TOOLS

    assert _param_tool(_TOOLS, Options("x")) is None  # not allowed to call it
    assert _param_tool(_TOOLS, Options("x", allow_tools=["echo"])) == (
        "echo", {"text": "mrtr-check"}, {"text": "Text"})


def test_27_folded_findings_without_a_tool_say_no_tool_count_and_no_empty_subject() -> None:
    # Before: "2 pass over 0 tools; e.g. : foreign Origin gets 403".
    findings = [Finding("transport.origin", "pass", "foreign Origin gets 403"),
                Finding("transport.origin", "pass", "foreign Host gets 421")]
    text = as_table(Report("http://x/mcp", findings, 2))
    assert "PASS  transport.origin  2 pass; e.g. foreign Origin gets 403" in text
    assert "over 0 tools" not in text and "e.g. :" not in text
    one = [Finding("sealed.tamper", "pass", "flipped: rejected", "a"),
           Finding("sealed.tamper", "pass", "truncated: rejected", "a")]
    assert "2 pass over 1 tool; e.g. a: flipped: rejected" in as_table(Report("x", one, 2))


def _asks(*keys: str) -> Exchange:
    requests = {k: {"method": "elicitation/create", "params": {}} for k in keys}
    return Exchange(response={"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "input_required", "inputRequests": requests, "requestState": "s"}})


def test_a_probe_that_moves_on_to_the_next_question_was_accepted() -> None:
    """The TypeScript SDK's deploy (env, then confirm): its round-2 state replayed for other
    arguments asks `confirm`, the genuine next question, so the state was taken, not refused;
    asking `env` again (a restart) stays a warning; a MUST rule's acceptance is a FAIL."""
    flow = Flow("deploy", {"service": "web"}, {},
                params=[{}, {"requestState": "a"}, {"requestState": "b"}],
                replies=[_asks("env"), _asks("confirm"), Exchange(response={"result": {}})])
    assert next_question(flow, 2) == {"confirm"}
    assert next_question(flow, 3) == frozenset()  # the final round asks nothing
    moved = verdict("sealed.bound-arguments", _asks("confirm"), "round 2 state", "deploy",
                    next_question(flow, 2))
    assert (moved.status, moved.detail) == (
        "fail", "round 2 state: accepted, the server moved on to the next question (confirm)")
    assert rule("sealed.bound-arguments").judged(moved.status) == "warn"  # a SHOULD
    again = verdict("sealed.bound-arguments", _asks("env"), "round 2 state", "deploy",
                    next_question(flow, 2))
    assert (again.status, again.detail) == ("warn", "round 2 state: asked again instead of "
                                                    "rejecting")
    tampered = verdict("sealed.tamper", _asks("confirm"), "x", "deploy", next_question(flow, 2))
    assert rule("sealed.tamper").judged(tampered.status) == "fail"  # a MUST
    assert verdict("sealed.tamper", _asks("confirm"), "x", "deploy").status == "warn"
    looping = Flow("ask", {}, {}, params=[{}, {}], replies=[_asks("n"), _asks("n")])
    assert next_question(looping, 2) == frozenset()  # the same key again cannot tell
