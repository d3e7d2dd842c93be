"""mrtr.testing: the in-process TestClient, scripted answers and state tampering helpers."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr import Context, Form, Server
from mrtr.errors import InvalidParams, MethodNotFound
from mrtr.protocol import PROTOCOL_VERSION, TextContent
from mrtr.testing import ALL_CAPABILITIES, ANSWER_CANCEL, Clock, Flow, TestClient, flip_bit, then

app = Server("tc", version="0.1.0")


class Name(Form):
    name: str


@app.tool()
async def everything(ctx: Context) -> str:
    name, ok, roots, said = await ctx.gather(
        ctx.elicit("Name?", Name, key="name"), ctx.confirm("OK?", key="ok"),
        ctx.roots(key="roots"), ctx.sample("hi", max_tokens=5, key="said"))
    text = said.content.text if isinstance(said.content, TextContent) else ""
    return f"{name.name} {ok} {[r.uri for r in roots]} {text}"


@app.tool()
async def twice(ctx: Context) -> str:
    first = await ctx.elicit("First?", Name, key="n")
    await ctx.report_progress(1)
    return first.name


@app.tool()
async def loop(ctx: Context) -> str:
    while True:
        await ctx.confirm("again?", key=f"k{ctx.round}")


def test_call_tool_converts_scripted_answers() -> None:
    with TestClient(app) as client:
        flow = client.call_tool("everything", answers={
            "name": {"name": "Ann"}, "ok": True, "roots": ["file:///a", {"uri": "file:///b"}],
            "said": "hello"})
    assert isinstance(flow, Flow) and flow.rounds == 2 and len(flow.requests) == 2
    assert flow.text == "Ann True ['file:///a', 'file:///b'] hello"
    retry = flow.requests[1]
    assert retry["inputResponses"]["ok"] == {"action": "accept", "content": {"confirm": True}}
    assert retry["requestState"] == flow.replies[0]["result"]["requestState"]
    assert retry["inputResponses"]["said"]["model"] == "scripted"


def test_callable_answers_see_the_request() -> None:
    seen: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {"name": "Cal"}

    with TestClient(app) as client:
        assert client.call_tool("twice", answers={"n": answer}).text == "Cal"
    assert seen[0]["method"] == "elicitation/create"


def test_then_pops_answers_and_repeats_the_last() -> None:
    answers = then({"name": 1}, {"name": "ok"})
    assert tuple(answers) == ({"name": 1}, {"name": "ok"})
    with TestClient(app) as client:
        flow = client.call_tool("twice", answers={"n": answers})
    assert flow.rounds == 3 and flow.text == "ok"


def test_full_responses_pass_through() -> None:
    with TestClient(app) as client:
        flow = client.call_tool("twice", answers={"n": ANSWER_CANCEL})
    assert flow.result["isError"] is True


def test_missing_script_and_too_many_rounds_fail_loudly() -> None:
    with TestClient(app) as client:
        with pytest.raises(AssertionError, match="no scripted answer for input request 'n'"):
            client.call_tool("twice")
        with pytest.raises(AssertionError, match="no final reply after 3 rounds"):
            client.call_tool("loop", answers={f"k{i}": True for i in range(1, 9)}, max_rounds=3)


def test_request_raises_wire_errors_and_send_returns_them() -> None:
    with TestClient(app) as client:
        with pytest.raises(MethodNotFound):
            client.request("ping")
        with pytest.raises(InvalidParams):
            client.request("tools/call", {"name": "missing", "arguments": {}})
        assert client.send("ping")["error"]["code"] == -32601
        flow = client.call_tool("missing")
        with pytest.raises(InvalidParams):
            flow.result  # noqa: B018


def test_meta_and_capabilities() -> None:
    with TestClient(app, capabilities={"roots": {}}) as client:
        meta = client.meta(progressToken="t")
        assert meta["io.modelcontextprotocol/protocolVersion"] == PROTOCOL_VERSION
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {"roots": {}}
        assert meta["progressToken"] == "t"
    with TestClient(app) as client:
        assert client.capabilities == ALL_CAPABILITIES
        assert client.capabilities is not ALL_CAPABILITIES


def test_notifications_are_collected() -> None:
    with TestClient(app) as client:
        first = client.send("tools/call", {"name": "twice", "arguments": {}})
        client.send("tools/call", {"name": "twice", "arguments": {},
                                   "requestState": first["result"]["requestState"],
                                   "inputResponses": {"n": {"action": "accept",
                                                            "content": {"name": "x"}}},
                                   "_meta": client.meta(progressToken=7)})
    assert client.notifications[0]["params"]["progressToken"] == 7


def test_send_raw_notification_returns_empty() -> None:
    with TestClient(app) as client:
        assert client.send_raw(b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
                               b'"params":{"requestId":1}}') == {}


def test_clock() -> None:
    clock = Clock(10.0)
    clock.advance(2.5)
    assert clock() == 12.5


def _raw(state: str) -> bytes:
    payload = state.partition(".")[2]
    return base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))


@given(st.binary(min_size=1, max_size=64), st.integers(min_value=0, max_value=10_000))
def test_flip_bit_flips_exactly_one_bit(blob: bytes, bit: int) -> None:
    state = "v1." + base64.urlsafe_b64encode(blob).decode().rstrip("=")
    flipped = flip_bit(state, bit)
    assert flipped.startswith("v1.") and "=" not in flipped
    diff = [a ^ b for a, b in zip(_raw(state), _raw(flipped), strict=True)]
    assert sum(bin(d).count("1") for d in diff) == 1
    assert flip_bit(flipped, bit) == state


def test_27_asked_raises_the_round_s_wire_error_not_a_bare_key_error() -> None:
    # Before: KeyError('result') for a round that ended in an error, IndexError past the end.
    with TestClient(app) as client:
        flow = client.call_tool("missing")
        done = client.call_tool("twice", answers={"n": {"name": "Ann"}})
    with pytest.raises(InvalidParams, match="Unknown tool: missing"):
        flow.asked(1)
    with pytest.raises(AssertionError, match=r"no round 3: the flow had 2 rounds"):
        done.asked(3)
    assert list(done.asked(1)) == ["n"] and done.asked(2) == {}


def test_the_docs_snippet_on_logs_and_progress_runs_issue27() -> None:
    docs = Path(__file__).resolve().parents[1] / "docs" / "testing-your-server.md"
    if not docs.exists():  # `make mutate` stages copy src/, tests/ and examples/ only
        pytest.skip("docs/ is not beside the tests (a mutation stage)")
    section = docs.read_text().split("## Asserting on logs and progress\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    ns: dict[str, Any] = {"__name__": "docs_logs"}
    exec(compile(code, str(docs), "exec", dont_inherit=True), ns)  # its asserts are the test
    assert ns["flow"].text == "Sent."
