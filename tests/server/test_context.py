"""Context: the ask API across rounds (validation, re-asks, settled keys, declines, capability
gates, fallbacks, once, gather), progress and logging."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
import pytest
from msgspec import Meta

from mrtr import Context, Elicited, Form, Server
from mrtr.protocol import (
    ClientCapabilities,
    RequestMeta,
    SamplingMessage,
    TextContent,
    Tool,
    ToolChoice,
)
from mrtr.server._asks import Declined, Reask, form_spec, sampling_spec, schema_digest, url_spec
from mrtr.server._forms import Confirmation, render_form
from mrtr.server._journal import FlowState
from mrtr.server._peer import Peer
from mrtr.testing import ANSWER_CANCEL, ANSWER_DECLINE, then
from tests.server.wire import WireClient

app = Server("ctx", version="1.0.0")
calls: Counter[str] = Counter()


class Boxes(Form):
    boxes: Annotated[int, Meta(ge=1, le=5)]


class Name(Form):
    name: str


@app.tool()
async def count_boxes(ctx: Context) -> str:
    return f"{(await ctx.elicit('How many boxes?', Boxes, key='boxes')).boxes} boxes"


@app.tool()
async def two_steps(ctx: Context) -> str:
    first = await ctx.elicit("First?", Name, key="a")
    second = await ctx.elicit("Second?", Name, key="b")
    return f"{first.name}+{second.name}"


@app.tool()
async def full_outcome(ctx: Context) -> str:
    answer: Elicited[Name] = await ctx.elicit("Name?", Name, key="n", outcome=True)
    return f"{answer.action}:{answer.value.name if answer.value else None}"


@app.tool()
async def confirm_it(ctx: Context) -> str:
    return "yes" if await ctx.confirm("Sure?", key="ok") else "no"


@app.tool()
async def visit(ctx: Context) -> str:
    await ctx.elicit_url("Sign in", "https://example.com/auth", key="auth")
    return "signed in"


@app.tool()
async def sample_plain(ctx: Context) -> str:
    reply = await ctx.sample("hi", max_tokens=5, key="s")
    return reply.content.text if isinstance(reply.content, TextContent) else "?"


@app.tool()
async def sample_tools(ctx: Context) -> str:
    tool = Tool(name="lookup", input_schema={"type": "object"})
    reply = await ctx.sample("hi", max_tokens=5, tools=[tool], key="s")
    return str(reply.model)


@app.tool()
async def strict_roots(ctx: Context) -> str:
    return str(len(await ctx.roots(key="r")))


@app.tool()
async def lenient_roots(ctx: Context) -> str:
    return f"{len(await ctx.roots(key='r', fallback=[]))} roots"


@app.tool()
async def with_once(ctx: Context) -> str:
    ticket = await ctx.once("ticket", lambda: calls.update(["once"]) or f"T-{sum(calls.values())}")
    first = await ctx.elicit("First?", Name, key="a")
    second = await ctx.elicit("Second?", Name, key="b")
    again = await ctx.once("ticket", lambda: "never")
    assert again == ticket
    return f"{ticket} {first.name} {second.name}"


@app.tool()
async def gathered(ctx: Context) -> str:
    name, ok, roots = await ctx.gather(
        ctx.elicit("Name?", Name, key="name"), ctx.confirm("OK?", key="ok"),
        ctx.roots(key="roots"))
    return f"{name.name} {ok} {len(roots)}"


@app.tool()
async def derived_keys(ctx: Context) -> str:
    first = await ctx.elicit("First?", Name)
    second = await ctx.confirm("Second?")
    return f"{first.name} {second}"


@app.tool()
async def up_front(ctx: Context) -> str:
    return (await ctx.elicit("Who?", Name, key="who", accept_unasked=True)).name


@app.tool()
async def progress(ctx: Context) -> str:
    for value in (0, 50, 50, 25, 100):
        await ctx.report_progress(value, 100)
    return "done"


@app.tool()
async def chatty(ctx: Context) -> str:
    for level in ("debug", "info", "warning", "error"):
        await ctx.log(level, {"level": level}, logger="t")
    return "done"


@app.tool()
async def who(ctx: Context) -> str:
    info = ctx.client_info
    return f"{ctx.principal} {info.name if info else None} {ctx.round} {ctx.request_id!r}"


@pytest.fixture()
def client() -> Iterator[WireClient]:
    calls.clear()
    with WireClient(app) as c:
        yield c


def accept(name: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": name}}


def prompt_of(flow: Any, round_no: int, key: str) -> str:
    return str(flow.asked(round_no)[key]["params"]["message"])


# -- validation and re-asks ----------------------------------------------------------------------
def test_invalid_answer_is_reasked_with_the_problem(client: WireClient) -> None:
    flow = client.call_tool("count_boxes", answers={"boxes": then({"boxes": 9}, {"boxes": 3})})
    assert flow.rounds == 3 and flow.text == "3 boxes"
    assert prompt_of(flow, 1, "boxes") == "How many boxes?"
    reask = prompt_of(flow, 2, "boxes")
    assert reask.endswith("How many boxes?") and reask != "How many boxes?"
    assert "5" in reask  # the validation message names the bound


def test_malformed_answer_is_reasked_not_raised(client: WireClient) -> None:
    flow = client.call_tool("count_boxes",
                            answers={"boxes": then({"action": "accept", "content": "x"},
                                                   {"boxes": 2})})
    assert flow.text == "2 boxes" and "malformed" in prompt_of(flow, 2, "boxes")


def test_missing_answer_is_asked_again(client: WireClient) -> None:
    first = client.request("tools/call", {"name": "two_steps", "arguments": {}})
    again = client.request("tools/call", {"name": "two_steps", "arguments": {},
                                          "requestState": first["requestState"],
                                          "inputResponses": {}})
    assert set(again["inputRequests"]) == {"a"}


def test_unknown_keys_are_ignored(client: WireClient) -> None:
    flow = client.call_tool("two_steps", answers={"a": {"name": "x"}, "b": {"name": "y"}})
    reply = client.send("tools/call", {
        "name": "two_steps", "arguments": {}, "requestState": flow.replies[0]["result"][
            "requestState"],
        "inputResponses": {"a": {"action": "accept", "content": {"name": "x"}},
                           "zzz": {"action": "accept", "content": {}}}})
    assert set(reply["result"]["inputRequests"]) == {"b"}


def test_the_journal_wins_over_a_re_answer(client: WireClient) -> None:
    r1 = client.request("tools/call", {"name": "two_steps", "arguments": {}})
    r2 = client.request("tools/call", {"name": "two_steps", "arguments": {},
                                       "requestState": r1["requestState"],
                                       "inputResponses": {"a": accept("first")}})
    assert set(r2["inputRequests"]) == {"b"}
    r3 = client.request("tools/call", {"name": "two_steps", "arguments": {},
                                       "requestState": r2["requestState"],
                                       "inputResponses": {"a": accept("forged"),
                                                          "b": accept("second")}})
    assert r3["content"][0]["text"] == "first+second"


def test_a_settled_key_cannot_be_reanswered(client: WireClient) -> None:
    """Even when its journaled answer no longer holds, a settled key is asked again: a response
    the retry carries for it answers nothing that was asked (issue 20)."""
    TAKEN.clear()
    r1 = client.request("tools/call", {"name": "reserve", "arguments": {}})
    r2 = client.request("tools/call", {
        "name": "reserve", "arguments": {}, "requestState": r1["requestState"],
        "inputResponses": {"slot": {"action": "accept", "content": {"slot": "9am"}}}})
    assert set(r2["inputRequests"]) == {"ok"}
    TAKEN.add("9am")  # the journaled answer fails now, so the journal cannot answer "slot"
    r3 = client.request("tools/call", {
        "name": "reserve", "arguments": {}, "requestState": r2["requestState"],
        "inputResponses": {"slot": {"action": "accept", "content": {"slot": "forged"}},
                           "ok": {"action": "accept", "content": {"confirm": True}}}})
    assert set(r3["inputRequests"]) == {"slot"}
    assert "taken" in r3["inputRequests"]["slot"]["params"]["message"]


def test_a_later_key_answered_early_is_only_taken_when_asked(client: WireClient) -> None:
    """Round 2 reaches "b" with an answer for it that round 1 never asked for (issue 20, M04)."""
    r1 = client.request("tools/call", {"name": "two_steps", "arguments": {}})
    assert set(r1["inputRequests"]) == {"a"}
    r2 = client.request("tools/call", {"name": "two_steps", "arguments": {},
                                       "requestState": r1["requestState"],
                                       "inputResponses": {"a": accept("first"),
                                                          "b": accept("early")}})
    assert set(r2["inputRequests"]) == {"b"}
    r3 = client.request("tools/call", {"name": "two_steps", "arguments": {},
                                       "requestState": r2["requestState"],
                                       "inputResponses": {"b": accept("asked")}})
    assert r3["content"][0]["text"] == "first+asked"


@pytest.mark.parametrize(("tool", "responses"), [
    ("two_steps", {"a": accept("p"), "b": accept("q")}),
    ("derived_keys", {"elicit-1": accept("p"), "confirm-2": {
        "action": "accept", "content": {"confirm": True}}}),
    ("confirm_it", {"ok": {"action": "accept", "content": {"confirm": True}}}),
])
def test_answers_to_asks_never_sent_are_ignored_issue_11(
    client: WireClient, tool: str, responses: dict[str, Any]
) -> None:
    """Round 1 has no state, so nothing was asked and no answer counts."""
    result = client.request("tools/call", {"name": tool, "arguments": {},
                                           "inputResponses": responses})
    assert result["resultType"] == "input_required"
    assert set(result["inputRequests"]) == {next(iter(responses))}


def test_accept_unasked_takes_an_answer_sent_up_front(client: WireClient) -> None:
    result = client.request("tools/call", {"name": "up_front", "arguments": {},
                                           "inputResponses": {"who": accept("Ann")}})
    assert result["content"][0]["text"] == "Ann"


# -- consent bound to the question -----------------------------------------------------------------
ITEMS: list[str] = []


@app.tool()
async def delete_items(ctx: Context) -> str:
    deleted = [item for item in list(ITEMS) if await ctx.confirm(f"Delete {item}?")]
    return "deleted " + ",".join(deleted)


def yes() -> dict[str, Any]:
    return {"action": "accept", "content": {"confirm": True}}


def no() -> dict[str, Any]:
    return {"action": "accept", "content": {"confirm": False}}


def test_an_answer_is_not_applied_to_a_changed_question_issue_11(client: WireClient) -> None:
    ITEMS[:] = ["A"]
    r1 = client.request("tools/call", {"name": "delete_items", "arguments": {}})
    assert r1["inputRequests"]["confirm-1"]["params"]["message"] == "Delete A?"
    ITEMS[:] = ["B", "A"]  # the list changed between the rounds: confirm-1 now asks about B
    r2 = client.request("tools/call", {"name": "delete_items", "arguments": {},
                                       "requestState": r1["requestState"],
                                       "inputResponses": {"confirm-1": yes()}})
    assert r2["inputRequests"]["confirm-1"]["params"]["message"] == "Delete B?"


def test_a_journaled_answer_is_not_replayed_for_a_changed_question_issue_20_m05(
    client: WireClient,
) -> None:
    ITEMS[:] = ["A", "B"]
    r1 = client.request("tools/call", {"name": "delete_items", "arguments": {}})
    r2 = client.request("tools/call", {"name": "delete_items", "arguments": {},
                                       "requestState": r1["requestState"],
                                       "inputResponses": {"confirm-1": yes()}})
    assert r2["inputRequests"]["confirm-2"]["params"]["message"] == "Delete B?"
    ITEMS[:] = ["B", "A"]  # "yes" was given for A, which confirm-1 no longer asks
    r3 = client.request("tools/call", {"name": "delete_items", "arguments": {},
                                       "requestState": r2["requestState"],
                                       "inputResponses": {"confirm-2": no()}})
    assert set(r3["inputRequests"]) == {"confirm-1"}
    assert r3["inputRequests"]["confirm-1"]["params"]["message"] == "Delete B?"


@app.tool()
async def one_key_two_asks(ctx: Context) -> str:
    first = await ctx.confirm("Pay 10 EUR?", key="pay")
    second = await ctx.confirm("Pay 1000 EUR?", key="pay")
    return f"{first} {second}"


@app.tool()
async def one_key_two_asks_gathered(ctx: Context) -> str:
    first, second = await ctx.gather(ctx.confirm("Pay 10 EUR?", key="pay"),
                                     ctx.confirm("Pay 1000 EUR?", key="pay"))
    return f"{first} {second}"


def test_two_different_asks_under_one_key_fail_issue_20_m18(
    client: WireClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"):
        gathered = client.send("tools/call", {"name": "one_key_two_asks_gathered",
                                              "arguments": {}})["result"]
        flow = client.call_tool("one_key_two_asks", answers={"pay": True})
    assert gathered["isError"] is True
    assert flow.rounds == 2 and flow.result["isError"] is True
    assert "two different asks share the key 'pay'" in caplog.text


# -- a handler must not swallow the suspension ----------------------------------------------------
@app.tool()
async def catches_exception(ctx: Context) -> str:
    try:
        return "yes" if await ctx.confirm("Sure?", key="ok") else "no"
    except Exception:  # a careless handler: must not swallow the suspension
        return "swallowed"


@app.tool()
async def catches_everything(ctx: Context) -> str:
    try:
        return "yes" if await ctx.confirm("Sure?", key="ok") else "no"
    except BaseException:  # noqa: BLE001 - what the engine must detect
        return "swallowed"


def test_except_exception_does_not_swallow_an_ask_issue_20_m15(client: WireClient) -> None:
    flow = client.call_tool("catches_exception", answers={"ok": True})
    assert flow.rounds == 2 and flow.text == "yes"


def test_a_swallowed_suspension_is_an_error_result_issue_11(
    client: WireClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"):
        reply = client.send("tools/call", {"name": "catches_everything", "arguments": {}})
    assert reply["result"]["isError"] is True
    assert reply["result"]["content"][0]["text"] == "Tool catches_everything failed."
    assert "caught mrtr's Suspend" in caplog.text


# -- decline, cancel, confirm --------------------------------------------------------------------
@pytest.mark.parametrize(("answer", "verb"), [(ANSWER_DECLINE, "declined"),
                                              (ANSWER_CANCEL, "cancelled")])
def test_decline_is_a_clear_error_result(client: WireClient, answer: Any, verb: str) -> None:
    flow = client.call_tool("count_boxes", answers={"boxes": answer})
    assert flow.result["isError"] is True
    assert flow.text == f"The user {verb} the request: How many boxes?"


@pytest.mark.parametrize(("answer", "text"), [({"name": "Ann"}, "accept:Ann"),
                                              (ANSWER_DECLINE, "decline:None"),
                                              (ANSWER_CANCEL, "cancel:None")])
def test_outcome_true_gives_the_full_outcome(client: WireClient, answer: Any, text: str) -> None:
    flow = client.call_tool("full_outcome", answers={"n": answer})
    assert flow.text == text and not flow.result.get("isError")


@pytest.mark.parametrize(("answer", "text"), [(True, "yes"), (False, "no"),
                                              (ANSWER_DECLINE, "no"), (ANSWER_CANCEL, "no")])
def test_confirm(client: WireClient, answer: Any, text: str) -> None:
    flow = client.call_tool("confirm_it", answers={"ok": answer})
    assert flow.text == text
    schema = flow.asked(1)["ok"]["params"]["requestedSchema"]
    assert schema["properties"]["confirm"]["type"] == "boolean"


def test_url_elicitation(client: WireClient) -> None:
    flow = client.call_tool("visit", answers={"auth": {}})
    assert flow.asked(1)["auth"]["params"] == {"mode": "url", "message": "Sign in",
                                               "url": "https://example.com/auth"}
    assert flow.text == "signed in"


# -- capability gates ------------------------------------------------------------------------------
GATES = [
    ("count_boxes", {"sampling": {}}, {"elicitation": {"form": {}}}),
    ("count_boxes", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
    ("visit", {"elicitation": {}}, {"elicitation": {"url": {}}}),
    ("visit", {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
    ("sample_plain", {"elicitation": {}}, {"sampling": {}}),
    ("sample_tools", {"sampling": {}}, {"sampling": {"tools": {}}}),
    ("strict_roots", {"sampling": {}}, {"roots": {}}),
]


@pytest.mark.parametrize(("tool", "caps", "needed"), GATES)
def test_capability_gate(tool: str, caps: dict[str, Any], needed: dict[str, Any]) -> None:
    with WireClient(app, capabilities=caps) as client:
        reply = client.send("tools/call", {"name": tool, "arguments": {}})
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": needed}


@pytest.mark.parametrize(("tool", "caps"), [
    ("count_boxes", {"elicitation": {}}), ("count_boxes", {"elicitation": {"form": {}}}),
    ("visit", {"elicitation": {"url": {}}}), ("sample_plain", {"sampling": {}}),
    ("sample_tools", {"sampling": {"tools": {}}}), ("strict_roots", {"roots": {}}),
])
def test_declared_capability_passes(tool: str, caps: dict[str, Any]) -> None:
    with WireClient(app, capabilities=caps) as client:
        result = client.request("tools/call", {"name": tool, "arguments": {}})
    assert result["resultType"] == "input_required"


def test_capabilities_are_checked_on_every_round() -> None:
    with WireClient(app) as client:
        first = client.request("tools/call", {"name": "two_steps", "arguments": {}})
        client.capabilities = {"sampling": {}}
        reply = client.send("tools/call", {
            "name": "two_steps", "arguments": {}, "requestState": first["requestState"],
            "inputResponses": {"a": {"action": "accept", "content": {"name": "x"}}}})
    assert reply["error"]["code"] == -32021


def test_fallback_when_capability_missing() -> None:
    with WireClient(app, capabilities={}) as client:
        result = client.request("tools/call", {"name": "lenient_roots", "arguments": {}})
    assert result["content"][0]["text"] == "0 roots"


def test_fallback_not_used_when_capability_present(client: WireClient) -> None:
    flow = client.call_tool("lenient_roots", answers={"r": ["file:///a", "file:///b"]})
    assert flow.rounds == 2 and flow.text == "2 roots"


# -- once, gather, keys ----------------------------------------------------------------------------
def test_once_runs_once_per_flow(client: WireClient) -> None:
    flow = client.call_tool("with_once", answers={"a": {"name": "x"}, "b": {"name": "y"}})
    assert flow.rounds == 3 and calls["once"] == 1
    assert flow.text == "T-1 x y"
    client.call_tool("with_once", answers={"a": {"name": "x"}, "b": {"name": "y"}})
    assert calls["once"] == 2  # a new flow runs it again


def test_gather_sends_all_asks_in_one_round(client: WireClient) -> None:
    flow = client.call_tool("gathered", answers={"name": {"name": "N"}, "ok": True,
                                                 "roots": ["file:///r"]})
    assert flow.rounds == 2 and set(flow.asked(1)) == {"name", "ok", "roots"}
    assert flow.text == "N True 1"


def test_gather_asks_only_what_is_missing(client: WireClient) -> None:
    r1 = client.request("tools/call", {"name": "gathered", "arguments": {}})
    r2 = client.request("tools/call", {
        "name": "gathered", "arguments": {}, "requestState": r1["requestState"],
        "inputResponses": {"ok": {"action": "accept", "content": {"confirm": True}}}})
    assert set(r2["inputRequests"]) == {"name", "roots"}


def test_derived_keys_are_stable_across_rounds(client: WireClient) -> None:
    flow = client.call_tool("derived_keys", answers={"elicit-1": {"name": "z"}, "confirm-2": True})
    assert list(flow.asked(1)) == ["elicit-1"] and list(flow.asked(2)) == ["confirm-2"]
    assert flow.text == "z True"


# -- progress, logging, identity -------------------------------------------------------------------
def test_progress_only_with_a_token_and_increasing(client: WireClient) -> None:
    client.request("tools/call", {"name": "progress", "arguments": {}})
    assert client.notifications == []
    client.request("tools/call", {"name": "progress", "arguments": {},
                                  "_meta": client.meta(progressToken="p-1")})
    sent = [n["params"] for n in client.notifications]
    assert [n["progress"] for n in sent] == [0, 50, 100]
    assert {n["progressToken"] for n in sent} == {"p-1"}
    assert all(n["method"] == "notifications/progress" for n in client.notifications)


def test_log_only_when_level_set_and_at_or_above(client: WireClient) -> None:
    client.request("tools/call", {"name": "chatty", "arguments": {}})
    assert client.notifications == []
    level = "io.modelcontextprotocol/logLevel"
    client.request("tools/call", {"name": "chatty", "arguments": {},
                                  "_meta": client.meta(**{level: "warning"})})
    assert [n["params"]["level"] for n in client.notifications] == ["warning", "error"]
    assert client.notifications[0]["params"] == {"level": "warning", "logger": "t",
                                                 "data": {"level": "warning"}}


def test_identity_and_round() -> None:
    with WireClient(app, principal="sub:7") as client:
        text = client.request("tools/call", {"name": "who", "arguments": {}})["content"][0]["text"]
    assert text == "sub:7 mrtr-testclient 1 1"


class Slot(Form):
    slot: str

    def __post_init__(self) -> None:
        if self.slot in TAKEN:
            raise ValueError(f"slot {self.slot} is taken")


TAKEN: set[str] = set()


@app.tool()
async def reserve(ctx: Context) -> str:
    slot = await ctx.elicit("Slot?", Slot, key="slot")
    ok = await ctx.confirm(f"Reserve {slot.slot}?", key="ok")
    return f"{slot.slot} {ok}"


def test_journaled_answer_that_became_invalid_is_asked_again(client: WireClient) -> None:
    TAKEN.clear()
    r1 = client.request("tools/call", {"name": "reserve", "arguments": {}})
    r2 = client.request("tools/call", {
        "name": "reserve", "arguments": {}, "requestState": r1["requestState"],
        "inputResponses": {"slot": {"action": "accept", "content": {"slot": "9am"}}}})
    assert set(r2["inputRequests"]) == {"ok"}
    TAKEN.add("9am")  # e.g. a rolling upgrade tightened the validation
    r3 = client.request("tools/call", {
        "name": "reserve", "arguments": {}, "requestState": r2["requestState"],
        "inputResponses": {"ok": {"action": "accept", "content": {"confirm": True}}}})
    assert set(r3["inputRequests"]) == {"slot"}
    assert "taken" in r3["inputRequests"]["slot"]["params"]["message"]
    r4 = client.request("tools/call", {
        "name": "reserve", "arguments": {}, "requestState": r3["requestState"],
        "inputResponses": {"slot": {"action": "accept", "content": {"slot": "10am"}}}})
    assert set(r4["inputRequests"]) == {"ok"}  # never reached last round: asked now
    assert r4["inputRequests"]["ok"]["params"]["message"] == "Reserve 10am?"


# -- the asks as built: a Context with a recording Settler (issue 20, mutation survivors) ---------
class Recorder:
    """A Settler that records the asks and answers them from `answers` (raw, by key)."""

    caught_up = True  # never replaying an earlier round: notifications are sent

    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        self.asks: list[Any] = []
        self.answers = answers or {}

    def settle(self, asks: Any) -> list[Any]:
        self.asks.extend(asks)
        return [ask.resolve(self.answers[ask.key])[0] if ask.key in self.answers else None
                for ask in asks]


def bare_context(answers: dict[str, Any] | None = None, **flow: Any) -> tuple[Context, Recorder]:
    recorder = Recorder(answers)
    meta = RequestMeta(protocol_version="2026-07-28", client_capabilities=ClientCapabilities())
    ctx = Context(request_id=1, meta=meta, peer=Peer(), flow=FlowState(**flow),
                  input_responses={}, settler=recorder)
    return ctx, recorder


def wire(ask: Any) -> dict[str, Any]:
    return msgspec.to_builtins(ask.request)  # type: ignore[no-any-return]


def test_sample_sends_every_parameter_and_shapes_it() -> None:
    ctx, _ = bare_context()
    tool = Tool(name="lookup", input_schema={"type": "object"})
    ask = ctx.sample("hi", max_tokens=7, system_prompt="be terse", tools=[tool],
                     tool_choice=ToolChoice(mode="required"), temperature=0.25, key="s")
    assert ask.key == "s"
    assert wire(ask) == {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 7, "systemPrompt": "be terse", "temperature": 0.25,
        "tools": [{"name": "lookup", "inputSchema": {"type": "object"}}],
        "toolChoice": {"mode": "required"}}}
    assert ask.spec == sampling_spec(ask.request.params)  # type: ignore[union-attr]
    assert ask.spec.capability == {"sampling": {"tools": {}}}
    assert not ask.has_fallback and not ask.accept_unasked


def test_sample_leaves_unset_parameters_out() -> None:
    ctx, _ = bare_context()
    ask = ctx.sample("hi", max_tokens=3)
    assert ask.key == "sample-1"
    assert wire(ask) == {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 3}}
    assert ask.spec.capability == {"sampling": {}}


def test_sample_takes_a_conversation_and_tool_choice_alone_needs_tools() -> None:
    ctx, _ = bare_context()
    talk = (SamplingMessage(role="user", content=TextContent(text="a")),
            SamplingMessage(role="assistant", content=TextContent(text="b")))
    ask = ctx.sample(talk, max_tokens=1, tool_choice=ToolChoice(mode="none"))
    params = wire(ask)["params"]
    assert params["messages"] == [{"role": "user", "content": {"type": "text", "text": "a"}},
                                  {"role": "assistant", "content": {"type": "text", "text": "b"}}]
    assert params["toolChoice"] == {"mode": "none"} and "tools" not in params
    assert ask.spec.capability == {"sampling": {"tools": {}}}


def test_sample_resolves_the_model_reply() -> None:
    reply = {"role": "assistant", "content": {"type": "text", "text": "t"}, "model": "m"}
    ctx, recorder = bare_context({"s": reply})
    ask = ctx.sample("hi", max_tokens=1, key="s")
    value, kept = ask.resolve(reply)
    assert value.model == "m" and kept == reply


def test_roots_ask_and_its_fallback() -> None:
    ctx, _ = bare_context()
    strict, lenient = ctx.roots(), ctx.roots(key="r", fallback=["x"])
    assert (strict.key, lenient.key) == ("roots-1", "r")
    assert wire(strict) == {"method": "roots/list"}
    assert strict.spec.capability == {"roots": {}} and strict.spec == lenient.spec
    assert not strict.has_fallback and lenient.has_fallback and lenient.fallback == ["x"]
    roots, kept = strict.resolve({"roots": [{"uri": "file:///a"}]})
    assert [r.uri for r in roots] == ["file:///a"] and kept == {"roots": [{"uri": "file:///a"}]}


class Booking(msgspec.Struct):
    ref: str
    seats: int


def test_once_journals_the_json_value_and_replays_it_typed() -> None:
    ctx, _ = bare_context()
    ran: list[str] = []

    async def book() -> Booking:
        ran.append("book")
        return Booking("B-1", 2)

    assert asyncio.run(ctx.once("book", book)) == Booking("B-1", 2)
    assert ctx._flow.onces == {"book": {"ref": "B-1", "seats": 2}}
    later, _ = bare_context(onces={"book": {"ref": "B-1", "seats": 2}})
    assert asyncio.run(later.once("book", book, returns=Booking)) == Booking("B-1", 2)
    assert asyncio.run(later.once("book", book)) == Booking("B-1", 2)  # its annotation
    assert asyncio.run(later.once("book", lambda: None)) == {"ref": "B-1", "seats": 2}
    assert ran == ["book"]
    assert asyncio.run(later.once("other", lambda: 5)) == 5
    assert later._flow.onces["other"] == 5


def test_ask_keys_default_to_kind_and_call_order() -> None:
    ctx, _ = bare_context()
    asks = [ctx.elicit("a", Name), ctx.confirm("b"), ctx.elicit_url("c", "https://x"),
            ctx.sample("d", max_tokens=1), ctx.roots(), ctx.elicit_schema("e", {}),
            ctx.confirm("f", key="mine"), ctx.confirm("g")]
    assert [a.key for a in asks] == ["elicit-1", "confirm-2", "url-3", "sample-4", "roots-5",
                                     "elicit-6", "mine", "confirm-8"]


class Note(Form):
    note: str = "none"


def test_elicit_builds_the_form_and_journals_the_validated_answer() -> None:
    ctx, _ = bare_context()
    rendered = render_form(Name)
    ask = ctx.elicit("Name?", Name, key="n")
    assert wire(ask) == {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Name?", "requestedSchema": rendered.schema}}
    assert ask.spec == form_spec("Name?", rendered.schema, rendered.digest)
    assert not ask.accept_unasked and not ask.has_fallback
    assert ask.resolve(accept("Ann")) == (Name(name="Ann"),
                                          {"action": "accept", "content": {"name": "Ann"}})
    with pytest.raises(Declined) as declined:
        ask.resolve({"action": "decline"})
    assert (declined.value.action, declined.value.prompt) == ("decline", "Name?")
    with pytest.raises(Reask, match="name"):
        ask.resolve({"action": "accept", "content": {"name": 3}})
    assert ctx.elicit("Who?", Name, accept_unasked=True).accept_unasked


def test_elicit_without_content_takes_the_form_defaults() -> None:
    ctx, _ = bare_context()
    assert ctx.elicit("Note?", Note).resolve({"action": "accept"}) == (
        Note(), {"action": "accept", "content": {"note": "none"}})
    assert ctx.elicit_schema("Note?", {"type": "object", "properties": {}}).resolve(
        {"action": "accept"}) == ({}, {"action": "accept", "content": {}})
    assert ctx.confirm("Sure?").resolve({"action": "accept", "content": {"confirm": False}}) == (
        False, {"action": "accept", "content": {"confirm": False}})


def test_elicit_with_outcome_journals_the_action() -> None:
    ctx, _ = bare_context()
    ask = ctx.elicit("Name?", Name, key="n", outcome=True)
    assert ask.resolve({"action": "cancel"}) == (Elicited("cancel", None), {"action": "cancel"})
    assert ask.resolve(accept("Ann")) == (Elicited("accept", Name(name="Ann")),
                                          {"action": "accept", "content": {"name": "Ann"}})


def test_elicit_schema_builds_and_validates() -> None:
    schema: dict[str, object] = {"type": "object", "properties": {"n": {"type": "integer"}},
                                 "required": ["n"]}
    ctx, _ = bare_context()
    ask = ctx.elicit_schema("N?", schema, key="k")
    assert ask.key == "k"
    assert wire(ask) == {"method": "elicitation/create", "params": {
        "mode": "form", "message": "N?", "requestedSchema": schema}}
    assert ask.spec == form_spec("N?", schema, schema_digest(schema))
    assert ask.resolve({"action": "accept", "content": {"n": 4}}) == (
        {"n": 4}, {"action": "accept", "content": {"n": 4}})
    with pytest.raises(Declined) as declined:
        ask.resolve({"action": "cancel"})
    assert (declined.value.action, declined.value.prompt) == ("cancel", "N?")
    with pytest.raises(Reask, match="^n: must be a whole number$"):
        ask.resolve({"action": "accept", "content": {"n": "four"}})


def test_missing_arguments_are_asked_in_one_form_under_their_ask_key() -> None:
    from mrtr.server._runs import _asked_if_missing  # the Runner's AskIfMissing step

    ctx, recorder = bare_context({"args:a,b": {"action": "accept",
                                               "content": {"a": "x", "b": 2}}})
    fields = {"b": ("How many?", {"type": "integer"}), "a": ("Which?", {"type": "string"}),
              "c": ("Given.", {"type": "string"})}
    given = {"c": "kept", "a": None}  # null counts as missing
    assert asyncio.run(_asked_if_missing(ctx, fields, given)) == {"a": "x", "b": 2, "c": "kept"}
    [ask] = recorder.asks
    assert ask.key == "args:a,b"
    assert wire(ask)["params"] == {"mode": "form", "message": "How many? Which?",
                                   "requestedSchema": {
        "type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
        "required": ["a", "b"]}}


def test_confirm_builds_a_checkbox_and_counts_decline_as_no() -> None:
    ctx, _ = bare_context()
    ask = ctx.confirm("Sure?", key="ok")
    rendered = render_form(Confirmation)
    assert wire(ask) == {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Sure?", "requestedSchema": rendered.schema}}
    assert ask.spec == form_spec("Sure?", rendered.schema, rendered.digest)
    assert ask.resolve({"action": "accept", "content": {"confirm": True}}) == (
        True, {"action": "accept", "content": {"confirm": True}})
    assert ask.resolve({"action": "decline"}) == (False, {"action": "decline"})
    with pytest.raises(Reask, match="^confirm: is required$"):
        ask.resolve({"action": "accept", "content": {}})
    with pytest.raises(Reask, match="^confirm: is required$"):  # no content: an empty form
        ask.resolve({"action": "accept"})


def test_elicit_url_builds_the_request_and_needs_consent() -> None:
    ctx, _ = bare_context()
    ask = ctx.elicit_url("Sign in", "https://a.example/x", key="auth")
    assert wire(ask) == {"method": "elicitation/create", "params": {
        "mode": "url", "message": "Sign in", "url": "https://a.example/x"}}
    assert ask.spec == url_spec("Sign in", "https://a.example/x")
    assert ask.resolve({"action": "accept"}) == (None, {"action": "accept"})
    with pytest.raises(Declined) as declined:
        ask.resolve({"action": "decline"})
    assert (declined.value.action, declined.value.prompt) == ("decline", "Sign in")


def notifying_context(**meta: Any) -> tuple[Context, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    async def sink(note: Any) -> None:
        sent.append(msgspec.to_builtins(note))

    ctx = Context(request_id=1, peer=Peer(), flow=FlowState(), input_responses={},
                  settler=Recorder(), sink=sink,
                  meta=RequestMeta(protocol_version="2026-07-28",
                                   client_capabilities=ClientCapabilities(), **meta))
    return ctx, sent


def note(kind: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": f"notifications/{kind}", "params": params}


def test_progress_sends_total_and_message_only_when_given() -> None:
    ctx, sent = notifying_context(progress_token=7)

    async def report() -> None:
        await ctx.report_progress(1)
        await ctx.report_progress(1)  # not an increase: dropped
        await ctx.report_progress(2, 4, "half")
        await ctx.report_progress(1.5, 4)  # a decrease: dropped

    asyncio.run(report())
    assert sent == [note("progress", progressToken=7, progress=1),
                    note("progress", progressToken=7, progress=2, total=4, message="half")]
    quiet, nothing = notifying_context()
    asyncio.run(quiet.report_progress(1))
    assert nothing == []


def test_log_filters_by_level_and_names_the_logger_only_when_given() -> None:
    ctx, sent = notifying_context(log_level="notice")

    async def log() -> None:
        for level in ("debug", "info", "notice", "warning", "emergency"):
            await ctx.log(level, level)
        await ctx.log("error", {"x": 1}, logger="db")

    asyncio.run(log())
    assert sent == [note("message", level="notice", data="notice"),
                    note("message", level="warning", data="warning"),
                    note("message", level="emergency", data="emergency"),
                    note("message", level="error", data={"x": 1}, logger="db")]
    quiet, nothing = notifying_context()
    asyncio.run(quiet.log("emergency", "x"))
    assert nothing == []


def test_an_unknown_log_level_is_a_mistake_not_a_silent_drop_issue27() -> None:
    # `ctx.log("verbose", ...)` used to vanish; it raises, naming the levels, even when the
    # client asked for no logs (so a test finds it).
    for ctx, sent in (notifying_context(log_level="debug"), notifying_context()):
        with pytest.raises(ValueError, match="unknown log level 'verbose': use one of debug"):
            asyncio.run(ctx.log("verbose", "x"))
        assert sent == []


def test_short_forms_log_at_their_level_issue27() -> None:
    ctx, sent = notifying_context(log_level="debug")

    async def log() -> None:
        await ctx.debug("d")
        await ctx.info("i", logger="carrier")
        await ctx.warning({"w": 1})
        await ctx.error("e")

    asyncio.run(log())
    assert sent == [note("message", level="debug", data="d"),
                    note("message", level="info", data="i", logger="carrier"),
                    note("message", level="warning", data={"w": 1}),
                    note("message", level="error", data="e")]


def test_guard_style_view_of_the_request() -> None:
    """input_responses keeps only the keys asked last round (issue 20, M04), state and round come
    from the flow, identity from the request."""
    recorder = Recorder()
    flow = FlowState(round=2, pending={"a": "shape-a", "b": "shape-b"}, state={"step": 3})
    meta = RequestMeta(protocol_version="2026-07-28",
                       client_capabilities=ClientCapabilities(roots={}))
    ctx = Context(request_id="r-9", meta=meta, peer=Peer(principal="sub:1"), flow=flow,
                  input_responses={"a": 1, "c": 3, "b": 2}, settler=recorder)
    assert ctx.input_responses == {"a": 1, "b": 2}
    assert ctx.state == {"step": 3} and ctx.round == 3
    assert (ctx.request_id, ctx.principal, ctx.client_info) == ("r-9", "sub:1", None)
    assert ctx.client_capabilities == ClientCapabilities(roots={})
    assert ctx.cancelled is ctx.cancelled and not ctx.cancelled.is_set()
    first = Context(request_id=1, meta=meta, peer=Peer(), flow=FlowState(),
                    input_responses={"a": 1}, settler=recorder)
    assert first.input_responses == {} and first.round == 1 and first.state is None


@pytest.mark.parametrize("spelling", ["response_type", "schema"])
def test_27_fastmcp_and_sdk_elicit_spellings_raise_naming_the_mrtr_one(spelling: str) -> None:
    # FastMCP writes ctx.elicit(message, response_type=X), the official SDK schema=X; both
    # were a bare "unexpected keyword argument" TypeError, masked as "Tool X failed.".
    ctx, _ = bare_context()
    with pytest.raises(TypeError, match=rf"ctx\.elicit takes the form type as its second "
                       rf"argument, not {spelling}=: `await ctx\.elicit\(message, Name\)` gives "
                       r"the filled Name .*outcome=True gives an Elicited with \.action and "
                       r"\.value"):
        ctx.elicit("Who?", **{spelling: Name})  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'shape'"):
        ctx.elicit("Who?", Name, shape=1)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"needs the form type: ctx\.elicit\('Seats\?', Seats\)"):
        ctx.elicit("Who?")  # type: ignore[call-overload]
