"""Deprecated: the 0.1 home of the HTTP, stdio and client transports; each name moved.

`from mrtr.transports import McpApp` still works and warns; import from the new home instead:
`mrtr.http` (McpApp, Authenticator, ProtectedResource), `mrtr.errors` (Unauthorized, Forbidden,
AuthUnavailable), `mrtr.stdio` (serve_stdio), `mrtr.serving` (ServerApp, JsonFormatter,
RequestContext), `mrtr.client` (HTTPTransport, StdioTransport, ServerExited, TAIL, connect,
transport_for) and `mrtr.server` (MemoryTransport). Old private module paths such as
`mrtr.transports._asgi` resolve through `mrtr._moved`.
"""

from __future__ import annotations

import importlib
import warnings

NEW_HOMES = {
    "Authenticator": "mrtr.http",
    "AuthUnavailable": "mrtr.errors",
    "connect": "mrtr.client",
    "Forbidden": "mrtr.errors",
    "HTTPTransport": "mrtr.client",
    "JsonFormatter": "mrtr.serving",
    "McpApp": "mrtr.http",
    "MemoryTransport": "mrtr.server",
    "ProtectedResource": "mrtr.http",
    "RequestContext": "mrtr.serving",
    "serve_stdio": "mrtr.stdio",
    "ServerApp": "mrtr.serving",
    "ServerExited": "mrtr.client",
    "StdioTransport": "mrtr.client",
    "TAIL": "mrtr.client",
    "transport_for": "mrtr.client",
    "Unauthorized": "mrtr.errors",
}

__all__ = sorted(NEW_HOMES, key=str.casefold)


def __getattr__(name: str) -> object:
    module = NEW_HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr.transports' has no attribute {name!r}")
    warnings.warn(f"mrtr.transports.{name} moved: import it from {module}", DeprecationWarning,
                  stacklevel=2)
    return getattr(importlib.import_module(module), name)
