"""One exception class per MCP wire error code, shared by server and client.

`to_wire()` turns an error into the JSON-RPC error object; `from_wire()` picks the class back by
code, so `except mrtr.errors.InvalidParams` works on both sides of the wire.
"""

# Design: `http_status` is a class attribute (like h11's error_status_hint) so the transport never
# decides a status code itself. Tool failures are results (`isError: true`), never these errors.
# On the server, mrtr.server._failures is the one place that turns an exception into a wire
# error, an HTTP refusal or an `isError` result; everything else raises or returns.
from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import msgspec

__all__ = [
    "AuthUnavailable", "DPoPRefused", "Forbidden", "from_wire", "HeaderMismatch",
    "IdempotencyKeyConflict",
    "IdempotencyKeyInProgress", "InsufficientScope", "InternalError", "InvalidParams",
    "InvalidRequest", "InvalidRequestState", "LimitExceeded", "MethodNotFound",
    "MissingRequiredClientCapability", "MrtrError", "OutcomePending", "OutcomeTooLarge",
    "ParseError", "ProtocolError", "ResourceNotFound", "SessionNotFound", "StoreUnavailable",
    "TooManySessions", "TransportError", "Unauthorized", "UnsupportedProtocolVersion",
]

JSONValue = object


class MrtrError(Exception):
    """Base of every error mrtr raises."""


class TransportError(MrtrError):
    """A client transport failed: connection refused, server exited, not MCP, broken stream."""


class Unauthorized(MrtrError):  # noqa: N818 - reads as the HTTP status it maps to
    """Raised by an authenticator: the request gets 401 with `WWW-Authenticate`."""

    status: ClassVar[int] = 401

    def __init__(self, message: str = "Unauthorized", *, challenge: str = "Bearer") -> None:
        super().__init__(message)
        self.message = message
        self.challenge = challenge  # "" sends no WWW-Authenticate


class DPoPRefused(Unauthorized):
    """A DPoP proof or DPoP-bound token refused (RFC 9449 §7.1): 401 with the DPoP challenge;
    `error` is its code, `nonce` (if any) goes out as the `DPoP-Nonce` header (§9)."""

    def __init__(self, message: str, *, challenge: str, error: str | None,
                 nonce: str | None = None) -> None:
        super().__init__(message, challenge=challenge)
        self.error, self.nonce = error, nonce


class Forbidden(Unauthorized):
    """The token is valid but lacks a scope: 403 with `WWW-Authenticate` (insufficient_scope).

    `scopes` are those the refused request needs; when a request was read they go out as the
    body's `requiredScopes`, as InsufficientScope's do.
    """

    status = 403

    def __init__(self, message: str = "Unauthorized", *, challenge: str = "Bearer",
                 scopes: Iterable[str] = ()) -> None:
        super().__init__(message, challenge=challenge)
        self.scopes = sorted(scopes)


class AuthUnavailable(Unauthorized):
    """The authorization server cannot be reached to check a token: 503, retry later."""

    status = 503


class ProtocolError(MrtrError):
    """A JSON-RPC error: it has a wire `code`, a `message`, optional `data` and an HTTP status."""

    code: ClassVar[int] = -32603
    http_status: ClassVar[int] = 400
    default_message: ClassVar[str] = "Error"
    # Set by the protocol decoder when the offending message's id was readable, so the
    # transport can echo it in the error response.
    request_id: str | int | None = None
    # Seconds after which a retry may succeed (HTTP sends it as Retry-After); None: not retryable.
    retry_after: float | None = None

    def __init__(self, message: str | None = None, *, data: object = None) -> None:
        self.message = message if message is not None else self.default_message
        self.data = data
        super().__init__(self.message)

    def to_wire(self) -> dict[str, object]:
        """Return the JSON-RPC `error` object (data omitted when None)."""
        wire: dict[str, object] = {"code": self.code, "message": self.message}
        if self.data is not None:
            wire["data"] = self.data
        return wire

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code}, data={self.data!r})"


class ParseError(ProtocolError):
    code = -32700
    default_message = "Parse error"


class InvalidRequest(ProtocolError):
    code = -32600
    default_message = "Invalid Request"


class MethodNotFound(ProtocolError):
    code = -32601
    http_status = 404
    default_message = "Method not found"


class InvalidParams(ProtocolError):
    code = -32602
    default_message = "Invalid params"


class InvalidRequestState(InvalidParams):
    """A requestState that failed verification; the reason is logged, never sent."""

    FROZEN_MESSAGE: ClassVar[str] = "Invalid or expired requestState"

    def __init__(self, reason: str = "unspecified") -> None:
        super().__init__(self.FROZEN_MESSAGE)
        self.reason = reason


