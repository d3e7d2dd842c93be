"""Server-side Streamable HTTP: `McpApp`, the ASGI app that serves a Server (both eras)."""

from mrtr.errors import AuthUnavailable, Forbidden, Unauthorized
from mrtr.http._app import (
    ASGIReceive,
    ASGIScope,
    ASGISend,
    Authenticator,
    McpApp,
    ProtectedResource,
)

__all__ = ["ASGIReceive", "ASGIScope", "ASGISend", "Authenticator", "AuthUnavailable", "Forbidden",
           "McpApp", "ProtectedResource", "Unauthorized"]
