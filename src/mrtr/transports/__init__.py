"""Transports: thin adapters between the Dispatcher and the outside world (HTTP, stdio)."""

# Design: the client transports are imported on first use (PEP 562), so a server process
# (`mrtr serve`, every worker) never loads httpx and the client stack just by importing McpApp.
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mrtr.transports._asgi import (
    Authenticator,
    AuthUnavailable,
    Forbidden,
    McpApp,
    ProtectedResource,
    Unauthorized,
)
from mrtr.transports._launch import ServerApp
from mrtr.transports._logging import JsonFormatter, RequestContext
from mrtr.transports._stdio_server import serve_stdio

if TYPE_CHECKING:
    from mrtr.transports._connect import connect, transport_for
    from mrtr.transports._http_client import HTTPTransport
    from mrtr.transports._memory import MemoryTransport
    from mrtr.transports._stdio_client import TAIL, ServerExited, StdioTransport

__all__ = ["Authenticator", "AuthUnavailable", "connect", "Forbidden", "HTTPTransport",
           "JsonFormatter", "McpApp", "MemoryTransport", "ProtectedResource", "RequestContext",
           "serve_stdio", "ServerApp", "ServerExited", "StdioTransport", "TAIL", "transport_for",
           "Unauthorized"]

_LAZY = {"HTTPTransport": "mrtr.transports._http_client",
         "StdioTransport": "mrtr.transports._stdio_client",
         "ServerExited": "mrtr.transports._stdio_client",
         "TAIL": "mrtr.transports._stdio_client",
         "MemoryTransport": "mrtr.transports._memory",
         "connect": "mrtr.transports._connect",
         "transport_for": "mrtr.transports._connect"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr.transports' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
