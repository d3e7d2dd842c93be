"""SessionServer (#12): initialize clients served by the same handlers, asks pushed to them."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from msgspec import Meta

from mrtr.protocol import UNSET, TextContent
from mrtr.server import Context, Dispatcher, Form, Peer, Server, Session, SessionServer
from mrtr.stores import MemoryStore

PEER = Peer(principal=None, transport="test")
app = Server("sessions-test", version="1.0.0", instructions="Be kind.")
BOOKED: list[str] = []


class Details(Form):
    boxes: Annotated[int, Meta(ge=1, le=5)]


class Name(Form):
    name: str


@app.tool()
async def book(ctx: Context, order: str) -> str:
    """A side effect between two asks: replayed rounds must not repeat it."""
    details = await ctx.elicit("How many boxes?", Details, key="details")
    number = await ctx.once("book", lambda: BOOKED.append(order) or len(BOOKED))
    if not await ctx.confirm(f"Booked #{number}. Send the label?", key="confirm"):
        return f"booked #{number}, no label"
    return f"booked #{number} with {details.boxes} boxes, label sent"


@app.tool()
async def open_page(ctx: Context) -> str:
    """A URL-mode elicitation."""
    await ctx.elicit_url("Sign in, please", "https://example.com/sign-in", key="signin")
    return "signed in"


@app.tool()
async def ask_model(ctx: Context) -> str:
    """A sampling ask."""
    reply = await ctx.sample("Say hi", max_tokens=5, key="hi")
    return reply.content.text if isinstance(reply.content, TextContent) else "?"


@app.tool()
async def chatty(ctx: Context) -> str:
    """Logs at info and at error."""
    await ctx.log("info", "an info line")
    await ctx.log("error", "an error line")
    return "done"


@app.tool()
async def capabilities(ctx: Context) -> str:
    """Echoes the client capabilities the handler sees."""
    return json.dumps(ctx.client_capabilities.elicitation)


@app.tool()
async def who(ctx: Context) -> str:
    """Echoes the client's name and which capabilities it has; reports progress."""
    await ctx.report_progress(1, 2)
    info, caps = ctx.client_info, ctx.client_capabilities
    return json.dumps([info.name if info else None, caps.elicitation is not UNSET,
                       caps.sampling is not UNSET])


@app.resource("test://doc", mime_type="text/plain")
def doc() -> str:
    """A document."""
    return "text"


Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


class Client:
    """Plays an initialize client: records what the server sends and answers its requests."""

    def __init__(self, server: SessionServer, session: Session, answer: Answer) -> None:
        self.server = server
        self.session = session
        self.answer = answer
        self.sent: list[dict[str, Any]] = []
        self.tasks: list[asyncio.Task[Any]] = []

    async def outbound(self, message: bytes) -> None:
        decoded = json.loads(message)
        self.sent.append(decoded)
        if "id" in decoded and "method" in decoded:
            reply = self.answer(decoded)
            if reply is not None:
                response = {"jsonrpc": "2.0", "id": decoded["id"], **reply}
                self.tasks.append(asyncio.create_task(
                    self.server.serve(self.session, response, PEER, self.outbound)))

    def requests(self, method: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.sent if "id" in m and (method is None or m["method"] == method)]

    async def call(self, method: str, params: dict[str, Any], id: int = 7) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
        body = await self.server.serve(self.session, message, PEER, self.outbound)
        assert body is not None
        reply: dict[str, Any] = json.loads(body)
        return reply


def open_session(
    answer: Answer, *, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None,
    ask_timeout: float = 5.0,
) -> Client:
    server = SessionServer(Dispatcher(app), ask_timeout=ask_timeout)
    caps = {"elicitation": {"form": {}, "url": {}}, "sampling": {}} if capabilities is None else (
        capabilities)
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": caps,
        "clientInfo": {"name": "t", "version": "1"}}}
    session, _ = server.initialize(message, PEER)
    assert session is not None
    return Client(server, session, answer)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


# -- initialize ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("requested", "negotiated"), [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2026-07-28", "2025-11-25"), ("1999-01-01", "2025-11-25"), ("v999", "2025-11-25"),
])
def test_initialize_negotiates_a_2025_version(requested: str, negotiated: str) -> None:
    server = SessionServer(Dispatcher(app))
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": requested, "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"}}}
    session, body = server.initialize(message, PEER)
    result = json.loads(body)["result"]
    assert session is not None and session.version == negotiated
    assert result["protocolVersion"] == negotiated
    assert result["serverInfo"] == {"name": "sessions-test", "version": "1.0.0"}
    assert result["instructions"] == "Be kind."
    assert result["capabilities"]["logging"] == {}
    assert result["capabilities"]["resources"] == {"subscribe": True}
    assert "resultType" not in result


