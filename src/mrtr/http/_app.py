"""McpApp: the Streamable HTTP transport (MCP 2026-07-28) as a plain ASGI 3 application.

One POST endpoint; JSON replies, or SSE when the handler emits notifications (spec:
basic/transports/streamable-http). Protocol decisions stay in the Dispatcher.
"""

# Design: a transport-level refusal (403, 404, 405, 413, 415, 400 for bad headers, the
# authenticator's 401/403/503) is a Refusal from the error policy (mrtr.server._failures), which
# chooses its status, headers and body; this module raises it and `__call__` writes it. Host/Origin
# checks live in _hosts.py, the reply of one request (JSON or SSE) in _exchange.py. A store the
# app owns (`owns_store`: Server.http_app() made it) is closed in the ASGI lifespan; `lifespan`
# lets a parent app run it, since Starlette does not forward lifespan events to mounted apps.
from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from mrtr.errors import AuthUnavailable, Forbidden, ProtocolError, Unauthorized
from mrtr.http._auth import Authenticator, ProtectedResource
from mrtr.http._body import receive_body
from mrtr.http._completion import CompletionRoute
from mrtr.http._exchange import DIRECT, Direct, Exchange, Watchlist
from mrtr.http._headers import HeaderDecoder
from mrtr.http._health import PROBE_PATHS, Health
from mrtr.http._hosts import HostCheck, bound_resource
from mrtr.http._playground import Playground, PlaygroundMode
from mrtr.http._sessions import SessionEndpoint, session_era
from mrtr.http._startup import warn_unshared_store
from mrtr.server import Dispatcher, Peer, Principal, Server, SessionLimits
from mrtr.server._failures import (
    auth_refusal,
    bad_request,
    error_reply,
    host_refused,
    http_refusal,
    not_found,
    post_only,
    too_large,
    unsupported_media_type,
)
from mrtr.stores._local import RunningLoop
from mrtr.stores._ready import ready

if TYPE_CHECKING:
    from mrtr.server import MemoryTransport

__all__ = ["ASGIReceive", "ASGIScope", "ASGISend", "Authenticator", "AuthUnavailable", "Forbidden",
           "McpApp", "ProtectedResource", "Unauthorized", "warn_unshared_store"]

ASGIScope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIReceive = Callable[[], Awaitable[Message]]
ASGISend = Callable[[Message], Awaitable[None]]

_ANONYMOUS = Peer(principal=None, transport="http")  # immutable, so shared by every request


