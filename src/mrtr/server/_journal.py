"""The journal: what a flow carries from round to round inside the sealed requestState."""

# Design: the body is msgpack (compact, fast) and opaque to the Sealer, which only binds and
# encrypts it. `pending` maps each key the last round asked to the shape of that ask, so a retry
# may only answer those questions, and only as they were asked. Answers are journaled as their
# validated JSON (fields a form ignores are dropped), so a client cannot bloat the state.
from __future__ import annotations

import msgspec

from mrtr.protocol import JSON

__all__ = ["Answer", "FlowState", "decode_flow", "encode_flow"]


class Answer(msgspec.Struct, array_like=True):
    """One accepted answer: the shape digest of the ask it answered and its validated JSON."""

    shape: str
    value: JSON


class FlowState(msgspec.Struct, array_like=True):
    """Everything a flow needs from earlier rounds; round 0 means no state was presented."""

    flow_id: str = ""
    round: int = 0
    journal: dict[str, Answer] = msgspec.field(default_factory=dict)
    onces: dict[str, JSON] = msgspec.field(default_factory=dict)
    pending: dict[str, str] = msgspec.field(default_factory=dict)  # key -> shape sent
    state: JSON = None
    # Names this round among all rounds of all flows, when a store makes rounds single-use:
    # the store key derives from it (never from the token text, which is malleable). The hex of
    # the sealing token's random nonce (Sealer.seal); states sealed before #31 carry 16
    # random bytes of their own here, read the same way.
    round_id: str = ""
    # The W3C traceparent of the span that sealed this state ("" when not tracing): the next
    # round's span links to it. Server-private like the rest of the state.
    trace: str = ""


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(FlowState)


def encode_flow(flow: FlowState) -> bytes:
    return _ENCODER.encode(flow)


def decode_flow(body: bytes) -> FlowState:
    """Decode a sealed body; raises msgspec.DecodeError/ValidationError on corruption."""
    return _DECODER.decode(body)
