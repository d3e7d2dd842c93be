"""Seal and unseal `requestState`: AES-256-GCM tokens bound to one request, audience and principal.

Implements the MRTR server requirements on `requestState` (integrity protection, binding to the
principal and the originating request, short expiry). Knows nothing of rounds.
"""

# Design:
# - Wire format: "v1." + base64url_nopad(kid(8) ‖ nonce(12) ‖ AES-256-GCM(claims, aad=b"v1."+kid)).
#   The prefix and kid are authenticated through the AAD, so editing either fails the tag.
# - Master keys never reach AES directly. HKDF-SHA256 derives the AES key (info
#   b"mrtr requestState v1") and, with another info, the 8-byte kid, so the kid tells an attacker
#   nothing about either. Derivation and AESGCM objects are built once, in __init__.
# - Random 96-bit nonces stay within NIST SP 800-38D for 2**32 seals per key, all replicas
#   sharing it counted: about 50 days at 1,000 seals/s, so keys are rotated (docs/deploy.md,
#   "Key rotation", says how often). Unique per token, the nonce names one too.
# - Claims are a msgpack array (msgspec, array_like) so the token stays small; the caller's body is
#   opaque bytes (the round engine puts round number, flow id and journal there).
# - Binding is a frozen dataclass so the principal digest is computed once per request.
# - Binding fields are checked after decryption, so they are authenticated values: plain `==` is
#   fine for method/target/audience; digests still go through hmac.compare_digest.
# - Every failure is InvalidRequestState with the frozen wire message; the reason goes to the log
#   only, never the token or payload. Expiry is INFO (a slow human), everything else WARNING.
# - Time checks are written `not now <= x` so a NaN timestamp fails closed.
# - The length check runs before base64 decoding, and decoding is strict ('+', '/', '=' and junk
#   are rejected, where base64.urlsafe_b64decode would accept or silently skip them).
# - The flow deadline is set once (round 1: now + flow_ttl) and copied forward by the caller from
#   `Unsealed.deadline`; seal never extends it.
# - digest_arguments canonicalises: sorted keys, and integral floats as ints (JSON 1.0 == 1), so
#   a client that re-serialises its arguments on the retry still matches. Its walk is recursive,
#   so nesting is bounded (MAX_ARGUMENT_DEPTH, far beyond real arguments): deeper is -32602,
#   never a RecursionError.
from __future__ import annotations

import binascii
import copy
import functools
import hashlib
import logging
import math
import os
import secrets
import time
from collections.abc import Callable, Sequence
from hmac import compare_digest
from typing import Any

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mrtr.errors import InvalidParams, InvalidRequestState

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "Binding",
    "Sealer",
    "StateTooLarge",
    "Unsealed",
    "digest_arguments",
    "generate_key",
    "parse_keys",
]

MIN_KEY_BYTES = 32
MAX_ARGUMENT_DEPTH = 100  # levels of objects and arrays digest_arguments accepts
_PREFIX = "v1."
_AAD_PREFIX = b"v1."
_VERSION = 1
_SALT = b"mrtr/requestState/hkdf-salt/v1"
_INFO_KEY = b"mrtr requestState v1"
_INFO_KID = b"mrtr requestState v1 kid"
_KID, _NONCE, _TAG = 8, 12, 16  # bytes of the key id, the GCM nonce and the GCM tag
_OVERHEAD = _KID + _NONCE + _TAG
_MAX_SKEW = 30.0  # seconds a token's issued-at may lie ahead of our clock (worker clock drift)
_EXACT_FLOAT = 2.0**53
_QUIET = frozenset({"expired", "flow deadline passed"})  # logged at INFO, not WARNING
_TO_URL = bytes.maketrans(b"+/", b"-_")
# One pass: url alphabet to standard, and the standard-only bytes (and '=') to an invalid byte.
_FROM_URL = bytes.maketrans(b"-_+/=", b"+/!!!")
_FROM_ANY = bytes.maketrans(b"-_", b"+/")  # keys: accept base64url and standard base64


class StateTooLarge(ValueError):
    """The sealed requestState would exceed `max_state_bytes`."""


