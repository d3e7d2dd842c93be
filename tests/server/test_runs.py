"""Runner: tools/call, prompts/get and resources/read through rounds, and how failures surface."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from msgspec import Meta

from mrtr import Context, Form, Server
from mrtr.server import AskIfMissing, CachePolicy, ToolError
from tests.server.wire import WireClient

app = Server("runs", version="1.0.0")
SECRET = "hunter2-internal-detail"


class Topic(Form):
    topic: str


@app.tool()
async def ship(
    ctx: Context,
    order: str,
    boxes: Annotated[int, Meta(ge=1, le=5), AskIfMissing("How many boxes?")],
    day: Annotated[dt.date, AskIfMissing()] = dt.date(2026, 7, 28),
) -> str:
    return f"{order}: {boxes} boxes on {day.isoformat()}"


@app.tool()
async def crash() -> str:
    raise RuntimeError(SECRET)


@app.tool()
def crash_sync() -> str:
    raise KeyError(SECRET)


@app.tool()
async def refuse() -> str:
    raise ToolError("Not today.")


@app.tool()
def add(a: int, b: int) -> int:
    """Sync tools run in a worker thread."""
    return a + b


@app.prompt()
async def brief(ctx: Context, audience: str, tone: str = "dry") -> str:
    topic = await ctx.elicit("Topic?", Topic, key="topic")
    return f"Brief {audience} on {topic.topic} ({tone})"


@app.prompt()
async def broken_prompt() -> str:
    raise ValueError(SECRET)


@app.resource("mem://notes/{day}")
async def notes(ctx: Context, day: str) -> str:
    topic = await ctx.elicit("Topic?", Topic, key="topic")
    return f"{day}: {topic.topic}"


@app.tool()
async def choose(ctx: Context) -> str:
    topic = await ctx.elicit("Topic?", Topic, key="topic")
    return topic.topic


@app.prompt()
async def told_off() -> str:
    raise ToolError("a tool's message, in a prompt")


@app.resource("mem://broken")
def broken_resource() -> str:
    raise OSError(SECRET)


@app.tool()
async def nested(ctx: Context, tree: list[Any]) -> str:
    topic = await ctx.elicit("Topic?", Topic, key="topic")
    return f"{topic.topic} with a tree"


def deep(levels: int) -> object:
    tree: object = "leaf"
    for index in range(levels - 1):
        tree = {"child": tree} if index % 2 else [tree]
    return [tree]


@pytest.fixture()
def client() -> Iterator[WireClient]:
    with WireClient(app) as c:
        yield c


def test_ask_if_missing_elicits_missing_arguments(client: WireClient) -> None:
    flow = client.call_tool("ship", {"order": "A-1"},
                            answers={"args:boxes,day": {"boxes": 2, "day": "2026-08-01"}})
    ask = flow.asked(1)["args:boxes,day"]["params"]
    assert ask["message"].startswith("How many boxes?")
    assert set(ask["requestedSchema"]["properties"]) == {"boxes", "day"}
    assert flow.text == "A-1: 2 boxes on 2026-08-01"


def test_ask_if_missing_reasks_invalid_answers(client: WireClient) -> None:
    from mrtr.testing import then
    flow = client.call_tool("ship", {"order": "A-1", "day": "2026-09-09"},
                            answers={"args:boxes": then({"boxes": 9}, {"boxes": 5})})
    assert flow.rounds == 3 and flow.text == "A-1: 5 boxes on 2026-09-09"
    assert flow.asked(2)["args:boxes"]["params"]["message"] != "How many boxes?"


def test_ask_if_missing_not_asked_when_given(client: WireClient) -> None:
    flow = client.call_tool("ship", {"order": "A-1", "boxes": 1, "day": "2026-01-02"})
    assert flow.rounds == 1 and flow.text == "A-1: 1 boxes on 2026-01-02"


def test_invalid_arguments_are_an_error_result(client: WireClient) -> None:
    flow = client.call_tool("add", {"a": "one", "b": 2})
    assert flow.result["isError"] is True and "Invalid arguments" in flow.text


def test_sync_tool(client: WireClient) -> None:
    assert client.call_tool("add", {"a": 2, "b": 3}).text == "5"


@pytest.mark.parametrize("tool", ["crash", "crash_sync"])
def test_tool_exception_is_an_error_result_without_internals(
    client: WireClient, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"):
        reply = client.send("tools/call", {"name": tool, "arguments": {}})
    result = reply["result"]
    assert result["isError"] is True and result["content"][0]["text"] == f"Tool {tool} failed."
    assert SECRET not in str(reply) and "Traceback" not in str(reply)
    assert SECRET in caplog.text  # logged for the operator


def test_tool_error_message_is_sent(client: WireClient) -> None:
    flow = client.call_tool("refuse")
    assert flow.result["isError"] is True and flow.text == "Not today."


def test_unknown_tool_is_invalid_params(client: WireClient) -> None:
    reply = client.send("tools/call", {"name": "nope", "arguments": {}})
    assert reply["error"]["code"] == -32602


def test_prompt_asks_like_a_tool(client: WireClient) -> None:
    flow = client.get_prompt("brief", {"audience": "ops"}, answers={"topic": {"topic": "DNS"}})
    assert flow.rounds == 2
    assert flow.result["messages"][0]["content"]["text"] == "Brief ops on DNS (dry)"


def test_prompt_missing_required_argument(client: WireClient) -> None:
    reply = client.send("prompts/get", {"name": "brief", "arguments": {}})
    assert reply["error"]["code"] == -32602 and "audience" in reply["error"]["message"]


def test_unknown_prompt(client: WireClient) -> None:
    assert client.send("prompts/get", {"name": "nope"})["error"]["code"] == -32602


def test_prompt_decline_is_invalid_params(client: WireClient) -> None:
    flow = client.get_prompt("brief", {"audience": "ops"}, answers={"topic": {"action": "decline"}})
    assert flow.replies[-1]["error"]["code"] == -32602


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_decline_reads_the_same_in_tools_prompts_and_resources(
    client: WireClient, action: str
) -> None:
    # docs/server.md "Errors: what the client sees": the same text, as isError in a tool and as
    # -32602 where there is no isError (never -32603: the server did not fail).
    answers = {"topic": {"action": action}}
    tool = client.call_tool("choose", answers=answers)
    prompt = client.get_prompt("brief", {"audience": "ops"}, answers=answers).replies[-1]
    resource = client.read_resource("mem://notes/monday", answers=answers).replies[-1]
    verb = {"decline": "declined", "cancel": "cancelled"}[action]
    text = f"The user {verb} the request: Topic?"
    assert tool.result["isError"] is True and tool.text == text
    assert prompt["error"] == resource["error"] == {"code": -32602, "message": text}


def test_a_tool_error_outside_a_tool_is_a_frozen_internal_error(client: WireClient) -> None:
    reply = client.send("prompts/get", {"name": "told_off"})
    assert reply["error"] == {"code": -32603, "message": "Internal error"}


def test_resource_template_asks_like_a_tool(client: WireClient) -> None:
    flow = client.read_resource("mem://notes/monday", answers={"topic": {"topic": "DNS"}})
    assert flow.rounds == 2
    content = flow.result["contents"][0]
    assert content == {"uri": "mem://notes/monday", "mimeType": "text/plain", "text": "monday: DNS"}
    assert (flow.result["ttlMs"], flow.result["cacheScope"]) == (0, "private")  # CACHE-M-01


def test_first_round_read_keeps_the_cache_policy() -> None:
    server = Server("cached", cache=CachePolicy(ttl_ms=9_000, scope="public"))
    server.resource("mem://plain")(lambda: "p")
    with WireClient(server) as client:
        result = client.request("resources/read", {"uri": "mem://plain"})
    assert (result["ttlMs"], result["cacheScope"]) == (9_000, "public")


def test_resource_state_is_bound_to_the_uri(client: WireClient) -> None:
    first = client.request("resources/read", {"uri": "mem://notes/monday"})
    reply = client.send("resources/read", {"uri": "mem://notes/tuesday",
                                           "requestState": first["requestState"]})
    assert reply["error"]["message"] == "Invalid or expired requestState"


def test_resource_not_found(client: WireClient) -> None:
    reply = client.send("resources/read", {"uri": "mem://missing"})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"uri": "mem://missing"}


@pytest.mark.parametrize(("method", "params"), [
    ("prompts/get", {"name": "broken_prompt"}), ("resources/read", {"uri": "mem://broken"})])
def test_prompt_and_resource_failures_are_frozen_internal_errors(
    client: WireClient, method: str, params: dict[str, str]
) -> None:
    reply = client.send(method, params)
    assert reply["error"] == {"code": -32603, "message": "Internal error"}


def test_deeply_nested_arguments_are_invalid_params_issue_11(
    client: WireClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        reply = client.send("tools/call", {"name": "nested", "arguments": {"tree": deep(600)}})
    assert reply["error"]["code"] == -32602 and "deeper than" in reply["error"]["message"]
    assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text


def test_reasonably_nested_arguments_flow(client: WireClient) -> None:
    flow = client.call_tool("nested", {"tree": deep(60)}, answers={"topic": {"topic": "DNS"}})
    assert flow.rounds == 2 and flow.text == "DNS with a tree"


def test_server_info_in_every_result(client: WireClient) -> None:
    info = {"name": "runs", "version": "1.0.0"}
    replies = [
        client.send("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}),
        client.send("tools/call", {"name": "crash", "arguments": {}}),
        client.send("tools/call", {"name": "ship", "arguments": {"order": "x"}}),
        client.send("prompts/get", {"name": "brief", "arguments": {"audience": "a"}}),
        client.send("resources/read", {"uri": "mem://notes/x"}),
        client.send("server/discover"),
        client.send("tools/list"),
    ]
    for reply in replies:
        assert reply["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == info


@app.tool()
async def two_topics(ctx: Context) -> str:
    first = await ctx.elicit("First topic?", Topic, key="first")
    second = await ctx.elicit("Second topic?", Topic, key="second")
    return f"{first.topic} then {second.topic}"


def test_fields_a_form_ignores_never_reach_the_next_state_issue_11(client: WireClient) -> None:
    # Item 4: the journal keeps the validated answer, so junk beside it cannot bloat the state
    # carried to the next round (which used to end in -32603 / HTTP 500 once too large).
    first = client.request("tools/call", {"name": "two_topics", "arguments": {}})
    junk = {"action": "accept", "content": {"topic": "DNS", "junk": "x" * 300_000}}
    second = client.request("tools/call", {"name": "two_topics", "arguments": {},
                                           "requestState": first["requestState"],
                                           "inputResponses": {"first": junk}})
    assert list(second["inputRequests"]) == ["second"]
    assert len(second["requestState"]) < 2 * len(first["requestState"]) + 200
    third = client.request("tools/call", {"name": "two_topics", "arguments": {},
                                          "requestState": second["requestState"],
                                          "inputResponses": {"second": {
                                              "action": "accept", "content": {"topic": "TLS"}}}})
    assert third["content"][0]["text"] == "DNS then TLS"
