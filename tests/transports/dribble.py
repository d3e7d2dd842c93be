"""Slow clients over raw sockets: send a request a byte at a time, see when the server hangs up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from mrtr.serving import ConnectionLimits
from mrtr.serving._uvicorn import BoundedConfig, protocol_class

HOST = "127.0.0.1"


def head(path: str = "/mcp", *, length: int | None = None, method: str = "POST") -> bytes:
    """A request line and headers; with `length`, a JSON body of that many bytes follows."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}", "Content-Type: application/json",
             "Accept: application/json, text/event-stream", "Mcp-Protocol-Version: 2026-07-28",
             "Mcp-Method: server/discover"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class Hangup:
    """What one slow client saw: seconds from starting to connect to the server closing."""

    after: float | None  # None: still open when the client gave up
    received: bytes

    @property
    def status(self) -> int | None:
        """The status of the first response received, if any."""
        if not self.received.startswith(b"HTTP/1.1 "):
            return None
        return int(self.received[9:12])


async def dribble(port: int, sent: bytes = b"", drip: bytes = b"", *, every: float = 1.0,
                  give_up: float = 10.0) -> Hangup:
    """Connect, send `sent` at once, then `drip` one byte every `every` seconds.

    Returns when the server closes the connection (or after `give_up` seconds).
    """
    loop = asyncio.get_running_loop()
    # From before the connect: the server's deadline starts when it accepts, and with hundreds of
    # clients on one loop this coroutine may resume long after that (stop 41's CI saw 0.8 s).
    start = loop.time()
    reader, writer = await asyncio.open_connection(HOST, port)

    async def send() -> None:
        writer.write(sent)
        for byte in drip:
            await asyncio.sleep(every)
            if writer.is_closing() or reader.at_eof():
                return
            writer.write(bytes([byte]))

    sender = asyncio.create_task(send())
    received = b""
    after: float | None = None
    try:
        async with asyncio.timeout(give_up):
            while chunk := await reader.read(65536):
                received += chunk
        after = loop.time() - start
    except (ConnectionResetError, BrokenPipeError):
        after = loop.time() - start
    except TimeoutError:
        pass
    finally:
        sender.cancel()
        with contextlib.suppress(BaseException):
            await sender
        writer.close()
    return Hangup(after, received)


async def read_response(reader: asyncio.StreamReader) -> bytes:
    """One whole response with a Content-Length (status line, headers and body)."""
    top = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in top.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return top + await reader.readexactly(length)


def open_files(pid: int) -> int:
    """How many file descriptors process `pid` holds."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def raise_open_files(needed: int) -> None:
    """Lift this process's soft RLIMIT_NOFILE to `needed` (within the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        top = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))


@contextlib.contextmanager
def bounded_server(app: Any, parser: str, **limits: Any) -> Iterator[int]:
    """uvicorn with mrtr serve's bounded protocol on a free port, in a thread; yields the port."""
    config = BoundedConfig(app, limits=ConnectionLimits(**limits), host=HOST, port=0,
                           http=protocol_class(parser), loop="asyncio", log_level="warning",
                           lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started or not thread.is_alive():
                break
            threading.Event().wait(0.02)
        assert server.started, "uvicorn did not start"
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
