"""Peer: who is calling, as the transport authenticated it, and where notifications go."""

# Design: a Principal is a str, so everything bound to "the principal" (requestState, sessions,
# task ownership) keeps binding to one string; its value is the JSON array [issuer, subject,
# client id], which no other triple can produce. Scopes sit beside it, not in the string: a
# client that steps up (more scopes, same user) keeps its flows.
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import msgspec

__all__ = ["Notifier", "Peer", "Principal"]


class Notifier(Protocol):
    """Delivers a request-scoped notification (progress, log) to the client."""

    async def __call__(self, notification: msgspec.Struct, /) -> None: ...


class Principal(str):
    """An authenticated caller: (issuer, subject, client id), with the scopes it was granted.

    The string value is `["issuer","subject","client id"]` (JSON); compare principals as
    strings. `claims` are the verified token claims (empty for other authenticators).
    """

    issuer: str
    subject: str
    client_id: str | None
    scopes: frozenset[str]
    claims: Mapping[str, object]

    def __new__(
        cls,
        issuer: str,
        subject: str,
        client_id: str | None = None,
        *,
        scopes: Iterable[str] = (),
        claims: Mapping[str, object] | None = None,
    ) -> Principal:
        key = json.dumps([issuer, subject, client_id], ensure_ascii=False, separators=(",", ":"))
        self = super().__new__(cls, key)
        self.issuer = issuer
        self.subject = subject
        self.client_id = client_id
        self.scopes = frozenset(scopes)
        self.claims = dict(claims or {})
        return self

    def __repr__(self) -> str:
        return (f"Principal(issuer={self.issuer!r}, subject={self.subject!r}, "
                f"client_id={self.client_id!r}, scopes={sorted(self.scopes)!r})")


@dataclass(frozen=True, slots=True)
class Peer:
    """The caller of one request: the principal comes from the transport's authenticator.

    `principal` is None for unauthenticated transports (stdio, local HTTP without auth).
    `trace_headers` are the transport's W3C trace context headers (`traceparent`,
    `tracestate`), used when the request's `_meta` carries none; `session_id` is the 2025
    session serving the request, if any (telemetry records a digest of it).
    `scopes` are the OAuth scopes granted to this request; None means no authorization layer
    is in play, and then tools declared with `scopes=` are callable by anyone.
    """

    principal: str | None = None
    transport: str = "memory"
    trace_headers: tuple[tuple[str, str], ...] = ()
    session_id: str | None = None
    scopes: frozenset[str] | None = None

    def allows(self, needed: frozenset[str]) -> bool:
        """True when this peer holds every scope in `needed`."""
        return self.scopes is None or needed <= self.scopes
