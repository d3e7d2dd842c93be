"""Peer: who is calling, as the transport authenticated it, and where notifications go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import msgspec

__all__ = ["NotificationSink", "Peer"]


class NotificationSink(Protocol):
    """Delivers a request-scoped notification (progress, log) to the client."""

    async def __call__(self, notification: msgspec.Struct, /) -> None: ...


@dataclass(frozen=True, slots=True)
class Peer:
    """The caller of one request: the principal comes from the transport's authenticator.

    `principal` is None for unauthenticated transports (stdio, local HTTP without auth).
    `trace_headers` are the transport's W3C trace context headers (`traceparent`,
    `tracestate`), used when the request's `_meta` carries none; `session_id` is the 2025
    session serving the request, if any (telemetry records a digest of it).
    """

    principal: str | None = None
    transport: str = "memory"
    trace_headers: tuple[tuple[str, str], ...] = ()
    session_id: str | None = None
