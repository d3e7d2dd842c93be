"""Exchange: one HTTP request to McpApp, answered with a JSON reply or an SSE stream.

The handler runs in the request's own task; a watcher cancels it when the client disconnects
or the deadline passes, and a keep-alive task writes SSE comments while it streams.
"""

# Design: the HTTP status line goes out before the first SSE event, so a reply that switched to
# SSE is always 200 and any error travels in the JSON-RPC body of the last event. Every `send`
# writes one whole chunk synchronously after waiting for the transport to drain, so events,
# keep-alives and the final reply never interleave within a chunk; the keep-alive task is
# cancelled and `finished` set before the final chunk, and events arriving after it are dropped.
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from mrtr.protocol import SSE_KEEPALIVE, encode_message, encode_sse_event
from mrtr.server import Peer
from mrtr.server._failures import timed_out, unanswered

if TYPE_CHECKING:
    from mrtr.http._app import McpApp

__all__ = ["DIRECT", "Direct", "Exchange", "Watchlist"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DIRECT = "mrtr.direct"  # the scope["extensions"] key a server offers a Direct under


class Direct(Protocol):
    """What a server may offer in `scope["extensions"][DIRECT]` for a request it holds whole
    (mrtr serve's direct path, serving/_direct.py): its body without a `receive` message, and a
    whole reply written without two `send` messages. McpApp takes it out of the scope first."""

    def take_body(self) -> bytes | None:
        """The whole request body, once, as the server's parser framed it (a malformed
        Content-Length refused there); None once taken or the client went away."""

    def reply(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
        """Write the whole reply at once, as `http.response.start` then its
        `http.response.body` would (nothing if the client went away); False, writing
        nothing, when it cannot without waiting (the transport's buffer is full): the
        caller then sends the two messages, which wait."""

    def on_disconnect(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` once if the client goes before the reply's end, from the server's
        own connection_lost (soon, from the loop, if it has gone): a watcher without a task
        or a `receive`. None forgets the callback."""


_JSON = (b"content-type", b"application/json")
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class Exchange:
    """One HTTP request: runs its handler inline and writes a JSON reply or an SSE stream.

    The handler runs in the request's own task, so a quick request costs no extra task. A
    handler still running after WATCH_AFTER seconds, or one that starts streaming, gets a
    watcher that cancels it when the client disconnects or the deadline passes: a timer and
    the Direct's disconnect callback when the server offers a Direct, else a task waiting on
    `receive`. While streaming, a keep-alive task writes a comment every `keepalive` seconds.
    """

    WATCH_AFTER = 0.05

    __slots__ = ("app", "deadline", "direct", "finished", "keeper", "reason", "receive", "send",
                 "started", "streaming", "task", "timer", "watcher", "watching")

    def __init__(self, app: McpApp, receive: Receive, send: Send,
                 direct: Direct | None = None) -> None:
        self.app = app
        self.receive = receive
        self.send = send
        self.direct = direct
        self.started = False  # the status line went out
        self.streaming = False
        self.finished = False
        self.reason: str | None = None  # why the handler was interrupted: "gone", "timeout"
        self.deadline = 0.0  # loop time
        self.task: asyncio.Task[Any] | None = None
        self.watching = False
        self.watcher: asyncio.Task[None] | None = None  # without a Direct
        self.timer: asyncio.TimerHandle | None = None  # the deadline, with a Direct
        self.keeper: asyncio.Task[None] | None = None

    async def respond(
        self, status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        pending = self._whole(status, body, extra)
        if pending is not None:
            await pending

    def _whole(self, status: int, body: bytes,
               extra: Sequence[tuple[bytes, bytes]]) -> Awaitable[None] | None:
        """Write a whole reply (JSON, or empty): at once through the server's Direct, else as
        the two ASGI messages (the awaitable returned)."""
        self.started = True
        if extra or self.app.extra_headers:
            headers = self._headers(body, extra)
        else:  # the usual reply, as _headers makes it
            length = (b"content-length", b"%d" % len(body))
            headers = [_JSON, length] if body else [length]
        if self.direct is not None and self.direct.reply(status, headers, body):
            return None
        return self._messages(status, headers, body)

    async def _messages(self, status: int, headers: list[tuple[bytes, bytes]],
                        body: bytes) -> None:
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})

    def _headers(self, body: bytes,
                 extra: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """The headers of a whole reply (JSON, or empty) with a Retry-After or a worker id;
        _whole makes the usual ones itself."""
        headers = [*extra, *self.app.extra_headers]
        if body:
            headers.append(_JSON)
        headers.append((b"content-length", b"%d" % len(body)))
        return headers

    async def run(self, message: Any, peer: Peer) -> None:
        app = self.app
        watchlist = app.watchlist()
        loop = watchlist.loop
        self.task = asyncio.current_task(loop)
        now = loop.time()
        self.deadline = now + app.request_timeout
        # Due for a watcher (which also enforces the deadline) after WATCH_AFTER, or at the
        # deadline if that is sooner: one timer per loop for all requests (Watchlist).
        watchlist.add(self, min(now + self.WATCH_AFTER, self.deadline))
        try:
            reply = await app.dispatcher.handle(message, peer, self.sink)
        except asyncio.CancelledError:
            if self.reason is None:
                raise  # the server is shutting down: not ours to swallow
            reply = None
        except Exception as exc:  # a Dispatcher bug: still answer, with the id (or last event)
            reply = unanswered(message.id, exc, app.log)
        finally:
            self.finished = True
            watchlist.discard(self)
            if self.watching or self.reason is not None:
                self._finish()
        if self.reason == "gone":
            return  # closing the stream is cancellation (spec): write nothing more
        if self.reason == "timeout":
            reply = timed_out(message.id, app.request_timeout, app.log)
        assert reply is not None
        if not self.streaming:  # respond(), inline: one coroutine less per request
            pending = (self._whole(200, reply.body, ()) if reply.error is None
                       else self._whole(reply.http_status, reply.body, reply.headers))
            if pending is not None:
                await pending
            return
        await self.send({"type": "http.response.body", "body": encode_sse_event(reply.body)})

    def _finish(self) -> None:
        """The handler of a watched or interrupted request is done: no watcher, no
        keep-alives, and an interruption undone."""
        for task in (self.watcher, self.keeper):
            if task is not None:
                task.cancel()
        if self.timer is not None:
            self.timer.cancel()
            if self.direct is not None:
                self.direct.on_disconnect(None)  # the server's cycle holds no Exchange
        if self.reason is not None and self.task is not None:
            self.task.uncancel()

    async def sink(self, notification: msgspec.Struct) -> None:
        if self.finished:
            return  # a straggler after the final reply has nowhere to go
        if not self.streaming:
            self.streaming = True
            self.started = True
            headers = [*_SSE_HEADERS, *self.app.extra_headers]
            await self.send({"type": "http.response.start", "status": 200, "headers": headers})
            self.watch()
            self.keeper = asyncio.create_task(self._keep_alive())
        await self._write(encode_sse_event(encode_message(notification)))

    def watch(self) -> None:
        """Start the watcher (disconnect and deadline), unless the request has finished."""
        if self.watching or self.finished:
            return
        self.watching = True
        direct = self.direct
        if direct is None:
            self.watcher = asyncio.create_task(self._wait_for_disconnect())
            return
        # No task (its receive, timeout and cancellation: ≈ 80 k instructions a watched
        # request): the deadline is a timer and the server calls back on a disconnect.
        self.timer = self.app.watchlist().loop.call_at(self.deadline, self._interrupt,
                                                       "timeout")
        direct.on_disconnect(self._gone)

    def _gone(self) -> None:
        self._interrupt("gone")

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


class Watchlist:
    """The requests of one event loop that may yet need a watcher, with the loop time each is due.

    One timer serves them all, armed at the earliest due time, instead of a timer armed and
    cancelled per request (~2 µs of a quick request's CPU). When it fires it starts the watcher
    of every request now due and re-arms itself for the next one, or stays unarmed while
    nothing is pending.
    """

    # Design: due times are kept in insertion order, which is their order too: each is the
    # request's start plus the app's min(WATCH_AFTER, request_timeout), on one loop's
    # monotonic clock. So a tick pops from the front and stops at the first one not due yet.

    __slots__ = ("due", "loop", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.due: dict[Exchange, float] = {}
        self.timer: asyncio.TimerHandle | None = None

    def add(self, exchange: Exchange, at: float) -> None:
        self.due[exchange] = at
        if self.timer is None:
            self.timer = self.loop.call_at(at, self._tick)

    def discard(self, exchange: Exchange) -> None:
        """The request finished: it needs no watcher (the armed timer stays; see _tick)."""
        self.due.pop(exchange, None)

    def _tick(self) -> None:
        self.timer = None
        due = self.due
        now = self.loop.time()
        while due:
            exchange, at = next(iter(due.items()))
            if at > now:
                self.timer = self.loop.call_at(at, self._tick)
                return
            del due[exchange]
            exchange.watch()