def test_initialize_without_a_version_names_the_supported_ones() -> None:
    server = SessionServer(Dispatcher(app))
    session, body = server.initialize({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                       "params": {"capabilities": {}}}, PEER)
    error = json.loads(body)["error"]
    assert session is None and error["code"] == -32602
    assert error["data"]["supported"] == ["2025-11-25", "2025-06-18", "2025-03-26"]


# -- utilities ----------------------------------------------------------------------------------
def test_ping_set_level_and_subscribe_answer_exactly_an_empty_object() -> None:
    client = open_session(lambda m: None)

    async def scenario() -> None:
        assert (await client.call("ping", {}))["result"] == {}
        assert (await client.call("logging/setLevel", {"level": "info"}))["result"] == {}
        assert (await client.call("resources/subscribe", {"uri": "test://doc"}))["result"] == {}
        assert client.session.subscriptions == {"test://doc"}
        assert (await client.call("resources/unsubscribe", {"uri": "test://doc"}))["result"] == {}
        assert (await client.call("logging/setLevel", {"level": "loud"}))["error"]["code"] == -32602
        missing = await client.call("resources/subscribe", {"uri": "test://nope"})
        assert missing["error"]["code"] == -32002

    run(scenario())


def test_results_lose_the_2026_envelope_and_not_found_is_32002() -> None:
    client = open_session(lambda m: None)

    async def scenario() -> None:
        listed = (await client.call("tools/list", {}))["result"]
        assert "tools" in listed
        assert not {"resultType", "ttlMs", "cacheScope", "_meta"} & set(listed)
        read = (await client.call("resources/read", {"uri": "test://doc"}))["result"]
        assert read == {"contents": [{"uri": "test://doc", "mimeType": "text/plain",
                                      "text": "text"}]}
        missing = await client.call("resources/read", {"uri": "test://gone"})
        assert missing["error"]["code"] == -32002 and missing["error"]["data"]["uri"] == "test://gone"

    run(scenario())


def test_log_notifications_follow_the_session_level() -> None:
    client = open_session(lambda m: None)

    async def scenario() -> list[str]:
        await client.call("tools/call", {"name": "chatty", "arguments": {}}, id=1)
        assert not client.sent  # no level set yet: the server chose silence
        await client.call("logging/setLevel", {"level": "warning"}, id=2)
        await client.call("tools/call", {"name": "chatty", "arguments": {}}, id=3)
        return [m["params"]["level"] for m in client.sent]

    assert run(scenario()) == ["error"]


def test_modern_meta_on_a_session_is_served_statelessly() -> None:
    client = open_session(lambda m: None)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    reply = run(client.call("tools/call", {"name": "book", "arguments": {"order": "m"},
                                           "_meta": meta}))
    assert reply["result"]["resultType"] == "input_required"  # MRTR, not a pushed request
    assert client.requests() == []


