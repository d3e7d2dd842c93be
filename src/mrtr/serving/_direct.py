"""The direct path: a whole POST to McpApp's endpoint served without uvicorn's request cycle.

uvicorn's httptools protocol gives every request a RequestResponseCycle: an asyncio.Event, a
bytearray the body is copied into and out of, a `receive` that waits on that event, and a
`send` that checks each header with two regular expressions and writes the status line and the
body in two writes (two system calls, two TCP segments). For a POST to McpApp's endpoint that
is whole when its last byte is parsed, `DirectCycle` does less: its `receive` hands over the
body as parsed, and its `send` writes the head and the body of a reply with a Content-Length
in one write (a stream's head is written at once, as uvicorn does), and while other requests are
in flight it holds the reply to write it with the others of its loop turn (_coalesce.py). McpApp
serves it through `serve_direct`, the entry its ASGI call reaches once routed (the same code for
every check, limit, error and reply); only the cycle beneath it is cheaper. Everything else
takes uvicorn's cycle unchanged.
"""

# Design: DirectCycle is a RequestResponseCycle to the protocol: it sits in `protocol.cycle`
# and in the pipeline, and the protocol's own code (connection_lost marking it disconnected,
# shutdown clearing keep_alive, the pipeline starting it through run_asgi, server_state.tasks
# for a graceful shutdown, on_response_complete counting requests and arming the keep-alive
# timer) treats it as uvicorn's. send_500_response is inherited; run_asgi is uvicorn's with
# McpApp.serve_direct called in place of the ASGI app (the path was checked here). A
# request is taken only once its headers show a POST to the endpoint with no Expect and no
# upgrade; its body is collected until on_message_complete, and a body still arriving when the
# bytes at hand are parsed hands the request to uvicorn's cycle as if it had never been held
# (`DirectHttpTools.data_received`). McpApp's watcher of a slow request is a callback on the
# cycle's event (`_Bell`), which connection_lost sets after marking the cycle disconnected: no
# task waits in `receive` for it.
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httptools
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

from mrtr.http import McpApp
from mrtr.serving._coalesce import Replies, replies_of

__all__ = ["DirectCycle", "DirectHttpTools"]

_CHUNKED_END = b"0\r\n\r\n"
_CLOSE = b"connection: close\r\n"
_PLAIN_NAMES = frozenset({b"content-type", b"content-length"})  # pass uvicorn's name check


class _Bell(asyncio.Event):
    """A cycle's message_event, with the watcher McpApp left (`on_disconnect`): the protocol
    marks the cycle disconnected and then sets its event (connection_lost, the Deadlines'
    close), so setting it calls the watcher, once; the reply's end forgets the watcher before
    it sets the event."""

    def __init__(self) -> None:
        super().__init__()
        self.hear: Callable[[], None] | None = None

    def set(self) -> None:
        super().set()
        hear = self.hear
        if hear is not None:
            self.hear = None
            hear()


