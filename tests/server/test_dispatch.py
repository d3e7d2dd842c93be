"""Dispatcher: decode, headers, version, method, capability, params — in that order — and one
error translation point (every failure is a reply that echoes the id)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from mrtr import Context, Server
from mrtr.errors import HeaderMismatch, InvalidParams, ParseError
from mrtr.protocol import PROTOCOL_VERSION, CallToolRequest
from mrtr.server import CachePolicy, Dispatcher, Peer, Reply, Sealer
from mrtr.server._peer import NotificationSink
from tests.server.wire import WireClient, check_reply, require_schema

app = Server("disp", version="2.0.0", instructions="Be nice.",
             cache=CachePolicy(ttl_ms=5_000, scope="public"))


@app.tool()
async def sample_me(ctx: Context) -> str:
    return str((await ctx.sample("hi", max_tokens=3, key="s")).model)


@app.tool()
async def echo(text: str) -> str:
    return text


@app.prompt()
async def hello(name: str) -> str:
    return f"Hello {name}"


@app.completion(prompt="hello")
async def complete_name(argument: str, value: str, context: dict[str, str]) -> list[str]:
    return [n for n in ("ann", "anna", "bob") if n.startswith(value)]


@app.resource("mem://many/{n}")
async def many(n: str) -> str:
    return n


@app.completion(resource_template="mem://many/{n}")
async def complete_many(ctx: Context, argument: str, value: str,
                        context: dict[str, str]) -> list[int]:
    assert isinstance(ctx, Context)
    return list(range(150))


@app.completion(prompt="boom")
async def complete_boom(argument: str, value: str, context: dict[str, str]) -> list[str]:
    raise RuntimeError("secret")


@app.completion(prompt="asks")
async def complete_asks(ctx: Context, argument: str, value: str,
                        context: dict[str, str]) -> list[str]:
    return ["yes"] if await ctx.confirm("Really?") else []


bare = Server("bare")


@pytest.fixture()
def client() -> Iterator[WireClient]:
    with WireClient(app) as c:
        yield c


def message(client: WireClient, method: str, params: dict[str, Any] | None = None,
            rid: object = 5, meta: dict[str, object] | None = None) -> bytes:
    body = {"_meta": client.meta(**(meta or {})), **(params or {})}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": body})


def serve(client: WireClient, data: bytes, headers: dict[str, str] | None = None) -> Reply | None:
    async def run() -> Reply | None:
        return await client.dispatcher.handle_bytes(data, Peer(), headers=headers)
    return asyncio.run(run())


def decoded(reply: Reply | None) -> dict[str, Any]:
    assert reply is not None
    return msgspec.json.decode(reply.body)  # type: ignore[no-any-return]


# -- order of checks -----------------------------------------------------------------------------
def test_parse_error_has_no_id(client: WireClient) -> None:
    reply = serve(client, b"{not json")
    assert reply is not None and isinstance(reply.error, ParseError)
    body = decoded(reply)
    assert "id" not in body and body["error"]["code"] == -32700
    check_reply(None, body)


def test_invalid_request_echoes_readable_id(client: WireClient) -> None:
    body = decoded(serve(client, b'{"jsonrpc": "2.0", "id": 3, "method": 7}'))
    assert body["id"] == 3 and body["error"]["code"] == -32600


def test_version_checked_before_method(client: WireClient) -> None:
    meta: dict[str, object] = {"io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    reply = decoded(serve(client, message(client, "unknown/method", meta=meta)))
    assert reply["error"]["code"] in (-32022, -32601)
    reply = decoded(serve(client, message(client, "tools/list", meta=meta)))
    assert reply["error"]["code"] == -32022 and reply["id"] == 5


def test_headers_checked_before_version(client: WireClient) -> None:
    data = message(client, "tools/list", meta={"io.modelcontextprotocol/protocolVersion": "v999"})
    headers = {"mcp-protocol-version": PROTOCOL_VERSION, "mcp-method": "tools/list"}
    reply = serve(client, data, headers)
    assert reply is not None and isinstance(reply.error, HeaderMismatch)
    assert reply.http_status == 400 and decoded(reply)["id"] == 5


def test_matching_headers_pass(client: WireClient) -> None:
    data = message(client, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
    headers = {"mcp-protocol-version": PROTOCOL_VERSION, "mcp-method": "tools/call",
               "mcp-name": "echo"}
    reply = serve(client, data, headers)
    assert reply is not None and reply.http_status == 200 and reply.error is None


def test_wrong_name_header_is_a_mismatch(client: WireClient) -> None:
    data = message(client, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
    headers = {"mcp-protocol-version": PROTOCOL_VERSION, "mcp-method": "tools/call",
               "mcp-name": "other"}
    reply = serve(client, data, headers)
    assert reply is not None and decoded(reply)["error"]["code"] == -32020


def test_receive_returns_the_typed_request(client: WireClient) -> None:
    data = message(client, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
    assert isinstance(client.dispatcher.receive(data), CallToolRequest)


def test_method_not_found_is_404(client: WireClient) -> None:
    reply = serve(client, message(client, "ping"))
    assert reply is not None and reply.http_status == 404
    assert decoded(reply)["error"]["code"] == -32601


def test_unadvertised_method_not_found() -> None:
    with WireClient(bare) as client:
        for method in ("tools/list", "prompts/list", "resources/list"):
            assert client.send(method, {})["error"]["code"] == -32601, method
        reply = client.send("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}})
        assert reply["error"]["code"] == -32601


def test_capability_error_after_method(client: WireClient) -> None:
    client.capabilities = {}
    reply = client.send("tools/call", {"name": "sample_me", "arguments": {}})
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_bad_log_level_is_invalid_params(client: WireClient) -> None:
    reply = client.send("tools/list", {"_meta": client.meta(
        **{"io.modelcontextprotocol/logLevel": "loud"})})
    assert reply["error"]["code"] == -32602


def test_notification_gets_no_reply(client: WireClient) -> None:
    data = msgspec.json.encode({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": 1}})
    assert serve(client, data) is None


def test_string_ids_are_echoed(client: WireClient) -> None:
    reply = decoded(serve(client, message(client, "nope/nope", rid="abc")))
    assert reply["id"] == "abc"


def test_unexpected_exception_is_a_frozen_internal_error(client: WireClient) -> None:
    reply = client.send("completion/complete", {"ref": {"type": "ref/prompt", "name": "boom"},
                                                "argument": {"name": "a", "value": ""}})
    assert reply["error"] == {"code": -32603, "message": "Internal error"}


def test_protocol_errors_from_handlers_pass_through() -> None:
    server = Server("raiser")

    @server.tool()
    async def strict() -> str:
        raise InvalidParams("bad input", data={"field": "x"})

    with WireClient(server) as client:
        reply = client.send("tools/call", {"name": "strict", "arguments": {}})
    assert reply["error"] == {"code": -32602, "message": "bad input", "data": {"field": "x"}}


# -- discover and completion -----------------------------------------------------------------------
def test_discover(client: WireClient) -> None:
    result = client.request("server/discover")
    assert result["supportedVersions"] == [PROTOCOL_VERSION]
    assert result["capabilities"] == {"tools": {}, "prompts": {}, "resources": {},
                                      "completions": {}}
    assert result["instructions"] == "Be nice."
    assert (result["ttlMs"], result["cacheScope"]) == (5_000, "public")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "disp",
                                                                    "version": "2.0.0"}


def test_discover_of_an_empty_server() -> None:
    with WireClient(bare) as client:
        result = client.request("server/discover")
    assert result["capabilities"] == {} and "instructions" not in result


def test_completion(client: WireClient) -> None:
    result = client.request("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "hello"},
        "argument": {"name": "name", "value": "an"}})
    assert result["completion"] == {"values": ["ann", "anna"]}


def test_completion_is_capped_at_100(client: WireClient) -> None:
    result = client.request("completion/complete", {
        "ref": {"type": "ref/resource", "uri": "mem://many/{n}"},
        "argument": {"name": "n", "value": ""}, "context": {"arguments": {"x": "y"}}})
    completion = result["completion"]
    assert len(completion["values"]) == 100 and completion["values"][0] == "0"
    assert completion["total"] == 150 and completion["hasMore"] is True


def test_completion_that_asks_is_an_internal_error_not_a_crash(client: WireClient) -> None:
    reply = client.send("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "asks"}, "argument": {"name": "a", "value": ""}})
    assert reply["error"] == {"code": -32603, "message": "Internal error"}


def test_completion_for_unknown_ref_is_empty(client: WireClient) -> None:
    result = client.request("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "other"}, "argument": {"name": "a", "value": ""}})
    assert result["completion"] == {"values": []}


# -- construction ----------------------------------------------------------------------------------
def test_default_sealer_is_ephemeral_per_dispatcher() -> None:
    one, two = Dispatcher(app), Dispatcher(app)
    assert isinstance(one.sealer, Sealer) and one.sealer is not two.sealer


def test_sink_receives_notifications() -> None:
    server = Server("sinky")

    @server.tool()
    async def tick(ctx: Context) -> str:
        await ctx.report_progress(1)
        return "ok"

    seen: list[msgspec.Struct] = []

    async def sink(notification: msgspec.Struct) -> None:
        seen.append(notification)

    typed: NotificationSink = sink
    dispatcher = Dispatcher(server)
    with WireClient(server) as client:
        data = message(client, "tools/call", {"name": "tick", "arguments": {}},
                       meta={"progressToken": 1})
    reply = asyncio.run(dispatcher.handle_bytes(data, Peer(), sink=typed))
    assert reply is not None and reply.error is None and len(seen) == 1


def test_every_reply_validates(client: WireClient) -> None:
    require_schema()
    client.send("server/discover")
    client.send("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    client.send("ping")
    assert client.checked == 3
