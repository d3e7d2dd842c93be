"""Transports: thin adapters between the Dispatcher and the outside world (HTTP, stdio)."""

from mrtr.transports._asgi import Authenticator, McpApp, Unauthorized
from mrtr.transports._stdio_server import serve_stdio

__all__ = ["Authenticator", "McpApp", "serve_stdio", "Unauthorized"]
