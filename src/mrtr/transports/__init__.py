"""Transports: thin adapters between the Dispatcher and the outside world (HTTP, stdio)."""

from mrtr.transports._asgi import Authenticator, McpApp, Unauthorized
from mrtr.transports._http_client import HTTPTransport
from mrtr.transports._stdio_client import StdioTransport
from mrtr.transports._stdio_server import serve_stdio

__all__ = ["Authenticator", "HTTPTransport", "McpApp", "serve_stdio", "StdioTransport",
           "Unauthorized"]
