"""Dispatcher: decode, headers, version, method, capability, params — in that order — and one
error translation point (every failure is a reply that echoes the id)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
import pytest

from mrtr import Context, Declined, Header, Server
from mrtr.errors import HeaderMismatch, InvalidParams, InvalidRequestState, ParseError
from mrtr.protocol import (
    PROTOCOL_VERSION,
    CallToolRequest,
    PromptMessage,
    TextContent,
    TextResourceContents,
)
from mrtr.server import CachePolicy, Dispatcher, Peer, Reply, Sealer
from mrtr.server._peer import Notifier
from mrtr.server._sealing import Binding
from tests.server import wire
from tests.server.wire import WireClient, check_reply, require_schema

app = Server("disp", version="2.0.0", instructions="Be nice.",
             cache=CachePolicy(ttl_ms=5_000, scope="public"))
bare = Server("bare")


@app.tool()
async def sample_me(ctx: Context) -> str:
    return str((await ctx.sample("hi", max_tokens=3, key="s")).model)


@app.tool()
async def echo(text: str) -> str:
    return text


@app.tool()
async def locate(region: Annotated[str, Header("Region")]) -> str:
    return f"at {region}"


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


@app.completion(prompt="declines")
async def complete_declines(argument: str, value: str, context: dict[str, str]) -> list[str]:
    raise Declined("decline", "Share your history?")


@app.completion(prompt="asks")
async def complete_asks(ctx: Context, argument: str, value: str,
                        context: dict[str, str]) -> list[str]:
    return ["yes"] if await ctx.confirm("Really?") else []



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


@pytest.mark.parametrize(("server", "method", "params"), [
    (app, "unknown/method", {}),  # rejected while decoding (protocol layer)
    (app, "tasks/get", {"taskId": "t-1"}),  # decodes, but this dispatcher has no route for it
    (bare, "tools/list", {}),  # routed, but not advertised by a server without tools
], ids=["undecodable-method", "unrouted-method", "unadvertised-method"])
def test_version_checked_before_method(server: Server, method: str,
                                       params: dict[str, Any]) -> None:
    # A method that would be -32601 with an unsupported version: the version error wins (#20 M06).
    meta: dict[str, object] = {"io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    with WireClient(server) as client:
        reply = serve(client, message(client, method, params, meta=meta))
    assert reply is not None and reply.http_status == 400
    assert decoded(reply) == {"jsonrpc": "2.0", "id": 5, "error": {
        "code": -32022, "message": "Unsupported protocol version",
        "data": {"supported": [PROTOCOL_VERSION], "requested": "v999.0.0"}}}


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


def param_headers(region: str | None) -> dict[str, str]:
    headers = {"mcp-protocol-version": PROTOCOL_VERSION, "mcp-method": "tools/call",
               "mcp-name": "locate"}
    if region is not None:
        headers["mcp-param-region"] = region
    return headers


@pytest.mark.parametrize("region", ["us-west-2", " us-west-2 "])
def test_matching_param_header_passes(client: WireClient, region: str) -> None:
    data = message(client, "tools/call", {"name": "locate", "arguments": {"region": "us-west-2"}})
    reply = serve(client, data, param_headers(region))
    assert reply is not None and reply.error is None
    assert decoded(reply)["result"]["content"] == [{"type": "text", "text": "at us-west-2"}]


@pytest.mark.parametrize("region", ["eu-west-1", None, "US-WEST-2"])
def test_mismatching_param_header_is_rejected(client: WireClient, region: str | None) -> None:
    # A value that differs from the argument, or a missing header, is -32020 / HTTP 400 (#20 M07).
    data = message(client, "tools/call", {"name": "locate", "arguments": {"region": "us-west-2"}})
    with pytest.raises(HeaderMismatch, match="Mcp-Param-Region"):
        client.dispatcher.receive(data, param_headers(region))
    reply = serve(client, data, param_headers(region))
    assert reply is not None and isinstance(reply.error, HeaderMismatch)
    assert reply.http_status == 400
    body = decoded(reply)
    assert body["id"] == 5 and body["error"]["code"] == -32020


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


def test_a_decline_in_any_method_is_invalid_params_issue_11(client: WireClient) -> None:
    # As in prompts and resources (docs/server.md "Errors"): the user's refusal, not a server bug.
    reply = client.send("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "declines"}, "argument": {"name": "a", "value": ""}})
    assert reply["error"] == {"code": -32602,
                              "message": "The user declined the request: Share your history?"}


def test_completion_for_unknown_ref_is_empty(client: WireClient) -> None:
    result = client.request("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "other"}, "argument": {"name": "a", "value": ""}})
    assert result["completion"] == {"values": []}


# -- construction ----------------------------------------------------------------------------------
def test_default_sealer_is_ephemeral_per_dispatcher() -> None:
    # A state sealed by one dispatcher's default key opens there and nowhere else.
    one, two = Dispatcher(app), Dispatcher(app)
    binding = Binding(method="tools/call", target="t", arguments_digest=b"d", principal=None)
    token = one.sealer.seal(b"journal", binding)
    assert one.sealer.unseal(token, binding).body == b"journal"
    with pytest.raises(InvalidRequestState):
        two.sealer.unseal(token, binding)


def test_dispatchers_sharing_a_key_open_each_others_states() -> None:
    key = bytes(range(32))
    one, two = (Dispatcher(app, sealer=Sealer(keys=[key], audience="disp")) for _ in range(2))
    with WireClient(app) as client:
        client.dispatcher = one
        first = client.send("tools/call", {"name": "sample_me", "arguments": {}})["result"]
        client.dispatcher = two
        answer = {"role": "assistant", "content": {"type": "text", "text": "hi"},
                  "model": "m-1", "stopReason": "endTurn"}
        second = client.send("tools/call", {"name": "sample_me", "arguments": {},
                                            "requestState": first["requestState"],
                                            "inputResponses": {"s": answer}})
    assert second["result"]["content"] == [{"type": "text", "text": "m-1"}]


def test_sink_receives_notifications() -> None:
    server = Server("sinky")

    @server.tool()
    async def tick(ctx: Context) -> str:
        await ctx.report_progress(1)
        return "ok"

    seen: list[msgspec.Struct] = []

    async def sink(notification: msgspec.Struct) -> None:
        seen.append(notification)

    typed: Notifier = sink
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


def test_without_the_schema_behaviour_still_runs_and_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "_schema", lambda: None)
    before = wire.UNCHECKED["tools/call"]
    with WireClient(app) as client:
        result = client.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    assert result["content"] == [{"type": "text", "text": "x"}]
    assert wire.UNCHECKED["tools/call"] == before + 1
    with pytest.raises(pytest.skip.Exception, match=r"\.\./shared is absent"):
        require_schema()


# -- replies JSON cannot carry (#11): a -32603 reply, never a crash in the transport -------------
LONE_SURROGATE = "\ud800"
unsendable = Server("unsendable", version="1.0.0")


@unsendable.prompt()
async def complex_text() -> PromptMessage:
    return PromptMessage(role="user", content=TextContent(text=1j))  # type: ignore[arg-type]


@unsendable.prompt()
async def surrogate_text() -> str:
    return f"half a pair: {LONE_SURROGATE}"


@unsendable.resource("mem://surrogate")
async def surrogate_resource() -> str:
    return LONE_SURROGATE


@unsendable.resource("mem://contents")
async def contents_resource() -> TextResourceContents:
    return TextResourceContents(uri="mem://contents", text=object())  # type: ignore[arg-type]


@unsendable.completion(prompt="surrogate_text")
async def complete_surrogate(argument: str, value: str, context: dict[str, str]) -> list[str]:
    return [LONE_SURROGATE]


@unsendable.tool()
async def bad_error_message() -> str:
    raise InvalidParams(f"bad {LONE_SURROGATE}")


UNSENDABLE_REQUESTS = [
    ("prompts/get", {"name": "complex_text"}),
    ("prompts/get", {"name": "surrogate_text"}),
    ("resources/read", {"uri": "mem://surrogate"}),
    ("resources/read", {"uri": "mem://contents"}),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "surrogate_text"},
                             "argument": {"name": "a", "value": ""}}),
    ("tools/call", {"name": "bad_error_message", "arguments": {}}),
]


@pytest.mark.parametrize(("method", "params"), UNSENDABLE_REQUESTS)
def test_a_reply_json_cannot_carry_is_a_frozen_internal_error_issue_11(
    method: str, params: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with WireClient(unsendable) as client, caplog.at_level(logging.INFO, "mrtr.server"):
        reply = client.send(method, params)
    assert reply["error"] == {"code": -32603, "message": "Internal error"}
    reasons = [r for r in caplog.records if r.levelno == logging.ERROR and r.exc_info]
    assert reasons, "the reason (TypeError, UnicodeEncodeError) goes to the log"


def test_a_reply_json_cannot_carry_is_http_500_issue_11() -> None:
    dispatcher = Dispatcher(unsendable)
    with WireClient(unsendable) as client:
        request = message(client, "prompts/get", {"name": "complex_text"}, rid=9)
    reply = asyncio.run(dispatcher.handle(dispatcher.receive(request), Peer()))
    assert reply.http_status == 500 and reply.request_id == 9
    assert decoded(reply) == {"jsonrpc": "2.0", "id": 9,
                              "error": {"code": -32603, "message": "Internal error"}}


def test_server_text_json_cannot_carry_is_an_internal_error_for_any_method_issue_11() -> None:
    server = Server("odd", instructions=f"read me {LONE_SURROGATE}")
    with WireClient(server) as client:
        reply = client.send("server/discover")
    assert reply["error"] == {"code": -32603, "message": "Internal error"}


buggy = Server("buggy")


@buggy.tool()
async def boom() -> str:
    return str(1 // 0)


@buggy.prompt()
async def broken_prompt() -> str:
    raise KeyError("no such template")


def _call(dispatcher: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {}}}}
    reply = asyncio.run(dispatcher.handle_bytes(msgspec.json.encode(message), Peer()))
    assert reply is not None
    decoded: dict[str, Any] = msgspec.json.decode(reply.body)
    return decoded


def test_expose_errors_shows_a_bug_to_the_client_and_replace_keeps_it_issue27() -> None:
    masked = Dispatcher(buggy)
    dev = masked.replace(expose_errors=True)
    assert not masked.expose_errors and dev.expose_errors and dev.replace().expose_errors
    assert not dev.replace(expose_errors=False).expose_errors
    tool = {"name": "boom", "arguments": {}}
    assert _call(masked, "tools/call", tool)["result"]["content"][0]["text"] == (
        "Tool boom failed.")
    assert _call(dev, "tools/call", tool)["result"]["content"][0]["text"] == (
        "Tool boom failed: ZeroDivisionError: integer division or modulo by zero")
    prompt = {"name": "broken_prompt"}
    assert _call(masked, "prompts/get", prompt)["error"]["message"] == "Internal error"
    assert _call(dev, "prompts/get", prompt)["error"]["message"] == (
        "Internal error: KeyError: 'no such template'")