def test_26_a_requests_meta_cannot_override_what_the_session_negotiated() -> None:
    # A 2025-03-26 session negotiated no elicitation and set no log level; a request's `_meta`
    # claiming elicitation and sampling, another client and debug logs changes none of that.
    # Other `_meta` keys pass: the progress token still reaches the handler.
    forged = {"io.modelcontextprotocol/clientCapabilities": {
                  "elicitation": {"form": {}, "url": {}}, "sampling": {}},
              "io.modelcontextprotocol/clientInfo": {"name": "forged", "version": "9"},
              "io.modelcontextprotocol/logLevel": "debug", "progressToken": "p-1"}
    client = open_session(lambda m: {"result": {"action": "accept"}}, version="2025-03-26",
                          capabilities={})

    def call(name: str, id: int, **arguments: str) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "_meta": forged}
        return run(client.call("tools/call", params, id=id))

    booked = call("book", 2, order="F")
    assert booked["result"]["isError"] is True and client.requests() == []  # never pushed
    assert json.loads(call("who", 3)["result"]["content"][0]["text"]) == ["t", False, False]
    call("chatty", 4)
    assert [m["method"] for m in client.sent] == ["notifications/progress"]  # no log lines
    assert client.sent[0]["params"]["progressToken"] == "p-1"
    # And the other way: a request claiming less keeps what the session negotiated.
    rich = open_session(lambda m: None)
    reply = run(rich.call("tools/call", {"name": "capabilities", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/clientCapabilities": {}}}))
    assert json.loads(reply["result"]["content"][0]["text"]) == {"form": {}, "url": {}}


# -- pushed asks --------------------------------------------------------------------------------
def test_reask_with_feedback_and_the_side_effect_runs_once() -> None:
    BOOKED.clear()
    boxes = iter([9, 3])

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        schema = request["params"]["requestedSchema"]
        if "boxes" in schema["properties"]:
            return {"result": {"action": "accept", "content": {"boxes": next(boxes)}}}
        return {"result": {"action": "accept", "content": {"confirm": True}}}

    client = open_session(answer)
    reply = run(client.call("tools/call", {"name": "book", "arguments": {"order": "A-1"}}))
    assert reply["result"]["content"][0]["text"] == "booked #1 with 3 boxes, label sent"
    assert "isError" not in reply["result"] and "resultType" not in reply["result"]
    asked = [m["params"]["message"] for m in client.requests("elicitation/create")]
    assert len(asked) == 3 and asked[0] == "How many boxes?"
    assert asked[1] != asked[0] and "How many boxes?" in asked[1]  # the re-ask says what was wrong
    assert BOOKED == ["A-1"]  # three rounds replayed the handler, the booking ran once


def test_a_decline_gives_the_declined_result() -> None:
    client = open_session(lambda m: {"result": {"action": "decline"}})
    reply = run(client.call("tools/call", {"name": "book", "arguments": {"order": "B"}}))
    assert reply["result"]["isError"] is True
    assert "declined" in reply["result"]["content"][0]["text"]


def test_an_unanswered_ask_times_out_as_an_error_result() -> None:
    client = open_session(lambda m: None, ask_timeout=0.05)
    reply = run(client.call("tools/call", {"name": "book", "arguments": {"order": "C"}}))
    assert reply["result"]["isError"] is True
    assert "did not answer the elicitation/create request" in reply["result"]["content"][0]["text"]


def test_a_client_error_to_sampling_is_an_error_result() -> None:
    client = open_session(lambda m: {"error": {"code": -1, "message": "User rejected"}})
    reply = run(client.call("tools/call", {"name": "ask_model", "arguments": {}}))
    assert reply["result"]["isError"] is True
    assert "User rejected" in reply["result"]["content"][0]["text"]


def test_sampling_is_pushed_and_answered() -> None:
    answer = {"result": {"role": "assistant", "content": {"type": "text", "text": "hello"},
                         "model": "m"}}
    client = open_session(lambda m: answer)
    reply = run(client.call("tools/call", {"name": "ask_model", "arguments": {}}))
    assert reply["result"]["content"][0]["text"] == "hello"
    assert client.requests("sampling/createMessage")[0]["params"]["maxTokens"] == 5


def test_responses_to_unknown_ids_are_ignored_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    client = open_session(lambda m: None)
    with caplog.at_level(logging.INFO, "mrtr.server.session"):
        out = run(client.server.serve(client.session, {"jsonrpc": "2.0", "id": 424242,
                                                       "result": {}}, PEER, client.outbound))
    assert out is None
    assert "server request id 424242, which this session never issued" in caplog.text


def test_26_responses_to_ids_never_issued_are_dropped_never_stored_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before #26 each went to the store for the ask timeout (600 s) whatever its size: another
    # process might have sent the request. Only ids this session issued may now go there.
    store = MemoryStore()
    server = SessionServer(Dispatcher(app, store=store), ask_timeout=5.0)
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}}}
    session, _ = server.initialize(message, PEER)
    assert session is not None
    there = SessionServer(Dispatcher(app, sealer=server.dispatcher.sealer, store=store))
    elsewhere = run(there.sessions.get(session.id, None))
    issued = elsewhere._new_id(5.0)  # a request the other process sent: it may await this
    number, expiry, tag = issued.split(".")
    strays = [4242, "s-1", None, f"{number}.{expiry}.{'A' * len(tag)}", issued + "0",
              f"{int(number) + 1}.{expiry}.{tag}"]

    async def post(request_id: object) -> None:
        response = {"jsonrpc": "2.0", "id": request_id, "result": {"blob": "x" * 100_000}}
        assert await server.serve(session, response, PEER, lambda m: asyncio.sleep(0)) is None

    with caplog.at_level(logging.INFO, "mrtr.server.session"):
        for request_id in strays * 20:
            run(post(request_id))
        assert len(store._entries) == 0  # nothing stored
        run(post(issued))
    dropped = [r for r in caplog.records if "never issued" in r.getMessage()]
    assert len(dropped) == 1 and dropped[0].levelno == logging.WARNING
    answers = [key for key in store._entries if ":answer:" in key]
    assert len(answers) == 1  # the answer to the real request: for the process awaiting it
    assert session.strays == 120


