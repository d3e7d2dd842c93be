"""McpApp: the Streamable HTTP transport (MCP 2026-07-28) as a plain ASGI 3 application.

One POST endpoint; JSON replies, or SSE when the handler emits notifications (spec:
basic/transports/streamable-http). Protocol decisions stay in the Dispatcher.
"""

# Design: a transport-level rejection (403, 404, 405, 413, 415, 400 for bad headers) carries a
# JSON-RPC error body without an id: the body was never read. Host/Origin checks live in
# _hosts.py, the reply of one request (JSON or SSE) in _exchange.py. A store the app owns
# (`owns_store`: Server.http_app() made it) is closed in the ASGI lifespan; `lifespan` lets a
# parent app run it, since Starlette does not forward lifespan events to mounted apps.
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mrtr.errors import (
    AuthUnavailable,
    Forbidden,
    InternalError,
    InvalidRequest,
    ProtocolError,
    Unauthorized,
)
from mrtr.http._exchange import Exchange
from mrtr.http._health import PROBE_PATHS, Health
from mrtr.http._hosts import HostCheck
from mrtr.http._sessions import SessionEndpoint, session_era
from mrtr.protocol import encode_error
from mrtr.server import Dispatcher, Peer, Principal, Reply, Server

if TYPE_CHECKING:
    from mrtr.server import MemoryTransport

__all__ = ["ASGIReceive", "ASGIScope", "ASGISend", "Authenticator", "AuthUnavailable", "Forbidden",
           "McpApp", "ProtectedResource", "Unauthorized"]

ASGIScope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIReceive = Callable[[], Awaitable[Message]]
ASGISend = Callable[[Message], Awaitable[None]]
Authenticator = Callable[[Mapping[str, str]], Awaitable[str | None]]

_ANONYMOUS = Peer(principal=None, transport="http")  # immutable, so shared by every request
MAX_HEADER_BYTES = 64 * 1024


@runtime_checkable
class ProtectedResource(Protocol):
    """An authenticator that is an OAuth resource server (mrtr.auth.ResourceServer).

    `resource` is the URL this request reached the MCP endpoint at. Each method raises
    Unauthorized (or a subclass) to refuse; `document` answers GETs on other paths.
    """

    async def authenticate(self, headers: Mapping[str, str], resource: str, /) -> str | None: ...

    def authorize(self, dispatcher: Dispatcher, message: Any, peer: Peer, resource: str,
                  /) -> None: ...

    def document(self, dispatcher: Dispatcher, path: str, resource: str, /) -> bytes | None: ...


