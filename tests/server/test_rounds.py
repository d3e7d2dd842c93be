"""RoundEngine, Round and guard style: suspend into a sealed state, reopen it, cap the rounds,
and how a handler's own exceptions, task groups and swallowed suspensions end a round."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import msgspec
import pytest

from mrtr import Context, Form, Server
from mrtr.errors import InvalidParams, InvalidRequestState
from mrtr.protocol import (
    UNSET,
    ElicitRequest,
    ElicitRequestParams,
    InputRequiredResult,
    RequestMeta,
)
from mrtr.server import Binding, InputRequired, Peer, Sealer
from mrtr.server._journal import FlowState, decode_flow
from mrtr.server._rounds import Round, RoundEngine
from mrtr.server._sealing import digest_arguments
from mrtr.testing import Clock
from tests.server.wire import FROZEN_STATE_ERROR, WireClient

app = Server("rounds", version="1.0.0")
calls: Counter[str] = Counter()


class Name(Form):
    name: str


@app.tool()
async def guard(ctx: Context) -> object:
    """Guard style: ask, carry state, read the raw responses next round."""
    calls["guard"] += 1
    if ctx.round == 1:
        return InputRequired(asks={"who": ctx.elicit("Who?", Name, key="who")},
                             state={"step": 1, "items": [1, 2]})
    answer = ctx.input_responses.get("who")
    assert isinstance(answer, dict)
    return f"{answer['content']['name']} state={ctx.state}"


@app.tool()
async def guard_raw(ctx: Context) -> object:
    """Guard style with a raw InputRequest and a state-only round."""
    if ctx.round == 1:
        return InputRequired(state="shed")  # request-state-only: retry immediately
    if ctx.round == 2:
        params = ElicitRequestParams(mode="url", message="Go", url="https://x.example")
        return InputRequired(asks={"go": ElicitRequest(params=params)}, state=ctx.state)
    return f"round {ctx.round} {ctx.state}"


@app.tool()
async def forever(ctx: Context) -> object:
    return InputRequired(asks={f"k{ctx.round}": ctx.confirm("again?", key=f"k{ctx.round}")})


@app.prompt()
async def guarded_prompt(ctx: Context) -> object:
    if ctx.state is None:
        return InputRequired(asks={"c": ctx.confirm("OK?", key="c")}, state="p")
    return f"prompt {ctx.state}"


@app.tool()
async def guard_peek(ctx: Context) -> object:
    """Guard style: report which raw responses the handler is shown."""
    seen = sorted(ctx.input_responses)
    if ctx.round == 1:
        return InputRequired(asks={"who": ctx.elicit("Who?", Name, key="who")}, state=seen)
    return f"{ctx.state} {seen}"


@app.tool()
async def in_task_group(ctx: Context) -> str:
    async with asyncio.TaskGroup() as group:
        first = group.create_task(_ask(ctx, "a"))
        second = group.create_task(_ask(ctx, "b"))
    return f"{first.result()} {second.result()}"


@app.tool()
async def in_anyio_task_group(ctx: Context) -> str:
    names: dict[str, str] = {}

    async def ask(key: str) -> None:
        names[key] = await _ask(ctx, key)

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "a")
        group.start_soon(ask, "b")
    return f"{names['a']} {names['b']}"


@app.tool()
async def in_asyncio_gather(ctx: Context) -> str:
    first, second = await asyncio.gather(_ask(ctx, "a"), _ask(ctx, "b"))
    return f"{first} {second}"


@app.tool()
async def task_group_fails(ctx: Context) -> str:
    async def boom() -> None:
        raise ValueError("boom")

    async with asyncio.TaskGroup() as group:
        group.create_task(_ask(ctx, "a"))
        group.create_task(boom())
    return "unreachable"


async def _ask(ctx: Context, key: str) -> str:
    return (await ctx.elicit(f"{key}?", Name, key=key)).name


@app.completion(prompt="guarded_prompt")
async def complete_by_asking(ctx: Context, argument: str, value: str,
                             context: object) -> list[str]:
    async with asyncio.TaskGroup() as group:
        group.create_task(_ask(ctx, "a"))
    return []


@pytest.fixture()
def client() -> Iterator[WireClient]:
    calls.clear()
    with WireClient(app) as c:
        yield c


def test_guard_style_round_trip(client: WireClient) -> None:
    flow = client.call_tool("guard", answers={"who": {"name": "Ann"}})
    assert flow.rounds == 2 and calls["guard"] == 2
    assert flow.text == "Ann state={'step': 1, 'items': [1, 2]}"
    assert flow.replies[0]["result"]["requestState"].startswith("v1.")


def test_guard_state_is_sealed(client: WireClient) -> None:
    first = client.request("tools/call", {"name": "guard", "arguments": {}})
    assert "step" not in first["requestState"]
    reply = client.send("tools/call", {"name": "guard", "arguments": {},
                                       "requestState": first["requestState"][:-2] + "AA",
                                       "inputResponses": {}})
    assert reply["error"] == FROZEN_STATE_ERROR


def test_request_state_only_round_and_raw_requests(client: WireClient) -> None:
    first = client.request("tools/call", {"name": "guard_raw", "arguments": {}})
    assert "inputRequests" not in first and first["requestState"]
    flow = client.call_tool("guard_raw", answers={"go": {}})
    assert flow.rounds == 3
    assert flow.asked(2)["go"]["params"]["mode"] == "url"
    assert flow.text == "round 3 shed"


def test_guard_asks_are_capability_checked() -> None:
    with WireClient(app, capabilities={"elicitation": {"form": {}}}) as client:
        first = client.request("tools/call", {"name": "guard_raw", "arguments": {}})
        reply = client.send("tools/call", {"name": "guard_raw", "arguments": {},
                                           "requestState": first["requestState"]})
    assert reply["error"]["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}


def test_guard_style_in_prompts(client: WireClient) -> None:
    flow = client.get_prompt("guarded_prompt", answers={"c": True})
    assert flow.result["messages"][0]["content"]["text"] == "prompt p"


def test_guard_style_sees_only_answers_to_what_it_asked(client: WireClient) -> None:
    junk = {"action": "accept", "content": {"name": "x"}}
    first = client.request("tools/call", {"name": "guard_peek", "arguments": {},
                                          "inputResponses": {"who": junk, "zzz": junk}})
    second = client.request("tools/call", {"name": "guard_peek", "arguments": {},
                                           "requestState": first["requestState"],
                                           "inputResponses": {"who": junk, "zzz": junk}})
    assert second["content"][0]["text"] == "[] ['who']"


@pytest.mark.parametrize("tool", ["in_task_group", "in_anyio_task_group", "in_asyncio_gather"])
def test_asks_inside_task_groups_suspend_issue_11(client: WireClient, tool: str) -> None:
    """Tasks that reach their asks together send them in one round, as ctx.gather does."""
    flow = client.call_tool(tool, answers={"a": {"name": "A"}, "b": {"name": "B"}})
    assert flow.rounds == 2 and set(flow.asked(1)) == {"a", "b"}
    assert flow.text == "A B" and not flow.result.get("isError")


def test_a_failure_in_a_task_group_wins_over_its_asks(
    client: WireClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"):
        reply = client.send("tools/call", {"name": "task_group_fails", "arguments": {}})
    assert reply["result"]["isError"] is True and "boom" in caplog.text


def test_an_ask_in_a_task_group_of_a_completion_is_a_frozen_error(client: WireClient) -> None:
    reply = client.send("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "guarded_prompt"},
        "argument": {"name": "x", "value": "y"}})
    assert reply["error"] == {"code": -32603, "message": "Internal error"}


def test_an_answer_too_large_to_carry_is_invalid_params_issue_11(client: WireClient) -> None:
    first = client.request("tools/call", {"name": "in_task_group", "arguments": {}})
    huge = {"action": "accept", "content": {"name": "x" * 300_000}}
    reply = client.send("tools/call", {
        "name": "in_task_group", "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {"a": huge}})
    assert reply["error"] == {"code": -32602, "message": (
        "The answers are too large to carry to the next round; send shorter ones")}


@app.tool()
async def hoard(ctx: Context) -> object:
    return InputRequired(state="x" * 300_000)


def test_a_state_too_large_without_answers_is_the_servers_fault_issue_20(
    client: WireClient,
) -> None:
    """No answer came this round, so an oversized state is the handler's doing: -32603."""
    reply = client.send("tools/call", {"name": "hoard", "arguments": {}})
    assert reply["error"] == {"code": -32603, "message": "Request state too large"}


