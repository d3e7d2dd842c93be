"""SessionEndpoint: the `initialize` side of McpApp (Streamable HTTP as of 2025-11-25).

POST `initialize` opens a session (`Mcp-Session-Id`); later POSTs carry the id; GET opens the
session's server→client SSE stream; DELETE ends the session. Requests whose
handlers may ask are answered on an SSE stream that also carries the server→client requests.
"""

# Design: McpApp only calls in here when a message failed the 2026-07-28 decode and carried no
# 2026 version header (or for GET/DELETE with a session id), so the stateless path pays nothing.
# A body with 2026 `_meta` gets the 2026 error it earned. Unknown, forged, expired and terminated
# ids are 404 (-32001, as the official SDKs answer); a request without an id is 400. A session
# cap is 429 with Retry-After; an anonymous caller counts by the ASGI scope's `client` address
# (behind a proxy: the address uvicorn takes from a trusted proxy's X-Forwarded-For). A tool call
# is checked for scopes before its stream opens, so it is refused as a 2026 one is (403). Every
# refusal is built by the error policy (mrtr.server._failures). A client disconnect cancels the
# handler, as on the stateless path.
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from mrtr.errors import ProtocolError
from mrtr.http._exchange import Exchange
from mrtr.protocol import (
    LEGACY_VERSIONS,
    PROTOCOL_VERSION_KEY,
    SSE_KEEPALIVE,
    JSONObject,
    encode_sse_event,
)
from mrtr.server import Peer, Session, SessionLimits, SessionServer
from mrtr.server._failures import (
    Refusal,
    batch_refused,
    error_refusal,
    not_a_request,
    not_json,
    scope_refusal,
    session_not_found,
    session_required,
    session_version,
)
from mrtr.server.sessions._server import STREAMED
from mrtr.server.sessions._session import Outbound, UnknownSession

if TYPE_CHECKING:
    from mrtr.http._app import ASGIScope, McpApp

__all__ = ["SessionEndpoint", "session_era"]

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def session_era(headers: Mapping[str, str]) -> bool:
    """True unless `MCP-Protocol-Version` names a version served without sessions."""
    version = headers.get("mcp-protocol-version")
    return version is None or version.strip() in LEGACY_VERSIONS


class SessionEndpoint:
    """Serves the session traffic of one McpApp through one SessionServer."""

    def __init__(self, app: McpApp, *, ask_timeout: float,
                 limits: SessionLimits | None = None) -> None:
        self.app = app
        self.ask_timeout = ask_timeout
        self.limits = limits
        self._server: SessionServer | None = None

    @property
    def server(self) -> SessionServer:
        """The SessionServer of the app's current Dispatcher (`mrtr serve` may swap it to
        install the shared keys after the app was built)."""
        server = self._server
        if server is None or server.dispatcher is not self.app.dispatcher:
            server = self._server = SessionServer(self.app.dispatcher,
                                                  ask_timeout=self.ask_timeout,
                                                  limits=self.limits)
        return server

    # -- POST ----------------------------------------------------------------------------------
    async def post(
        self,
        body: bytes,
        scope: ASGIScope,
        headers: Mapping[str, str],
        principal: str | None,
        exchange: Exchange,
        fallback: ProtocolError | None,
    ) -> None:
        """Serve one POSTed message; `fallback` is the 2026 error to send if it is not ours."""
        try:
            message = msgspec.json.decode(body)
        except msgspec.DecodeError:
            message = None
        if not isinstance(message, dict | list) or _has_modern_meta(message):
            await _refuse(exchange, not_json(fallback))
            return
        peer = self.app.peer_for(principal)  # scopes from the authenticator, as for 2026
        address = _address(scope)
        if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
            try:
                session, reply = self.server.initialize(message, peer, address=address)
            except ProtocolError as exc:  # a session cap (429)
                await _refuse(exchange, error_refusal(exc, _id(message.get("id"))))
                return
            extra = [(b"mcp-session-id", session.id.encode())] if session is not None else []
            await exchange.respond(200, reply, extra)
            return
        session = await self._session(headers, principal, address, exchange,
                                      _request_id(message))
        if session is None:
            return
        if isinstance(message, list):
            await self._batch(session, message, peer, exchange)
            return
        if "id" not in message or not isinstance(message.get("method"), str):
            await self.server.serve(session, message, peer, _nowhere)
            await exchange.respond(202, b"")
            return
        if message["method"] not in STREAMED:
            answer = await self.server.serve(session, message, peer, _nowhere)
            await exchange.respond(200, answer or b"")
            return
        if message["method"] == "tools/call":
            self._authorize(scope, headers, session, message, peer)  # before the stream opens
        await _stream(self.app, exchange,
                      lambda out: self.server.serve(session, message, peer, out))

    async def _batch(
        self, session: Session, messages: list[Any], peer: Peer, exchange: Exchange
    ) -> None:
        """A JSON-RPC batch (2025-03-26): replies are events of one SSE stream."""
        if session.version != "2025-03-26" or not messages:
            await _refuse(exchange, batch_refused())
            return

        async def work(out: Outbound) -> None:
            async def one(item: object) -> None:
                if not isinstance(item, dict):
                    await out(not_a_request())
                    return
                reply = await self.server.serve(session, item, peer, out)
                if reply is not None:
                    await out(reply)

            await asyncio.gather(*(one(item) for item in messages))

        await _stream(self.app, exchange, work)

    # -- GET and DELETE ------------------------------------------------------------------------
    async def other(
        self, method: str, scope: ASGIScope, headers: Mapping[str, str], principal: str | None,
        exchange: Exchange,
    ) -> None:
        """GET: the session's server→client stream; DELETE: end the session everywhere."""
        session = await self._session(headers, principal, _address(scope), exchange, None)
        if session is None:
            return
        if method == "DELETE":
            try:
                await self.server.sessions.end(session)
            except ProtocolError as exc:  # the store is down, or the client's cap of ends
                await _refuse(exchange, error_refusal(exc))
                return
            await exchange.respond(200, b"")
            return

        async def listen(out: Outbound) -> None:
            session.streams.append(out)
            try:  # a DELETE another process served ends it too: asked every keep-alive
                while not session.closed.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.app.keepalive):
                            await session.closed.wait()
                    if not session.closed.is_set():
                        await self.server.sessions.refresh(session)
            finally:
                session.streams.remove(out)

        await _stream(self.app, exchange, listen)

    async def _session(
        self,
        headers: Mapping[str, str],
        principal: str | None,
        address: str | None,
        exchange: Exchange,
        request_id: object,
    ) -> Session | None:
        """The session the request names; None after refusing the request (400, 404, a cap's
        429, or 503 when the store cannot say whether the session was terminated)."""
        rid = _id(request_id)
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            await _refuse(exchange, session_required(rid))
            return None
        try:
            session = await self.server.sessions.get(session_id.strip(), principal,
                                                     address=address)
        except UnknownSession:
            await _refuse(exchange, session_not_found(rid))
            return None
        except ProtocolError as exc:
            await _refuse(exchange, error_refusal(exc, rid))
            return None
        version = headers.get("mcp-protocol-version")
        if version is not None and version.strip() != session.version:
            await _refuse(exchange, session_version(rid, session.version))
            return None
        return session

    def _authorize(self, scope: ASGIScope, headers: Mapping[str, str], session: Session,
                   message: JSONObject, peer: Peer) -> None:
        """Refuse a session's tool call as a 2026-07-28 one is refused (raises a Refusal, 403):
        the guard's check of it in its 2026 form, else the Runner's own scope rule."""
        if self.app.guard is not None:
            request = self.server.as_request(session, message)
            if request is not None:
                self.app.authorize(scope, headers, request, peer)
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        entry = self.app.dispatcher.server.tables.tools.get(name) if isinstance(name, str) \
            else None
        if entry is not None and entry.scopes and not peer.allows(entry.scopes):
            rid = message.get("id")
            raise scope_refusal(rid if isinstance(rid, str | int) else None, entry.scopes)


