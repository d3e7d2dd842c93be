"""Server-side stdio: `serve_stdio`, newline-delimited JSON-RPC on a process's stdin and stdout."""

from mrtr.stdio._server import serve_stdio

__all__ = ["serve_stdio"]