@app.tool()
async def ask_twice(ctx: Context) -> str:
    first = await ctx.confirm("Sure?", key="sure")
    again = await ctx.confirm("Sure?", key="sure")  # the same ask: the same answer
    return f"{first} {again}"


def test_the_same_ask_twice_in_one_run_gets_one_answer_issue_20(client: WireClient) -> None:
    flow = client.call_tool("ask_twice", answers={"sure": True})
    assert flow.rounds == 2 and flow.text == "True True"


@app.tool()
async def guard_then_ask(ctx: Context, grouped: bool = False) -> object:
    """Guard style first, straight-line asks after: the guard's state survives the asks."""
    if ctx.round == 1:
        return InputRequired(state="kept")
    if grouped:
        async with asyncio.TaskGroup() as group:
            task = group.create_task(_ask(ctx, "a"))
        name = task.result()
    else:
        name = await _ask(ctx, "a")
    return f"{name} {ctx.state}"


@pytest.mark.parametrize("grouped", [False, True])
def test_guard_state_survives_a_later_suspension_issue_20(
    client: WireClient, grouped: bool
) -> None:
    flow = client.call_tool("guard_then_ask", {"grouped": grouped}, answers={"a": {"name": "A"}})
    assert flow.rounds == 3 and flow.text == "A kept"


def test_max_rounds_cap() -> None:
    with WireClient(app, max_rounds=3) as client:
        flow = client.call_tool("forever", answers={f"k{i}": True for i in range(1, 10)},
                                max_rounds=10)
    assert flow.rounds == 4
    error = flow.replies[-1]["error"]
    assert error["code"] == -32602 and "3" in error["message"]


