"""Streamable HTTP client transport: one POST per request, JSON or SSE replies (httpx)."""

# Design: the transport only moves bytes. It tells the final response from notifications on an
# SSE stream by the presence of an `id` without a `method` (a framing fact, not a protocol
# decision), and leaving the `async with stream` early, or being cancelled, closes the stream,
# which is how Streamable HTTP cancels a request. A server is not trusted with our memory: a
# JSON body is read up to `max_body` bytes and one SSE event up to `max_event` bytes (keep-alive
# comments end an event too); time is bounded by the Client's deadline, not here.
# The 2025 transport's session rules live here too, since they are HTTP facts: an
# `Mcp-Session-Id` issued with a 2xx reply is sent back on every later request (a server that
# never issues one is unaffected; some issue one on a 400, which is ignored), a 404 to a request
# carrying it is SessionExpired, a stream that ends before its response after giving event ids
# is resumed by GET + `Last-Event-ID` once the server's `retry` has passed, and `aclose` DELETEs
# the session.
from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
import msgspec

from mrtr.client.transports._base import MessageSink, SessionExpired, TransportError
from mrtr.protocol import JSON, UNSET, RequestId, SSEParser, UnsetType

__all__ = ["HTTPTransport"]

DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=300.0)
DEFAULT_MAX_BODY = 16 * 1024 * 1024  # bytes, as the stdio line limit
DEFAULT_MAX_EVENT = 16 * 1024 * 1024
DEFAULT_RETRY_MS = 1000  # reconnection delay when the server gave event ids but no `retry`
MAX_RESUMES = 5  # resumptions of one request's stream that bring no new event
SESSION_HEADER = "Mcp-Session-Id"
_ACCEPT = "application/json, text/event-stream"
log = logging.getLogger("mrtr.client")


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


@dataclass
class _Cursor:
    """Where an SSE stream was left: its last event id and the server's reconnection time."""

    last_id: str | None = None
    retry_ms: int | None = None