class LimitExceeded(InvalidParams):
    """Input over one of the byte limits on what the server keeps for a caller (StoreLimits):
    a task's arguments, an answer, or the bytes one principal may keep stored at once.

    The message names the limit and the setting that raises it; `data` is {"type":
    "limit_exceeded", "setting", "limit", "size"} (bytes). Sending it again as it is fails again.
    """

    DATA_TYPE: ClassVar[str] = "limit_exceeded"


class InsufficientScope(InvalidRequest):
    """The caller's token lacks scopes the request needs (HTTP 403, RFC 6750 §3.1)."""

    http_status = 403

    def __init__(self, scopes: list[str], message: str | None = None) -> None:
        self.scopes = list(scopes)
        super().__init__(message or "Forbidden: insufficient scope",
                         data={"requiredScopes": self.scopes})


class SessionNotFound(ProtocolError):
    """The `Mcp-Session-Id` is unknown, forged, expired or terminated: re-`initialize` (2025)."""

    code = -32001
    http_status = 404
    default_message = "Session not found"


class TooManySessions(InvalidRequest):
    """A 2025 session refused by a cap of the server's session table: HTTP 429, `Retry-After`.

    `limit` is the cap and `scope` what it bounds: "client" (the sessions one principal, or one
    anonymous address, holds in one process), "server" (every session of the process), "ended"
    (the terminated ids of one client the store remembers until they expire).
    """

    http_status = 429

    def __init__(self, message: str, *, limit: int, scope: str, retry_after: float) -> None:
        super().__init__(message, data={"limit": limit, "scope": scope})
        self.limit = limit
        self.scope = scope
        self.retry_after = retry_after


class ResourceNotFound(ProtocolError):
    """-32002, the 2025 code for an unknown resource (2026-07-28 says -32602)."""

    code = -32002
    default_message = "Resource not found"


class InternalError(ProtocolError):
    code = -32603
    http_status = 500
    default_message = "Internal error"


class StoreUnavailable(InternalError):
    """The store did not answer in time or failed: sent as the frozen -32603, reason logged.

    Retryable: HTTP 503 with `Retry-After` (nothing ran that a retry could repeat).
    """

    http_status = 503
    retry_after = 1.0

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason

    def __repr__(self) -> str:
        return f"StoreUnavailable({self.reason!r})"


class OutcomePending(InternalError):
    """The work ran, but its outcome is not recorded yet (the store failed): retry later.

    Sent as HTTP 503 with `Retry-After` and `data` {"type": "outcome_pending", "retryAfter": s}.
    The process that ran the work keeps retrying the write; a retry after it landed gets the
    recorded outcome, and the work never runs a second time (docs/deploy.md).
    """

    http_status = 503
    default_message = "Outcome pending"
    DATA_TYPE: ClassVar[str] = "outcome_pending"

    def __init__(self, message: str | None = None, *, retry_after: float = 2.0) -> None:
        super().__init__(message, data={"type": self.DATA_TYPE, "retryAfter": retry_after})
        self.retry_after = retry_after


class OutcomeTooLarge(InternalError):
    """What the server produced is over StoreLimits.max_outcome: a task's result (the task
    fails with it), or a round's or `ctx.once`'s outcome that was too large to keep, so a
    replay of it cannot be answered. The message names the limit; `data` as LimitExceeded's.
    """

    DATA_TYPE: ClassVar[str] = LimitExceeded.DATA_TYPE


class HeaderMismatch(ProtocolError):
    code = -32020
    default_message = "Header mismatch"


class MissingRequiredClientCapability(ProtocolError):
    code = -32021
    default_message = "Missing required client capability"

    def __init__(
        self, required: dict[str, object] | None = None, message: str | None = None
    ) -> None:
        self.required: dict[str, object] = dict(required or {})
        super().__init__(message, data={"requiredCapabilities": self.required})

    @property
    def needed(self) -> list[str]:
        """The missing capabilities as dotted paths: `["elicitation.url"]`."""
        return _paths(self.required)

    def __str__(self) -> str:
        needed = ", ".join(self.needed)
        return f"{self.message} (needs {needed})" if needed else self.message


def _paths(tree: dict[str, object], prefix: str = "") -> list[str]:
    """Dotted paths to the leaves of a capability object: {"a": {"b": {}}} -> ["a.b"]."""
    paths: list[str] = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        inner = value if isinstance(value, dict) else {}
        paths += _paths(inner, f"{path}.") if inner else [path]
    return paths


