"""serve_stdio: the stdio transport, newline-delimited JSON-RPC (spec: basic/transports/stdio).

Requests run concurrently; `notifications/cancelled` cancels one and suppresses its reply.
stdout carries only MCP messages; logs go to stderr (the `logging` module's business). A client
that opens with `initialize` makes the process its session (SessionServer), whatever it probed.
"""

# Design: one task per request; every write takes one lock so each message is exactly one line.
# A cancelled task never writes again (its CancelledError unwinds past the write), which is the
# spec's "MUST NOT send anything further". On EOF in-flight requests get `grace` seconds.
from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Coroutine
from typing import Any, Protocol

import msgspec

from mrtr.errors import ProtocolError
from mrtr.protocol import (
    PROTOCOL_VERSION_KEY,
    CancelledNotification,
    FrameTooLarge,
    LineFramer,
    encode_line,
    encode_message,
)
from mrtr.server import Dispatcher, Peer, Session, SessionServer
from mrtr.server._failures import error_reply, in_flight, line_too_long, not_a_request, unanswered

__all__ = ["ByteReader", "ByteWriter", "serve_stdio"]

MAX_LINE = 16 * 1024 * 1024
_CHUNK = 64 * 1024


class ByteReader(Protocol):
    """The read half: `read(n)` returns b"" at EOF (an asyncio.StreamReader fits)."""

    async def read(self, n: int = -1, /) -> bytes: ...


class ByteWriter(Protocol):
    """The write half (an asyncio.StreamWriter fits)."""

    def write(self, data: bytes, /) -> object: ...

    async def drain(self) -> None: ...


async def serve_stdio(
    dispatcher: Dispatcher,
    *,
    reader: ByteReader | None = None,
    writer: ByteWriter | None = None,
    grace: float = 5.0,
    max_line: int = MAX_LINE,
    ask_timeout: float = 600.0,
) -> None:
    """Serve `dispatcher` until EOF; stdin/stdout (fds 0 and 1) unless streams are given.

    `grace` is how many seconds in-flight requests may still run after EOF before cancellation;
    `ask_timeout` how long a request to an `initialize` client waits for its answer (seconds).
    """
    if reader is None or writer is None:
        std_reader, std_writer = await _std_streams()
        reader = reader or std_reader
        writer = writer or std_writer
    sessions = SessionServer(dispatcher, ask_timeout=ask_timeout)
    await _Stream(dispatcher, sessions, writer).run(reader, grace, max_line)


