"""Runner: tools/call, prompts/get and resources/read through rounds, and how failures surface."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Annotated, Any, cast

import msgspec
import pytest
from msgspec import Meta

from mrtr import Context, Form, Server
from mrtr.protocol import ElicitRequest, ElicitRequestFormParams
from mrtr.server import AskIfMissing, CachePolicy, InputRequired, ToolError
from mrtr.testing import TestClient
from tests.server.wire import FROZEN_STATE_ERROR, WireClient

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


NAME = ElicitRequest(params=ElicitRequestFormParams(
    message="Name?", requested_schema={"type": "object", "properties": {
        "name": {"type": "string"}}, "required": ["name"]}))


@app.tool()
async def plain_guard(who: str) -> Any:
    """No Context: round 1 runs without a Round (Runner._call_plain) until it suspends."""
    return InputRequired(asks={"name": NAME}, state={"who": who})


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


# -- issue 20: tests that kill the mutants of _runs.py (mutation/baseline.toml) -------------------
@app.tool()
async def greet(ctx: Context, who: str) -> str:
    topic = await ctx.elicit("Topic?", Topic, key="topic")
    return f"{who}: {topic.topic}"


TOPIC = {"topic": {"action": "accept", "content": {"topic": "DNS"}}}
# (method, round-1 params, the same request aimed elsewhere: other arguments, prompt or URI)
REPLAYS = [
    ("tools/call", {"name": "greet", "arguments": {"who": "ann"}},
     {"name": "greet", "arguments": {"who": "bob"}}),
    ("prompts/get", {"name": "brief", "arguments": {"audience": "ops"}},
     {"name": "brief", "arguments": {"audience": "board"}}),
    ("resources/read", {"uri": "mem://notes/monday"}, {"uri": "mem://notes/tuesday"}),
]


@pytest.mark.parametrize(("method", "params", "elsewhere"), REPLAYS,
                         ids=["tool", "prompt", "resource"])
def test_a_state_opens_only_for_its_request_and_principal_issue_20(
    method: str, params: dict[str, Any], elsewhere: dict[str, Any]
) -> None:
    """A sealed state is bound to the method, target, arguments and principal (spec: mrtr):
    replayed with other arguments, or by another caller, it is refused, not continued."""
    with WireClient(app, principal="sub:alice") as client:
        first = client.request(method, params)
        retry = {"requestState": first["requestState"], "inputResponses": TOPIC}
        assert client.send(method, {**elsewhere, **retry})["error"] == FROZEN_STATE_ERROR
        client.principal = "sub:mallory"
        assert client.send(method, {**params, **retry})["error"] == FROZEN_STATE_ERROR
        client.principal = None  # an anonymous caller is another principal too
        assert client.send(method, {**params, **retry})["error"] == FROZEN_STATE_ERROR
        client.principal = "sub:alice"
        assert "error" not in client.send(method, {**params, **retry})


class Point(msgspec.Struct):
    x: int
    y: int


@app.tool()
def off_schema() -> Point:
    return cast(Point, {"x": "one", "y": 2})  # not a Point: breaks the outputSchema


@app.tool()
def hello(name: str = "world") -> str:
    return f"hello {name}"


@app.prompt()
def greeting(tone: str = "warm") -> str:
    """Say hello."""
    return f"a {tone} hello"


@app.prompt()
def pair(first: str, second: str) -> str:
    return first + second


@app.prompt()
async def progress_prompt(ctx: Context) -> str:
    await ctx.report_progress(1.0, 2.0)
    return "done"


@app.resource("mem://progress", mime_type="text/markdown")
async def progress_resource(ctx: Context) -> str:
    await ctx.report_progress(1.0, 2.0)
    return "# done"


@app.completion(prompt="greeting")
def complete_greeting(ctx: Context, argument: str, value: str, context: object) -> list[str]:
    return [str(ctx.request_id), str(ctx.principal), str(dict(ctx.input_responses)), str(ctx.round)]


def test_unknown_names_say_which_issue_20(client: WireClient) -> None:
    def message(method: str, params: dict[str, str]) -> str:
        return str(client.send(method, params)["error"]["message"])

    assert message("tools/call", {"name": "nope"}) == "Unknown tool: nope"
    assert message("prompts/get", {"name": "nope"}) == "Unknown prompt: nope"
    assert message("resources/read", {"uri": "mem://missing"}) == "Resource not found: mem://missing"


def test_every_missing_prompt_argument_is_named_issue_20(client: WireClient) -> None:
    error = client.send("prompts/get", {"name": "pair", "arguments": {}})["error"]
    assert error == {"code": -32602, "message": "Missing required arguments: first, second"}


def test_arguments_may_be_absent_issue_20(client: WireClient) -> None:
    """`arguments` is optional on the wire: absent is the empty object, not an error."""
    assert client.request("tools/call", {"name": "hello"})["content"][0]["text"] == "hello world"
    result = client.request("prompts/get", {"name": "greeting"})
    assert result["messages"][0]["content"]["text"] == "a warm hello"


def test_prompt_result_has_its_description_and_server_info_issue_20(client: WireClient) -> None:
    result = client.request("prompts/get", {"name": "greeting", "arguments": {"tone": "dry"}})
    assert result["description"] == "Say hello."
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "runs", "version": "1.0.0"}


def test_tool_output_off_its_schema_is_an_error_result_issue_20(
    client: WireClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"):
        result = client.request("tools/call", {"name": "off_schema", "arguments": {}})
    assert result["isError"] is True and "structuredContent" not in result
    assert result["content"][0]["text"] == (
        "Tool off_schema returned a result that does not match its output schema.")
    assert "does not match its outputSchema" in caplog.text


@pytest.mark.parametrize(("method", "params"), [
    ("prompts/get", {"name": "progress_prompt"}), ("resources/read", {"uri": "mem://progress"})])
def test_prompts_and_resources_send_progress_issue_20(
    client: WireClient, method: str, params: dict[str, Any]
) -> None:
    client.request(method, {**params, "_meta": client.meta(progressToken="p1")})
    assert [n["params"] for n in client.notifications] == [
        {"progressToken": "p1", "progress": 1.0, "total": 2.0}]


def test_resource_result_keeps_mime_type_and_server_info_issue_20(client: WireClient) -> None:
    result = client.request("resources/read", {"uri": "mem://progress"})
    assert result["contents"] == [
        {"uri": "mem://progress", "mimeType": "text/markdown", "text": "# done"}]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "runs", "version": "1.0.0"}


def test_completion_context_knows_the_request_issue_20() -> None:
    with WireClient(app, principal="sub:42") as client:
        result = client.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "greeting"},
            "argument": {"name": "tone", "value": "w"}})
    assert result["completion"]["values"] == ["1", "sub:42", "{}", "1"]


cached = Server("cached", cache=CachePolicy(ttl_ms=9_000, scope="public"))


@cached.resource("mem://guarded")
async def guarded(ctx: Context) -> object:
    if ctx.round == 1:
        return InputRequired(state="again")
    return f"round {ctx.round}"


def test_every_retried_read_is_private_and_uncached_issue_20() -> None:
    """CACHE-M-01: a read that carries a requestState, with or without inputResponses, is a
    retry; its result is never cached, whatever the server's cache policy."""
    with WireClient(cached) as client:
        first = client.request("resources/read", {"uri": "mem://guarded"})
        state = first["requestState"]
        for retry in ({"requestState": state}, {"requestState": state, "inputResponses": {}}):
            result = client.request("resources/read", {"uri": "mem://guarded", **retry})
            assert result["contents"][0]["text"] == "round 2"
            assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


