"""Properties of the round engine: forged, stale or misplaced states never reach a handler, the
journal replays exactly the scripted answers whatever the order and grouping of asks, and an
answer is only ever applied to the question it was given for."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr import Context, Form, Server
from mrtr.server import Sealer
from mrtr.testing import Clock, flip_bit
from tests.server.wire import FROZEN_STATE_ERROR, WireClient

KEY = b"p" * 32
TTL, FLOW_TTL = 100.0, 150.0
calls: Counter[str] = Counter()
app = Server("props", version="1.0.0")


class Value(Form):
    value: int


@app.tool()
async def probe(ctx: Context, n: int) -> str:
    calls["probe"] += 1
    first = await ctx.elicit("First?", Value, key="a")
    second = await ctx.elicit("Second?", Value, key="b")
    return f"{n}:{first.value}:{second.value}"


@app.tool()
async def other(ctx: Context, n: int) -> str:
    calls["other"] += 1
    return str((await ctx.elicit("First?", Value, key="a")).value)


@app.tool()
async def replay(ctx: Context, groups: list[list[str]], kinds: dict[str, str]) -> dict[str, Any]:
    calls["replay"] += 1
    await ctx.once("side-effect", lambda: calls.update(["once"]) or "done")
    seen: dict[str, Any] = {}
    for group in groups:
        asks = [ctx.confirm(f"{k}?", key=k) if kinds[k] == "confirm"
                else ctx.elicit(f"{k}?", Value, key=k) for k in group]
        values = await ctx.gather(*asks)
        for key, value in zip(group, values, strict=True):
            seen[key] = value if isinstance(value, bool) else value.value
    return seen


def client_for(clock: Clock, *, audience: str = "props",
               principal: str | None = None) -> WireClient:
    sealer = Sealer(keys=[KEY], audience=audience, ttl=TTL, flow_ttl=FLOW_TTL, clock=clock)
    return WireClient(app, sealer=sealer, clock=clock, principal=principal)


@pytest.fixture(scope="module")
def issued() -> Iterator[tuple[WireClient, str]]:
    """A client and a round-1 state for probe(n=1)."""
    with client_for(Clock()) as client:
        state = client.request("tools/call", {"name": "probe", "arguments": {"n": 1}})
        yield client, state["requestState"]


def retry(client: WireClient, state: str, name: str = "probe", n: int = 1) -> dict[str, Any]:
    calls.clear()
    return client.send("tools/call", {
        "name": name, "arguments": {"n": n}, "requestState": state,
        "inputResponses": {"a": {"action": "accept", "content": {"value": 1}}},
    })


def assert_rejected(reply: dict[str, Any]) -> None:
    assert reply["error"] == FROZEN_STATE_ERROR
    assert not calls, "the handler ran on a rejected state"


def test_untouched_state_is_accepted(issued: tuple[WireClient, str]) -> None:
    client, state = issued
    assert retry(client, state)["result"]["resultType"] == "input_required"
    assert calls["probe"] == 1


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150)
@given(bit=st.integers(min_value=0, max_value=10_000))
def test_any_bit_flip_is_rejected(issued: tuple[WireClient, str], bit: int) -> None:
    client, state = issued
    assert_rejected(retry(client, flip_bit(state, bit)))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_truncation_is_rejected(issued: tuple[WireClient, str], data: st.DataObject) -> None:
    client, state = issued
    cut = data.draw(st.integers(min_value=0, max_value=len(state) - 1))
    assert_rejected(retry(client, state[:cut]))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(suffix=st.text(min_size=1, max_size=40))
def test_extension_is_rejected(issued: tuple[WireClient, str], suffix: str) -> None:
    client, state = issued
    assert_rejected(retry(client, state + suffix))


def test_state_of_another_tool_is_rejected(issued: tuple[WireClient, str]) -> None:
    client, state = issued
    assert_rejected(retry(client, state, name="other"))


@given(n=st.integers().filter(lambda n: n != 1))
def test_state_with_other_arguments_is_rejected(n: int) -> None:
    clock = Clock()
    with client_for(clock) as client:
        state = client.request("tools/call", {"name": "probe", "arguments": {"n": 1}})
        assert_rejected(retry(client, state["requestState"], n=n))


@given(principals=st.lists(st.text(max_size=8) | st.none(), min_size=2, max_size=2, unique=True))
def test_state_of_another_principal_is_rejected(principals: list[str | None]) -> None:
    clock = Clock()
    with client_for(clock, principal=principals[0]) as alice, \
            client_for(clock, principal=principals[1]) as bob:
        state = alice.request("tools/call", {"name": "probe", "arguments": {"n": 1}})
        assert_rejected(retry(bob, state["requestState"]))
        assert retry(alice, state["requestState"])["result"]["resultType"] == "input_required"


def test_state_for_another_audience_is_rejected(issued: tuple[WireClient, str]) -> None:
    _, state = issued
    with client_for(Clock(), audience="elsewhere") as stranger:
        assert_rejected(retry(stranger, state))


@given(late=st.floats(min_value=TTL + 0.001, max_value=1e6))
def test_expired_state_is_rejected(late: float) -> None:
    clock = Clock()
    with client_for(clock) as client:
        state = client.request("tools/call", {"name": "probe", "arguments": {"n": 1}})
        clock.advance(late)
        assert_rejected(retry(client, state["requestState"]))


def test_state_replayed_after_the_flow_deadline_is_rejected() -> None:
    clock = Clock()
    with client_for(clock) as client:
        first = client.request("tools/call", {"name": "probe", "arguments": {"n": 1}})
        clock.advance(60.0)
        second = retry(client, first["requestState"])["result"]
        assert second["resultType"] == "input_required"
        clock.advance(95.0)  # t=155: within round 2's ttl (60+100), past the deadline (150)
        calls.clear()
        assert_rejected(client.send("tools/call", {
            "name": "probe", "arguments": {"n": 1}, "requestState": second["requestState"],
            "inputResponses": {"b": {"action": "accept", "content": {"value": 2}}}}))


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[list[str]], dict[str, str], dict[str, Any]]:
    keys = draw(st.lists(st.text("abcdefghij_-.", min_size=1, max_size=5), min_size=1,
                         max_size=7, unique=True))
    keys = draw(st.permutations(keys))
    cuts = sorted(draw(st.sets(st.integers(1, len(keys) - 1), max_size=len(keys) - 1))
                  if len(keys) > 1 else set())
    bounds = [0, *cuts, len(keys)]
    groups = [list(keys[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    kinds = {k: draw(st.sampled_from(["form", "confirm"])) for k in keys}
    answers = {k: draw(st.booleans()) if kinds[k] == "confirm" else draw(st.integers(-99, 99))
               for k in keys}
    return groups, kinds, answers


@settings(max_examples=60, deadline=None)
@given(plan=plans())
def test_journal_replays_exactly_the_scripted_answers(
    plan: tuple[list[list[str]], dict[str, str], dict[str, Any]],
) -> None:
    groups, kinds, answers = plan
    script = {k: (v if kinds[k] == "confirm" else {"value": v}) for k, v in answers.items()}
    with client_for(Clock()) as client:
        results = []
        for _ in range(2):
            calls.clear()
            flow = client.call_tool("replay", {"groups": groups, "kinds": kinds}, answers=script)
            assert flow.rounds == len(groups) + 1
            for number, group in enumerate(groups, start=1):
                assert set(flow.asked(number)) == set(group)
            assert calls["once"] == 1 and calls["replay"] == len(groups) + 1
            results.append(flow.result["structuredContent"] if "structuredContent" in
                           flow.result else flow.text)
    final = results[0]
    assert final == results[1]
    assert (final if isinstance(final, dict) else json.loads(final)) == answers


# -- consent bound to the question (issue 11) ------------------------------------------------------
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
PLAN: list[str] = []


@app.tool()
async def plan(ctx: Context) -> dict[str, int]:
    messages = list(PLAN)
    values = await ctx.gather(*[ctx.elicit(m, Value) for m in messages])
    await ctx.confirm("Done?", key="final")
    return {m: v.value for m, v in zip(messages, values, strict=True)}


def answer_for(message: str) -> int:
    """The answer the user gives to `message` (a rewording "x!" is a different question)."""
    return WORDS.index(message.rstrip("!")) + 100 * message.count("!")


@st.composite
def changes(draw: st.DrawFn) -> tuple[list[str], list[str], int]:
    before = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5, unique=True))
    after = list(draw(st.permutations(before)))
    after = [m + "!" if draw(st.booleans()) else m for m in after]
    return before, after, draw(st.sampled_from([2, 3]))


@settings(max_examples=80, deadline=None)
@given(change=changes())
def test_reordered_or_reworded_asks_are_asked_again(
    change: tuple[list[str], list[str], int],
) -> None:
    """Between any two rounds, asks may be reordered or reworded under the same (derived) keys: a
    changed ask is asked again, never answered from the journal or by last round's response."""
    before, after, switch = change
    changed = {f"elicit-{i}" for i, (a, b) in enumerate(zip(before, after, strict=True), 1)
               if a != b}
    PLAN[:] = before
    params: dict[str, Any] = {"name": "plan", "arguments": {}}
    with client_for(Clock()) as client:
        reply = client.request("tools/call", params)
        for number in range(2, 12):
            asked = reply.get("inputRequests", {})
            if number == switch:
                PLAN[:] = after
            responses = {key: {"action": "accept", "content": (
                {"confirm": True} if key == "final"
                else {"value": answer_for(request["params"]["message"])})}
                for key, request in asked.items()}
            reply = client.request("tools/call", {**params, "requestState": reply["requestState"],
                                                  "inputResponses": responses})
            if number == switch:
                expected = changed or ({"final"} if switch == 2 else set())
                assert set(reply.get("inputRequests", {})) == expected
            if reply["resultType"] == "complete":
                break
    result = reply["structuredContent"] if "structuredContent" in reply else json.loads(
        reply["content"][0]["text"])
    assert result == {m: answer_for(m) for m in after}
