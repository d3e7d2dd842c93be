"""Streamable HTTP client transport: one POST per request, JSON or SSE replies (httpx)."""

# Design: the transport only moves bytes. It tells the final response from notifications on an
# SSE stream by the presence of an `id` without a `method` (a framing fact, not a protocol
# decision), and leaving the `async with stream` early, or being cancelled, closes the stream,
# which is how Streamable HTTP cancels a request. A server is not trusted with our memory: a
# JSON body is read up to `max_body` bytes and one SSE event up to `max_event` bytes (keep-alive
# comments end an event too); time is bounded by the Client's deadline, not here.
from __future__ import annotations

import socket
from collections.abc import Mapping

import httpx
import msgspec

from mrtr.client import NotificationSink, TransportError
from mrtr.protocol import JSON, UNSET, RequestId, SSEParser, UnsetType

__all__ = ["HTTPTransport"]

DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=300.0)
DEFAULT_MAX_BODY = 16 * 1024 * 1024  # bytes, as the stdio line limit
DEFAULT_MAX_EVENT = 16 * 1024 * 1024
_ACCEPT = "application/json, text/event-stream"


class _Peek(msgspec.Struct, frozen=True):
    id: JSON = UNSET
    method: JSON | UnsetType = UNSET


_PEEK = msgspec.json.Decoder(_Peek)


def is_response(message: bytes) -> bool:
    """True for a JSON-RPC response (an `id` and no `method`); False for anything else."""
    try:
        peek = _PEEK.decode(message)
    except msgspec.DecodeError:
        return False
    return peek.id is not UNSET and peek.method is UNSET


class HTTPTransport:
    """POST each request to `url` (the one MCP endpoint).

    `headers` are added to every request (e.g. Authorization); `transport` is an httpx
    transport for the client this creates (e.g. `httpx.ASGITransport(app)` in tests); or pass
    your own `client` (it is then not closed by `aclose`). A JSON reply over `max_body`
    bytes, or an SSE event over `max_event` bytes, raises TransportError.
    """

    sends_headers = True

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        max_body: int = DEFAULT_MAX_BODY,
        max_event: int = DEFAULT_MAX_EVENT,
    ) -> None:
        self.url = url
        self.max_body = max_body
        self.max_event = max_event
        self._extra = dict(headers or {})
        self._owned = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout, transport=transport)

    async def request(
        self,
        message: bytes,
        *,
        request_id: RequestId,
        headers: Mapping[str, str],
        notify: NotificationSink,
    ) -> bytes:
        """POST `message`; return the JSON-RPC response, routing SSE notifications to `notify`."""
        all_headers = {
            **self._extra,
            **headers,
            "Accept": _ACCEPT,
            "Content-Type": "application/json",
        }
        try:
            async with self._client.stream(
                "POST", self.url, content=message, headers=all_headers
            ) as reply:
                kind = reply.headers.get("content-type", "").split(";")[0].strip().lower()
                if kind == "text/event-stream":
                    return await _read_stream(reply, notify, self.max_event)
                body = await _read_body(reply, self.max_body)
                if kind == "application/json" or (body[:1] == b"{" and reply.status_code < 500):
                    return body
                raise TransportError(
                    f"HTTP {reply.status_code} from {self.url}: not an MCP reply "
                    f"({kind or 'no content type'})" + _excerpt(body)
                )
        except httpx.ConnectError as exc:
            raise TransportError(f"cannot connect to {self.url}: {_reason(exc)}") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise TransportError(f"HTTP request to {self.url} failed: {exc}") from exc

    async def aclose(self) -> None:
        """Close the httpx client if this transport created it."""
        if self._owned:
            await self._client.aclose()


def _excerpt(body: bytes, limit: int = 200) -> str:
    """`: <the body's first characters>` on one line (it often says why), or "" when empty."""
    text = " ".join(body[: limit * 4].decode("utf-8", "replace").split())
    if not text:
        return ""
    return ": " + (text if len(text) <= limit else text[:limit] + "...")


def _reason(exc: BaseException) -> str:
    """Why a connection failed, from the OS error under httpx's (often generic) message."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (is the server running?)"
        if isinstance(cause, socket.gaierror):
            return f"unknown host ({cause.strerror or cause})"
        cause = cause.__cause__ or cause.__context__
    return f"{exc} (is the server running?)"


async def _read_body(reply: httpx.Response, limit: int) -> bytes:
    declared = reply.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TransportError(f"the reply body ({declared} bytes) exceeds max_body={limit}")
    body = bytearray()
    async for chunk in reply.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise TransportError(f"the reply body exceeds max_body={limit} bytes")
    return bytes(body)


class EventSize:
    """The size in bytes of the SSE event being received (since the last blank line).

    Line ends are CRLF, LF or CR (WHATWG); `feed` raises TransportError past `limit`.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._line_start = True  # the bytes so far end with a line end
        self._after_cr = False  # ... and that line end was a CR (an LF may follow)

    def feed(self, chunk: bytes) -> None:
        if self._after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._after_cr = chunk[-1:] == b"\r"
        if not chunk:
            return
        text = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = (b"\n" if self._line_start else b"") + text
        self._line_start = text[-1:] == b"\n"
        blank = end.rfind(b"\n\n")
        self.size = len(end) - blank - 2 if blank != -1 else self.size + len(text)
        if self.size > self.limit:
            raise TransportError(f"an SSE event exceeds max_event={self.limit} bytes")


async def _read_stream(reply: httpx.Response, notify: NotificationSink, limit: int) -> bytes:
    parser = SSEParser()
    size = EventSize(limit)
    async for chunk in reply.aiter_bytes():
        size.feed(chunk)
        for event in parser.feed(chunk):
            if event.event != "message" or not event.data:
                continue
            data = event.data.encode("utf-8")
            if is_response(data):
                return data
            notify(data)
    raise TransportError("the SSE stream ended before the response")