# -- the engine on its own -------------------------------------------------------------------------
META = msgspec.convert({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
                       RequestMeta)
BINDING = Binding(method="tools/call", target="t", arguments_digest=digest_arguments({}),
                  principal=None)


def make_engine(clock: Clock | None = None) -> tuple[RoundEngine, Sealer]:
    sealer = Sealer(keys=[b"e" * 32], audience="a", clock=clock or Clock())
    return RoundEngine(sealer, max_rounds=4, random=lambda n: b"\x01" * n), sealer


def run(round_: Round, handler: Any, responses: dict[str, Any] | None = None) -> Any:
    ctx = round_.context(request_id=1, meta=META, peer=Peer(), input_responses=responses or {})
    return asyncio.run(round_.run(handler, ctx))


def test_open_without_state_starts_a_flow() -> None:
    engine, _ = make_engine()
    round_ = engine.open(UNSET, lambda: pytest.fail("no binding needed"))
    assert round_.flow == FlowState()


def test_suspend_seals_journal_and_pending() -> None:
    engine, sealer = make_engine()

    async def handler(ctx: Context) -> str:
        first = await ctx.confirm("a?", key="a")
        await ctx.gather(ctx.confirm("b?", key="b"), ctx.confirm("c?", key="c"))
        return str(first)

    first = run(engine.open(UNSET, lambda: BINDING), handler)
    assert isinstance(first, InputRequiredResult)
    assert first.input_requests is not UNSET and list(first.input_requests) == ["a"]
    out = run(engine.open(first.request_state, lambda: BINDING), handler,
              {"a": {"action": "accept", "content": {"confirm": True}}})
    assert isinstance(out, InputRequiredResult)
    assert out.input_requests is not UNSET and sorted(out.input_requests) == ["b", "c"]
    body = decode_flow(sealer.unseal(str(out.request_state), BINDING).body)
    assert body.round == 2 and sorted(body.pending) == ["b", "c"] and body.flow_id == "01" * 12
    assert list(body.journal) == ["a"]
    assert len(set(body.pending.values())) == 2  # each key with the shape of its own ask
    reopened = engine.open(out.request_state, lambda: BINDING)
    assert reopened.flow == body


def test_default_flow_ids_are_unique_per_flow_and_per_engine() -> None:
    sealer = Sealer(keys=[b"e" * 32], audience="a", clock=Clock())

    async def handler(ctx: Context) -> bool:
        return await ctx.confirm("a?", key="a")

    def flow_id(engine: RoundEngine) -> str:
        out = run(engine.open(UNSET, lambda: BINDING), handler)
        assert isinstance(out, InputRequiredResult)
        return decode_flow(sealer.unseal(str(out.request_state), BINDING).body).flow_id

    first, second = RoundEngine(sealer), RoundEngine(sealer)
    ids = [flow_id(first), flow_id(first), flow_id(second)]
    assert len(set(ids)) == 3 and all(len(i) == 24 for i in ids)


def test_open_rejects_a_foreign_binding() -> None:
    engine, sealer = make_engine()
    token = sealer.seal(b"\x90", BINDING)
    other = Binding(method="tools/call", target="u", arguments_digest=digest_arguments({}),
                    principal=None)
    with pytest.raises(InvalidRequestState):
        engine.open(token, lambda: other)


def test_open_rejects_an_undecodable_journal() -> None:
    engine, sealer = make_engine()
    with pytest.raises(InvalidRequestState) as caught:
        engine.open(sealer.seal(b"not msgpack \xc1", BINDING), lambda: BINDING)
    assert caught.value.reason == "journal does not decode"  # logged, never sent


def test_open_caps_rounds() -> None:
    engine, sealer = make_engine()
    from mrtr.server._journal import encode_flow
    token = sealer.seal(encode_flow(FlowState(flow_id="f", round=4)), BINDING)
    with pytest.raises(InvalidParams, match="limit 4"):
        engine.open(token, lambda: BINDING)


def test_the_default_limit_is_16_rounds_issue_20() -> None:
    sealer = Sealer(keys=[b"e" * 32], audience="a", clock=Clock())
    engine = RoundEngine(sealer)
    from mrtr.server._journal import encode_flow

    def state(round_no: int) -> str:
        return sealer.seal(encode_flow(FlowState(flow_id="f", round=round_no)), BINDING)

    assert engine.open(state(15), lambda: BINDING).flow.round == 15
    with pytest.raises(InvalidParams, match="limit 16"):
        engine.open(state(16), lambda: BINDING)


def test_flow_deadline_is_carried_not_extended() -> None:
    clock = Clock()
    engine, sealer = make_engine(clock)

    async def handler(ctx: Context) -> object:
        return InputRequired(state=ctx.round)

    first = run(engine.open(UNSET, lambda: BINDING), handler)
    assert isinstance(first, InputRequiredResult)
    deadline = sealer.unseal(str(first.request_state), BINDING).deadline
    clock.advance(100)
    second = run(engine.open(first.request_state, lambda: BINDING), handler)
    assert isinstance(second, InputRequiredResult)
    assert sealer.unseal(str(second.request_state), BINDING).deadline == deadline