class Binding(msgspec.Struct, frozen=True, kw_only=True):
    """What a requestState is bound to: the originating request and the caller's identity."""

    method: str
    target: str  # tool or prompt name, or resource URI
    arguments_digest: bytes  # from digest_arguments()
    principal: str | None  # the transport's authenticated identity, None when anonymous

    @property
    def principal_digest(self) -> bytes:
        return _digest_principal(self.principal)


class Unsealed(msgspec.Struct, frozen=True, kw_only=True):
    """A verified requestState: the caller's body and the flow's deadline (epoch seconds)."""

    body: bytes
    deadline: float  # pass to the next seal() so the flow deadline is never extended


class _Claims(msgspec.Struct, array_like=True, frozen=True, gc=False):
    v: int  # payload format version
    iat: float
    exp: float  # this round's expiry
    dl: float  # the flow's absolute deadline
    m: str
    t: str
    a: bytes
    aud: str
    p: bytes  # SHA-256 of the principal, b"" when None
    b: bytes


def digest_arguments(arguments: object) -> bytes:
    """Return the SHA-256 of the canonical JSON of `arguments` (sorted keys, 1.0 as 1).

    Raises InvalidParams when objects and arrays nest deeper than MAX_ARGUMENT_DEPTH.
    """
    canonical = _canonical_json_value(arguments, MAX_ARGUMENT_DEPTH)
    return hashlib.sha256(_encode_sorted(canonical)).digest()


_encode_sorted = msgspec.json.Encoder(order="sorted").encode
_PLAIN = frozenset({str, int, bool, type(None)})  # exact types canonical as they are


