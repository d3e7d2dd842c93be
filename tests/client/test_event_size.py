"""EventSize bounds one SSE event however the stream is split, and keep-alives never add up."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.client import TransportError
from mrtr.client.transports._http import EventSize

LINE_END = st.sampled_from([b"\n", b"\r\n", b"\r"])
LINE = st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))


def feed(chunks: list[bytes], limit: int = 10**9) -> int:
    size = EventSize(limit)
    for chunk in chunks:
        size.feed(chunk)
    return size.size


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(st.lists(st.tuples(LINE, LINE_END), max_size=20), st.lists(st.integers(0, 10**6)))
def test_any_split_gives_the_same_size(lines: list[tuple[bytes, bytes]], cuts: list[int]) -> None:
    data = b"".join(line + end for line, end in lines)
    assert feed(split(data, cuts)) == feed([data])


@given(st.lists(st.integers(0, 10**6)))
def test_an_event_over_the_limit_raises_however_split(cuts: list[int]) -> None:
    data = b": ping\r\n\r\n" * 50 + b"data: " + b"x" * 95 + b"\r\n"  # 102 bytes: CRLF counts as one
    assert feed(split(data, cuts), limit=103) == 102
    with pytest.raises(TransportError, match="max_event=100"):
        feed(split(data, cuts), limit=100)


def test_keepalives_forever_stay_small() -> None:
    size = EventSize(20)
    for _ in range(10_000):
        size.feed(b": keep-alive\n\n")
    assert size.size == 0
