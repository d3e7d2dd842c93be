"""Deprecated: the 0.1 home of the HTTP, stdio and client transports; each name moved.

`from mrtr.transports import McpApp` still works and warns; import from the new home instead:
`mrtr.http` (McpApp, which ServerApp now is, Authenticator, ProtectedResource), `mrtr.errors`
(Unauthorized, Forbidden, AuthUnavailable), `mrtr.stdio` (serve_stdio), `mrtr.serving`
(JsonFormatter, RequestContext), `mrtr.client` (HTTPTransport, StdioTransport, ServerExited,
TAIL, connect, transport_for) and `mrtr.server` (MemoryTransport). Old private module paths such
as `mrtr.transports._asgi` resolve through `mrtr._moved`.
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
    "ServerApp": "mrtr.http",
    "ServerExited": "mrtr.client",
    "StdioTransport": "mrtr.client",
    "TAIL": "mrtr.client",
    "transport_for": "mrtr.client",
    "Unauthorized": "mrtr.errors",
}

RENAMED = {"ServerApp": "McpApp"}  # McpApp owns a store and honours root_path itself

__all__ = sorted(NEW_HOMES, key=str.casefold)


def __getattr__(name: str) -> object:
    module = NEW_HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr.transports' has no attribute {name!r}")
    new = RENAMED.get(name, name)
    where = module if new == name else f"{module} as {new}"
    warnings.warn(f"mrtr.transports.{name} moved: import it from {where}", DeprecationWarning,
                  stacklevel=2)
    return getattr(importlib.import_module(module), new)