# -- AskIfMissing on prompts and resources (#27) -----------------------------------------------
asking = Server("asking")


@asking.prompt("brief")
async def asking_brief(
    ctx: Context,
    topic: Annotated[str, AskIfMissing("Which topic?")],
    tone: Annotated[str | None, AskIfMissing("Which tone?")] = None,
    length: str = "short",
) -> str:
    return f"A {length} {tone} brief on {topic}."


@asking.resource("notes://{day}", name="notes")
async def asking_notes(day: str, author: Annotated[str, AskIfMissing("Whose notes?")]) -> str:
    return f"{author}'s notes for {day}"


def test_27_a_prompt_asks_for_its_ask_if_missing_arguments_instead_of_refusing_them() -> None:
    # Before: `topic` was a required argument (-32602 before the handler ran) and `tone`
    # reached the handler as None.
    with TestClient(asking) as client:
        listed = client.request("prompts/list")["prompts"][0]["arguments"]
        flow = client.get_prompt("brief", {}, answers={
            AskIfMissing.key("topic", "tone"): {"topic": "tides", "tone": "dry"}})
        given = client.get_prompt("brief", {"topic": "moons", "tone": "warm"})
    assert [(a["name"], a.get("required")) for a in listed] == [
        ("topic", False), ("tone", False), ("length", False)]
    asked = flow.asked(1)["args:tone,topic"]["params"]
    assert asked["message"] == "Which topic? Which tone?"
    assert asked["requestedSchema"]["required"] == ["tone", "topic"]
    assert flow.result["messages"][0]["content"]["text"] == "A short dry brief on tides."
    assert given.rounds == 1
    assert given.result["messages"][0]["content"]["text"] == "A short warm brief on moons."


def test_27_a_resource_template_asks_for_a_parameter_the_uri_does_not_carry() -> None:
    with TestClient(asking) as client:
        flow = client.read_resource("notes://monday",
                                    answers={AskIfMissing.key("author"): {"author": "Ann"}})
    assert flow.asked(1)["args:author"]["params"]["message"] == "Whose notes?"
    assert flow.result["contents"][0]["text"] == "Ann's notes for monday"


def test_27_the_ask_key_names_the_omitted_parameters_sorted() -> None:
    assert AskIfMissing.key("region") == "args:region"
    assert AskIfMissing.key("size", "region") == "args:region,size"


def test_a_tool_without_context_may_suspend_guard_style(client: WireClient) -> None:
    # Round 1 of a ctx-less tool skips the round engine; a returned InputRequired still seals
    # a state bound to the call, which the retry (through the engine) opens.
    first = client.send("tools/call", {"name": "plain_guard", "arguments": {"who": "a"}})
    result = first["result"]
    assert result["resultType"] == "input_required" and set(result["inputRequests"]) == {"name"}
    answers = {"name": {"action": "accept", "content": {"name": "x"}}}
    again = client.send("tools/call", {"name": "plain_guard", "arguments": {"who": "a"},
                                       "requestState": result["requestState"],
                                       "inputResponses": answers})
    assert again["result"]["resultType"] == "input_required"
    assert again["result"]["requestState"] != result["requestState"]
    other = client.send("tools/call", {"name": "plain_guard", "arguments": {"who": "b"},
                                       "requestState": result["requestState"]})
    assert other["error"] == FROZEN_STATE_ERROR  # bound to the arguments


def test_a_tool_without_context_still_rejects_a_bad_state(client: WireClient) -> None:
    reply = client.send("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2},
                                       "requestState": "v1.forged"})
    assert reply["error"] == FROZEN_STATE_ERROR
