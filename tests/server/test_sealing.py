"""Tests for mrtr.server._sealing: round-trips, rotation, tampering, binding, time, keys."""

from __future__ import annotations

import base64
import hashlib
import logging
import random
import re
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given
from hypothesis import strategies as st

from mrtr.errors import InvalidParams, InvalidRequestState
from mrtr.server import _sealing
from mrtr.server._sealing import (
    Binding,
    Sealer,
    StateTooLarge,
    digest_arguments,
    generate_key,
    parse_keys,
)

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 140))
KEY_C = b"\xff" * 32
NOW = 1_000_000.0
FROZEN = "Invalid or expired requestState"
UNKNOWN_KEY = ("sealed by a key this server does not have: restarted with a new key or keys "
               "rotated?")
B = Binding(
    method="tools/call",
    target="book",
    arguments_digest=digest_arguments({"n": 1}),
    principal="sub:42",
)
SEALER = Sealer(keys=[KEY_A], audience="billing", clock=lambda: NOW)
ROTATED = Sealer(keys=[KEY_B, KEY_A], audience="billing", clock=lambda: NOW)
OTHER = Sealer(keys=[KEY_C], audience="billing", clock=lambda: NOW)

bindings = st.builds(
    Binding,
    method=st.text(max_size=30),
    target=st.text(max_size=100),
    arguments_digest=st.binary(min_size=32, max_size=32),
    principal=st.none() | st.text(max_size=40),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


class Clock:
    """A settable clock for one test."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def decode(token: str) -> bytes:
    raw = token.removeprefix("v1.")
    return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))


def encode(blob: bytes, prefix: str = "v1.") -> str:
    return prefix + base64.urlsafe_b64encode(blob).rstrip(b"=").decode("ascii")


def rejected(sealer: Sealer, token: object, binding: Binding = B) -> str:
    """Unseal `token`, expect InvalidRequestState, and return its reason."""
    with pytest.raises(InvalidRequestState) as info:
        sealer.unseal(token, binding)  # type: ignore[arg-type]
    assert info.value.message == FROZEN
    assert str(info.value) == FROZEN
    assert isinstance(info.value, InvalidParams) and info.value.code == -32602
    assert info.value.reason
    return info.value.reason


def forge(master: bytes, plain: bytes) -> str:
    """Seal raw plaintext under `master` exactly as the wire format says (AEAD-valid garbage)."""
    kid = _sealing._derive(master, _sealing._INFO_KID, 8)
    nonce = b"\x00" * 12
    ct = AESGCM(_sealing._derive(master, _sealing._INFO_KEY, 32)).encrypt(
        nonce, plain, b"v1." + kid
    )
    return encode(kid + nonce + ct)


# --- round-trip and rotation ------------------------------------------------------------------


@given(body=st.binary(max_size=2048), binding=bindings)
def test_seal_roundtrip(body: bytes, binding: Binding) -> None:
    token = SEALER.seal(body, binding)
    assert re.fullmatch(r"v1\.[A-Za-z0-9_-]+", token)
    state = SEALER.unseal(token, binding)
    assert state.body == body
    assert state.deadline == NOW + 3600.0


def test_seal_uses_fresh_nonces() -> None:
    assert SEALER.seal(b"x", B) != SEALER.seal(b"x", B)


@given(body=st.binary(max_size=256))
def test_rotation_old_state_unseals_with_new_keys(body: bytes) -> None:
    assert ROTATED.unseal(SEALER.seal(body, B), B).body == body


def test_rotation_seals_with_first_key() -> None:
    token = ROTATED.seal(b"x", B)
    new_only = Sealer(keys=[KEY_B], audience="billing", clock=lambda: NOW)
    assert decode(token)[:8] == decode(new_only.seal(b"x", B))[:8]
    assert decode(token)[:8] != decode(SEALER.seal(b"x", B))[:8]
    assert new_only.unseal(token, B).body == b"x"
    assert rejected(SEALER, token) == UNKNOWN_KEY


def test_state_from_foreign_key_rejected() -> None:
    assert rejected(SEALER, OTHER.seal(b"x", B)) == UNKNOWN_KEY
    assert rejected(OTHER, SEALER.seal(b"x", B)) == UNKNOWN_KEY


def test_ephemeral_sealers_are_isolated() -> None:
    one = Sealer.ephemeral(audience="a", clock=lambda: NOW)
    two = Sealer.ephemeral(audience="a", clock=lambda: NOW)
    assert one.unseal(one.seal(b"hi", B), B).body == b"hi"
    assert rejected(two, one.seal(b"hi", B)) == UNKNOWN_KEY


# --- tampering --------------------------------------------------------------------------------


@given(st.data())
def test_any_bit_flip_rejected(data: st.DataObject) -> None:
    blob = bytearray(decode(ROTATED.seal(data.draw(st.binary(max_size=64)), B)))
    bit = data.draw(st.integers(0, len(blob) * 8 - 1))
    blob[bit // 8] ^= 1 << (bit % 8)
    reason = rejected(ROTATED, encode(bytes(blob)))
    assert reason == (UNKNOWN_KEY if bit < 64 else "tampered")


@given(st.data())
def test_truncation_rejected(data: st.DataObject) -> None:
    token = SEALER.seal(data.draw(st.binary(max_size=64)), B)
    rejected(SEALER, token[: data.draw(st.integers(0, len(token) - 1))])
    blob = decode(token)
    rejected(SEALER, encode(blob[: data.draw(st.integers(0, len(blob) - 1))]))


@given(body=st.binary(max_size=64), extra=st.binary(min_size=1, max_size=16))
def test_extension_rejected(body: bytes, extra: bytes) -> None:
    token = SEALER.seal(body, B)
    assert rejected(SEALER, encode(decode(token) + extra)) == "tampered"
    rejected(SEALER, token + base64.urlsafe_b64encode(extra).decode().rstrip("="))


def test_swapped_kid_rejected() -> None:
    blob = decode(ROTATED.seal(b"x", B))  # sealed under KEY_B
    kid_a = decode(SEALER.seal(b"x", B))[:8]
    assert rejected(ROTATED, encode(kid_a + blob[8:])) == "tampered"


@pytest.mark.parametrize("prefix", ["", "v2.", "V1.", "v1", "v1.."])
def test_changed_prefix_rejected(prefix: str) -> None:
    token = encode(decode(SEALER.seal(b"x", B)), prefix)
    assert rejected(SEALER, token) in {"bad prefix", "bad base64"}


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (42, "not a string"),
        (b"v1.AAAA", "not a string"),
        (None, "not a string"),
        ("", "bad prefix"),
        ("v1.", "too short"),
        ("v1.!!!!", "bad base64"),
        ("v1.ab+c", "bad base64"),
        ("v1.ab/c", "bad base64"),
        ("v1.abc=", "bad base64"),
        ("v1.a", "bad base64"),
        ("v1.é", "bad base64"),
        ("v1. abc", "bad base64"),
        ("v1." + "A" * 40, "too short"),
        ("v1." + "A" * 60, UNKNOWN_KEY),
    ],
)
def test_malformed_tokens_rejected(token: object, reason: str) -> None:
    assert rejected(SEALER, token) == reason


def test_oversized_token_rejected_before_decoding() -> None:
    small = Sealer(keys=[KEY_A], audience="billing", clock=lambda: NOW, max_state_bytes=200)
    assert rejected(small, "v1." + "A" * 198) == "too long"
    assert rejected(small, "v1." + "!" * 10_000) == "too long"


def test_undecodable_payload_rejected() -> None:
    assert rejected(SEALER, forge(KEY_A, b"\xc1 not msgpack")) == "malformed payload"
    assert rejected(SEALER, forge(KEY_A, msgspec.msgpack.encode([1, 2]))) == "malformed payload"


def test_unknown_payload_version_rejected() -> None:
    claims = msgspec.msgpack.decode(decode_plain(SEALER.seal(b"x", B)))
    claims[0] = 2
    assert rejected(SEALER, forge(KEY_A, msgspec.msgpack.encode(claims))) == (
        "unsupported payload version"
    )


def decode_plain(token: str) -> bytes:
    blob = decode(token)
    aead = AESGCM(_sealing._derive(KEY_A, _sealing._INFO_KEY, 32))
    return aead.decrypt(blob[8:20], blob[20:], b"v1." + blob[:8])


def test_wire_format_matches_design() -> None:
    claims = msgspec.msgpack.decode(decode_plain(SEALER.seal(b"body", B)))
    assert claims == [
        1,
        NOW,
        NOW + 900.0,
        NOW + 3600.0,
        "tools/call",
        "book",
        B.arguments_digest,
        "billing",
        hashlib.sha256(b"sub:42").digest(),
        b"body",
    ]


# --- binding ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"method": "prompts/get"}, "method mismatch"),
        ({"target": "cancel"}, "target mismatch"),
        ({"arguments_digest": digest_arguments({"n": 2})}, "arguments mismatch"),
        ({"principal": "sub:43"}, "principal mismatch"),
        ({"principal": None}, "principal mismatch"),
        ({"principal": ""}, "principal mismatch"),
    ],
)
def test_state_bound_to_request_and_principal(change: dict[str, Any], reason: str) -> None:
    other = msgspec.structs.replace(B, **change)
    assert rejected(SEALER, SEALER.seal(b"x", B), other) == reason
    assert rejected(SEALER, SEALER.seal(b"x", other), B) == reason


def test_state_bound_to_audience() -> None:
    elsewhere = Sealer(keys=[KEY_A], audience="shipping", clock=lambda: NOW)
    assert rejected(elsewhere, SEALER.seal(b"x", B)) == "audience mismatch"


@given(one=bindings, two=bindings)
def test_any_other_binding_rejected(one: Binding, two: Binding) -> None:
    token = SEALER.seal(b"x", one)
    if one == two:
        assert SEALER.unseal(token, two).body == b"x"
    else:
        assert rejected(SEALER, token, two).endswith("mismatch")


# --- time -------------------------------------------------------------------------------------


def test_expiry() -> None:
    clock = Clock()
    sealer = Sealer(keys=[KEY_A], audience="billing", ttl=60.0, clock=clock)
    token = sealer.seal(b"x", B)
    clock.now = NOW + 60.0
    assert sealer.unseal(token, B).body == b"x"
    clock.now = NOW + 60.001
    assert rejected(sealer, token) == "expired"


def test_flow_deadline_is_never_extended() -> None:
    clock = Clock()
    sealer = Sealer(keys=[KEY_A], audience="billing", ttl=900.0, flow_ttl=1000.0, clock=clock)
    state = sealer.unseal(sealer.seal(b"r1", B), B)
    assert state.deadline == NOW + 1000.0
    clock.now = NOW + 800.0
    token = sealer.seal(b"r2", B, deadline=state.deadline)
    assert sealer.unseal(token, B).deadline == NOW + 1000.0
    clock.now = NOW + 1000.5  # the round's own expiry (NOW + 1700) is still ahead
    assert rejected(sealer, token) == "flow deadline passed"


def test_nan_deadline_fails_closed() -> None:
    assert rejected(SEALER, SEALER.seal(b"x", B, deadline=float("nan"))) == "flow deadline passed"


def test_future_issued_at_rejected() -> None:
    ahead = Clock(NOW + 10.0)
    sealer = Sealer(keys=[KEY_A], audience="billing", clock=ahead)
    assert SEALER.unseal(sealer.seal(b"x", B), B).body == b"x"  # within the skew
    ahead.now = NOW + 3600.0
    assert rejected(SEALER, sealer.seal(b"x", B)) == "issued in the future"


def test_reasons_differ_by_case() -> None:
    clock = Clock()
    sealer = Sealer(keys=[KEY_A], audience="billing", ttl=10.0, clock=clock)
    good = sealer.seal(b"x", B)
    blob = bytearray(decode(good))
    blob[-1] ^= 1
    tampered = rejected(sealer, encode(bytes(blob)))
    clock.now = NOW + 11.0
    expired = rejected(sealer, good)
    assert (tampered, expired) == ("tampered", "expired")


# --- size limits ------------------------------------------------------------------------------


@given(body=st.binary(max_size=600), binding=bindings)
def test_size_check_is_exact(body: bytes, binding: Binding) -> None:
    size = len(SEALER.seal(body, binding))
    at_limit = Sealer(keys=[KEY_A], audience="billing", clock=lambda: NOW, max_state_bytes=size)
    assert at_limit.unseal(at_limit.seal(body, binding), binding).body == body
    below = Sealer(keys=[KEY_A], audience="billing", clock=lambda: NOW, max_state_bytes=size - 1)
    with pytest.raises(StateTooLarge):
        below.seal(body, binding)


def test_state_too_large_is_value_error() -> None:
    small = Sealer(keys=[KEY_A], audience="billing", max_state_bytes=1024)
    with pytest.raises(ValueError, match="1024"):
        small.seal(b"x" * 2000, B)


# --- logging ----------------------------------------------------------------------------------


def test_logs_reason_but_never_token_or_body(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    sealer = Sealer(keys=[KEY_A], audience="billing", ttl=10.0, clock=clock)
    body = b"secret-journal-entry"
    token = sealer.seal(body, B)
    caplog.set_level(logging.DEBUG, logger="mrtr.sealing")
    rejected(sealer, token, msgspec.structs.replace(B, principal="intruder"))
    rejected(sealer, token[:-4] + "AAAA")
    rejected(sealer, token + "AAAA")
    clock.now = NOW + 11.0
    rejected(sealer, token)
    text = caplog.text
    assert "principal mismatch" in text and "tampered" in text and "expired" in text
    assert token not in text and token[3:40] not in text and "secret-journal" not in text
    levels = {r.getMessage().rsplit(": ", 1)[1]: r.levelno for r in caplog.records}
    assert levels["expired"] == logging.INFO and levels["tampered"] == logging.WARNING


def test_custom_logger(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.sealing.custom")
    sealer = Sealer(keys=[KEY_A], audience="billing", clock=lambda: NOW, logger=logger)
    with caplog.at_level(logging.INFO, logger="test.sealing.custom"):
        rejected(sealer, "nope")
    assert [r.name for r in caplog.records] == ["test.sealing.custom"]


# --- argument digests -------------------------------------------------------------------------


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=8), st.randoms())
def test_digest_arguments_ignores_key_order(args: dict[str, object], rnd: random.Random) -> None:
    items = list(args.items())
    rnd.shuffle(items)
    assert digest_arguments(dict(items)) == digest_arguments(args)
    nested = {"outer": args, "list": [args]}
    assert digest_arguments(nested) == digest_arguments(
        {"list": [dict(items)], "outer": dict(items)}
    )


@given(json_values, json_values)
def test_digest_arguments_separates_values(one: object, two: object) -> None:
    if digest_arguments(one) == digest_arguments(two):
        canonical = _sealing._canonical_json_value
        assert msgspec.json.encode(canonical(one, 100), order="sorted") == msgspec.json.encode(
            canonical(two, 100), order="sorted"
        )


def test_digest_arguments_canonical_numbers() -> None:
    assert digest_arguments({"n": 1.0}) == digest_arguments({"n": 1})
    assert digest_arguments([0.0, -0.0]) == digest_arguments([0, 0])
    assert digest_arguments({"n": 1.5}) != digest_arguments({"n": 1})
    assert digest_arguments({"n": "1"}) != digest_arguments({"n": 1})
    assert digest_arguments({}) != digest_arguments([])
    assert digest_arguments((1, 2)) == digest_arguments([1, 2])
    assert len(digest_arguments(None)) == 32


# --- keys -------------------------------------------------------------------------------------


def test_generate_key_roundtrips_through_parse_keys() -> None:
    text = generate_key()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", text)
    (key,) = parse_keys(text)
    assert len(key) == 32 and generate_key() != text


def test_parse_keys_formats() -> None:
    b64 = base64.b64encode(KEY_B).decode()  # standard, padded (openssl rand -base64)
    text = f" {KEY_A.hex()} , {encode(KEY_C, '')},{b64}\n"
    assert parse_keys(text) == [KEY_A, KEY_C, KEY_B]
    assert parse_keys(KEY_A.hex().upper()) == [KEY_A]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "no requestState keys"),
        (" , ", "no requestState keys"),
        ("00" * 16, "16 bytes"),
        (f"{KEY_A.hex()},", "#2 is empty"),
        ("not a key!", "neither hex nor base64url"),
        ("é" * 50, "neither hex nor base64url"),
    ],
)
def test_parse_keys_rejects(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        parse_keys(text)
    if text.strip(" ,"):
        assert text.split(",")[0] not in str(info.value)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: Sealer(keys=[], audience="a"), ValueError),
        (lambda: Sealer(keys=KEY_A, audience="a"), ValueError),  # type: ignore[arg-type]
        (lambda: Sealer(keys=[b"short"], audience="a"), ValueError),
        (lambda: Sealer(keys=[KEY_A, b"x" * 31], audience="a"), ValueError),
        (lambda: Sealer(keys=[KEY_A.hex()], audience="a"), TypeError),  # type: ignore[list-item]
        (lambda: Sealer(keys=[KEY_A], audience="a", ttl=0), ValueError),
        (lambda: Sealer(keys=[KEY_A], audience="a", flow_ttl=float("inf")), ValueError),
        (lambda: Sealer(keys=[KEY_A], audience="a", max_state_bytes=10), ValueError),
    ],
)
def test_sealer_rejects_bad_config(make: Callable[[], Sealer], error: type[Exception]) -> None:
    with pytest.raises(error):
        make()


def test_repr_hides_keys() -> None:
    text = repr(ROTATED)
    assert "billing" in text and KEY_A.hex() not in text and repr(KEY_A) not in text


# --- boundaries, defaults and messages pinned by mutation testing (make mutate) ------------------


def test_digest_arguments_sorts_keys() -> None:
    assert digest_arguments({"a": 1, "b": 2}) == digest_arguments({"b": 2, "a": 1})
    assert digest_arguments([{"a": 1, "b": 2}]) == digest_arguments([{"b": 2, "a": 1}])


def test_digest_arguments_separates_list_items() -> None:
    assert digest_arguments({"seats": [1, 2]}) != digest_arguments({"seats": [3, 4]})
    assert digest_arguments([1.0, [2.0]]) == digest_arguments([1, [2]])


def test_digest_arguments_keeps_unsafe_integral_floats() -> None:
    # Below 2**53 an integral float is exactly the integer it reads as; from 2**53 on it may not be.
    assert digest_arguments(2.0**53 - 1) == digest_arguments(2**53 - 1)
    assert digest_arguments(2.0**53) != digest_arguments(2**53)


def test_parse_keys_tells_hex_from_base64() -> None:
    text = "X" + "a" * 43  # even length and hex digits but for the "X": base64, not a bad hex key
    assert parse_keys(text) == [base64.b64decode(text)]


def test_parse_keys_keeps_trailing_x_and_tolerates_padding() -> None:
    text = "a" * 43 + "X"
    assert parse_keys(text) == [base64.b64decode(text)]
    padded = base64.b64encode(KEY_A).decode()
    assert parse_keys(padded.rstrip("=")) == parse_keys(padded) == [KEY_A]
    assert parse_keys(padded + "=") == [KEY_A]


def test_sub_second_lifetimes_are_valid() -> None:
    clock = Clock()
    sealer = Sealer(keys=[KEY_A], audience="billing", ttl=0.5, flow_ttl=0.75, clock=clock)
    token = sealer.seal(b"x", B)
    clock.now = NOW + 0.5
    assert sealer.unseal(token, B).deadline == NOW + 0.75
    clock.now = NOW + 0.6
    assert rejected(sealer, token) == "expired"


@pytest.mark.parametrize(
    "make",
    [lambda **kw: Sealer(keys=[KEY_A], **kw), Sealer.ephemeral],
    ids=["Sealer", "ephemeral"],
)
def test_default_lifetimes(make: Callable[..., Sealer]) -> None:
    clock = Clock()
    sealer = make(audience="billing", clock=clock)  # ttl: 900 s a round
    token = sealer.seal(b"x", B)
    clock.now = NOW + 900.0
    assert sealer.unseal(token, B).deadline == NOW + 3600.0
    clock.now = NOW + 900.5
    assert rejected(sealer, token) == "expired"
    clock.now = NOW
    patient = make(audience="billing", ttl=7200.0, clock=clock)  # flow_ttl: 3600 s a flow
    token = patient.seal(b"x", B)
    clock.now = NOW + 3600.5
    assert rejected(patient, token) == "flow deadline passed"


def test_ephemeral_passes_every_option_on(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    logger = logging.getLogger("test.sealing.ephemeral")
    sealer = Sealer.ephemeral(
        audience="billing", ttl=5.0, flow_ttl=8.0, clock=clock, max_state_bytes=400, logger=logger
    )
    token = sealer.seal(b"x", B)
    state = sealer.unseal(token, B)
    assert state.deadline == NOW + 8.0  # the clock and flow_ttl were passed on
    with pytest.raises(StateTooLarge):
        sealer.seal(b"x" * 400, B)
    clock.now = NOW + 5.5
    with caplog.at_level(logging.INFO, logger="test.sealing.ephemeral"):
        assert rejected(sealer, token) == "expired"
    assert [r.name for r in caplog.records] == ["test.sealing.ephemeral"]


def test_max_state_bytes_floor_is_twice_the_overhead() -> None:
    assert Sealer(keys=[KEY_A], audience="a", max_state_bytes=72)
    with pytest.raises(ValueError, match=r"^max_state_bytes is too small: 71$"):
        Sealer(keys=[KEY_A], audience="a", max_state_bytes=71)


def test_time_bounds_are_inclusive() -> None:
    ahead = Clock(NOW + 30.0)  # exactly the allowed clock skew
    assert SEALER.unseal(Sealer(keys=[KEY_A], audience="billing", clock=ahead).seal(b"x", B), B)
    clock = Clock()
    sealer = Sealer(keys=[KEY_A], audience="billing", ttl=900.0, flow_ttl=100.0, clock=clock)
    token = sealer.seal(b"x", B)
    clock.now = NOW + 100.0  # exactly the flow deadline
    assert sealer.unseal(token, B).body == b"x"


def test_log_line_names_audience_and_reason(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mrtr.sealing")
    rejected(SEALER, "nope")
    assert [r.getMessage() for r in caplog.records] == [
        "requestState rejected (audience 'billing'): bad prefix"
    ]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Sealer(keys=[], audience="a"),
         "keys must be a non-empty sequence of byte strings (newest first)"),
        (lambda: Sealer(keys=[KEY_A, KEY_A.hex()], audience="a"),  # type: ignore[list-item]
         "key #2 is not bytes; use parse_keys() for text keys"),
        (lambda: Sealer(keys=[KEY_A, b"x" * 31], audience="a"),
         "key #2 is 31 bytes; at least 32 needed"),
        (lambda: Sealer(keys=[KEY_A], audience="a", ttl=0),
         "ttl must be a positive finite number of seconds, got 0"),
        (lambda: Sealer(keys=[KEY_A], audience="a", flow_ttl=float("inf")),
         "flow_ttl must be a positive finite number of seconds, got inf"),
        (lambda: parse_keys(" , "),
         "no requestState keys given (expected comma-separated base64url or hex)"),
        (lambda: parse_keys("00" * 16),
         "requestState key #1 is 16 bytes; at least 32 needed"
         " (create one with `mrtr keys generate`)"),
    ],
)
def test_config_errors_say_what_to_fix(make: Callable[[], object], message: str) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        make()
    assert str(info.value) == message
