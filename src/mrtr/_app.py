"""`mrtr.Server`: the server core's Server plus `run()` and `http_app()`.

The core (`mrtr.server`) never imports the process runner (`mrtr.serving`); this facade sits
above both and imports the runner only when one of the two methods is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from mrtr.server import Server as CoreServer

if TYPE_CHECKING:
    from mrtr.http import McpApp

__all__ = ["Server"]


class Server(CoreServer):
    """Tools, prompts and resources (see `mrtr.server.Server`), servable from their own file."""

    def run(
        self,
        transport: Literal["stdio", "http"] = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        workers: int = 1,
        path: str = "/mcp",
        log_level: str = "info",
    ) -> None:
        """Serve this server as `mrtr serve` does: over stdio (default) or HTTP (uvicorn)."""
        from mrtr.serving._launch import run

        run(self, transport, host=host, port=port, workers=workers, path=path,
            log_level=log_level)

    def http_app(
        self,
        path: str = "/mcp",
        *,
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
        authenticator: Callable[[Mapping[str, str]], Awaitable[str | None]] | None = None,
    ) -> McpApp:
        """The ASGI app serving this server on `path`; the options are `McpApp`'s.

        Keys come from MRTR_STATE_KEYS (else an ephemeral key), the store from MRTR_STORE; the
        app owns that store and closes it when its lifespan ends.
        """
        from mrtr.serving._launch import http_app

        return http_app(self, path=path, allowed_hosts=allowed_hosts,
                        allowed_origins=allowed_origins, authenticator=authenticator)
