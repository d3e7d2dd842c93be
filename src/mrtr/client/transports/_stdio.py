"""stdio client transport: run the server as a subprocess, newline-delimited JSON-RPC."""

# Design: one reader task routes each line by `id` to the waiting request, so requests run
# concurrently; notifications (no id) go to every in-flight request's sink, and the client keeps
# the ones that are its own (progress tokens). Cancelling a waiting request sends
# `notifications/cancelled`, the stdio way to cancel (spec: transports/stdio). A 2025 server
# also sends requests: they go to the `listen` sink when one is set, else to the waiting sinks.
from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from mrtr.client.transports._base import MessageSink, TransportError
from mrtr.protocol import (
    JSON,
    UNSET,
    CancelledNotification,
    CancelledNotificationParams,
    LineFramer,
    RequestId,
    UnsetType,
    encode_line,
    encode_message,
)

__all__ = ["ServerExited", "StdioTransport", "TAIL"]

DEFAULT_MAX_LINE = 16 * 1024 * 1024  # bytes, as LineFramer's default
TAIL: Literal["tail"] = "tail"
TAIL_LINES = 20
TAIL_LINE_BYTES = 512  # a longer stderr line keeps its first bytes
TAIL_WAIT = 1.0  # seconds to wait for the rest of stderr once the server has exited


class ServerExited(TransportError):
    """The server process exited; `stderr_tail` holds its last stderr lines (with `stderr=TAIL`)."""

    def __init__(self, code: int | None, stderr_tail: Sequence[str] = ()) -> None:
        self.code = code
        self.stderr_tail = tuple(stderr_tail)
        text = f"the server exited with code {code}"
        if self.stderr_tail:
            text += "; the end of its stderr:\n" + "\n".join(self.stderr_tail)
        super().__init__(text)


class _Peek(msgspec.Struct, frozen=True):
    id: JSON = UNSET
    method: JSON | UnsetType = UNSET


_PEEK = msgspec.json.Decoder(_Peek)
_Waiter = tuple["asyncio.Future[bytes]", MessageSink]


