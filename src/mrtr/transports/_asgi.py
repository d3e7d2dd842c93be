"""McpApp: the Streamable HTTP transport (MCP 2026-07-28) as a plain ASGI 3 application.

One POST endpoint; JSON replies, or SSE when the handler emits notifications (spec:
basic/transports/streamable-http). Protocol decisions stay in the Dispatcher.
"""

# Design: the HTTP status line goes out before the first SSE event, so a reply that switched to
# SSE is always 200 and any error travels in the JSON-RPC body of the last event. All writes to
# one response happen in `_Exchange.run` (one coroutine), so progress events, keep-alives and the
# final reply never interleave. A transport-level rejection (403, 404, 405, 413, 415, 400 for bad
# headers) carries a JSON-RPC error body without an id: the body was never read.
from __future__ import annotations

import asyncio
import logging
import os
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
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._exchange(scope, receive, tracked)
        except _Reject as exc:
            if not started:
                await self._respond(tracked, exc.status, _error_body(str(exc)), exc.headers)
        except Exception:
            self.log.exception("unexpected error in the HTTP transport")
            if not started:
                body = encode_error(None, InternalError())
                await self._respond(tracked, 500, body)

    async def _exchange(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _decode_headers(scope.get("headers", ()))
        self._check_host(headers)
        if scope.get("path") != self.path:
            raise _Reject(404, f"Not Found: the MCP endpoint is POST {self.path}")
        if scope.get("method") != "POST":
            raise _Reject(405, "Method Not Allowed: use POST", [(b"allow", b"POST")])
        principal = await self._authenticate(headers)
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            raise _Reject(415, "Unsupported Media Type: Content-Type must be application/json")
        body = await self._read_body(headers, receive)
        if body is None:
            return  # the client went away while sending
        try:
            message = self.dispatcher.receive(body, headers)
        except ProtocolError as exc:
            reply = Reply(exc.request_id, error=exc)
            await self._respond(send, reply.http_status, reply.body)
            return
        if not hasattr(message, "id"):
            await self._respond(send, 202, b"")
            return
        peer = Peer(principal=principal, transport="http")
        await _Exchange(self, message, peer, receive, send).run()

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
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _Reject(413, f"Payload Too Large: the limit is {self.max_body} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _respond(
        self,
        send: Send,
        status: int,
        body: bytes,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        headers = [*extra, *self.worker_headers()]
        if body:
            headers.append((b"content-type", b"application/json"))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def worker_headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"mcp-debug-worker", str(os.getpid()).encode())] if self.expose_worker else []


class _Exchange:
    """One request in flight: runs the handler and writes JSON or an SSE stream."""

    def __init__(
        self, app: McpApp, message: Any, peer: Peer, receive: Receive, send: Send
    ) -> None:
        self.app = app
        self.message = message
        self.peer = peer
        self.receive = receive
        self.send = send
        self.events: asyncio.Queue[bytes] = asyncio.Queue(maxsize=64)
        self.streaming = False

    async def sink(self, notification: msgspec.Struct) -> None:
        await self.events.put(encode_message(notification))

    async def run(self) -> None:
        app = self.app
        handler = asyncio.create_task(app.dispatcher.handle(self.message, self.peer, self.sink))
        gone = asyncio.create_task(_disconnected(self.receive))
        getter: asyncio.Task[bytes] | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + app.request_timeout
        try:
            while True:
                getter = getter or asyncio.create_task(self.events.get())
                wait = deadline - loop.time()
                if self.streaming:
                    wait = min(wait, app.keepalive)
                done, _ = await asyncio.wait(
                    {handler, getter, gone}, timeout=max(wait, 0.0),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if gone in done:
                    return  # closing the stream is cancellation (spec): write nothing more
                if getter.done():  # before the final reply, even if both finished together
                    await self._event(getter.result())
                    getter = None
                elif handler.done():
                    await self._finish(handler.result())
                    return
                elif loop.time() >= deadline:
                    app.log.warning("request %r timed out", self.message.id)
                    error = InternalError(f"Request timed out after {app.request_timeout:g}s")
                    await self._finish(Reply(self.message.id, error=error))
                    return
                elif self.streaming:
                    await self._write(SSE_KEEPALIVE)
        finally:
            for task in (handler, gone, getter):
                if task is not None:
                    task.cancel()

    async def _event(self, data: bytes) -> None:
        if not self.streaming:
            self.streaming = True
            headers = [*_SSE_HEADERS, *self.app.worker_headers()]
            await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        await self._write(encode_sse_event(data))

    async def _finish(self, reply: Reply) -> None:
        while not self.events.empty():
            await self._event(self.events.get_nowait())
        if not self.streaming:
            await self.app._respond(self.send, reply.http_status, reply.body)
            return
        await self.send({"type": "http.response.body", "body": encode_sse_event(reply.body)})

    async def _write(self, chunk: bytes) -> None:
        await self.send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


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
    for name, value in raw:
        total += len(name) + len(value)
        if total > MAX_HEADER_BYTES:
            raise _Reject(400, "Bad Request: headers too large")
        try:
            key, text = name.decode("ascii").lower(), value.decode("utf-8")
        except UnicodeDecodeError:
            raise _Reject(400, "Bad Request: header is not valid UTF-8") from None
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


def _split_host(host: str) -> tuple[str, str]:
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest.removeprefix(":")
    name, _, port = host.partition(":")
    return name, port


def _error_body(message: str) -> bytes:
    return encode_error(None, InvalidRequest(message))
