"""Tests for mrtr.protocol._framing: stdio lines and Server-Sent Events."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.protocol._framing import (
    SSE_KEEPALIVE,
    FrameTooLarge,
    LineFramer,
    SSEEvent,
    SSEParser,
    encode_line,
    encode_sse_event,
)


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    """Split `data` at the given offsets (clamped and sorted)."""
    points = sorted({min(c, len(data)) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


# --- stdio lines --------------------------------------------------------------------------------


def test_encode_line() -> None:
    assert encode_line(b'{"jsonrpc":"2.0"}') == b'{"jsonrpc":"2.0"}\n'


@pytest.mark.parametrize("message", [b'{"a":\n1}', b"x\r", b"\n"])
def test_encode_line_rejects_raw_newlines(message: bytes) -> None:
    with pytest.raises(ValueError):
        encode_line(message)


def test_line_framer_splits_and_keeps_the_tail() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert framer.feed(b":2}\r") == []
    assert framer.feed(b"\n\n\r\n{}\n") == [b'{"b":2}', b"{}"]
    assert framer.feed(b"") == []


def test_line_framer_close_returns_an_unterminated_line() -> None:
    framer = LineFramer()
    assert framer.feed(b"{}\n{") == [b"{}"]
    assert framer.close() == [b"{"]
    assert framer.close() == []


def test_line_framer_limit() -> None:
    framer = LineFramer(max_line_length=4)
    assert framer.feed(b"abcd\r\n") == [b"abcd"]
    assert framer.feed(b"abcd\r") == []
    with pytest.raises(FrameTooLarge):
        framer.feed(b"x")
    with pytest.raises(FrameTooLarge):
        LineFramer(max_line_length=4).feed(b"abcde\nok\n")
    with pytest.raises(ValueError):
        LineFramer(max_line_length=4).feed(b"abcdefgh")


LINE = st.binary(min_size=1).filter(lambda b: b"\n" not in b and b"\r" not in b)


@given(st.lists(LINE), st.lists(st.integers(0, 10_000)), st.booleans())
def test_line_framer_reassembles_any_split(lines: list[bytes], cuts: list[int], crlf: bool) -> None:
    stream = b"".join(encode_line(line)[:-1] + (b"\r\n" if crlf else b"\n") for line in lines)
    framer = LineFramer()
    out = [frame for chunk in split_at(stream, cuts) for frame in framer.feed(chunk)]
    assert out == lines
    assert framer.close() == []


# --- SSE encoding -------------------------------------------------------------------------------


def test_encode_sse_event() -> None:
    assert encode_sse_event(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert encode_sse_event(b"a\nb\r\nc\rd", event="message", id="7") == (
        b"event: message\nid: 7\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    )
    assert encode_sse_event(b"") == b"data: \n\n"
    assert SSE_KEEPALIVE == b": keep-alive\n\n"


@pytest.mark.parametrize(
    ("event", "id"), [("a\nb", None), ("a\rb", None), (None, "1\n"), (None, "a\0b")]
)
def test_encode_sse_event_rejects_bad_fields(event: str | None, id: str | None) -> None:
    with pytest.raises(ValueError):
        encode_sse_event(b"x", event=event, id=id)


# --- SSE parsing (WHATWG rules) -----------------------------------------------------------------


def parse(*chunks: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    events = [e for chunk in chunks for e in parser.feed(chunk)]
    return events + parser.close()


@pytest.mark.parametrize(
    "stream",
    [
        b"data: x\n\n",
        b"data: x\r\n\r\n",
        b"data: x\r\r",
        b"data:x\n\n",
        b"\xef\xbb\xbfdata: x\n\n",
        b": comment\ndata: x\nretry: 10\nunknown: y\n\n",
        b"data: x\n\n\n\n",
    ],
)
def test_sse_single_event(stream: bytes) -> None:
    assert parse(stream) == [SSEEvent(data="x")]


def test_sse_field_details() -> None:
    assert parse(b"data:  two spaces\n\n") == [SSEEvent(data=" two spaces")]
    assert parse(b"data: a\ndata\ndata: b\n\n") == [SSEEvent(data="a\n\nb")]
    assert parse(b"data\n\n") == [SSEEvent(data="")]
    assert parse(b"data: \n\n") == [SSEEvent(data="")]
    assert parse(b"event: ping\n\n") == []
    assert parse(b"event: ping\ndata: 1\n\n") == [SSEEvent(event="ping", data="1")]
    assert parse(b"event:\ndata: 1\n\n") == [SSEEvent(event="message", data="1")]
    assert parse(b"data: a:b: c\n\n") == [SSEEvent(data="a:b: c")]
    assert parse(b"DATA: x\n\n") == []


def test_sse_bom_only_at_stream_start() -> None:
    assert parse(b"\xef\xbb", b"\xbfdata: x\n\n") == [SSEEvent(data="x")]
    assert parse(b"data: x\n\n\xef\xbb\xbfdata: y\n\n") == [SSEEvent(data="x")]


def test_sse_incomplete_event_is_discarded_at_close() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: x\n\ndata: y\n") == [SSEEvent(data="x")]
    assert parser.close() == []
    assert parser.feed(b"data: z\n\n") == [SSEEvent(data="z")]


def test_sse_last_event_id_persists() -> None:
    events = parse(b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: x\0y\ndata: d\n\n")
    assert [e.id for e in events] == ["1", "1", None, None]


def test_sse_split_line_endings_and_utf8() -> None:
    text = "data: caf\u00e9\r\n\r\n".encode()
    events = [SSEEvent(data="caf\u00e9")]
    for cut in range(len(text) + 1):
        assert parse(text[:cut], text[cut:]) == events, cut
    assert parse(b"data: a\r", b"\ndata: b\r", b"\r") == [SSEEvent(data="a\nb")]
    assert parse(b"data: \xff\n\n") == [SSEEvent(data="\ufffd")]


def test_sse_keepalive_between_events() -> None:
    stream = SSE_KEEPALIVE + encode_sse_event(b"1") + SSE_KEEPALIVE + encode_sse_event(b"2")
    assert parse(stream) == [SSEEvent(data="1"), SSEEvent(data="2")]


FIELD = st.text().filter(lambda s: not any(c in s for c in "\r\n\0"))
EVENTS = st.lists(
    st.tuples(
        st.text().filter(lambda s: "\r" not in s),
        st.none() | FIELD,
        st.none() | FIELD,
        st.booleans(),
    )
)


@given(EVENTS, st.lists(st.integers(0, 10_000)))
def test_sse_parser_reassembles_any_chunking(
    events: list[tuple[str, str | None, str | None, bool]], cuts: list[int]
) -> None:
    stream = b""
    expected: list[SSEEvent] = []
    last_id: str | None = None
    for data, event, id, keepalive in events:
        stream += encode_sse_event(data.encode(), event=event, id=id)
        stream += SSE_KEEPALIVE if keepalive else b""
        last_id = (id or None) if id is not None else last_id
        expected.append(SSEEvent(event=event or "message", data=data, id=last_id))
    parser = SSEParser()
    out = [e for chunk in split_at(stream, cuts) for e in parser.feed(chunk)]
    assert out + parser.close() == expected
