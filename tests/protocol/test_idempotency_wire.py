"""The SEP-3182 idempotency key on the wire (#25): bounded on decode, valid against the schema."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mrtr.protocol as p
from mrtr.errors import (
    IdempotencyKeyConflict,
    IdempotencyKeyInProgress,
    InternalError,
    InvalidParams,
    from_wire,
)

from .test_schema_valid import validator

META = p.RequestMeta(protocol_version=p.PROTOCOL_VERSION,
                     client_capabilities=p.ClientCapabilities())
VISIBLE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=255)


def call(key: str) -> p.CallToolRequest:
    params = p.CallToolRequestParams(name="pay", arguments={"amount": 5}, idempotency_key=key,
                                     meta=META)
    return p.CallToolRequest(id=1, params=params)


@given(key=VISIBLE)
def test_25_a_keyed_call_round_trips_and_the_key_is_idempotencyKey(key: str) -> None:
    wire = p.encode(call(key))
    assert json.loads(wire)["params"]["idempotencyKey"] == key
    decoded = p.decode_client_message(wire)
    assert isinstance(decoded, p.CallToolRequest) and decoded.params.idempotency_key == key
    assert p.valid_idempotency_key(key)


@pytest.mark.parametrize("key", ["", " ", "a b", "ключ", "x" * 256, "\x7f", "line\n", 5, None])
def test_25_a_malformed_key_is_invalid_params_at_decode(key: object) -> None:
    body = json.loads(p.encode(call("k")))
    body["params"]["idempotencyKey"] = key
    with pytest.raises(InvalidParams) as caught:
        p.decode_client_message(json.dumps(body))
    assert caught.value.request_id == 1
    assert not p.valid_idempotency_key(key)


def test_25_keyed_requests_and_the_capability_validate_against_the_schema(
    shared_dir: Path,
) -> None:
    # The 2026-07-28 schema does not know the field; its params objects allow extra members,
    # so a keyed request stays valid for every server, including those that ignore the key.
    request = json.loads(p.encode(call("order-1")))
    assert not list(validator("CallToolRequest").iter_errors(request))
    assert not list(validator("CallToolRequestParams").iter_errors(request["params"]))
    discover = p.DiscoverResult(supported_versions=[p.PROTOCOL_VERSION],
                                capabilities=p.ServerCapabilities(tools={"idempotency": {}}))
    wire = json.loads(p.encode(discover))
    assert wire["capabilities"] == {"tools": {"idempotency": {}}}
    assert not list(validator("DiscoverResult").iter_errors(wire))


def test_25_idempotency_declared_reads_capabilities_tools() -> None:
    assert p.idempotency_declared({"idempotency": {}})
    assert p.idempotency_declared({"listChanged": True, "idempotency": {"x": 1}})
    assert not p.idempotency_declared({})
    assert not p.idempotency_declared({"idempotency": True})
    assert not p.idempotency_declared(p.UNSET)


def test_25_the_idempotency_errors_come_back_as_their_classes() -> None:
    conflict = from_wire(msgspec.json.decode(msgspec.json.encode(
        IdempotencyKeyConflict().to_wire())))
    assert isinstance(conflict, IdempotencyKeyConflict) and isinstance(conflict, InvalidParams)
    assert conflict.to_wire() == {"code": -32602,
                                  "message": "Idempotency key already used for another call",
                                  "data": {"type": "idempotency_key_conflict"}}
    busy = from_wire({"code": -32603, "message": "busy",
                      "data": {"type": "idempotency_key_in_progress", "retryAfter": 2.5}})
    assert isinstance(busy, IdempotencyKeyInProgress) and isinstance(busy, InternalError)
    assert busy.retry_after == 2.5 and busy.message == "busy" and busy.http_status == 409
    odd = from_wire({"code": -32603, "message": "busy",
                     "data": {"type": "idempotency_key_in_progress", "retryAfter": "soon"}})
    assert isinstance(odd, IdempotencyKeyInProgress) and odd.retry_after == 1.0
    plain = from_wire({"code": -32602, "message": "bad", "data": {"type": "other"}})
    assert type(plain) is InvalidParams