def test_url_elicitation_carries_an_id_and_completes() -> None:
    client = open_session(lambda m: {"result": {"action": "accept"}})
    reply = run(client.call("tools/call", {"name": "open_page", "arguments": {}}))
    assert reply["result"]["content"][0]["text"] == "signed in"
    request = client.requests("elicitation/create")[0]["params"]
    assert request["mode"] == "url" and request["elicitationId"]
    done = [m for m in client.sent if m.get("method") == "notifications/elicitation/complete"]
    assert done == [{"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                     "params": {"elicitationId": request["elicitationId"]}}]


def test_a_2025_06_18_session_gets_form_only_without_mode() -> None:
    client = open_session(lambda m: {"result": {"action": "accept"}}, version="2025-06-18")
    caps = run(client.call("tools/call", {"name": "capabilities", "arguments": {}}, id=1))
    assert json.loads(caps["result"]["content"][0]["text"]) == {"form": {}}
    url = run(client.call("tools/call", {"name": "open_page", "arguments": {}}, id=2))
    assert url["result"]["isError"] is True and client.requests() == []  # never sent: no url mode

    client = open_session(lambda m: {"result": {"action": "decline"}}, version="2025-06-18")
    run(client.call("tools/call", {"name": "book", "arguments": {"order": "D"}}))
    assert "mode" not in client.requests("elicitation/create")[0]["params"]


def test_cancelled_notification_stops_the_request() -> None:
    client = open_session(lambda m: None)

    async def scenario() -> bytes | None:
        message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                   "params": {"name": "book", "arguments": {"order": "E"}}}
        call = asyncio.create_task(client.server.serve(client.session, message, PEER,
                                                       client.outbound))
        while not client.requests():
            await asyncio.sleep(0.01)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 9}}
        assert await client.server.serve(client.session, cancel, PEER, client.outbound) is None
        return await call  # the transport's task carries on; the request ends without a reply

    assert run(scenario()) is None
    assert not client.session.inflight


def test_resource_updates_reach_subscribed_sessions_with_a_stream() -> None:
    client = open_session(lambda m: None)
    other = Client(client.server, client.server.sessions.open(client.session.info, None),
                   lambda m: None)

    async def scenario() -> None:
        client.session.streams.append(client.outbound)
        other.session.streams.append(other.outbound)  # open stream, but not subscribed
        await client.call("resources/subscribe", {"uri": "test://doc"})
        await client.server.resource_updated("test://doc")
        await client.server.resource_updated("test://elsewhere")

    run(scenario())
    assert client.sent == [{"jsonrpc": "2.0", "method": "notifications/resources/updated",
                            "params": {"uri": "test://doc"}}]
    assert other.sent == []


def test_27_a_missing_capability_is_named_as_a_dotted_path_not_a_python_dict() -> None:
    # Before: "... the session lacks: {'requiredCapabilities': {'sampling': {}}}".
    client = open_session(lambda m: None, capabilities={"elicitation": {"form": {}}})
    reply = run(client.call("tools/call", {"name": "ask_model", "arguments": {}}))
    assert reply["result"]["isError"] is True
    assert reply["result"]["content"][0]["text"] == (
        "This tool needs a client capability the session did not declare at initialize: "
        "sampling.")
    assert client.requests() == []


def test_27_a_session_is_asked_as_many_rounds_as_mrtr_s_own_client_allows() -> None:
    # Before: 16 (the Dispatcher's flow cap), while the Client and `mrtr call` give up after
    # 10. A client answering what never fits is now asked 10 times, then the tool stops.
    client = open_session(lambda m: {"result": {"action": "accept", "content": {"boxes": 9}}})
    reply = run(client.call("tools/call", {"name": "book", "arguments": {"order": "Z"}}))
    assert len(client.requests("elicitation/create")) == 10
    assert reply["result"] == {"content": [{"type": "text", "text": (
        "Still asking after 10 rounds of questions, so the call stopped.")}], "isError": True}
    legacy = " ".join((Path(__file__).parents[2] / "docs" / "legacy.md").read_text().split())
    assert "for at most 10 rounds of questions per call, as mrtr's own client allows" in legacy


def test_27_a_lower_dispatcher_cap_still_wins_in_a_session() -> None:
    server = SessionServer(Dispatcher(app, max_rounds=3))
    assert server.max_rounds == 3 and SessionServer(Dispatcher(app)).max_rounds == 10
