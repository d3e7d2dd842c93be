"""Random bytes and random JSON never make the decoders raise anything but ProtocolError."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import mrtr.protocol as p
from mrtr.errors import ProtocolError

from .strategies import SCALARS, TEXT

FUZZ = settings(max_examples=300, deadline=None)
METHOD_NAMES = st.sampled_from(
    [*p.METHODS, *p.REMOVED_METHODS, "notifications/cancelled", "notifications/progress", "x"]
)
ENVELOPE_VALUES: st.SearchStrategy[Any] = st.recursive(
    SCALARS | METHOD_NAMES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "jsonrpc",
                    "id",
                    "method",
                    "params",
                    "result",
                    "error",
                    "_meta",
                    "resultType",
                    "io.modelcontextprotocol/protocolVersion",
                    "io.modelcontextprotocol/clientCapabilities",
                    "name",
                    "inputResponses",
                    "code",
                    "message",
                    "content",
                    "type",
                ]
            )
            | TEXT,
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)
META: dict[str, st.SearchStrategy[Any]] = {
    "io.modelcontextprotocol/protocolVersion": st.sampled_from(["2026-07-28", "1999-01-01"]),
    "io.modelcontextprotocol/clientCapabilities": st.just({}) | ENVELOPE_VALUES,
}
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | ENVELOPE_VALUES,
        "id": st.integers() | TEXT | ENVELOPE_VALUES,
        "method": METHOD_NAMES | ENVELOPE_VALUES,
        "params": st.fixed_dictionaries(
            {}, optional={"_meta": st.fixed_dictionaries(META)}
        ).flatmap(lambda d: st.dictionaries(TEXT, ENVELOPE_VALUES, max_size=3).map(d.__or__))
        | ENVELOPE_VALUES,
        "result": ENVELOPE_VALUES,
        "error": ENVELOPE_VALUES,
    },
)


def only_protocol_errors(data: bytes) -> None:
    try:
        p.decode_client_message(data)
    except ProtocolError:
        pass
    for method in ("tools/call", "tools/list", "tasks/get"):
        try:
            p.decode_server_message(data, method)
        except ProtocolError:
            pass


@FUZZ
@given(st.binary(max_size=64))
def test_random_bytes(data: bytes) -> None:
    only_protocol_errors(data)


@FUZZ
@given(ENVELOPE_VALUES)
def test_random_json(value: Any) -> None:
    only_protocol_errors(json.dumps(value).encode())


@FUZZ
@given(MESSAGES)
def test_random_messages(value: Any) -> None:
    only_protocol_errors(json.dumps(value).encode())


@FUZZ
@given(
    st.sampled_from(["elicitation/create", "sampling/createMessage", "roots/list", "x"]),
    st.dictionaries(TEXT, ENVELOPE_VALUES, max_size=4),
)
def test_random_input_responses(method: str, obj: dict[str, Any]) -> None:
    try:
        p.decode_input_response(method, obj)
    except ProtocolError:
        pass


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    deep = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' + b"[" * 5000 + b"]" * 5000
    only_protocol_errors(deep + b"}")
    only_protocol_errors(b"[" * 5000 + b"]" * 5000)
