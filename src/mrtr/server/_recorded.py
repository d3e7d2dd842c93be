"""The bytes the Ledger stores for a round or a `ctx.once`, and reading them back."""

# Design: a round's outcome is the digest of its answers (32 bytes), a one-byte tag saying what
# the body is, and the body (msgspec JSON); a `once` outcome is fn's JSON value. Either one over
# max_outcome (StoreLimits) is kept as a marker, [its size, the limit], so a replay gets
# OutcomeTooLarge and never a second run.
from __future__ import annotations

import logging
from hmac import compare_digest
from typing import TypeVar

import msgspec

from mrtr.errors import InvalidRequestState
from mrtr.protocol import CreateTaskResult, InputRequiredResult, resolve_contents
from mrtr.server._failures import outcome_too_large

__all__ = ["once_outcome", "once_value", "replayed", "round_outcome"]

R = TypeVar("R")
_DIGEST = 32
_INPUT = b"i"  # the stored outcome is an InputRequiredResult
_FINAL = b"r"  # it is the method's own result type
_TASK = b"t"  # it is a CreateTaskResult (a tools/call whose last round started a task)
_DROPPED = b"x"  # it was over max_outcome: [its size, the limit] in its place
_DROPPED_ONCE = b"\x00"  # a `once` value over max_outcome (no JSON value starts so)
_ENCODER = msgspec.json.Encoder()


def round_outcome(digest: bytes, result: object, limit: int, key: str,
                  log: logging.Logger) -> bytes:
    """What the store keeps for a finished round: digest, tag and body (or the marker)."""
    tag = (_INPUT if isinstance(result, InputRequiredResult)
           else _TASK if isinstance(result, CreateTaskResult) else _FINAL)
    body = _ENCODER.encode(result)
    if len(body) > limit:
        tag, body = _DROPPED, _dropped(key, len(body), limit, log)
    return digest + tag + body


def once_outcome(value: object, limit: int, key: str, log: logging.Logger) -> bytes:
    """What the store keeps for a `ctx.once`: fn's JSON value (or the marker)."""
    outcome = _ENCODER.encode(msgspec.to_builtins(value))
    if len(outcome) > limit:
        outcome = _DROPPED_ONCE + _dropped(key, len(outcome), limit, log)
    return outcome


def once_value(outcome: bytes, key: str) -> object:
    """The JSON value another run of `ctx.once(key, ...)` stored; raises OutcomeTooLarge."""
    if outcome[:1] == _DROPPED_ONCE:
        size, limit = msgspec.json.decode(outcome[1:])
        raise outcome_too_large(f"The value of ctx.once({key!r})", size, limit, kept=False)
    return msgspec.json.decode(outcome)


def replayed(outcome: bytes, digest: bytes, kind: type[R],
             log: logging.Logger) -> R | InputRequiredResult:
    """A stored round outcome answered again; InvalidRequestState for other answers."""
    if not compare_digest(outcome[:_DIGEST], digest):
        log.warning("a redeemed round was presented again with other answers")
        raise InvalidRequestState("round already redeemed with other answers")
    tag, body = outcome[_DIGEST:_DIGEST + 1], outcome[_DIGEST + 1:]
    if tag == _DROPPED:
        size, limit = msgspec.json.decode(body)
        raise outcome_too_large("The outcome of this round", size, limit, kept=False)
    if tag == _INPUT:
        return msgspec.json.decode(body, type=InputRequiredResult)
    if tag == _TASK:
        return msgspec.json.decode(body, type=CreateTaskResult)  # type: ignore[return-value]
    return msgspec.json.decode(body, type=kind, dec_hook=resolve_contents)


def _dropped(key: str, size: int, limit: int, log: logging.Logger) -> bytes:
    """The marker kept instead of an outcome over max_outcome: [its size, the limit]."""
    log.warning("the outcome of %s is %d bytes, over StoreLimits.max_outcome=%d: it is answered"
                " once and a marker kept, so a replay of it gets an error", key, size, limit)
    return _ENCODER.encode([size, limit])
