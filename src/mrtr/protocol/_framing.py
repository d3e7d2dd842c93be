"""Framing: newline-delimited JSON for stdio and Server-Sent Events for Streamable HTTP.

Bytes in, frames out; frames in, bytes out. No I/O (spec: transports/stdio, streamable-http).
"""

# Design: both parsers keep only an unterminated tail and scan each chunk once, so a message
# arriving in many small chunks costs linear time. SSEParser follows the WHATWG "event stream
# interpretation" rules to the letter, including that an event not closed by a blank line before
# the end of the stream is discarded; so `close()` only finishes decoding and resets.
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from mrtr.errors import MrtrError

__all__ = [
    "SSE_KEEPALIVE",
    "FrameTooLarge",
    "LineFramer",
    "SSEEvent",
    "SSEParser",
    "encode_line",
    "encode_sse_event",
]

DEFAULT_MAX_LINE = 16 * 1024 * 1024
SSE_KEEPALIVE = b": keep-alive\n\n"
_EOL = re.compile(r"\r\n|\r|\n")
_EOL_BYTES = re.compile(rb"\r\n|\r|\n")


class FrameTooLarge(MrtrError, ValueError):
    """A frame exceeds the framer's size limit; the stream should be dropped."""


def encode_line(message: bytes) -> bytes:
    """Return `message` terminated by `\\n` for stdio.

    Raises ValueError if it holds a raw `\\n` or `\\r` (JSON text never needs one).
    """
    if b"\n" in message or b"\r" in message:
        raise ValueError("a stdio message must not contain a raw newline")
    return message + b"\n"


class LineFramer:
    """Split a byte stream into `\\n`- or `\\r\\n`-terminated frames, skipping blank lines."""

    def __init__(self, *, max_line_length: int = DEFAULT_MAX_LINE) -> None:
        self.max_line_length = max_line_length
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Return the lines completed by `data`, without their terminators.

        Raises FrameTooLarge when a line exceeds `max_line_length` bytes; the framer is then
        unusable.
        """
        start = len(self._buffer)
        self._buffer += data
        lines: list[bytes] = []
        begin = 0
        pos = self._buffer.find(b"\n", start)
        while pos != -1:
            self._take(lines, bytes(self._buffer[begin:pos]))
            begin = pos + 1
            pos = self._buffer.find(b"\n", begin)
        del self._buffer[:begin]
        # One spare byte for a `\r` whose `\n` has not arrived yet.
        if len(self._buffer) > self.max_line_length + 1:
            raise FrameTooLarge(f"line exceeds {self.max_line_length} bytes")
        return lines

    def close(self) -> list[bytes]:
        """Return the final line if the stream ended without a newline, and reset."""
        lines: list[bytes] = []
        self._take(lines, bytes(self._buffer))
        self._buffer.clear()
        return lines

    def _take(self, lines: list[bytes], line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self.max_line_length:
            raise FrameTooLarge(f"line exceeds {self.max_line_length} bytes")
        if line:
            lines.append(line)


def encode_sse_event(data: bytes, *, event: str | None = None, id: str | None = None) -> bytes:
    """Return one SSE event; each line of `data` becomes a `data:` line.

    `data` is UTF-8; its CR, LF and CRLF all come back as LF. Raises ValueError when `event` or
    `id` holds a line break, or `id` a NUL (which the WHATWG parser would ignore).
    """
    out = bytearray()
    if event is not None:
        out += b"event: " + _field_value(event, "event") + b"\n"
    if id is not None:
        if "\0" in id:
            raise ValueError("an SSE id must not contain NUL")
        out += b"id: " + _field_value(id, "id") + b"\n"
    for line in _EOL_BYTES.split(data):
        out += b"data: " + line + b"\n"
    out += b"\n"
    return bytes(out)


def _field_value(value: str, field: str) -> bytes:
    if "\n" in value or "\r" in value:
        raise ValueError(f"an SSE {field} must not contain a line break")
    return value.encode("utf-8")


@dataclass(frozen=True, slots=True, kw_only=True)
class SSEEvent:
    """One dispatched event; `id` is the stream's last event ID (None when unset or empty)."""

    event: str = "message"
    data: str
    id: str | None = None


class SSEParser:
    """Parse a `text/event-stream` body into SSEEvents, per the WHATWG HTML rules."""

    def __init__(self) -> None:
        self.retry: int | None = None  # the last `retry:` field (reconnection time, ms)
        self._reset()

    def _reset(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False
        self._skip_lf = False
        self._tail: list[str] = []
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Return the events completed by `chunk` (any split of the stream is fine)."""
        return self._feed_text(self._decoder.decode(chunk))

    def close(self) -> list[SSEEvent]:
        """End the stream and reset; an event without its closing blank line is discarded."""
        events = self._feed_text(self._decoder.decode(b"", final=True))
        self._reset()
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._skip_lf and text:
            text = text.removeprefix("\n")
            self._skip_lf = False
        if not text:
            return []
        parts = _EOL.split(text)
        self._skip_lf = text.endswith("\r")
        events: list[SSEEvent] = []
        for index, part in enumerate(parts[:-1]):
            line = "".join([*self._tail, part]) if index == 0 else part
            self._line(line, events)
        if len(parts) > 1:
            self._tail.clear()
        self._tail.append(parts[-1])
        return events

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if line == "":
            self._dispatch(events)
            return
        if line.startswith(":"):
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._last_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._data:
            events.append(SSEEvent(data="\n".join(self._data), event=self._event or "message",
                                   id=self._last_id or None))
        self._data = []
        self._event = ""
