"""The conformance scenarios input-required-result-* (14) and server-stateless, in process.

The fixture app below uses the scenario's tool names and keys; every reply is schema-checked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from mrtr import Context, Form, Server
from mrtr.protocol import PROTOCOL_VERSION, TextContent
from mrtr.server import InputRequired, Peer
from tests.server.wire import FROZEN_STATE_ERROR, WireClient, require_schema

HARNESS_CAPS = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"},
           "model": "test-model", "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}
ELICITATION = "test_input_required_result_elicitation"

app = Server("mrtr-fixture", version="1.0.0")


class Name(Form):
    name: str


class Ok(Form):
    ok: bool


class Color(Form):
    color: str


class UserContext(Form):
    context: str


@app.tool("test_simple_text")
async def simple_text() -> str:
    return "This is a simple text response for testing."


@app.tool("test_input_required_result_elicitation")
async def input_required_result_elicitation(ctx: Context) -> str:
    """Ask the user's name; an answer sent up front counts (ignore-extra-params)."""
    answer = await ctx.elicit("What is your name?", Name, key="user_name", accept_unasked=True)
    return f"Hello, {answer.name}!"


@app.tool("test_input_required_result_sampling")
async def input_required_result_sampling(ctx: Context) -> str:
    """Ask the client's model."""
    reply = await ctx.sample("What is the capital of France?", max_tokens=100,
                             key="capital_question")
    return reply.content.text if isinstance(reply.content, TextContent) else "?"


@app.tool("test_input_required_result_list_roots")
async def input_required_result_list_roots(ctx: Context) -> str:
    """List the client's roots."""
    roots = await ctx.roots(key="client_roots")
    return "Roots: " + ", ".join(r.uri for r in roots)


@app.tool("test_input_required_result_request_state")
async def input_required_result_request_state(ctx: Context) -> object:
    """Guard style: the state is sealed by the framework and verified on the retry."""
    if ctx.state is None:
        return InputRequired(asks={"confirm": ctx.elicit("Proceed?", Ok, key="confirm")},
                             state={"nonce": "n-1"})
    answer = ctx.input_responses.get("confirm")
    if ctx.state != {"nonce": "n-1"} or not isinstance(answer, dict):
        return "state-bad"
    return f"state-ok: ok={answer['content']['ok']}"


@app.tool("test_input_required_result_multiple_inputs")
async def input_required_result_multiple_inputs(ctx: Context) -> str:
    """Three asks in one round."""
    name, greeting, roots = await ctx.gather(
        ctx.elicit("What is your name?", Name, key="user_name"),
        ctx.sample("Say hello", max_tokens=50, key="greeting"),
        ctx.roots(key="client_roots"),
    )
    text = greeting.content.text if isinstance(greeting.content, TextContent) else ""
    return f"{text} {name.name} ({len(roots)} roots)"


