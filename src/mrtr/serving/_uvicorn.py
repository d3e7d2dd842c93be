"""uvicorn's HTTP protocols with deadlines for a request's headers and body (`mrtr serve`).

uvicorn bounds the idle time between requests (`timeout_keep_alive`) and the number of
connections (`limit_concurrency`), but not the time a client takes to send a request: a
connection that dribbles its headers or body one byte at a time stays open, and even its idle
timer is re-armed by every byte. `Deadlines` adds that bound to both of uvicorn's parsers.
The httptools protocol also serves a whole POST to McpApp's endpoint directly (_direct.py).
"""

# Design: the phases are read from what uvicorn exposes, not from parser internals: a new
# `cycle` means the headers are complete (both protocols make one per request at that point),
# `cycle.more_body` turning False means the body is, and `on_response_complete` means the
# connection is idle again. The timer is armed only when a phase outlasts the data_received
# call that began it, so a request that arrives in one piece costs no timer.
from __future__ import annotations

import asyncio
import importlib.util
import logging
from typing import TYPE_CHECKING, Any, Protocol

from uvicorn.config import Config
from uvicorn.server import ServerState

from mrtr.serving._connections import MAX_HEAD_BYTES, ConnectionLimits
from mrtr.serving._gc import GcTuning, tune_gc

__all__ = ["BoundedConfig", "protocol_class"]

log = logging.getLogger("mrtr.serve")
# The mixin's base for the type checker only: at run time the protocol class follows it in the
# MRO, so its super() calls reach uvicorn's methods.
if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    _Base = H11Protocol
else:
    _Base = object
_HEAD, _BODY, _APP, _IDLE = "head", "body", "app", "idle"


class BoundedConfig(Config):
    """uvicorn.Config carrying ConnectionLimits to the protocols (and to worker processes);
    with `gc`, each process serving it tunes its garbage collector once its app is loaded
    (_gc.py; None: left as it is)."""

    def __init__(self, app: Any, *, limits: ConnectionLimits, gc: GcTuning | None = None,
                 **options: Any) -> None:
        super().__init__(app, **{**options, **limits.uvicorn_options()})
        self.limits = limits
        self.gc = gc

    def load(self) -> None:
        super().load()  # in the process that serves: each worker runs it for itself
        if self.gc is not None:
            tune_gc(self.gc)


def protocol_class(parser: str) -> type[asyncio.Protocol]:
    """The bounded protocol for uvicorn's `"httptools"` or `"h11"` parser (if installed).

    Each is built at its first use, so a server on httptools never loads h11 (0.5 MiB)."""
    if parser not in _PROTOCOLS:
        if parser == "h11":
            _PROTOCOLS["h11"] = _bounded_h11()
        elif parser == "httptools" and importlib.util.find_spec("httptools") is not None:
            _PROTOCOLS["httptools"] = _bounded_httptools()
        else:
            raise ValueError(f"no bounded protocol for the {parser!r} parser")
    return _PROTOCOLS[parser]


class _Cycle(Protocol):
    """What both protocols' RequestResponseCycle expose about one request."""

    more_body: bool
    response_started: bool
    response_complete: bool
    disconnected: bool
    message_event: asyncio.Event


class _Connection(Protocol):
    @property
    def cycle(self) -> _Cycle | None: ...

    @property
    def transport(self) -> asyncio.Transport: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...