async def _refuse(exchange: Exchange, refusal: Refusal) -> None:
    await exchange.respond(refusal.status, refusal.body, refusal.headers)


async def _nowhere(message: bytes) -> None:
    """The Outbound of a request answered as JSON: nothing may go out before the reply."""


async def _stream(
    app: McpApp, exchange: Exchange, work: Callable[[Outbound], Awaitable[bytes | None]]
) -> None:
    """Answer with an SSE stream: `work` writes events through its Outbound, then its reply
    (if any) is the last event. A client disconnect cancels `work`."""
    await _EventStream(app, exchange).run(work)


class _EventStream:
    """One SSE response: whole-event writes under a lock, keep-alives, disconnect → cancel."""

    def __init__(self, app: McpApp, exchange: Exchange) -> None:
        self.app = app
        self.exchange = exchange
        self.lock = asyncio.Lock()
        self.task: asyncio.Task[Any] | None = None
        self.gone = False
        self.finished = False

    async def run(self, work: Callable[[Outbound], Awaitable[bytes | None]]) -> None:
        self.exchange.started = True
        await self.exchange.send({"type": "http.response.start", "status": 200,
                                  "headers": [*_SSE_HEADERS, *self.app.extra_headers]})
        self.task = asyncio.current_task()
        helpers = [asyncio.create_task(self._watch()), asyncio.create_task(self._keep_alive())]
        try:
            reply = await work(self.out)
        except asyncio.CancelledError:
            if not self.gone or self.task is None:
                raise
            self.task.uncancel()
            return
        finally:
            self.finished = True
            for helper in helpers:
                helper.cancel()
        async with self.lock:
            last = encode_sse_event(reply) if reply else b""
            await self.exchange.send({"type": "http.response.body", "body": last})

    async def out(self, message: bytes) -> None:
        await self._write(encode_sse_event(message))

    async def _write(self, chunk: bytes) -> None:
        async with self.lock:
            await self.exchange.send({"type": "http.response.body", "body": chunk,
                                      "more_body": True})

    async def _watch(self) -> None:
        while (await self.exchange.receive())["type"] != "http.disconnect":
            pass
        if not self.finished and self.task is not None:
            self.gone = True
            self.task.cancel()

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.app.keepalive)
            await self._write(SSE_KEEPALIVE)


def _has_modern_meta(message: object) -> bool:
    if not isinstance(message, dict):
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def _request_id(message: JSONObject | list[Any]) -> object:
    return message.get("id") if isinstance(message, dict) else None


def _id(value: object) -> str | int | None:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def _address(scope: ASGIScope) -> str | None:
    """The client's host as the ASGI server saw it (`scope["client"]`), if it says."""
    client = scope.get("client")
    if isinstance(client, list | tuple) and client and isinstance(client[0], str):
        return client[0]
    return None
