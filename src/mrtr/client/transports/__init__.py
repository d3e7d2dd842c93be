"""Client transports: Streamable HTTP (httpx), stdio (a subprocess), and `transport_for`."""

# Design: HTTPTransport and StdioTransport are imported on first use (PEP 562), so a client of
# one kind never loads the other's code (httpx for HTTP, the subprocess machinery for stdio).
from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING

from mrtr.client.transports._base import (
    MessageSink,
    SessionExpired,
    SessionTransport,
    Transport,
    TransportError,
)
from mrtr.client.transports._targets import transport_for

if TYPE_CHECKING:
    from mrtr.client.transports._http import HTTPTransport
    from mrtr.client.transports._stdio import TAIL, ServerExited, StdioTransport

__all__ = ["HTTPTransport", "MessageSink", "ServerExited", "SessionExpired",
           "SessionTransport", "StdioTransport", "TAIL", "Transport", "transport_for",
           "TransportError"]

_LAZY = {"HTTPTransport": "mrtr.client.transports._http",
         "StdioTransport": "mrtr.client.transports._stdio",
         "ServerExited": "mrtr.client.transports._stdio",
         "TAIL": "mrtr.client.transports._stdio"}

_DEPRECATED = {"NotificationSink": "MessageSink"}


def __getattr__(name: str) -> object:
    if name in _DEPRECATED:
        warnings.warn(f"mrtr.client.transports.{name} is now "
                      f"mrtr.client.transports.{_DEPRECATED[name]}", DeprecationWarning,
                      stacklevel=2)
        return globals()[_DEPRECATED[name]]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr.client.transports' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
