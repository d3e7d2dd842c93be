"""Client against mock HTTP servers: the client rules of the conformance scenarios."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from mrtr.client import ClientError, Handlers, InputRefused, TooManyRounds, UnexpectedResult
from mrtr.errors import HeaderMismatch, InvalidParams, UnsupportedProtocolVersion
from mrtr.protocol import TASKS_EXTENSION as TASKS
from mrtr.protocol import ElicitRequestParams, ElicitResult, PromptReference, TextContent

from .mocks import VERSION, JSONDict, MockServer, Reply, client_for, fail, ok

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def accept_all(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirmed": True})


ELICIT = {"method": "elicitation/create", "params": {
    "message": "Confirm?", "requestedSchema": {
        "type": "object", "properties": {"confirmed": {"type": "boolean"}}}}}
ADD = {"name": "add_numbers", "inputSchema": {"type": "object", "properties": {
    "a": {"type": "number"}, "b": {"type": "number"}}}}


def text(value: str) -> JSONDict:
    return {"content": [{"type": "text", "text": value}]}


# -- tools_call and request-metadata ----------------------------------------------------------

def basic(request: JSONDict, headers: dict[str, str]) -> Reply:
    method = request["method"]
    if method == "tools/list":
        return ok(request, {"tools": [ADD], "ttlMs": 0, "cacheScope": "public"})
    if method == "tools/call":
        args = request["params"]["arguments"]
        return ok(request, {"resultType": "complete", **text(str(args["a"] + args["b"]))})
    if method == "server/discover":
        return ok(request, {"supportedVersions": [VERSION], "capabilities": {},
                            "ttlMs": 0, "cacheScope": "public"})
    return fail(request, -32601, "nope", status=404)


def test_tools_call_stamps_meta_and_headers() -> None:
    app = MockServer(basic)

    async def go() -> None:
        async with client_for(app) as client:
            tools = await client.list_tools()
            assert [t.name for t in tools] == ["add_numbers"]
            result = await client.call_tool("add_numbers", {"a": 5, "b": 3})
            assert result.content == [TextContent(text="8")]

    run(go())
    for headers, body in app.seen:
        meta = body["params"]["_meta"]
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {"extensions": {TASKS: {}}}
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mrtr"
        assert headers["mcp-protocol-version"] == VERSION
    assert app.headers_of("tools/call")[0]["mcp-name"] == "add_numbers"


def test_first_request_refused_with_32022_is_retried() -> None:
    refused: list[object] = []

    def handle(request: JSONDict, headers: dict[str, str]) -> Reply:
        if not refused:
            refused.append(request["id"])
            return fail(request, -32022, "Unsupported protocol version",
                        {"supported": [VERSION], "requested": headers["mcp-protocol-version"]})
        return basic(request, headers)

    app = MockServer(handle)
    handlers = Handlers(elicitation=accept_all, roots=[], sampling=None)

    async def go() -> None:
        async with client_for(app, handlers) as client:
            await client.discover()
            await client.list_tools()
            await client.call_tool("add_numbers", {"a": 1, "b": 2})

    run(go())
    first, retry = app.bodies("server/discover")
    assert first["id"] != retry["id"]
    meta = retry["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == VERSION
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {
        "roots": {}, "elicitation": {"form": {}}, "extensions": {TASKS: {}}}


def test_unsupported_version_without_overlap_raises() -> None:
    app = MockServer(lambda r, h: fail(r, -32022, "no", {"supported": ["2099-01-01"],
                                                         "requested": VERSION}))

    async def go() -> None:
        async with client_for(app) as client:
            await client.discover()

    with pytest.raises(UnsupportedProtocolVersion) as info:
        run(go())
    assert info.value.supported == ["2099-01-01"]
    assert len(app.seen) == 1


# -- sep-2322-client-request-state -----------------------------------------------------------

STATE = '{"step":1,"nonce":"\\u00e9 é +/="}'


def mrtr(request: JSONDict, headers: dict[str, str]) -> Reply:
    method, params = request["method"], request["params"]
    if method == "tools/list":
        names = ["test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated",
                 "test_mrtr_no_result_type"]
        return ok(request, {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                                      for n in names]})
    name = params["name"]
    retry = "inputResponses" in params
    if name == "test_mrtr_echo_state" and not retry:
        return ok(request, {"resultType": "input_required", "inputRequests": {"confirm": ELICIT},
                           "requestState": STATE})
    if name == "test_mrtr_no_state" and not retry:
        return ok(request, {"resultType": "input_required", "inputRequests": {"confirm": ELICIT}})
    if name == "test_mrtr_no_result_type":
        return ok(request, text("no type"))
    return ok(request, {"resultType": "complete", **text("ok")})


def test_request_state_rules() -> None:
    app = MockServer(mrtr)

    async def go() -> None:
        async with client_for(app, Handlers(elicitation=accept_all)) as client:
            await client.list_tools()
            await client.call_tool("test_mrtr_echo_state", {})
            await client.call_tool("test_mrtr_unrelated", {})
            await client.call_tool("test_mrtr_no_state", {})
            result = await client.call_tool("test_mrtr_no_result_type", {})
            assert result.content == [TextContent(text="no type")]

    run(go())
    calls = app.bodies("tools/call")
    by_name: dict[str, list[JSONDict]] = {}
    for body in calls:
        by_name.setdefault(body["params"]["name"], []).append(body)
    first, retry = by_name["test_mrtr_echo_state"]
    assert retry["params"]["requestState"] == STATE
    assert retry["params"]["inputResponses"] == {
        "confirm": {"action": "accept", "content": {"confirmed": True}}}
    assert retry["id"] != first["id"]
    (unrelated,) = by_name["test_mrtr_unrelated"]
    assert "inputResponses" not in unrelated["params"]
    assert "requestState" not in unrelated["params"]
    _, no_state_retry = by_name["test_mrtr_no_state"]
    assert "requestState" not in no_state_retry["params"]
    assert len(by_name["test_mrtr_no_result_type"]) == 1
    assert len({b["id"] for b in app.bodies()}) == len(app.seen)


def test_unknown_result_type_is_an_error() -> None:
    app = MockServer(lambda r, h: ok(r, {"resultType": "mystery", **text("x")}) if
                     r["method"] == "tools/call" else ok(r, {"tools": []}))

    async def go() -> None:
        async with client_for(app) as client:
            await client.call_tool("x", {})

    with pytest.raises(ClientError, match="mystery"):
        run(go())
    assert len(app.bodies("tools/call")) == 1


def test_undeclared_capability_fails_locally() -> None:
    app = MockServer(mrtr)

    async def go() -> None:
        async with client_for(app) as client:
            await client.call_tool("test_mrtr_echo_state", {})

    with pytest.raises(InputRefused, match="elicitation was not declared"):
        run(go())
    assert len(app.bodies("tools/call")) == 1


def test_round_cap_and_on_round_hook() -> None:
    def forever(request: JSONDict, headers: dict[str, str]) -> Reply:
        if request["method"] == "tools/list":
            return ok(request, {"tools": []})
        return ok(request, {"resultType": "input_required", "inputRequests": {"k": ELICIT}})

    app = MockServer(forever)
    seen_rounds: list[int] = []

    def hook(round_no: int, requests: object) -> bool:
        seen_rounds.append(round_no)
        return round_no < 2

    async def go(handlers: Handlers, cap: int) -> None:
        async with client_for(app, handlers, max_rounds=cap) as client:
            await client.call_tool("loop", {})

    with pytest.raises(TooManyRounds):
        run(go(Handlers(elicitation=accept_all), 3))
    assert len(app.bodies("tools/call")) == 4
    with pytest.raises(InputRefused, match="on_round"):
        run(go(Handlers(elicitation=accept_all, on_round=hook), 10))
    assert seen_rounds == [1, 2]


def test_deadline_covers_the_whole_flow() -> None:
    async def slow(params: ElicitRequestParams) -> ElicitResult:
        await asyncio.sleep(10)
        raise AssertionError("not reached")

    app = MockServer(mrtr)

    async def go() -> None:
        async with client_for(app, Handlers(elicitation=slow), timeout=0.2) as client:
            await client.call_tool("test_mrtr_echo_state", {})

    with pytest.raises(TimeoutError):
        run(go())


def test_json_rpc_errors_raise_mrtr_errors() -> None:
    app = MockServer(lambda r, h: fail(r, -32602, "Unknown tool: zz", status=200)
                     if r["method"] == "tools/call" else ok(r, {"tools": []}))

    async def go() -> None:
        async with client_for(app) as client:
            await client.call_tool("zz")

    with pytest.raises(InvalidParams, match="Unknown tool"):
        run(go())


# -- http-standard-headers -------------------------------------------------------------------

FILE_URI = "file:///path/to/file%20name.txt"


def standard(request: JSONDict, headers: dict[str, str]) -> Reply:
    method = request["method"]
    if method == "tools/list":
        return ok(request, {"tools": [{"name": n, "inputSchema": {"type": "object"}}
                                      for n in ("test_headers", "my-hyphenated-tool")]})
    if method == "resources/list":
        return ok(request, {"resources": [{"uri": FILE_URI, "name": "f"}, {
            "uri": "https://example.com/resource?id=123", "name": "r"}]})
    if method == "resources/read":
        uri = request["params"]["uri"]
        return ok(request, {"contents": [{"uri": uri, "text": "hi"}]})
    if method == "prompts/list":
        return ok(request, {"prompts": [{"name": "test_prompt"}]})
    if method == "prompts/get":
        return ok(request, {"messages": [{"role": "user", "content": {
            "type": "text", "text": "p"}}]})
    if method == "completion/complete":
        return ok(request, {"completion": {"values": ["a"]}})
    return ok(request, text("ok"))


def test_standard_headers_byte_for_byte() -> None:
    app = MockServer(standard)

    async def go() -> None:
        async with client_for(app) as client:
            for tool in await client.list_tools():
                await client.call_tool(tool.name, {})
            for resource in await client.list_resources():
                await client.read_resource(resource.uri)
            for prompt in await client.list_prompts():
                await client.get_prompt(prompt.name, {})
            await client.complete(PromptReference(name="test_prompt"), "x", "a")

    run(go())
    for headers, body in app.seen:
        assert headers["mcp-method"] == body["method"]
        params = body["params"]
        if body["method"] in ("tools/call", "prompts/get"):
            assert headers["mcp-name"] == params["name"]
        elif body["method"] == "resources/read":
            assert headers["mcp-name"] == params["uri"]
        else:
            assert "mcp-name" not in headers
    assert [h["mcp-name"] for h in app.headers_of("resources/read")][0] == FILE_URI


# -- http-custom-headers and http-invalid-tool-headers ----------------------------------------

CUSTOM = {"name": "test_custom_headers", "inputSchema": {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "method": {"type": "string", "x-mcp-header": "Method"},
    "count": {"type": "integer", "x-mcp-header": "Count"},
    "verbose": {"type": ["boolean", "null"], "x-mcp-header": "Verbose"},
    "note": {"type": "string", "x-mcp-header": "Note"},
    "empty": {"type": "string", "x-mcp-header": "Empty"},
    "float_val": {"type": "number"},
}}}


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def test_custom_headers_are_mirrored() -> None:
    app = MockServer(lambda r, h: ok(r, {"tools": [CUSTOM]}) if r["method"] == "tools/list"
                     else ok(r, text("ok")))

    async def go() -> None:
        async with client_for(app) as client:  # no explicit list: the client lists first
            await client.call_tool("test_custom_headers", {
                "region": "us west", "method": "GET", "count": 42, "verbose": True,
                "note": " café\n", "empty": "", "float_val": 1.5})
            await client.call_tool("test_custom_headers", {"verbose": None, "region": "eu"})

    run(go())
    first, second = app.headers_of("tools/call")
    assert first["mcp-param-region"] == "us west"
    assert first["mcp-param-method"] == "GET" and first["mcp-method"] == "tools/call"
    assert first["mcp-param-count"] == "42" and first["mcp-param-verbose"] == "true"
    assert first["mcp-param-note"] == b64(" café\n")
    assert first["mcp-param-empty"] == ""
    assert not any("float" in k for k in first)
    assert "mcp-param-verbose" not in second and second["mcp-param-region"] == "eu"
    assert len(app.bodies("tools/list")) == 1


INVALID = [
    {"name": "bad_empty", "p": {"type": "string", "x-mcp-header": ""}},
    {"name": "bad_object", "p": {"type": "object", "x-mcp-header": "Obj"}},
    {"name": "bad_number", "p": {"type": "number", "x-mcp-header": "Num"}},
    {"name": "bad_space", "p": {"type": "string", "x-mcp-header": "A B"}},
    {"name": "bad_colon", "p": {"type": "string", "x-mcp-header": "A:B"}},
]


def invalid_tools(request: JSONDict, headers: dict[str, str]) -> Reply:
    if request["method"] == "tools/list":
        tools = [{"name": "valid_tool", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}}}]
        tools += [{"name": t["name"], "inputSchema": {"type": "object", "properties": {
            "p": t["p"]}}} for t in INVALID]
        tools.append({"name": "bad_dup", "inputSchema": {"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "X"},
            "b": {"type": "string", "x-mcp-header": "x"}}}})
        return ok(request, {"tools": tools})
    return ok(request, text("ok"))


def test_invalid_tool_headers_drop_the_tool(caplog: pytest.LogCaptureFixture) -> None:
    app = MockServer(invalid_tools)

    async def go() -> None:
        async with client_for(app) as client:
            tools = await client.list_tools()
            assert [t.name for t in tools] == ["valid_tool"]
            await client.call_tool("valid_tool", {"region": "eu"})
            with pytest.raises(ClientError, match="dropped"):
                await client.call_tool("bad_dup", {"a": "1"})

    with caplog.at_level(logging.WARNING, logger="mrtr.client"):
        run(go())
    assert [b["params"]["name"] for b in app.bodies("tools/call")] == ["valid_tool"]
    assert sum("dropping tool" in r.message for r in caplog.records) == len(INVALID) + 1


def test_schema_ref_is_never_fetched() -> None:
    schema = {"type": "object", "properties": {"profile": {
        "$ref": "http://mock/canary/profile-schema.json"}}}
    app = MockServer(lambda r, h: ok(r, {"tools": [{"name": "lookup_user",
                                                    "inputSchema": schema}]}))

    async def go() -> None:
        async with client_for(app) as client:
            (tool,) = await client.list_tools()
            assert tool.input_schema == schema

    run(go())
    assert app.other_requests == []


# -- caching, progress over SSE ----------------------------------------------------------------

def test_list_tools_is_cached_for_ttl() -> None:
    now = [0.0]
    app = MockServer(lambda r, h: ok(r, {"tools": [ADD], "ttlMs": 1000}))

    async def go() -> None:
        async with client_for(app, clock=lambda: now[0]) as client:
            await client.list_tools()
            await client.list_tools()
            now[0] = 2.0
            await client.list_tools()

    run(go())
    assert len(app.bodies("tools/list")) == 2


def test_pagination_reads_all_pages() -> None:
    def pages(request: JSONDict, headers: dict[str, str]) -> Reply:
        cursor = request["params"].get("cursor")
        if cursor is None:
            return ok(request, {"prompts": [{"name": "a"}], "nextCursor": ""})
        return ok(request, {"prompts": [{"name": "b"}]})

    app = MockServer(pages)

    async def go() -> list[str]:
        async with client_for(app) as client:
            return [p.name for p in await client.list_prompts()]

    assert run(go()) == ["a", "b"]


def test_progress_notifications_over_sse() -> None:
    def handle(request: JSONDict, headers: dict[str, str]) -> Reply:
        if request["method"] == "tools/list":
            return ok(request, {"tools": []})
        token = request["params"]["_meta"]["progressToken"]
        notes = [{"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": token, "progress": p, "total": 2}} for p in (1, 2)]
        notes.append({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": "someone-else", "progress": 9}})
        reply = ok(request, text("done"))
        reply.notifications = notes
        return reply

    app = MockServer(handle)
    seen: list[tuple[float, float | None]] = []

    async def go() -> None:
        async with client_for(app) as client:
            result = await client.call_tool(
                "slow", {}, progress=lambda p, total, msg: seen.append((p, total)))
            assert result.content == [TextContent(text="done")]

    run(go())
    assert seen == [(1, 2), (2, 2)]


# -- recoveries and checks in Client._send (#20 M12, M13) ---------------------------------------

REGION = {"name": "deploy", "inputSchema": {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"}}}}


def test_header_mismatch_relists_the_tools_and_retries_once() -> None:
    # The tool gained an x-mcp-header since the client listed it: the server answers -32020
    # until the client sends Mcp-Param-Region, which it can only know by listing again.
    listed: list[int] = []

    def handle(request: JSONDict, headers: dict[str, str]) -> Reply:
        if request["method"] == "tools/list":
            listed.append(request["id"])
            tool = REGION if len(listed) > 1 else {**REGION, "inputSchema": {"type": "object"}}
            return ok(request, {"tools": [tool], "ttlMs": 60_000})
        if headers.get("mcp-param-region") != "eu":
            return fail(request, -32020, "header mismatch: Mcp-Param-Region")
        return ok(request, text("deployed"))

    app = MockServer(handle)

    async def go() -> None:
        async with client_for(app) as client:
            result = await client.call_tool("deploy", {"region": "eu"})
            assert result.content == [TextContent(text="deployed")]

    run(go())
    first, retry = app.bodies("tools/call")
    assert len(listed) == 2
    assert retry["id"] != first["id"] and retry["params"] == first["params"]
    assert app.headers_of("tools/call")[1]["mcp-param-region"] == "eu"


def test_header_mismatch_is_retried_only_once() -> None:
    app = MockServer(lambda r, h: ok(r, {"tools": [REGION]}) if r["method"] == "tools/list"
                     else fail(r, -32020, "header mismatch"))

    async def go() -> None:
        async with client_for(app) as client:
            await client.call_tool("deploy", {"region": "eu"})

    with pytest.raises(HeaderMismatch):
        run(go())
    assert len(app.bodies("tools/call")) == 2 and len(app.bodies("tools/list")) == 2


@pytest.mark.parametrize("reply_id", [999, "1", None])
def test_a_response_with_another_id_is_rejected(reply_id: object) -> None:
    def handle(request: JSONDict, headers: dict[str, str]) -> Reply:
        reply = ok(request, {"tools": []})
        reply.body["id"] = reply_id if reply_id != "1" else str(request["id"])
        return reply

    async def go() -> None:
        async with client_for(MockServer(handle)) as client:
            await client.list_tools()

    with pytest.raises(UnexpectedResult):
        run(go())