class HTTPTransport:
    """POST each request to `url` (the one MCP endpoint).

    `headers` are added to every request (e.g. Authorization); `transport` is an httpx
    transport for the client this creates (e.g. `httpx.ASGITransport(app)` in tests); `auth`
    authorizes its requests (e.g. `mrtr.client.auth.OAuth`); or pass your own `client` (it is
    then not closed by `aclose`). A JSON reply over `max_body`
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
        auth: httpx.Auth | None = None,
    ) -> None:
        if client is not None and auth is not None:
            raise ValueError("give auth to your own httpx client (AsyncClient(auth=...))")
        self.url = url
        self.max_body = max_body
        self.max_event = max_event
        self._extra = dict(headers or {})
        self._owned = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout, transport=transport, auth=auth)
        self.session_id: str | None = None
        self._last_version: dict[str, str] = {}

    async def request(
        self,
        message: bytes,
        *,
        request_id: RequestId,
        headers: Mapping[str, str],
        notify: MessageSink,
    ) -> bytes:
        """POST `message`; return the JSON-RPC response, routing SSE notifications to `notify`.

        Raises SessionExpired on a 404 to a request sent with a session id.
        """
        all_headers = self._headers(headers, "application/json")
        cursor = _Cursor()
        try:
            async with self._client.stream(
                "POST", self.url, content=message, headers=all_headers
            ) as reply:
                self._check_session(reply, all_headers)
                kind = _kind(reply)
                if kind == "text/event-stream":
                    found = await _read_stream(reply, notify, self.max_event, cursor)
                    return found or await self._resume(cursor, headers, notify)
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

    async def send(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        """POST a notification or a response; the server answers 202 (any 2xx is taken)."""
        all_headers = self._headers(headers, "application/json")
        try:
            reply = await self._client.post(self.url, content=message, headers=all_headers)
        except httpx.HTTPError as exc:
            raise TransportError(f"HTTP request to {self.url} failed: {exc}") from exc
        self._check_session(reply, all_headers)
        if not reply.is_success:
            raise TransportError(f"HTTP {reply.status_code} from {self.url} to a posted message")

    async def listen(self, sink: MessageSink, *, headers: Mapping[str, str]) -> None:
        """Read the GET stream into `sink`, resuming it after `retry`; returns if refused."""
        cursor = _Cursor()
        for _ in range(MAX_RESUMES + 1):
            before = cursor.last_id
            try:
                await self._get(cursor, headers, sink)
            except (TransportError, httpx.HTTPError) as exc:
                log.debug("no GET stream from %s: %s", self.url, exc)
                return
            if cursor.last_id is None or cursor.retry_ms is None or cursor.last_id == before:
                return
            await asyncio.sleep(cursor.retry_ms / 1000)

    async def aclose(self) -> None:
        """DELETE the session if one was issued, then close the httpx client if ours."""
        if self.session_id is not None:
            headers = self._headers(self._last_version, None)
            self.session_id = None
            with contextlib.suppress(httpx.HTTPError):
                await self._client.delete(self.url, headers=headers, timeout=5.0)
        if self._owned:
            await self._client.aclose()

    def _headers(self, headers: Mapping[str, str], content_type: str | None) -> dict[str, str]:
        out = {**self._extra, **headers}
        version = {k: v for k, v in headers.items() if k.lower() == "mcp-protocol-version"}
        self._last_version = version or self._last_version  # for the closing DELETE
        if self.session_id is not None:
            out[SESSION_HEADER] = self.session_id
        if content_type is None:
            out["Accept"] = "text/event-stream"
        else:
            out["Accept"] = _ACCEPT
            out["Content-Type"] = content_type
        return out

    def _check_session(
        self, reply: httpx.Response, sent: Mapping[str, str], *, expire: bool = True
    ) -> None:
        # A GET's 404 only means "no stream": a POST will tell whether the session ended (and
        # a call whose resumption fails is not re-sent, so it cannot run twice).
        if expire and reply.status_code == 404 and SESSION_HEADER in sent:
            self.session_id = None
            raise SessionExpired(f"HTTP 404 from {self.url}: the session has ended")
        issued = reply.headers.get(SESSION_HEADER) if reply.is_success else None
        if issued and issued.isascii() and issued.isprintable() and " " not in issued:
            self.session_id = issued

    async def _resume(
        self, cursor: _Cursor, headers: Mapping[str, str], notify: MessageSink
    ) -> bytes:
        """Reconnect with `Last-Event-ID` until the response arrives (2025 resumability)."""
        for _ in range(MAX_RESUMES):
            if cursor.last_id is None:
                break
            before = cursor.last_id
            await asyncio.sleep((cursor.retry_ms or DEFAULT_RETRY_MS) / 1000)
            found = await self._get(cursor, headers, notify)
            if found is not None:
                return found
            if cursor.last_id == before:
                break
        raise TransportError("the SSE stream ended before the response")

    async def _get(
        self, cursor: _Cursor, headers: Mapping[str, str], sink: MessageSink
    ) -> bytes | None:
        """One GET stream: the response found on it, or None when it ends without one."""
        get_headers = self._headers(headers, None)
        for name in ("Mcp-Method", "Mcp-Name"):
            get_headers.pop(name, None)
        if cursor.last_id is not None:
            get_headers["Last-Event-ID"] = cursor.last_id
        async with self._client.stream("GET", self.url, headers=get_headers) as reply:
            self._check_session(reply, get_headers, expire=False)
            if reply.status_code != 200 or _kind(reply) != "text/event-stream":
                raise TransportError(f"HTTP {reply.status_code} from {self.url} to a GET")
            return await _read_stream(reply, sink, self.max_event, cursor)


def _kind(reply: httpx.Response) -> str:
    content_type: str = reply.headers.get("content-type", "")
    return content_type.split(";")[0].strip().lower()


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


async def _read_stream(
    reply: httpx.Response, notify: MessageSink, limit: int, cursor: _Cursor
) -> bytes | None:
    """The response found on the stream, or None when the stream ends without one."""
    parser = SSEParser()
    size = EventSize(limit)
    async for chunk in reply.aiter_bytes():
        size.feed(chunk)
        events = parser.feed(chunk)
        cursor.retry_ms = parser.retry if parser.retry is not None else cursor.retry_ms
        for event in events:
            cursor.last_id = event.id or cursor.last_id
            if event.event != "message" or not event.data:
                continue
            data = event.data.encode("utf-8")
            if is_response(data):
                return data
            notify(data)
    return None