class McpApp:
    """The ASGI app serving a Server on `path` (POST only).

    `dispatcher` is the Server, or a Dispatcher configured around it (keys, store, telemetry);
    a Server gets a Dispatcher of its own (an ephemeral key, no store). Mounted at a prefix
    (Starlette `Mount`, FastAPI `app.mount`), the endpoint is the prefix followed by `path`.
    `allowed_hosts` lists the names accepted in `Host` and in `Origin`: `name` on any port, or
    `name:port` exactly; None accepts the loopback names on any port. `allowed_origins` adds
    full origins (`https://app.example`). A ResourceServer `authenticator` whose settings name
    no `resource` accepts tokens for `http://` + the address the ASGI server is bound to +
    `path`, never the Host a request names: behind a proxy, set AuthSettings(resource=...).
    `max_body` is in bytes; `request_timeout` and `keepalive` are in seconds. `body_timeout`
    (seconds, None: no deadline) bounds the time a request's body takes to arrive; after it the
    request gets 408 and its connection is closed (a client dribbling the body cannot hold it).
    `sessions` also serves `initialize` clients (2025-11-25 and earlier) on the same path;
    `ask_timeout` is how long their server→client requests wait for an answer (seconds), and
    `session_limits` caps the sessions a process holds (per client and in all).
    `health` serves `GET /healthz` and `GET /readyz` (docs/operations.md) beside `path`.
    `owns_store` closes the Dispatcher's store when the ASGI lifespan ends (see `lifespan`).
    `playground=True` serves the browser playground at `/` (docs/playground.md): for
    development only, and only to a loopback bind unless `playground="force"`.
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
        session_limits: SessionLimits | None = None,
        health: bool = True,
        owns_store: bool = False,
        playground: PlaygroundMode = False,
    ) -> None:
        self.dispatcher = (dispatcher if isinstance(dispatcher, Dispatcher)
                           else Dispatcher(dispatcher))
        self.owns_store = owns_store
        self.path = path
        self.hosts = HostCheck(allowed_hosts, allowed_origins or ())
        self._headers = HeaderDecoder()  # names and values seen, decoded once
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
        self._loop = RunningLoop()
        self._watchlist: Watchlist | None = None
        self.sessions: SessionEndpoint | None = (
            SessionEndpoint(self, ask_timeout=ask_timeout, limits=session_limits) if sessions
            else None
        )
        self.health: Health | None = Health(lambda: self.dispatcher) if health else None
        self.playground = Playground(self, playground) if playground else None
        # Routes beside `path`: the playground's page, URL elicitation completions.
        self.routes: tuple[Playground | CompletionRoute, ...] = (
            *([self.playground] if self.playground else []),
            CompletionRoute(lambda: self.dispatcher, path))

    def in_process_transport(self, *, principal: str | None = None) -> MemoryTransport:
        """A client transport calling this app's Dispatcher in process (`Client(mcp_app)`)."""
        return self.dispatcher.in_process_transport(principal=principal)

    async def __call__(self, scope: ASGIScope, receive: ASGIReceive, send: ASGISend) -> None:
        kind = scope["type"]
        if kind != "http":
            await self._not_http(kind, receive, send)
            return
        # Routed here; served by serve_direct, the entry `mrtr serve`'s direct path calls.
        root = scope.get("root_path", "")
        if root and scope.get("path", "").startswith(root):  # mounted at a prefix
            scope = {**scope, "path": scope["path"][len(root):] or "/"}
        path = scope.get("path", "")
        if path != self.path:
            if path.rstrip("/") == self.path.rstrip("/"):
                scope = {**scope, "path": self.path}  # `/mcp/` is the endpoint too
            elif path in PROBE_PATHS and self.health is not None:
                await self.health.answer(path, scope.get("method", ""), send)  # before Host checks
                return
        # A server's Direct (serving/_direct.py) leaves the scope at once: it refers to the scope,
        # and a reference cycle would outlive the request until the garbage collector ran.
        extensions = scope.get("extensions")
        direct: Direct | None = extensions.pop(DIRECT, None) if extensions else None
        await self.serve_direct(scope, receive, send, direct)

    async def serve_direct(self, scope: ASGIScope, receive: ASGIReceive, send: ASGISend,
                           direct: Direct | None) -> None:
        """Serve one HTTP request already routed to `path` (`__call__`'s routing done), with
        the server's Direct if it holds the request whole: `mrtr serve` calls this for such a
        POST (serving/_direct.py), no extensions dict to carry the Direct and take it out."""
        exchange = Exchange(self, receive, send, direct)
        if self.playground is not None:  # dev only: files this request's rounds for the page
            self.playground.watch(scope)
        try:
            await self._exchange(scope, exchange)
        except Exception as exc:  # a Refusal, the authenticator's Unauthorized, or a bug (500)
            refusal = http_refusal(exc, self.log)  # logged: its traceback is needed no more,
            exc.__traceback__ = None  # and it holds this frame, which holds `refusal`: a cycle
            if not exchange.started:
                await exchange.respond(refusal.status, refusal.body, refusal.headers)

    async def _not_http(self, kind: str, receive: ASGIReceive, send: ASGISend) -> None:
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "websocket":
            await receive()
            await send({"type": "websocket.close", "code": 1008})

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Run the app's start-up and shutdown: `FastAPI(lifespan=mcp.lifespan)`.

        At start-up it checks the store (raises ValueError, naming the setting, for one that
        refuses to serve: a Redis that does not persist every write) and warns when this process
        looks like one of several workers with a store of its own; at shutdown it closes the
        Dispatcher's store if the app owns it (`owns_store`). While it runs, a server with task
        tools sweeps for tasks whose runner died (TaskPolicy.sweep_every).
        """
        sweep = self.dispatcher.tasks.sweeping()  # tasks whose runner died (server/tasks)
        try:
            await ready(self.dispatcher.store)
            warn_unshared_store(self.dispatcher, self.log)
            if sweep is not None:
                sweep.start()
            yield
        finally:
            if sweep is not None:
                await sweep.aclose()
            await self.dispatcher.drain()  # once work of requests that went away: recorded
            store = self.dispatcher.store
            if self.owns_store and store is not None:
                await store.aclose()
                logging.getLogger("mrtr.serve").info("%s closed", type(store).__name__)

    async def _lifespan(self, receive: ASGIReceive, send: ASGISend) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with contextlib.AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self.lifespan())
            except ValueError as exc:
                self.log.error("the store refuses to serve: %s", exc)
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
        await send({"type": "lifespan.shutdown.complete"})

    async def _exchange(self, scope: ASGIScope, exchange: Exchange) -> None:
        headers = self._headers.decode(scope.get("headers", ()))
        refusal = self.hosts.refusal(headers)
        if refusal is not None:
            raise host_refused(refusal)
        if scope.get("path") != self.path:
            await self._elsewhere(scope, headers, exchange)
            return
        if scope.get("method") != "POST":
            await self._other(scope, headers, exchange)
            return
        principal = (await self._authenticate(scope, headers) if self.authenticator is not None
                     else None)  # the guard is an authenticator too
        media = headers.get("content-type", "")
        if media != "application/json" and (
            media.split(";", 1)[0].strip().lower() != "application/json"
        ):
            raise unsupported_media_type()
        body = (self._direct_body(headers, exchange.direct) if exchange.direct is not None
                else await self._read_body(headers, exchange.receive))
        if body is None:
            return  # the client went away while sending
        try:
            message = self.dispatcher.receive(body, headers)
        except ProtocolError as exc:
            exc.__traceback__ = None  # the client's error: its frames (and `body`) not kept
            # Not a 2026-07-28 message: a session's (initialize, or an Mcp-Session-Id), if the
            # version header allows; only this error path looks at session headers.
            if self.sessions is not None and session_era(headers):
                await self.sessions.post(body, scope, headers, principal, exchange, exc)
                return
            reply = error_reply(exc.request_id, exc)
            await exchange.respond(reply.http_status, reply.body)
            return
        if not hasattr(message, "id"):
            if self.sessions is not None and "mcp-session-id" in headers and session_era(headers):
                await self.sessions.post(body, scope, headers, principal, exchange, None)
                return
            await exchange.respond(202, b"")
            return
        peer = (_ANONYMOUS if self.authenticator is None and "traceparent" not in headers
                else self._admit(scope, headers, message, principal))  # _admit's usual case
        await exchange.run(message, peer)

    async def _elsewhere(self, scope: ASGIScope, headers: Mapping[str, str],
                         exchange: Exchange) -> None:
        """Not the MCP path: the playground, URL elicitation completions, the guard's metadata
        documents (GET), else 404."""
        for route in self.routes:
            if await route.intercept(scope, exchange):
                return
        if self.guard is not None and scope.get("method") == "GET":
            document = self.guard.document(self.dispatcher, scope.get("path", ""),
                                           self._resource(scope))
            if document is not None:
                await exchange.respond(200, document)
                return
        raise not_found(self.path)

    async def _other(self, scope: ASGIScope, headers: Mapping[str, str],
                     exchange: Exchange) -> None:
        """GET and DELETE exist only within a session (2025 clients); else 405."""
        method = scope.get("method", "")
        if self.sessions is None or method not in ("GET", "DELETE") or (
            "mcp-session-id" not in headers
        ):
            raise post_only()
        principal = await self._authenticate(scope, headers)
        await self.sessions.other(method, scope, headers, principal, exchange)

    def watchlist(self) -> Watchlist:
        """The Watchlist of the loop running this request (one per loop and thread), found
        without a system call per request.

        On Python 3.11 `asyncio.get_running_loop()` calls getpid() each time: ~4 % of a busy
        server's CPU. `RunningLoop` remembers the loop; the Watchlist is made anew only when
        the loop is another one.
        """
        loop = self._loop.get()
        watchlist = self._watchlist
        if watchlist is None or watchlist.loop is not loop:
            watchlist = self._watchlist = Watchlist(loop)
        return watchlist

    async def _authenticate(self, scope: ASGIScope, headers: Mapping[str, str]) -> str | None:
        """The principal, or None; raises Unauthorized (answered in `__call__`)."""
        if self.guard is not None:
            return await self.guard.authenticate(headers, self._resource(scope),
                                                 method=scope.get("method", "POST"),
                                                 dispatcher=self.dispatcher)
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
        if self.authenticator is None and "traceparent" not in headers:
            return _ANONYMOUS  # the usual request: no guard, no scopes, no trace headers
        peer = self.peer_for(principal, headers)
        self.authorize(scope, headers, message, peer)
        return peer

    def authorize(self, scope: ASGIScope, headers: Mapping[str, str], message: Any,
                  peer: Peer) -> None:
        """The guard's check of a decoded 2026-07-28 `message` (both eras: a session's request
        is checked in that form); raises a Refusal (403 with its challenge and the id)."""
        if self.guard is None:
            return
        try:
            self.guard.authorize(self.dispatcher, message, peer, self._resource(scope))
        except Unauthorized as exc:
            raise auth_refusal(exc, getattr(message, "id", None)) from None

    def _resource(self, scope: ASGIScope) -> str:
        """The endpoint's URL (RFC 9728), for a guard configured without one: never a header."""
        return bound_resource(scope, self.path)

    def _read_body(self, headers: Mapping[str, str],
                   receive: ASGIReceive) -> Awaitable[bytes | None]:
        """Checks Content-Length now (a Refusal), then reads the body (the awaitable returned)."""
        self._check_length(headers)
        return receive_body(receive, self.max_body, self.body_timeout)

    def _direct_body(self, headers: Mapping[str, str], direct: Direct) -> bytes | None:
        """The body a server's Direct holds, under the same limit as a body read. Its parser
        read exactly Content-Length bytes (a malformed one was its 400), so the body's own
        length is the check (_check_length would only repeat it)."""
        body = direct.take_body()
        if body is not None and len(body) > self.max_body:
            raise too_large(self.max_body)
        return body

    def _check_length(self, headers: Mapping[str, str]) -> None:
        """A Refusal for a Content-Length that is not a number or over max_body."""
        declared = headers.get("content-length")
        if declared is not None:
            digits = declared.strip()
            # isdigit() alone takes "²" (int() then fails) and other scripts' digits.
            if not (digits.isascii() and digits.isdigit()):
                raise bad_request("invalid Content-Length")
            if int(declared) > self.max_body:
                raise too_large(self.max_body)


def _trace(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """W3C trace context headers: telemetry's fallback when `_meta` carries none (see Peer)."""
    if "traceparent" not in headers:
        return ()
    return tuple((name, headers[name]) for name in ("traceparent", "tracestate")
                 if name in headers)