class DirectCycle(RequestResponseCycle):
    """One whole request: its body at hand, its reply written straight to the transport."""

    # Not RequestResponseCycle.__init__: only what the protocol and this class read.
    def __init__(self, protocol: DirectHttpTools, scope: Any, body: bytes,
                 keep_alive: bool) -> None:
        self.scope = scope
        self.transport = protocol.transport
        self.flow: FlowControl = protocol.flow
        self.logger = protocol.logger
        self.access_logger = protocol.access_logger
        self.access_log = protocol.access_log
        self.default_headers = protocol.server_state.default_headers
        self.on_response: Callable[..., None] = protocol.on_response_complete
        self.replies: Replies = protocol.replies
        self.in_flight: set[Any] = protocol.tasks  # every connection's requests under way
        self.keep_alive = keep_alive
        self.disconnected = False
        self.waiting_for_100_continue = False
        self.more_body = False
        self.request_body: bytes | None = body  # until the first receive()
        self.response_started = False
        self.response_complete = False
        self.chunked_encoding: bool | None = None
        self.expected_content_length = 0
        self.head: list[bytes] | None = None  # the reply's head, until its first body write
        self._event: _Bell | None = None

    @property
    def message_event(self) -> asyncio.Event:
        """Set on a disconnect or the reply's end; made only when someone waits or sets it."""
        if self._event is None:
            self._event = _Bell()
        return self._event

    @message_event.setter
    def message_event(self, event: asyncio.Event) -> None:
        # uvicorn hands its cycles their event in __init__ and never assigns it; one that is
        # not a bell would not call McpApp's watcher.
        if not isinstance(event, _Bell):
            raise TypeError("a DirectCycle's message_event is its own")
        self._event = event

    # -- McpApp's Direct (http/_exchange.py): the body and a whole reply, without messages ----
    def take_body(self) -> bytes | None:
        body = self.request_body
        self.request_body = None
        return None if self.disconnected else body

    def reply(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
        if self.response_started or (self.flow.write_paused and not self.disconnected):
            return False  # McpApp sends the messages: send() waits, or refuses a second reply
        if not self.disconnected:
            self.response_started = True
            head = self._head(status, headers)
            if self.chunked_encoding or len(body) != self.expected_content_length:
                self.head = head  # chunked, or a length that _framed refuses
                data = self._framed(body, False)
            else:  # _framed's usual case, inline: the head and the whole body in one write
                self.expected_content_length = 0
                head.append(body)
                data = b"".join(head)
            if self.keep_alive and len(self.in_flight) > 1:  # not alone: with the turn's others
                self.replies.later(self.transport, data)
            else:
                self.replies.now(self.transport, data)
            self._complete()
        return True

    def on_disconnect(self, callback: Callable[[], None] | None) -> None:
        if callback is None:
            if self._event is not None:
                self._event.hear = None
        elif self.disconnected:  # soon, not now: this may be the handler's own task
            asyncio.get_running_loop().call_soon(callback)
        else:
            bell = self._event
            if bell is None:
                bell = self._event = _Bell()
            bell.hear = callback
            self.flow.resume_reading()  # as receive() does: a close is seen only reading

    # -- ASGI ------------------------------------------------------------------------------------
    async def run_asgi(self, app: Any) -> None:
        """uvicorn's run_asgi (the same log lines, 500 and closes), calling McpApp's direct
        entry with this cycle: no ASGI call, no extensions dict carrying the cycle (#31)."""
        try:
            await app.serve_direct(self.scope, self.receive, self.send, self)
        except BaseException as exc:
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            if not self.response_started:
                await self.send_500_response()
            else:
                self.transport.close()
        else:
            if not self.response_started and not self.disconnected:
                self.logger.error("ASGI callable returned without starting response.")
                await self.send_500_response()
            elif not self.response_complete and not self.disconnected:
                self.logger.error("ASGI callable returned without completing response.")
                self.transport.close()
        finally:
            self.on_response = _nothing

    async def receive(self) -> Any:
        body = self.request_body
        if body is not None and not self.disconnected:
            self.request_body = None
            return {"type": "http.request", "body": body, "more_body": False}
        # Then as uvicorn's cycle: wait for the client to go or the reply to end.
        if not self.disconnected and not self.response_complete:
            self.flow.resume_reading()
            event = self.message_event
            await event.wait()
            event.clear()
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(self, message: Any) -> None:
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.response_started:
            if kind != "http.response.start":
                raise RuntimeError(
                    f"Expected ASGI message 'http.response.start', but got '{kind}'.")
            self.response_started = True
            head = self._head(message["status"], message.get("headers", ()))
            if self.chunked_encoding:  # a stream: its head goes out now, events may take long
                self.replies.now(self.transport, b"".join(head))
            else:  # a whole reply (Content-Length): written with its body, in one write
                self.head = head
            return
        if self.response_complete:
            raise RuntimeError(
                f"Unexpected ASGI message '{kind}' sent, after response already completed.")
        if kind != "http.response.body":
            raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{kind}'.")
        more_body: bool = message.get("more_body", False)
        self.replies.now(self.transport, self._framed(message.get("body", b""), more_body))
        if not more_body:
            self._complete()

    def _complete(self) -> None:
        if self.expected_content_length != 0:
            raise RuntimeError("Response content shorter than Content-Length")
        self.response_complete = True
        event = self._event
        if event is not None:
            event.hear = None  # the reply's end is no disconnect
            event.set()
        if not self.keep_alive:
            self.transport.close()
        self.on_response()

    def _framed(self, body: bytes, more_body: bool) -> bytes:
        """The bytes of one body chunk, after the head if it has not gone out yet."""
        content = self.head or []
        self.head = None
        if self.chunked_encoding:
            if body:
                content += (b"%x\r\n" % len(body), body, b"\r\n")
            if not more_body:
                content.append(_CHUNKED_END)
        else:
            if len(body) > self.expected_content_length:
                raise RuntimeError("Response content longer than Content-Length")
            self.expected_content_length -= len(body)
            content.append(body)
        return b"".join(content)  # a single bytes object is returned as it is, not copied

    def _head(self, status: int, headers: Any) -> list[bytes]:
        """The status line and headers, framed as uvicorn frames them (see its cycle's send)."""
        if self.access_log:
            self._log(status)
        content = [STATUS_LINE[status]]
        for name, value in self.default_headers:  # the server's own: date, server
            content += (name, b": ", value, b"\r\n")
        close = False
        for raw_name, value in headers:
            # McpApp's usual names are valid and lower-case: only their values are checked
            name = raw_name if raw_name in _PLAIN_NAMES else _checked_name(raw_name)
            if HEADER_VALUE_RE.search(value):
                raise RuntimeError("Invalid HTTP header value.")
            if name == b"content-length" and self.chunked_encoding is None:
                self.expected_content_length = int(value.decode())
                self.chunked_encoding = False
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self.expected_content_length = 0
                self.chunked_encoding = True
            elif name == b"connection" and b"close" in [
                token.lower().strip() for token in value.split(b",")
            ]:
                self.keep_alive = False
                close = True
            content += (name, b": ", value, b"\r\n")
        if not self.keep_alive and not close:
            content.append(_CLOSE)
        if self.chunked_encoding is None and status not in (204, 304):  # never a HEAD here
            self.chunked_encoding = True
            content.append(b"transfer-encoding: chunked\r\n")
        content.append(b"\r\n")
        return content

    def _log(self, status: int) -> None:
        scope = self.scope
        self.access_logger.info('%s - "%s %s HTTP/%s" %d', get_client_addr(scope),
                                scope["method"], get_path_with_query_string(scope),
                                scope["http_version"], status)


def _nothing() -> None:
    """A finished cycle's on_response: it lets go of the protocol (as uvicorn's lambda)."""


def _checked_name(name: bytes) -> bytes:
    """The header's name, lower-cased; RuntimeError for a name uvicorn refuses."""
    if HEADER_RE.search(name):
        raise RuntimeError("Invalid HTTP header name.")
    return name.lower()


if TYPE_CHECKING:
    _Base = HttpToolsProtocol
else:
    _Base = object


class DirectHttpTools(_Base):
    """The direct path, mixed into uvicorn's httptools protocol (before it in the MRO)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        app = self.app
        # Only McpApp itself: a wrapped app (proxy headers, a user's middleware) may read more
        # of the scope or the messages than DirectCycle keeps; and only at the root path.
        self.direct_path: bytes | None = (
            app.path.encode() if type(app) is McpApp and not self.root_path
            and app.path.isascii() and "%" not in app.path else None)
        self.held: list[bytes] | None = None  # the body of a request being held, so far
        self.replies = replies_of(self.server_state, self.loop)

    def on_headers_complete(self) -> None:
        path = self.direct_path
        parser = self.parser
        limit = self.limit_concurrency  # over it: uvicorn's cycle answers 503
        if (path is None or self.expect_100_continue or parser.get_method() != b"POST"
                or parser.should_upgrade() or (limit is not None and (
                    len(self.connections) >= limit or len(self.tasks) >= limit))):
            super().on_headers_complete()
            return
        parsed = httptools.parse_url(self.url)
        if parsed.path != path:
            super().on_headers_complete()
            return
        scope = self.scope
        scope["method"] = "POST"
        version = parser.get_http_version()
        if version != "1.1":
            scope["http_version"] = version
        scope["path"] = path.decode()
        scope["raw_path"] = path
        scope["query_string"] = parsed.query or b""
        self.held = []

    def on_body(self, body: bytes) -> None:
        if self.held is not None:
            self.held.append(body)
        else:
            super().on_body(body)

    def on_message_complete(self) -> None:
        held = self.held
        if held is None:
            super().on_message_complete()
            return
        self.held = None
        parser = self.parser
        keep_alive = self.scope["http_version"] != "1.0" and parser.should_keep_alive()
        body = held[0] if len(held) == 1 else b"".join(held)
        cycle = DirectCycle(self, self.scope, body, keep_alive)
        existing = self.cycle
        self.cycle = cycle
        if existing is None or existing.response_complete:
            self._start_asgi_task(cycle, self.app)
        else:  # pipelined behind a request still being answered
            self.flow.pause_reading()
            self.pipeline.appendleft((cycle, self.app))

    # What uvicorn writes or closes goes after the replies held for this connection.
    def shutdown(self) -> None:
        self.replies.now(self.transport)
        super().shutdown()

    def timeout_keep_alive_handler(self) -> None:
        self.replies.now(self.transport)
        super().timeout_keep_alive_handler()

    def data_received(self, data: bytes) -> None:
        self.replies.now(self.transport)  # a parse error's 400 follows the earlier replies
        super().data_received(data)
        held = self.held
        if held is None:
            return
        self.held = None
        if not self.transport.is_closing():
            # The body is still arriving: uvicorn's cycle takes the request as it stands.
            HttpToolsProtocol.on_headers_complete(self)
            if held:
                HttpToolsProtocol.on_body(self, b"".join(held))