def _canonical_json_value(value: Any, depth: int) -> object:
    kind = type(value)
    if kind is dict or kind is list:  # decoded JSON: copied only where a member changed
        if depth <= 0:
            raise InvalidParams(f"Arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
        changed: Any = None
        for k, v in value.items() if kind is dict else enumerate(value):
            if type(v) not in _PLAIN and (c := _canonical_json_value(v, depth - 1)) is not v:
                if changed is None:
                    changed = kind(value)
                changed[k] = c
        return value if changed is None else changed
    return value if kind in _PLAIN else _canonical_other(value, depth)


def _canonical_other(value: Any, depth: int) -> object:
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < _EXACT_FLOAT else value
    if not isinstance(value, dict | list | tuple):
        return value
    if depth <= 0:  # subclasses and tuples: a plain copy
        raise InvalidParams(f"Arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels")
    if isinstance(value, dict):
        return {k: _canonical_json_value(v, depth - 1) for k, v in value.items()}
    return [_canonical_json_value(v, depth - 1) for v in value]


@functools.lru_cache(maxsize=1024)  # a pure memo: the same callers come back round after round
def _digest_principal(principal: str | None) -> bytes:
    if principal is None:
        return b""
    return hashlib.sha256(principal.encode("utf-8", "surrogatepass")).digest()


def generate_key() -> str:
    """Return a new random 32-byte key as unpadded base64url (for `MRTR_STATE_KEYS`)."""
    return (
        binascii.b2a_base64(secrets.token_bytes(32), newline=False)
        .rstrip(b"=")
        .translate(_TO_URL)
        .decode("ascii")
    )


def parse_keys(text: str) -> list[bytes]:
    """Parse `MRTR_STATE_KEYS`: comma-separated keys, newest first, each hex or base64(url).

    Raises ValueError (never quoting key material) if a key is malformed or under 32 bytes.
    """
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        raise ValueError("no requestState keys given (expected comma-separated base64url or hex)")
    keys: list[bytes] = []
    for index, part in enumerate(parts, start=1):
        if not part:
            raise ValueError(f"requestState key #{index} is empty")
        key = _parse_key(part)
        if key is None:
            raise ValueError(f"requestState key #{index} is neither hex nor base64url")
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(
                f"requestState key #{index} is {len(key)} bytes; at least {MIN_KEY_BYTES} needed"
                " (create one with `mrtr keys generate`)"
            )
        keys.append(key)
    return keys


def _parse_key(text: str) -> bytes | None:
    # A hex string is also valid base64, so hex wins when it fits (even length, hex digits);
    # a base64url key of 32 bytes is 43 characters, odd, so it never parses as hex.
    # Standard base64 is accepted too, for keys made with `openssl rand -base64 32`.
    if len(text) % 2 == 0 and all(c in "0123456789abcdefABCDEF" for c in text):
        return bytes.fromhex(text)
    return _b64decode(text.rstrip("="), _FROM_ANY)


def _b64decode(text: str, table: bytes = _FROM_URL) -> bytes | None:
    try:
        raw = text.encode("ascii").translate(table)
        return binascii.a2b_base64(raw + b"=" * (-len(raw) % 4), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error):
        return None


def _derive(master: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=_SALT, info=info).derive(master)


def _positive(name: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number of seconds, got {value!r}")
    return float(value)


class Sealer:
    """Seals caller bodies into `requestState` tokens and verifies them on the way back.

    `keys[0]` seals; every key unseals (rotation: deploy `[new, old]`, later drop `old`).
    Times are epoch seconds from `clock`; `ttl` is per round, `flow_ttl` bounds a whole flow.
    """

    def __init__(
        self,
        *,
        keys: Sequence[bytes],
        audience: str,
        ttl: float = 900.0,
        flow_ttl: float = 3600.0,
        clock: Callable[[], float] = time.time,
        max_state_bytes: int = 256 * 1024,
        logger: logging.Logger | None = None,
    ) -> None:
        if isinstance(keys, bytes | str) or not keys:
            raise ValueError("keys must be a non-empty sequence of byte strings (newest first)")
        if max_state_bytes < _OVERHEAD * 2:
            raise ValueError(f"max_state_bytes is too small: {max_state_bytes}")
        self._audience = audience
        self._ttl = _positive("ttl", ttl)
        self._flow_ttl = _positive("flow_ttl", flow_ttl)
        self._clock = clock
        self._max = max_state_bytes
        self._log = logger if logger is not None else logging.getLogger("mrtr.sealing")
        self._keys: dict[bytes, tuple[AESGCM, bytes]] = {}
        for index, master in enumerate(keys):
            if not isinstance(master, bytes | bytearray):
                raise TypeError(f"key #{index + 1} is not bytes; use parse_keys() for text keys")
            if len(master) < MIN_KEY_BYTES:
                raise ValueError(
                    f"key #{index + 1} is {len(master)} bytes; at least {MIN_KEY_BYTES} needed"
                )
            kid = _derive(bytes(master), _INFO_KID, _KID)
            aead = AESGCM(_derive(bytes(master), _INFO_KEY, 32))
            self._keys.setdefault(kid, (aead, _AAD_PREFIX + kid))
            if index == 0:
                self._kid, (self._aead, self._aad) = kid, self._keys[kid]
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder(_Claims).decode

    @classmethod
    def ephemeral(
        cls,
        *,
        audience: str,
        ttl: float = 900.0,
        flow_ttl: float = 3600.0,
        clock: Callable[[], float] = time.time,
        max_state_bytes: int = 256 * 1024,
        logger: logging.Logger | None = None,
    ) -> Sealer:
        """Return a Sealer with a fresh random key.

        Single-process use only: another process (or a restart) cannot unseal its states, so
        multi-worker deployments must share keys (`MRTR_STATE_KEYS`).
        """
        return cls(keys=[secrets.token_bytes(32)], audience=audience, ttl=ttl,
                   flow_ttl=flow_ttl, clock=clock, max_state_bytes=max_state_bytes, logger=logger)

    def for_audience(self, audience: str, *, ttl: float, flow_ttl: float | None = None) -> Sealer:
        """A Sealer on the same key ring for another audience and lifetime (seconds).

        Tokens of one audience never unseal under another, so one key ring can seal
        `requestState` and, say, session ids without either being usable as the other.
        """
        sibling = copy.copy(self)
        sibling._audience = audience
        sibling._ttl = _positive("ttl", ttl)
        sibling._flow_ttl = _positive("flow_ttl", ttl if flow_ttl is None else flow_ttl)
        return sibling

    def __repr__(self) -> str:
        return f"Sealer(audience={self._audience!r}, keys={len(self._keys)}, ttl={self._ttl})"

    def flow_deadline(self) -> float:
        """The deadline (epoch seconds) a flow starting now gets: now + flow_ttl."""
        return float(self._clock()) + self._flow_ttl

    def seal(self, body: bytes | Callable[[str], bytes], binding: Binding, *,
             deadline: float | None = None) -> str:
        """Return a requestState carrying `body`, bound to `binding`; a function `body` gets the
        token's name, the hex of its random 96-bit nonce (unique per token, as GCM needs).

        `deadline` is the flow's absolute deadline: None on round 1 (now + flow_ttl), else the
        `Unsealed.deadline` of the incoming state. Raises StateTooLarge past `max_state_bytes`.
        """
        nonce, now = os.urandom(_NONCE), float(self._clock())
        plain = self._encode(_Claims(
            _VERSION, now, now + self._ttl, now + self._flow_ttl if deadline is None else deadline,
            binding.method, binding.target, binding.arguments_digest, self._audience,
            binding.principal_digest, body if isinstance(body, bytes) else body(nonce.hex())))
        size = len(_PREFIX) + (4 * (_OVERHEAD + len(plain)) + 2) // 3
        if size > self._max:
            raise StateTooLarge(f"requestState would be {size} bytes; the limit is {self._max}")
        blob = self._kid + nonce + self._aead.encrypt(nonce, plain, self._aad)
        text = binascii.b2a_base64(blob, newline=False).rstrip(b"=").translate(_TO_URL)
        return _PREFIX + text.decode("ascii")

    def unseal(self, token: str, binding: Binding) -> Unsealed:
        """Return the body and timestamps sealed in `token`.

        Raises InvalidRequestState (frozen wire message; `.reason` is logged) if the token is
        malformed, tampered, under an unknown key, expired, past its flow deadline, or bound to
        another audience, request or principal.
        """
        claims = self._open(token)
        now = float(self._clock())
        reason = self._mismatch(claims, binding) or _stale(claims, now)
        if reason is not None:
            raise self._reject(reason)
        return Unsealed(body=claims.b, deadline=claims.dl)

    def _open(self, token: object) -> _Claims:
        if not isinstance(token, str):
            raise self._reject("not a string")
        if len(token) > self._max:
            raise self._reject("too long")
        if not token.startswith(_PREFIX):
            raise self._reject("bad prefix")
        blob = _b64decode(token[len(_PREFIX) :])
        if blob is None:
            raise self._reject("bad base64")
        if len(blob) < _OVERHEAD:
            raise self._reject("too short")
        key = self._keys.get(blob[:_KID])
        if key is None:
            raise self._reject("sealed by a key this server does not have: "
                               "restarted with a new key or keys rotated?")
        view = memoryview(blob)
        try:
            plain = key[0].decrypt(view[_KID : _KID + _NONCE], view[_KID + _NONCE :], key[1])
        except InvalidTag:
            raise self._reject("tampered") from None
        try:
            return self._decode(plain)
        except msgspec.DecodeError:
            raise self._reject("malformed payload") from None

    def _mismatch(self, claims: _Claims, binding: Binding) -> str | None:
        if claims.v != _VERSION:
            return "unsupported payload version"
        if claims.aud != self._audience:
            return "audience mismatch"
        if claims.m != binding.method:
            return "method mismatch"
        if claims.t != binding.target:
            return "target mismatch"
        if not compare_digest(claims.a, binding.arguments_digest):
            return "arguments mismatch"
        if not compare_digest(claims.p, binding.principal_digest):
            return "principal mismatch"
        return None

    def _reject(self, reason: str) -> InvalidRequestState:
        level = logging.INFO if reason in _QUIET else logging.WARNING
        self._log.log(level, "requestState rejected (audience %r): %s", self._audience, reason)
        return InvalidRequestState(reason)


def _stale(claims: _Claims, now: float) -> str | None:
    if not claims.iat <= now + _MAX_SKEW:
        return "issued in the future"
    if not now <= claims.exp:
        return "expired"
    if not now <= claims.dl:
        return "flow deadline passed"
    return None
