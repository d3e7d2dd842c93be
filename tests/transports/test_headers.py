"""HeaderDecoder (http/_headers.py): what it remembers never changes what a request decodes to."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.http._headers import MAX_HEADER_BYTES, HeaderDecoder
from mrtr.server._failures import Refusal


def plain(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The decoding with no memory, as the spec of it."""
    out: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("ascii").lower(), value.decode("utf-8")
        out[key] = out[key] + ", " + text if key in out else text
    return out


_names = st.sampled_from([b"Content-Type", b"content-type", b"ACCEPT", b"mcp-name", b"x-a"])
_values = st.one_of(st.sampled_from([b"application/json", b"echo", b""]),
                    st.text(max_size=80).map(lambda t: t.encode("utf-8")))


@given(st.lists(st.lists(st.tuples(_names, _values), max_size=6), max_size=8))
def test_a_remembered_decoding_is_the_plain_one(requests: list[list[tuple[bytes, bytes]]]) -> None:
    decoder = HeaderDecoder()
    for raw in requests:  # one decoder across requests, as an app keeps it
        assert decoder.decode(raw) == plain(raw)


def test_memory_is_bounded_and_long_values_are_not_kept() -> None:
    decoder = HeaderDecoder()
    for i in range(HeaderDecoder.LIMIT * 2):
        raw = [(b"x-%d" % i, b"v%d" % i), (b"authorization", b"Bearer " + b"t" * 100)]
        assert decoder.decode(raw) == plain(raw)
    assert len(decoder.names) == len(decoder.values) == HeaderDecoder.LIMIT
    assert all(len(value) <= HeaderDecoder.VALUE_LIMIT for value in decoder.values)


@pytest.mark.parametrize("raw, why", [
    ([(b"x-a", b"\xff")], "header is not valid UTF-8"),
    ([(b"x-\xe9", b"a")], "header is not valid UTF-8"),
    ([(b"x-a", b"v" * MAX_HEADER_BYTES)], "headers too large"),
])
def test_garbage_is_refused(raw: list[tuple[bytes, bytes]], why: str) -> None:
    with pytest.raises(Refusal) as refused:
        HeaderDecoder().decode(raw)
    assert refused.value.status == 400 and why.encode() in refused.value.body
