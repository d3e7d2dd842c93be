"""Manual stepping, checkpoints across clients, and the sampling/roots handlers."""

from __future__ import annotations

import asyncio
import json

import pytest

from mrtr.client import ClientError, Handlers, InputRefused
from mrtr.errors import MissingRequiredClientCapability, from_wire
from mrtr.protocol import TASKS_EXTENSION as TASKS
from mrtr.protocol import (
    CallToolResult,
    ClientCapabilities,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitResult,
    Root,
    TextContent,
)

from .mocks import JSONDict, MockServer, Reply, client_for, ok

FORM = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {
    "type": "object", "properties": {"name": {"type": "string"}}}}}
SAMPLE: JSONDict = {"method": "sampling/createMessage", "params": {"maxTokens": 5, "messages": [
    {"role": "user", "content": {"type": "text", "text": "hi"}}]}}
ROOTS = {"method": "roots/list"}


def two_rounds(request: JSONDict, headers: dict[str, str]) -> Reply:
    if request["method"] == "tools/list":
        return ok(request, {"tools": []})
    params = request["params"]
    state = params.get("requestState")
    if state is None:
        return ok(request, {"resultType": "input_required", "inputRequests": {"who": FORM},
                            "requestState": "r1"})
    if state == "r1":
        name = params["inputResponses"]["who"]["content"]["name"]
        return ok(request, {"resultType": "input_required", "requestState": f"r2:{name}",
                            "inputRequests": {"llm": SAMPLE, "where": ROOTS}})
    answers = params["inputResponses"]
    summary = f"{state} {answers['llm']['content']['text']} {answers['where']['roots'][0]['uri']}"
    return ok(request, {"content": [{"type": "text", "text": summary}]})


def test_manual_stepping_with_checkpoint_in_another_client() -> None:
    app = MockServer(two_rounds)

    async def go() -> str:
        async with client_for(app) as first:
            flow = first.start_tool_call("wizard", {"x": 1})
            pending = await flow.step()
            assert list(pending) == ["who"] and isinstance(pending["who"], ElicitRequest)
            pending = await flow.answer({"who": ElicitResult(action="accept",
                                                             content={"name": "Ada"})})
            assert set(pending) == {"llm", "where"} and flow.round == 2
            checkpoint = flow.checkpoint()
        data = json.loads(checkpoint)
        assert data["requestState"] == "r2:Ada" and data["round"] == 2
        async with client_for(app) as second:
            resumed = second.resume(checkpoint)
            assert await resumed.answer({
                "llm": {"role": "assistant", "content": {"type": "text", "text": "yo"},
                        "model": "m"},
                "where": {"roots": [{"uri": "file:///tmp"}]},
            }) == {}
            assert resumed.done
            result = resumed.result
            assert isinstance(result, CallToolResult) and isinstance(result.content[0], TextContent)
            return result.content[0].text

    assert asyncio.run(go()) == "r2:Ada yo file:///tmp"
    retry = app.bodies("tools/call")[-1]
    assert retry["params"]["arguments"] == {"x": 1}
    assert retry["params"]["requestState"] == "r2:Ada"


def test_handlers_answer_a_round_concurrently() -> None:
    app = MockServer(two_rounds)
    running = 0
    peak = 0

    async def elicit(params: object) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "Bo"})

    async def sample(params: CreateMessageRequestParams) -> CreateMessageResult:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return CreateMessageResult(role="assistant", content=TextContent(text="hey"), model="m")

    async def roots() -> list[Root]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return [Root(uri="file:///home")]

    handlers = Handlers(elicitation=elicit, sampling=sample, roots=roots)

    async def go() -> str:
        async with client_for(app, handlers) as client:
            result = await client.call_tool("wizard", {})
            assert isinstance(result.content[0], TextContent)
            return result.content[0].text

    assert asyncio.run(go()) == "r2:Bo hey file:///home"
    assert peak == 2
    caps = app.bodies("tools/call")[0]["params"]["_meta"][
        "io.modelcontextprotocol/clientCapabilities"]
    assert caps == {"elicitation": {"form": {}}, "sampling": {}, "roots": {},
                    "extensions": {TASKS: {}}}


def test_sampling_with_tools_needs_sampling_tools() -> None:
    ask = {"method": "sampling/createMessage", "params": {**SAMPLE["params"], "tools": [
        {"name": "t", "inputSchema": {"type": "object"}}]}}
    app = MockServer(lambda r, h: ok(r, {"tools": []}) if r["method"] == "tools/list" else
                     ok(r, {"resultType": "input_required", "inputRequests": {"s": ask}}))

    async def sample(params: CreateMessageRequestParams) -> CreateMessageResult:
        raise AssertionError("must not be called")

    async def go() -> None:
        async with client_for(app, Handlers(sampling=sample)) as client:
            assert list(await client.start_tool_call("t").step()) == ["s"]
            await client.read_resource("file:///x")

    with pytest.raises(InputRefused, match="sampling with tools"):
        asyncio.run(go())


def test_bad_checkpoint_is_a_client_error() -> None:
    async def go() -> None:
        async with client_for(MockServer(two_rounds)) as client:
            client.resume('{"format": "mrtr-flow/1", "method": "tools/list"}')

    with pytest.raises(ClientError, match="invalid checkpoint"):
        asyncio.run(go())


def test_a_missing_capability_is_named_in_the_message_issue19() -> None:
    error = from_wire({"code": -32021, "message": "Missing required client capability",
                       "data": {"requiredCapabilities": {
                           "elicitation": {"form": {}, "url": {}}, "sampling": {}}}})
    assert isinstance(error, MissingRequiredClientCapability)
    assert str(error) == ("Missing required client capability "
                          "(needs elicitation.form, elicitation.url, sampling)")
    assert error.message == "Missing required client capability"  # the wire text is unchanged
    assert str(from_wire({"code": -32021, "message": "Nope"})) == "Nope"


def test_manual_mode_declares_the_capabilities_given_issue19() -> None:
    app = MockServer(two_rounds)

    async def go() -> None:
        async with client_for(app) as plain:
            await plain.start_tool_call("wizard").step()
        declared = ClientCapabilities(elicitation={"form": {}}, roots={})
        async with client_for(app, capabilities=declared) as manual:
            await manual.start_tool_call("wizard").step()

    asyncio.run(go())
    metas = [b["params"]["_meta"] for b in app.bodies("tools/call")]
    key = "io.modelcontextprotocol/clientCapabilities"
    tasks = {"extensions": {TASKS: {}}}
    assert metas[0][key] == tasks
    assert metas[1][key] == {"elicitation": {"form": {}}, "roots": {}, **tasks}