class Deadlines:
    """One connection's deadline: the request's headers in time, then its body in time.

    A connection is in one phase at a time: "head" (from the connection opening, or from the
    first byte after a response, to the end of the headers), "body" (to the end of the body),
    "app" (the request is whole: no deadline of ours) or "idle" (between requests, where
    uvicorn's keep-alive timer applies). A head longer than MAX_HEAD_BYTES gets 431.
    """

    __slots__ = ("conn", "head_bytes", "limits", "phase", "request", "since", "timer")

    def __init__(self, conn: _Connection, limits: ConnectionLimits) -> None:
        self.conn = conn
        self.limits = limits
        self.phase = _IDLE
        self.since = 0.0  # loop time the phase began
        self.timer: asyncio.TimerHandle | None = None
        self.request: _Cycle | None = None  # the last request whose headers were seen
        self.head_bytes = 0

    def opened(self) -> None:
        """The connection opened: its first request's headers are due."""
        self._begin(_HEAD)
        self._arm()  # a client that never sends a byte is bounded too

    # receiving, received and answered run for every request: their usual paths are written
    # out rather than calling _observe and _begin (five calls fewer a request, #31).
    def receiving(self) -> None:
        """Bytes arrived (before they are parsed): after a response they begin a request."""
        if self.phase is _IDLE:
            if self.timer is not None:  # none runs while idle; as _begin would, all the same
                self._cancel()
            self.phase = _HEAD
            self.since = self.conn.loop.time()
            self.head_bytes = 0

    def received(self, size: int) -> None:
        """Bytes were parsed: move on if they completed the headers or the body."""
        cycle = self.conn.cycle
        if cycle is not None and cycle is not self.request and not cycle.more_body:
            self.request = cycle  # the usual case: a whole request arrived
            if self.timer is not None:
                self._cancel()
            self.phase = _APP
            return
        self._observe()
        phase = self.phase
        if phase is _APP:
            return  # the usual case: the whole request arrived
        if phase is _HEAD:
            self.head_bytes += size
            if self.head_bytes > MAX_HEAD_BYTES:
                self._close(431, "Request Header Fields Too Large",
                            f"the request line and headers exceed {MAX_HEAD_BYTES} bytes")
                return
        if self.timer is None and (phase is _HEAD or phase is _BODY):
            self._arm()

    def answered(self) -> None:
        """A response completed: the connection is idle unless another request is under way."""
        cycle = self.conn.cycle
        if cycle is not None and (cycle is not self.request or self.phase is _BODY):
            self._observe()
        if cycle is not None and cycle.response_complete:
            if self.timer is not None:
                self._cancel()
            self.phase = _IDLE

    def stop(self) -> None:
        """The connection is closed, or handed to another protocol (a WebSocket)."""
        self._cancel()
        self.phase = _APP

    def _observe(self) -> None:
        cycle = self.conn.cycle
        if cycle is None:
            return
        if cycle is not self.request:  # a new request: its headers are complete
            self.request = cycle
            self._begin(_BODY if cycle.more_body else _APP)
        elif self.phase is _BODY and not cycle.more_body:
            self._begin(_APP)

    def _begin(self, phase: str) -> None:
        if self.timer is not None:
            self._cancel()
        self.phase = phase
        if phase is _HEAD or phase is _BODY:  # the phases with a deadline: when it began
            self.since = self.conn.loop.time()
            self.head_bytes = 0

    def _arm(self) -> None:
        limit = self.limits.header_timeout if self.phase is _HEAD else self.limits.body_timeout
        self.timer = self.conn.loop.call_at(self.since + limit, self._expire)

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        if self.phase is _HEAD:
            # A connection that sent nothing is closed quietly (a browser's preconnect).
            status = 408 if self.head_bytes else None
            self._close(status, "Request Timeout", "the request headers did not arrive within "
                        f"{self.limits.header_timeout:g} s")
        elif self.phase is _BODY:
            self._close(408, "Request Timeout", "the request body did not arrive within "
                        f"{self.limits.body_timeout:g} s")

    def _close(self, status: int | None, reason: str, text: str) -> None:
        transport = self.conn.transport
        if transport.is_closing():
            return
        cycle = self.conn.cycle if self.phase is _BODY else None
        started = cycle is not None and cycle.response_started
        if status is not None and not started:
            body = f"{text}\n".encode()
            transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
                            b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                            % (status, reason.encode(), len(body), body))
        if cycle is not None:  # the app waiting for the body sees the client gone
            cycle.disconnected = True
            cycle.message_event.set()
        log.debug("closed an HTTP connection: %s", text)
        self.stop()
        transport.close()


class _Bounded(_Base):
    """The deadlines of ConnectionLimits, mixed into one of uvicorn's HTTP protocols.

    Both protocols take (config, server_state, app_state, _loop) and differ in what calls in
    here only by handle_websocket_upgrade: h11 passes the request event, httptools nothing, so
    it forwards whatever it was given."""

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.deadlines = Deadlines(self, _limits(config))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.deadlines.opened()

    def data_received(self, data: bytes) -> None:
        self.deadlines.receiving()
        super().data_received(data)
        self.deadlines.received(len(data))

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.deadlines.answered()

    def handle_websocket_upgrade(self, *event: Any) -> None:
        self.deadlines.stop()
        super().handle_websocket_upgrade(*event)

    def connection_lost(self, exc: Exception | None) -> None:
        self.deadlines.stop()
        super().connection_lost(exc)


def _limits(config: Config) -> ConnectionLimits:
    return config.limits if isinstance(config, BoundedConfig) else ConnectionLimits()


_PROTOCOLS: dict[str, type[asyncio.Protocol]] = {}


def _bounded_h11() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11(_Bounded, H11Protocol):
        """uvicorn's h11 protocol with the request deadlines of ConnectionLimits."""

    BoundedH11.__qualname__ = "BoundedH11"  # pickled by name into worker processes
    return BoundedH11


def _bounded_httptools() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from mrtr.serving._direct import DirectHttpTools
    from mrtr.serving._keepalive import LazyKeepAlive

    class BoundedHttpTools(  # type: ignore[misc]
        _Bounded, DirectHttpTools, LazyKeepAlive, HttpToolsProtocol
    ):
        """uvicorn's httptools protocol with the request deadlines of ConnectionLimits, the
        direct path for a whole POST to McpApp's endpoint (_direct.py) and one keep-alive
        timer per idle spell (_keepalive.py)."""

    BoundedHttpTools.__qualname__ = "BoundedHttpTools"
    return BoundedHttpTools


def __getattr__(name: str) -> type[asyncio.Protocol]:
    """`BoundedH11` / `BoundedHttpTools` by name (how a worker process unpickles its config)."""
    parser = {"BoundedH11": "h11", "BoundedHttpTools": "httptools"}.get(name)
    if parser is None:
        raise AttributeError(name)
    return protocol_class(parser)