class _Stream:
    def __init__(self, dispatcher: Dispatcher, sessions: SessionServer, writer: ByteWriter) -> None:
        self.dispatcher = dispatcher
        self.sessions = sessions
        self.session: Session | None = None  # set by `initialize`: the process is the session
        self.writer = writer
        self.lock = asyncio.Lock()
        self.tasks: dict[Any, asyncio.Task[None]] = {}
        self.peer = Peer(principal=None, transport="stdio")
        self.log = logging.getLogger("mrtr.transports.stdio")
        self.broken = False

    async def run(self, reader: ByteReader, grace: float, max_line: int) -> None:
        framer = LineFramer(max_line_length=max_line)
        try:
            while True:
                chunk = await reader.read(_CHUNK)
                lines = framer.feed(chunk) if chunk else framer.close()
                for line in lines:
                    await self.take(line)
                if not chunk or self.broken:
                    break
        except FrameTooLarge:
            # Design: the framer cannot resynchronise safely, so the stream is dropped.
            self.log.error("a line exceeded %d bytes; closing the stream", max_line)
            await self.write(line_too_long())
        await self.drain(grace)
        await self.dispatcher.drain(grace)  # once work of cancelled requests: recorded

    async def take(self, line: bytes) -> None:
        try:
            message = self.dispatcher.receive(line, None)
        except ProtocolError as exc:
            if not await self.take_session(line):
                await self.write(error_reply(exc.request_id, exc).body)
            return
        if isinstance(message, CancelledNotification):
            task = self.tasks.pop(message.params.request_id, None)
            if task is not None:
                task.cancel()
            return
        if not hasattr(message, "id"):
            return  # other notifications are ignored
        if message.id in self.tasks:
            await self.write(in_flight(message.id).body)
            return
        self.spawn(message.id, self.serve(message))

    def spawn(self, key: Any, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks[key] = task
        task.add_done_callback(functools.partial(self._forget, key))

    async def take_session(self, line: bytes) -> bool:
        """Serve `line` as a message of an `initialize` session; False if it is not one."""
        try:
            message = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return False
        session = self.session
        if isinstance(message, list) and session is not None and session.version == "2025-03-26":
            # A 2025-03-26 batch: each member is served as if it came alone (replies one a line).
            for item in message:
                if not isinstance(item, dict) or not await self.take_message(item):
                    await self.write(not_a_request())
            return True
        return isinstance(message, dict) and await self.take_message(message)

    async def take_message(self, message: dict[str, Any]) -> bool:
        if _modern(message):
            return False
        method = message.get("method")
        if method == "initialize" and "id" in message:
            # Design: a failed probe (`server/discover`) never locks the era; neither does a
            # second `initialize`, which starts the session afresh.
            try:
                session, body = self.sessions.initialize(message, self.peer)
            except ProtocolError as exc:  # a session cap
                await self.write(error_reply(_id(message["id"]), exc).body)
                return True
            if session is not None:
                self.session = session
            await self.write(body)
            return True
        session = self.session
        if session is None:
            return False
        if isinstance(method, str) and "id" in message:
            if message["id"] in self.tasks:
                await self.write(in_flight(message["id"]).body)
            else:
                self.spawn(message["id"], self.serve_session(session, message))
            return True
        await self.sessions.serve(session, message, self.peer, self.write)
        return True

    async def serve_session(self, session: Session, message: dict[str, Any]) -> None:
        reply = await self.sessions.serve(session, message, self.peer, self.write)
        if reply is not None:
            await self.write(reply)

    def _forget(self, key: Any, task: asyncio.Task[None]) -> None:
        if self.tasks.get(key) is task:
            del self.tasks[key]

    async def serve(self, message: Any) -> None:
        try:
            reply = await self.dispatcher.handle(message, self.peer, self.notify)
        except Exception as exc:  # a Dispatcher bug: still answer, or the client waits forever
            reply = unanswered(message.id, exc, self.log)
        await self.write(reply.body)

    async def notify(self, notification: msgspec.Struct) -> None:
        await self.write(encode_message(notification))

    async def write(self, body: bytes) -> None:
        if self.broken:
            return
        async with self.lock:
            try:
                self.writer.write(encode_line(body))
                await self.writer.drain()
            except (ConnectionError, RuntimeError) as exc:
                self.log.info("stdout closed (%s); stopping", exc)
                self.broken = True

    async def drain(self, grace: float) -> None:
        pending = list(self.tasks.values())
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=grace)
        for task in late:
            task.cancel()
        if late:
            self.log.warning("cancelled %d request(s) still running at EOF", len(late))
            await asyncio.wait(late)


def _id(value: object) -> str | int | None:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def _modern(message: dict[str, Any]) -> bool:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


async def _std_streams() -> tuple[ByteReader, ByteWriter]:
    """Async streams over fds 0 and 1; blocking fallbacks when they are regular files."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    try:
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", closefd=False)
        )
        std_reader: ByteReader = reader
    except (ValueError, OSError):
        std_reader = _ThreadReader(0)
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(1, "wb", closefd=False)
        )
        std_writer: ByteWriter = asyncio.StreamWriter(transport, protocol, None, loop)
    except (ValueError, OSError):
        std_writer = _BlockingWriter()
    return std_reader, std_writer


class _ThreadReader:
    """Reads a file descriptor in a worker thread (for stdin redirected from a regular file)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def read(self, n: int = -1, /) -> bytes:
        size = n if n > 0 else _CHUNK
        return await asyncio.get_running_loop().run_in_executor(None, os.read, self.fd, size)


class _BlockingWriter:
    """Writes fd 1 synchronously (for stdout redirected to a regular file)."""

    def write(self, data: bytes, /) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

    async def drain(self) -> None:
        return None
