"""McpApp: the Streamable HTTP transport (MCP 2026-07-28) as a plain ASGI 3 application.

One POST endpoint; JSON replies, or SSE when the handler emits notifications (spec:
basic/transports/streamable-http). Protocol decisions stay in the Dispatcher.
"""

# Design: the HTTP status line goes out before the first SSE event, so a reply that switched to
# SSE is always 200 and any error travels in the JSON-RPC body of the last event. Each event,
# keep-alive and the final reply is one whole `send` (see _Exchange), so they never interleave
# within a chunk and nothing follows the final one. A transport-level rejection (403, 404, 405,
# 413, 415, 400 for bad headers) carries a JSON-RPC error body without an id: the body was
# never read.
from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import Any

import msgspec

from mrtr.errors import InternalError, InvalidRequest, ProtocolError
from mrtr.protocol import SSE_KEEPALIVE, encode_error, encode_message, encode_sse_event
from mrtr.server import Dispatcher, Peer, Reply

__all__ = ["Authenticator", "McpApp", "Unauthorized"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Authenticator = Callable[[Mapping[str, str]], Awaitable[str | None]]

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_ANONYMOUS = Peer(principal=None, transport="http")  # immutable, so shared by every request
MAX_HEADER_BYTES = 64 * 1024
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class Unauthorized(Exception):  # noqa: N818 - reads as the HTTP status it maps to
    """Raised by an authenticator: the request gets 401 with `WWW-Authenticate`."""

    def __init__(self, message: str = "Unauthorized", *, challenge: str = "Bearer") -> None:
        super().__init__(message)
        self.message = message
        self.challenge = challenge


class _Reject(Exception):  # noqa: N818 - internal control flow
    """A transport-level refusal: HTTP `status` with a JSON-RPC error body."""

    def __init__(
        self, status: int, message: str, headers: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = list(headers)


class McpApp:
    """ASGI app serving one Dispatcher on `path` (POST only).

    `allowed_hosts` lists `host[:port]` values accepted in `Host` and in `Origin`; None accepts
    the loopback names with any port. `allowed_origins` adds full origins (`https://app.example`).
    `max_body` is in bytes; `request_timeout` and `keepalive` are in seconds.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        path: str = "/mcp",
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
        authenticator: Authenticator | None = None,
        max_body: int = 4 * 1024 * 1024,
        request_timeout: float = 300.0,
        keepalive: float = 15.0,
        expose_worker: bool = False,
    ) -> None:
        self.dispatcher = dispatcher
        self.path = path
        self.hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
        self.origins = {o.lower().rstrip("/") for o in allowed_origins or ()}
        self.authenticator = authenticator
        self.max_body = max_body
        self.request_timeout = request_timeout
        self.keepalive = keepalive
        self.expose_worker = expose_worker
        self.log = logging.getLogger("mrtr.transports.http")
        # Sent with every reply; computed once (the pid of a worker never changes).
        self.extra_headers: list[tuple[bytes, bytes]] = (
            [(b"mcp-debug-worker", str(os.getpid()).encode())] if expose_worker else []
        )
        self._hosts_seen: dict[str, bool] = {}  # Host values already judged (bounded)
        self._loop_seen: tuple[asyncio.AbstractEventLoop, int] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await _lifespan(receive, send)
        elif kind == "websocket":
            await receive()
            await send({"type": "websocket.close", "code": 1008})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        exchange = _Exchange(self, receive, send)
        try:
            await self._exchange(scope, exchange)
        except _Reject as exc:
            if not exchange.started:
                await exchange.respond(exc.status, _error_body(str(exc)), exc.headers)
        except Exception:
            self.log.exception("unexpected error in the HTTP transport")
            if not exchange.started:
                await exchange.respond(500, encode_error(None, InternalError()))

    async def _exchange(self, scope: Scope, exchange: _Exchange) -> None:
        headers = _decode_headers(scope.get("headers", ()))
        self._check_host(headers)
        if scope.get("path") != self.path:
            raise _Reject(404, f"Not Found: the MCP endpoint is POST {self.path}")
        if scope.get("method") != "POST":
            raise _Reject(405, "Method Not Allowed: use POST", [(b"allow", b"POST")])
        principal = await self._authenticate(headers)
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
            reply = Reply(exc.request_id, error=exc)
            await exchange.respond(reply.http_status, reply.body)
            return
        if not hasattr(message, "id"):
            await exchange.respond(202, b"")
            return
        peer = _ANONYMOUS if principal is None else Peer(principal=principal, transport="http")
        await exchange.run(message, peer)

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

    def _check_host(self, headers: Mapping[str, str]) -> None:
        host = headers.get("host", "").strip().lower()
        if not self._host_allowed(host):
            raise _Reject(403, "Forbidden: Host not allowed")
        origin = headers.get("origin")
        if origin is None:
            return
        origin = origin.strip().lower().rstrip("/")
        scheme, sep, rest = origin.partition("://")
        trusted = origin in self.origins or (
            sep and scheme in ("http", "https") and self._host_allowed(rest)
        )
        if not trusted:
            raise _Reject(403, "Forbidden: Origin not allowed")

    def _host_allowed(self, host: str) -> bool:
        known = self._hosts_seen.get(host)
        if known is not None:
            return known
        allowed = self._judge_host(host)
        if len(self._hosts_seen) < 64:  # a client sending junk Hosts cannot grow this
            self._hosts_seen[host] = allowed
        return allowed

    def _judge_host(self, host: str) -> bool:
        if not host:
            return False
        if self.hosts is not None:
            return host in self.hosts
        name, port = _split_host(host)
        return name in LOOPBACK and (port == "" or port.isdigit())

    async def _authenticate(self, headers: Mapping[str, str]) -> str | None:
        if self.authenticator is None:
            return None
        try:
            return await self.authenticator(headers)
        except Unauthorized as exc:
            challenge = exc.challenge.encode("latin-1", "replace")
            raise _Reject(401, exc.message, [(b"www-authenticate", challenge)]) from None

    async def _read_body(self, headers: Mapping[str, str], receive: Receive) -> bytes | None:
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                raise _Reject(400, "Bad Request: invalid Content-Length")
            if int(declared) > self.max_body:
                raise _Reject(413, f"Payload Too Large: the limit is {self.max_body} bytes")
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


class _Exchange:
    """One HTTP request: runs its handler inline and writes a JSON reply or an SSE stream.

    The handler runs in the request's own task, so a quick request costs no extra task. A
    handler still running after WATCH_AFTER seconds, or one that starts streaming, gets a
    watcher task that cancels it when the client disconnects or the deadline passes. While
    streaming, a keep-alive task writes a comment every `keepalive` seconds.
    """

    # Design: every `send` writes one whole chunk synchronously after waiting for the
    # transport to drain, so events, keep-alives and the final reply never interleave within a
    # chunk; the keep-alive task is cancelled and `finished` set before the final chunk, and
    # events arriving after it are dropped.
    WATCH_AFTER = 0.05

    __slots__ = ("app", "deadline", "finished", "keeper", "reason", "receive", "send",
                 "started", "streaming", "task", "watcher")

    def __init__(self, app: McpApp, receive: Receive, send: Send) -> None:
        self.app = app
        self.receive = receive
        self.send = send
        self.started = False  # the status line went out
        self.streaming = False
        self.finished = False
        self.reason: str | None = None  # why the handler was interrupted: "gone", "timeout"
        self.deadline = 0.0  # loop time
        self.task: asyncio.Task[Any] | None = None
        self.watcher: asyncio.Task[None] | None = None
        self.keeper: asyncio.Task[None] | None = None

    async def respond(
        self, status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        headers = [*extra, *self.app.extra_headers]
        if body:
            headers.append((b"content-type", b"application/json"))
        headers.append((b"content-length", str(len(body)).encode()))
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})

    async def run(self, message: Any, peer: Peer) -> None:
        app = self.app
        loop = app.running_loop()
        self.task = asyncio.current_task(loop)
        self.deadline = loop.time() + app.request_timeout
        # One timer per request: it starts the watcher, which also enforces the deadline.
        timer = loop.call_at(min(loop.time() + self.WATCH_AFTER, self.deadline), self._watch)
        try:
            reply = await app.dispatcher.handle(message, peer, self.sink)
        except asyncio.CancelledError:
            if self.reason is None:
                raise  # the server is shutting down: not ours to swallow
            reply = None
        finally:
            self.finished = True
            timer.cancel()
            for task in (self.watcher, self.keeper):
                if task is not None:
                    task.cancel()
            if self.reason is not None and self.task is not None:
                self.task.uncancel()
        if self.reason == "gone":
            return  # closing the stream is cancellation (spec): write nothing more
        if self.reason == "timeout":
            app.log.warning("request %r timed out", message.id)
            error = InternalError(f"Request timed out after {app.request_timeout:g}s")
            reply = Reply(message.id, error=error)
        assert reply is not None
        if not self.streaming:
            await self.respond(reply.http_status, reply.body)
            return
        await self.send({"type": "http.response.body", "body": encode_sse_event(reply.body)})

    async def sink(self, notification: msgspec.Struct) -> None:
        if self.finished:
            return  # a straggler after the final reply has nowhere to go
        if not self.streaming:
            self.streaming = True
            self.started = True
            headers = [*_SSE_HEADERS, *self.app.extra_headers]
            await self.send({"type": "http.response.start", "status": 200, "headers": headers})
            self._watch()
            self.keeper = asyncio.create_task(self._keep_alive())
        await self._write(encode_sse_event(encode_message(notification)))

    def _watch(self) -> None:
        if self.watcher is None and not self.finished:
            self.watcher = asyncio.create_task(self._wait_for_disconnect())

    async def _wait_for_disconnect(self) -> None:
        try:
            async with asyncio.timeout_at(self.deadline):
                while (await self.receive())["type"] != "http.disconnect":
                    pass
        except TimeoutError:
            self._interrupt("timeout")
        else:
            self._interrupt("gone")

    def _interrupt(self, reason: str) -> None:
        if self.finished or self.reason is not None or self.task is None:
            return
        self.reason = reason
        self.task.cancel()

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.app.keepalive)
            if self.finished:
                return
            await self._write(SSE_KEEPALIVE)

    async def _write(self, chunk: bytes) -> None:
        await self.send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


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


def _split_host(host: str) -> tuple[str, str]:
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest.removeprefix(":")
    name, _, port = host.partition(":")
    return name, port


def _error_body(message: str) -> bytes:
    return encode_error(None, InvalidRequest(message))
