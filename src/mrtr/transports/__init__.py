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
from mrtr.transports._stdio_server import serve_stdio

if TYPE_CHECKING:
    from mrtr.transports._http_client import HTTPTransport
    from mrtr.transports._stdio_client import StdioTransport

__all__ = ["Authenticator", "AuthUnavailable", "Forbidden", "HTTPTransport", "McpApp",
           "ProtectedResource", "serve_stdio", "StdioTransport", "Unauthorized"]

_LAZY = {"HTTPTransport": "mrtr.transports._http_client",
         "StdioTransport": "mrtr.transports._stdio_client"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr.transports' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