class _Reject(Exception):  # noqa: N818 - internal control flow
    """A transport-level refusal: HTTP `status` with a JSON-RPC error body."""

    def __init__(
        self, status: int, message: str, headers: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = list(headers)


class McpApp:
    """The ASGI app serving a Server on `path` (POST only).

    `dispatcher` is the Server, or a Dispatcher configured around it (keys, store, telemetry);
    a Server gets a Dispatcher of its own (an ephemeral key, no store). Mounted at a prefix
    (Starlette `Mount`, FastAPI `app.mount`), the endpoint is the prefix followed by `path`.
    `allowed_hosts` lists the names accepted in `Host` and in `Origin`: `name` on any port, or
    `name:port` exactly; None accepts the loopback names on any port. `allowed_origins` adds
    full origins (`https://app.example`).
    `max_body` is in bytes; `request_timeout` and `keepalive` are in seconds. `body_timeout`
    (seconds, None: no deadline) bounds the time a request's body takes to arrive; after it the
    request gets 408 and its connection is closed (a client dribbling the body cannot hold it).
    `sessions` also serves `initialize` clients (2025-11-25 and earlier) on the same path;
    `ask_timeout` is how long their server→client requests wait for an answer (seconds).
    `health` serves `GET /healthz` and `GET /readyz` (docs/operations.md) beside `path`.
    `owns_store` closes the Dispatcher's store when the ASGI lifespan ends (see `lifespan`).
    """

    def __init__(
        self,
        dispatcher: Dispatcher | Server,
        *,
        path: str = "/mcp",
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
        authenticator: Authenticator | ProtectedResource | None = None,
        max_body: int = 4 * 1024 * 1024,
        body_timeout: float | None = 30.0,
        request_timeout: float = 300.0,
        keepalive: float = 15.0,
        expose_worker: bool = False,
        sessions: bool = True,
        ask_timeout: float = 600.0,
        health: bool = True,
        owns_store: bool = False,
    ) -> None:
        self.dispatcher = (dispatcher if isinstance(dispatcher, Dispatcher)
                           else Dispatcher(dispatcher))
        self.owns_store = owns_store
        self.path = path
        self.hosts = HostCheck(allowed_hosts, allowed_origins or ())
        self.authenticator = authenticator
        self.guard = authenticator if isinstance(authenticator, ProtectedResource) else None
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.request_timeout = request_timeout
        self.keepalive = keepalive
        self.expose_worker = expose_worker
        self.log = logging.getLogger("mrtr.transports.http")
        # Sent with every reply; computed once (the pid of a worker never changes).
        self.extra_headers: list[tuple[bytes, bytes]] = (
            [(b"mcp-debug-worker", str(os.getpid()).encode())] if expose_worker else []
        )
        self._loop_seen: tuple[asyncio.AbstractEventLoop, int] | None = None
        self.sessions: SessionEndpoint | None = (
            SessionEndpoint(self, ask_timeout=ask_timeout) if sessions else None
        )
        self.health: Health | None = Health(lambda: self.dispatcher) if health else None

    def in_process_transport(self, *, principal: str | None = None) -> MemoryTransport:
        """A client transport calling this app's Dispatcher in process (`Client(mcp_app)`)."""
        return self.dispatcher.in_process_transport(principal=principal)

    async def __call__(self, scope: ASGIScope, receive: ASGIReceive, send: ASGISend) -> None:
        kind = scope["type"]
        if kind == "http":
            root = scope.get("root_path", "")
            if root and scope.get("path", "").startswith(root):  # mounted at a prefix
                scope = {**scope, "path": scope["path"][len(root):] or "/"}
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "websocket":
            await receive()
            await send({"type": "websocket.close", "code": 1008})

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Run the app's start-up and shutdown: `FastAPI(lifespan=mcp.lifespan)`.

        At shutdown it closes the Dispatcher's store if the app owns it (`owns_store`).
        """
        try:
            yield
        finally:
            store = self.dispatcher.store
            if self.owns_store and store is not None:
                await store.aclose()
                logging.getLogger("mrtr.serve").info("%s closed", type(store).__name__)

    async def _lifespan(self, receive: ASGIReceive, send: ASGISend) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with self.lifespan():
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
        await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: ASGIScope, receive: ASGIReceive, send: ASGISend) -> None:
        path = scope.get("path")
        if path != self.path and path in PROBE_PATHS and self.health is not None:
            await self.health.answer(path, scope.get("method", ""), send)  # before Host checks
            return
        exchange = Exchange(self, receive, send)
        try:
            await self._exchange(scope, exchange)
        except _Reject as exc:
            if not exchange.started:
                await exchange.respond(exc.status, _error_body(str(exc)), exc.headers)
        except Unauthorized as exc:  # from the authenticator
            if not exchange.started:
                await exchange.respond(exc.status, _error_body(exc.message), _challenge(exc))
        except Exception:
            self.log.exception("unexpected error in the HTTP transport")
            if not exchange.started:
                await exchange.respond(500, encode_error(None, InternalError()))

    async def _exchange(self, scope: ASGIScope, exchange: Exchange) -> None:
        headers = _decode_headers(scope.get("headers", ()))
        refusal = self.hosts.refusal(headers)
        if refusal is not None:
            raise _Reject(403, refusal)
        if scope.get("path") != self.path:
            await self._elsewhere(scope, headers, exchange)
            return
        if scope.get("method") != "POST":
            await self._other(scope, headers, exchange)
            return
        principal = await self._authenticate(scope, headers)
        media = headers.get("content-type", "")
        if media != "application/json" and (
            media.split(";", 1)[0].strip().lower() != "application/json"
        ):
            raise _Reject(415, "Unsupported Media Type: Content-Type must be application/json")
        body = await self._read_body(headers, exchange.receive)
        if body is None:
            return  # the client went away while sending
        try:
            message = self.dispatcher.receive(body, headers)
        except ProtocolError as exc:
            # Not a 2026-07-28 message: a session's (initialize, or an Mcp-Session-Id), if the
            # version header allows; only this error path looks at session headers.
            if self.sessions is not None and session_era(headers):
                await self.sessions.post(body, headers, principal, exchange, exc)
                return
            reply = Reply(exc.request_id, error=exc)
            await exchange.respond(reply.http_status, reply.body)
            return
        if not hasattr(message, "id"):
            if self.sessions is not None and "mcp-session-id" in headers and session_era(headers):
                await self.sessions.post(body, headers, principal, exchange, None)
                return
            await exchange.respond(202, b"")
            return
        await exchange.run(message, self._admit(scope, headers, message, principal))

    async def _elsewhere(self, scope: ASGIScope, headers: Mapping[str, str],
                         exchange: Exchange) -> None:
        """Not the MCP path: the guard's metadata documents (GET), else 404."""
        if self.guard is not None and scope.get("method") == "GET":
            document = self.guard.document(self.dispatcher, scope.get("path", ""),
                                           self._resource(scope, headers))
            if document is not None:
                await exchange.respond(200, document)
                return
        raise _Reject(404, f"Not Found: the MCP endpoint is POST {self.path}")

    async def _other(self, scope: ASGIScope, headers: Mapping[str, str],
                     exchange: Exchange) -> None:
        """GET and DELETE exist only within a session (2025 clients); else 405."""
        method = scope.get("method", "")
        if self.sessions is None or method not in ("GET", "DELETE") or (
            "mcp-session-id" not in headers
        ):
            raise _Reject(405, "Method Not Allowed: use POST", [(b"allow", b"POST")])
        principal = await self._authenticate(scope, headers)
        await self.sessions.other(method, headers, principal, exchange)

    def running_loop(self) -> asyncio.AbstractEventLoop:
        """The event loop running this request, without a system call per request.

        On Python 3.11 `asyncio.get_running_loop()` (and `current_task()` without a loop) calls
        getpid() each time: ~4 % of a busy server's CPU. The loop seen last is reused while it
        is running and this is the thread that saw it run (one loop per thread, as every ASGI
        server runs them); anything else asks asyncio again.
        """
        seen = self._loop_seen
        if seen is not None and seen[1] == threading.get_ident() and seen[0].is_running():
            return seen[0]
        loop = asyncio.get_running_loop()
        self._loop_seen = (loop, threading.get_ident())
        return loop

    async def _authenticate(self, scope: ASGIScope, headers: Mapping[str, str]) -> str | None:
        """The principal, or None; raises Unauthorized (answered in `_http`)."""
        if self.guard is not None:
            return await self.guard.authenticate(headers, self._resource(scope, headers))
        if self.authenticator is None:
            return None
        return await self.authenticator(headers)  # type: ignore[operator]  # not a guard

    def peer_for(self, principal: str | None, headers: Mapping[str, str] | None = None) -> Peer:
        """The Peer of a request: with an authenticator, its scopes limit `scopes=` tools."""
        trace = _trace(headers) if headers is not None else ()
        if self.authenticator is None:
            return Peer(principal=None, transport="http", trace_headers=trace) if trace \
                else _ANONYMOUS
        scopes = principal.scopes if isinstance(principal, Principal) else frozenset()
        return Peer(principal=principal, transport="http", scopes=scopes, trace_headers=trace)

    def _admit(self, scope: ASGIScope, headers: Mapping[str, str], message: Any,
               principal: str | None) -> Peer:
        """The request's Peer; the guard refuses (403) a `scopes=` tool before it runs."""
        peer = self.peer_for(principal, headers)
        if self.guard is not None:
            self.guard.authorize(self.dispatcher, message, peer, self._resource(scope, headers))
        return peer

    def _resource(self, scope: ASGIScope, headers: Mapping[str, str]) -> str:
        """The URL this request reached the MCP endpoint at (RFC 9728 resource identifier)."""
        return f"{scope.get('scheme', 'http')}://{headers.get('host', '')}{self.path}"

    async def _read_body(self, headers: Mapping[str, str], receive: ASGIReceive) -> bytes | None:
        declared = headers.get("content-length")
        if declared is not None:
            digits = declared.strip()
            # isdigit() alone takes "²" (int() then fails) and other scripts' digits.
            if not (digits.isascii() and digits.isdigit()):
                raise _Reject(400, "Bad Request: invalid Content-Length")
            if int(declared) > self.max_body:
                raise _Reject(413, f"Payload Too Large: the limit is {self.max_body} bytes")
        if self.body_timeout is None:
            return await self._receive_body(receive)
        try:
            async with asyncio.timeout(self.body_timeout):
                return await self._receive_body(receive)
        except TimeoutError:
            raise _Reject(408, "Request Timeout: the body did not arrive within "
                          f"{self.body_timeout:g} s", [(b"connection", b"close")]) from None

    async def _receive_body(self, receive: ASGIReceive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _Reject(413, f"Payload Too Large: the limit is {self.max_body} bytes")
            if not message.get("more_body", False):
                # The usual case is one message holding the whole body: no join, no copy.
                return b"".join((*chunks, chunk)) if chunks else chunk
            chunks.append(chunk)


def _decode_headers(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """Lower-cased names; repeated headers joined with ", ". Raises _Reject (400) on garbage."""
    headers: dict[str, str] = {}
    total = 0
    try:
        for name, value in raw:
            total += len(name) + len(value)
            key = name.decode("ascii").lower()
            if key in headers:
                headers[key] += ", " + value.decode("utf-8")
            else:
                headers[key] = value.decode("utf-8")
    except UnicodeDecodeError:
        raise _Reject(400, "Bad Request: header is not valid UTF-8") from None
    if total > MAX_HEADER_BYTES:
        raise _Reject(400, "Bad Request: headers too large")
    return headers


def _trace(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """W3C trace context headers: telemetry's fallback when `_meta` carries none (see Peer)."""
    if "traceparent" not in headers:
        return ()
    return tuple((name, headers[name]) for name in ("traceparent", "tracestate")
                 if name in headers)


def _challenge(exc: Unauthorized) -> list[tuple[bytes, bytes]]:
    if not exc.challenge:
        return [(b"retry-after", b"5")] if exc.status == 503 else []
    return [(b"www-authenticate", exc.challenge.encode("latin-1", "replace"))]


def _error_body(message: str) -> bytes:
    return encode_error(None, InvalidRequest(message))