class StdioTransport:
    """Spawn `command` (a list, or a string split like a shell would) on first use.

    `stderr` is passed to the subprocess (None inherits ours; `subprocess.DEVNULL` hides the
    server's log); `TAIL` hides it but keeps its last lines (up to 20, each cut at 512 bytes)
    for the ServerExited error raised when the server exits. A line over `max_line` bytes from
    the server fails every request with TransportError. Shutdown closes stdin, waits
    `shutdown_timeout` seconds, then sends SIGTERM, then SIGKILL.
    """

    sends_headers = False

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | Literal["tail"] | None = None,
        shutdown_timeout: float = 2.0,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._stderr = stderr
        self._shutdown_timeout = shutdown_timeout
        self.max_line = max_line
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._tail_reader: asyncio.Task[None] | None = None
        self._waiting: dict[RequestId, _Waiter] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        self._listener: MessageSink | None = None

    async def request(
        self,
        message: bytes,
        *,
        request_id: RequestId,
        headers: Mapping[str, str],
        notify: MessageSink,
    ) -> bytes:
        """Write `message` as one line; wait for the line answering `request_id`."""
        proc = await self._ensure_started()
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (future, notify)
        try:
            await self._write(proc, message)
            return await future
        except asyncio.CancelledError:
            if future.cancelled():  # no answer yet: tell the server to stop
                self._cancel_remote(proc, request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)

    async def send(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        """Write one notification or response line."""
        await self._write(await self._ensure_started(), message)

    async def listen(self, sink: MessageSink, *, headers: Mapping[str, str]) -> None:
        """Pass the server's requests to `sink` (instead of to every waiting request's sink)."""
        await self._ensure_started()
        self._listener = sink
        try:
            await asyncio.Event().wait()
        finally:
            self._listener = None

    async def aclose(self) -> None:
        """Close stdin, wait, then SIGTERM, then SIGKILL."""
        self._closed = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            for stop in (None, proc.terminate, proc.kill):
                if stop is not None:
                    with contextlib.suppress(ProcessLookupError):
                        stop()
                try:
                    await asyncio.wait_for(proc.wait(), self._shutdown_timeout)
                    break
                except TimeoutError:
                    continue
        for task in (self._reader, self._tail_reader):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _ensure_started(self) -> asyncio.subprocess.Process:
        async with self._lock:
            if self._closed:
                raise TransportError("the transport is closed")
            if self._proc is None:
                stderr = asyncio.subprocess.PIPE if self._stderr == TAIL else self._stderr
                try:
                    self._proc = await asyncio.create_subprocess_exec(
                        *self.argv, stdin=asyncio.subprocess.PIPE,
                        stdout=asyncio.subprocess.PIPE, stderr=stderr,
                        env=self._env, cwd=self._cwd,
                    )
                except OSError as exc:
                    raise TransportError(f"cannot start {self.argv[:1]}: {exc}") from exc
                if self._proc.stderr is not None:
                    self._tail_reader = asyncio.create_task(self._keep_tail(self._proc.stderr))
                self._reader = asyncio.create_task(self._read(self._proc))
            if self._proc.returncode is not None:
                raise await self._exited(self._proc)
            return self._proc

    async def _keep_tail(self, stream: asyncio.StreamReader) -> None:
        """Read the server's stderr to its end, keeping the last lines (bounded)."""
        partial = b""
        while chunk := await stream.read(65536):
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                self._tail.append(line[:TAIL_LINE_BYTES].decode("utf-8", "replace").rstrip())
            partial = partial[: TAIL_LINE_BYTES + 1]
        if partial:
            self._tail.append(partial[:TAIL_LINE_BYTES].decode("utf-8", "replace").rstrip())

    async def _exited(self, proc: asyncio.subprocess.Process) -> ServerExited:
        """The error for a server that has exited, with its stderr tail once that is read."""
        if self._tail_reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._tail_reader), TAIL_WAIT)
        return ServerExited(proc.returncode, list(self._tail))

    async def _write(self, proc: asyncio.subprocess.Process, message: bytes) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(encode_line(message))
            await proc.stdin.drain()
        except (ConnectionError, OSError) as exc:
            raise TransportError(f"cannot write to the server: {exc}") from exc

    def _cancel_remote(self, proc: asyncio.subprocess.Process, request_id: RequestId) -> None:
        # No drain: a server that reads nothing must not hang the cancellation (the deadline).
        note = CancelledNotification(params=CancelledNotificationParams(request_id=request_id))
        assert proc.stdin is not None
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            proc.stdin.write(encode_line(encode_message(note)))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        framer = LineFramer(max_line_length=self.max_line)
        try:
            while chunk := await proc.stdout.read(65536):
                for line in framer.feed(chunk):
                    self._route(line)
            for line in framer.close():
                self._route(line)
        except ValueError as exc:  # FrameTooLarge
            self._fail(TransportError(f"bad output from the server: {exc}"))
            return
        await proc.wait()
        self._fail(await self._exited(proc))

    def _route(self, line: bytes) -> None:
        try:
            peek = _PEEK.decode(line)
        except msgspec.DecodeError:
            return  # not JSON-RPC: stdout must carry only MCP messages, so skip it
        if peek.method is UNSET:
            waiter = self._waiting.get(peek.id) if isinstance(peek.id, str | int) else None
            if waiter is not None and not waiter[0].done():
                waiter[0].set_result(line)
        elif peek.id is not UNSET and self._listener is not None:
            self._listener(line)  # a server request (2025 sessions): answered once
        else:
            for _, notify in list(self._waiting.values()):
                notify(line)

    def _fail(self, error: TransportError) -> None:
        for future, _ in self._waiting.values():
            if not future.done():
                future.set_exception(error)
