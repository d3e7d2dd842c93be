"""connect: a Client for a URL, a stdio command line or an in-process Server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from mrtr.protocol import ClientCapabilities

from ._client import DEFAULT_TIMEOUT, Client
from ._era import Mode
from ._handlers import Handlers
from ._limits import ClientLimits
from .transports._base import Transport
from .transports._targets import transport_for

__all__ = ["Target", "connect", "transport_for"]

Target: TypeAlias = "Transport | str | Sequence[str] | object"  # or a Server, Dispatcher, McpApp


def connect(
    target: Target,
    *,
    handlers: Handlers | None = None,
    capabilities: ClientCapabilities | None = None,
    max_rounds: int = 10,
    timeout: float | None = DEFAULT_TIMEOUT,
    limits: ClientLimits | None = None,
    mode: Mode = "auto",
) -> Client:
    """A Client for `target` (see `transport_for`); use it as `async with connect(url) as c:`."""
    return Client(transport_for(target), handlers=handlers, capabilities=capabilities,
                  max_rounds=max_rounds, timeout=timeout, limits=limits, mode=mode)
