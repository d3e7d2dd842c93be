"""The journal codec: what a flow carries between rounds."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.server._journal import Answer, FlowState, decode_flow, encode_flow

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=10,
)


@given(
    round_no=st.integers(0, 1000),
    journal=st.dictionaries(st.text(max_size=8), json_values.map(lambda v: Answer("s", v)),
                            max_size=4),
    onces=st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    state=json_values,
)
def test_roundtrip(round_no: int, journal: dict[str, Answer], onces: dict[str, object],
                   state: object) -> None:
    flow = FlowState(flow_id="f", round=round_no, journal=journal, onces=onces,
                     pending={key: "s" for key in journal}, state=state)
    assert decode_flow(encode_flow(flow)) == flow


def test_empty_flow_is_round_zero() -> None:
    assert FlowState().round == 0 and decode_flow(encode_flow(FlowState())) == FlowState()


@pytest.mark.parametrize("body", [b"", b"\xc1", msgspec.msgpack.encode({"round": 1})])
def test_corrupt_bodies_raise(body: bytes) -> None:
    with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
        decode_flow(body)