@app.tool("test_input_required_result_multi_round")
async def input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds of questions."""
    name = await ctx.elicit("What is your name?", Name, key="step1")
    color = await ctx.elicit("Favourite color?", Color, key="step2")
    return f"{name.name} likes {color.color}"


@app.tool("test_input_required_result_tampered_state")
async def input_required_result_tampered_state(ctx: Context) -> str:
    """Any state edit must be an error."""
    answer = await ctx.elicit("What is your name?", Name, key="user_name")
    return f"Hello, {answer.name}!"


@app.tool("test_input_required_result_capabilities")
async def input_required_result_capabilities(ctx: Context) -> str:
    """Prefers elicitation; falls back to sampling when the client lacks it."""
    caps = msgspec.to_builtins(ctx.client_capabilities)
    if "elicitation" in caps:
        return (await ctx.elicit("Name?", Name, key="user_name")).name
    reply = await ctx.sample("Pick a name", max_tokens=10, key="name_sample")
    return reply.content.text if isinstance(reply.content, TextContent) else "?"


@app.tool("test_missing_capability")
async def missing_capability(ctx: Context) -> str:
    """Needs sampling, no fallback."""
    reply = await ctx.sample("hi", max_tokens=5, key="s")
    return str(reply.model)


@app.prompt("test_input_required_result_prompt")
async def input_required_result_prompt(ctx: Context) -> str:
    """MRTR on prompts/get."""
    answer = await ctx.elicit("Some context?", UserContext, key="user_context")
    return f"Context: {answer.context}"


@pytest.fixture()
def client() -> Any:
    with WireClient(app, capabilities=HARNESS_CAPS) as c:
        yield c


def call(client: WireClient, name: str, **extra: Any) -> dict[str, Any]:
    return client.send("tools/call", {"name": name, "arguments": {}, **extra})


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def test_replies_validate_against_schema(client: WireClient) -> None:
    require_schema()
    client.call_tool(ELICITATION, answers={"user_name": {"name": "Alice"}})
    assert client.checked == 2


def test_basic_elicitation(client: WireClient) -> None:
    first = call(client, ELICITATION)["result"]
    assert first["resultType"] == "input_required"
    ask = first["inputRequests"]["user_name"]
    assert ask["method"] == "elicitation/create"
    assert ask["params"]["requestedSchema"]["required"] == ["name"]
    flow = client.call_tool(ELICITATION, answers={"user_name": {"name": "Alice"}})
    assert flow.rounds == 2 and flow.text == "Hello, Alice!"
    assert flow.result["resultType"] == "complete"


def test_basic_sampling(client: WireClient) -> None:
    flow = client.call_tool("test_input_required_result_sampling",
                            answers={"capital_question": SAMPLED})
    first = next(iter(flow.asked(1).values()))
    assert first["method"] == "sampling/createMessage"
    assert first["params"]["maxTokens"] == 100
    assert flow.text == "Paris"


def test_basic_list_roots(client: WireClient) -> None:
    flow = client.call_tool("test_input_required_result_list_roots",
                            answers={"client_roots": ROOTS})
    assert next(iter(flow.asked(1).values()))["method"] == "roots/list"
    assert flow.text == "Roots: file:///test/root"


def test_request_state(client: WireClient) -> None:
    first = call(client, "test_input_required_result_request_state")["result"]
    schema = first["inputRequests"]["confirm"]["params"]["requestedSchema"]
    assert schema["properties"]["ok"]["type"] == "boolean"
    assert isinstance(first["requestState"], str)
    second = call(client, "test_input_required_result_request_state",
                  requestState=first["requestState"],
                  inputResponses={"confirm": accept({"ok": True})})["result"]
    assert second["resultType"] == "complete"
    assert second["content"] == [{"type": "text", "text": "state-ok: ok=True"}]


def test_multiple_input_requests(client: WireClient) -> None:
    flow = client.call_tool(
        "test_input_required_result_multiple_inputs",
        answers={"user_name": {"name": "Alice"}, "greeting": SAMPLED, "client_roots": ROOTS},
    )
    asked = flow.asked(1)
    assert {r["method"] for r in asked.values()} == {
        "elicitation/create", "sampling/createMessage", "roots/list"}
    assert set(asked) == {"user_name", "greeting", "client_roots"}
    assert "requestState" in flow.replies[0]["result"]
    assert flow.rounds == 2 and flow.text == "Paris Alice (1 roots)"


def test_multi_round(client: WireClient) -> None:
    flow = client.call_tool("test_input_required_result_multi_round",
                            answers={"step1": {"name": "Ann"}, "step2": {"color": "blue"}})
    assert flow.rounds == 3
    assert set(flow.asked(1)) == {"step1"} and set(flow.asked(2)) == {"step2"}
    states = [r["result"]["requestState"] for r in flow.replies[:2]]
    assert states[0] != states[1]
    assert flow.text == "Ann likes blue"


def test_missing_input_response_reasks(client: WireClient) -> None:
    reply = call(client, ELICITATION, inputResponses={"wrong_key": accept({"name": "A"})})
    assert reply["result"]["resultType"] == "input_required"
    assert set(reply["result"]["inputRequests"]) == {"user_name"}


def test_non_tool_request_prompt(client: WireClient) -> None:
    flow = client.get_prompt("test_input_required_result_prompt",
                             answers={"user_context": {"context": "test context"}})
    assert flow.asked(1)["user_context"]["params"]["requestedSchema"]["properties"]["context"][
        "type"] == "string"
    assert flow.result["messages"][0]["content"]["text"] == "Context: test context"


def test_result_type_literal(client: WireClient) -> None:
    raw = client.send_raw(msgspec.json.encode({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": ELICITATION, "arguments": {}, "_meta": client.meta()}}))
    assert raw["result"]["resultType"] == "input_required"


@pytest.mark.parametrize("method", ["tools/list", "prompts/list"])
def test_unsupported_methods_never_input_required(client: WireClient, method: str) -> None:
    result = client.request(method, {})
    assert result["resultType"] == "complete"


def test_tampered_state_is_an_error(client: WireClient) -> None:
    first = call(client, "test_input_required_result_tampered_state")["result"]
    reply = call(client, "test_input_required_result_tampered_state",
                 requestState=first["requestState"] + "-TAMPERED",
                 inputResponses={"user_name": accept({"name": "Eve"})})
    assert reply["error"] == FROZEN_STATE_ERROR


def test_capability_check_only_sampling() -> None:
    with WireClient(app, capabilities={"sampling": {}}) as client:
        result = call(client, "test_input_required_result_capabilities")["result"]
    assert result["resultType"] == "input_required"
    methods = [r["method"] for r in result["inputRequests"].values()]
    assert methods == ["sampling/createMessage"]


def test_ignore_extra_params_completes(client: WireClient) -> None:
    reply = call(client, ELICITATION, inputResponses={
        "user_name": accept({"name": "Alice"}),
        "unknown_extra_key": accept({"x": 1}),
        "another_unexpected": {"roots": []},
    })
    assert reply["result"]["resultType"] == "complete"
    assert reply["result"]["content"][0]["text"] == "Hello, Alice!"


@pytest.mark.parametrize("responses", [{"user_name": 12345}, None])
def test_validate_input_never_completes(client: WireClient, responses: object) -> None:
    reply = call(client, ELICITATION, inputResponses=responses)
    if "error" in reply:
        assert reply["error"]["code"] == -32602
    else:
        assert reply["result"]["resultType"] == "input_required"


# -- server-stateless at the Dispatcher level ----------------------------------------------------
META_KEYS = ("io.modelcontextprotocol/protocolVersion",
             "io.modelcontextprotocol/clientCapabilities")


def raw(client: WireClient, method: str, params: dict[str, Any], rid: int = 41) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    return client.send_raw(msgspec.json.encode(body))


@pytest.mark.parametrize("drop", [None, *META_KEYS])
def test_missing_meta_pieces_are_invalid_params(client: WireClient, drop: str | None) -> None:
    params: dict[str, Any] = {}
    if drop is not None:
        params["_meta"] = {k: v for k, v in client.meta().items() if k != drop}
    reply = raw(client, "server/discover", params)
    assert reply["error"]["code"] == -32602 and reply["id"] == 41


def test_missing_client_info_is_served(client: WireClient) -> None:
    meta = {k: v for k, v in client.meta().items() if k in META_KEYS}
    result = raw(client, "server/discover", {"_meta": meta})["result"]
    assert PROTOCOL_VERSION in result["supportedVersions"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "mrtr-fixture", "version": "1.0.0"}
    assert result["capabilities"]["tools"] == {} and result["capabilities"]["prompts"] == {}


def test_unsupported_version(client: WireClient) -> None:
    meta = client.meta(**{"io.modelcontextprotocol/protocolVersion": "v999.0.0"})
    reply = raw(client, "server/discover", {"_meta": meta}, rid=9)
    error = reply["error"]
    assert error["code"] == -32022 and reply["id"] == 9
    assert error["data"]["requested"] == "v999.0.0"
    supported = client.request("server/discover")["supportedVersions"]
    assert error["data"]["supported"] and set(error["data"]["supported"]) <= set(supported)


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel",
                                    "resources/subscribe", "resources/unsubscribe",
                                    "unknown/method"])
def test_removed_methods_not_found(client: WireClient, method: str) -> None:
    meta = client.meta()
    body = {"jsonrpc": "2.0", "id": "r-1", "method": method, "params": {"_meta": meta}}
    data = msgspec.json.encode(body)
    reply = client.send_raw(data)
    assert reply["error"]["code"] == -32601 and reply["id"] == "r-1"
    served = asyncio.run(client.dispatcher.handle_bytes(data, Peer()))
    assert served is not None and served.http_status == 404


def test_missing_capability_error() -> None:
    with WireClient(app, capabilities={}) as client:
        reply = call(client, "test_missing_capability")
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_tools_list_answers_when_tools_declared(client: WireClient) -> None:
    tools = client.request("tools/list")["tools"]
    assert tools[0]["name"] == "test_simple_text"
    assert all(t["description"] for t in tools)