class UnsupportedProtocolVersion(ProtocolError):
    code = -32022
    default_message = "Unsupported protocol version"

    def __init__(
        self, supported: list[str], requested: str, message: str | None = None
    ) -> None:
        self.supported = list(supported)
        self.requested = requested
        super().__init__(message, data={"supported": self.supported, "requested": requested})


class IdempotencyKeyConflict(InvalidParams):
    """The `idempotencyKey` was already used by this caller for another call (another tool or
    other arguments): -32602 with `data` {"type": "idempotency_key_conflict"}. Not retryable
    with this key; a new call needs a new key (docs/deploy.md, "Idempotency keys")."""

    DATA_TYPE: ClassVar[str] = "idempotency_key_conflict"
    default_message = "Idempotency key already used for another call"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, data={"type": self.DATA_TYPE})


class IdempotencyKeyInProgress(InternalError):
    """The first call with this `idempotencyKey` is still running: retry after `retry_after`
    seconds and get its outcome. -32603 with `data` {"type": "idempotency_key_in_progress",
    "retryAfter": seconds}; over HTTP a 409 (Conflict, as for HTTP idempotency keys)."""

    http_status = 409
    DATA_TYPE: ClassVar[str] = "idempotency_key_in_progress"
    default_message = "A call with this idempotency key is in progress; retry shortly"

    def __init__(self, message: str | None = None, *, retry_after: float = 1.0) -> None:
        super().__init__(message, data={"type": self.DATA_TYPE, "retryAfter": retry_after})
        self.retry_after = retry_after  # HTTP sends it as Retry-After (whole seconds)


_BY_CODE: dict[int, type[ProtocolError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        HeaderMismatch,
        MissingRequiredClientCapability,
        UnsupportedProtocolVersion,
        SessionNotFound,
        ResourceNotFound,
    )
}


def from_wire(error: object) -> ProtocolError:
    """Build the matching error from a JSON-RPC error object (a dict or a Struct with code/message).

    Unknown codes give a plain `ProtocolError` carrying that code.
    """
    if isinstance(error, msgspec.Struct):
        error = msgspec.to_builtins(error)
    if not isinstance(error, dict):
        return InternalError("Malformed error object", data=error)
    code = error.get("code")
    message = error.get("message")
    data = error.get("data")
    text = message if isinstance(message, str) else None
    cls = _BY_CODE.get(code) if isinstance(code, int) else None
    typed = _typed(cls, text, data)
    if typed is not None:
        return typed
    if cls is MissingRequiredClientCapability:
        req = data.get("requiredCapabilities") if isinstance(data, dict) else None
        return MissingRequiredClientCapability(req if isinstance(req, dict) else {}, text)
    if cls is UnsupportedProtocolVersion:
        sup = data.get("supported") if isinstance(data, dict) else None
        reqd = data.get("requested") if isinstance(data, dict) else None
        return UnsupportedProtocolVersion(
            [v for v in sup if isinstance(v, str)] if isinstance(sup, list) else [],
            reqd if isinstance(reqd, str) else "",
            text,
        )
    if cls is not None:
        return cls(text, data=data)
    err = ProtocolError(text, data=data)
    if isinstance(code, int):
        err.code = code  # type: ignore[misc]  # instance override for codes we do not model
    return err


def _retry_after(data: dict[str, object], default: float) -> float:
    after = data.get("retryAfter")
    if isinstance(after, int | float) and not isinstance(after, bool):
        return float(after)
    return default


def _typed(cls: type[ProtocolError] | None, text: str | None,
           data: object) -> ProtocolError | None:
    """The error a `data.type` names within its code's class (-32602, -32603), else None."""
    if not isinstance(data, dict):
        return None
    kind = data.get("type")
    if cls is InvalidParams:
        if kind == IdempotencyKeyConflict.DATA_TYPE:
            return IdempotencyKeyConflict(text)
        if kind == LimitExceeded.DATA_TYPE:
            return LimitExceeded(text, data=data)
    if cls is InternalError:
        if kind == IdempotencyKeyInProgress.DATA_TYPE:
            return IdempotencyKeyInProgress(text, retry_after=_retry_after(data, 1.0))
        if kind == OutcomeTooLarge.DATA_TYPE:
            return OutcomeTooLarge(text, data=data)
        if kind == OutcomePending.DATA_TYPE:
            return OutcomePending(text, retry_after=_retry_after(data, 2.0))
    return None
