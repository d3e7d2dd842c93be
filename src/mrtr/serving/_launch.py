"""`Server.run()` and `Server.http_app()`: serve a Server from its own file, as `mrtr serve` does.

The server package cannot import transports (DESIGN §3), so these two methods import this module
inside their bodies; it is the only transports module the server layer ever names.
"""

# Design: run() goes through the same code as `mrtr serve` (keys from MRTR_STATE_KEYS or the
# per-user key file, a private SQLite store for the run, uvicorn settings), so the two cannot
# drift. http_app() is for an app someone else serves (uvicorn, a FastAPI mount): it cannot know
# the bind address, so without MRTR_STATE_KEYS it seals with an ephemeral key (the rule for any
# process not started by `mrtr serve`), and without MRTR_STORE its store is in memory. The app
# owns that store and closes it in the ASGI lifespan; `lifespan` lets a parent app run it, since
# Starlette does not forward lifespan events to mounted apps.
from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Literal

from mrtr.http._app import ASGIReceive, ASGIScope, ASGISend, Authenticator, McpApp
from mrtr.server import Dispatcher, Server, parse_keys
from mrtr.serving._keyfile import default_key_file
from mrtr.serving._target import KEYS_ENV, with_keys
from mrtr.stores import MemoryStore, store_from_env

__all__ = ["EPHEMERAL_ENV", "ServerApp", "http_app", "run"]

EPHEMERAL_ENV = "MRTR_EPHEMERAL_KEY"  # the same variable `mrtr serve --ephemeral-key` reads
_NAMES = ("app", "mcp", "server")
log = logging.getLogger("mrtr.serve")


class ServerApp(McpApp):
    """An McpApp that owns its Dispatcher's store: the ASGI lifespan closes it at shutdown.

    Mounted at a prefix (Starlette `Mount`, FastAPI `app.mount`), the endpoint is the prefix
    followed by `path`: the mount's `root_path` is taken off the request path.
    """

    async def __call__(self, scope: ASGIScope, receive: ASGIReceive, send: ASGISend) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        root = scope.get("root_path", "")
        if kind == "http" and root and scope.get("path", "").startswith(root):
            scope = {**scope, "path": scope["path"][len(root):] or "/"}
        await McpApp.__call__(self, scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Run the app's start-up and shutdown: `FastAPI(lifespan=mcp.lifespan)`."""
        try:
            yield
        finally:
            await self.dispatcher.drain()  # once work still running: recorded before closing
            store = self.dispatcher.store
            if store is not None:
                await store.aclose()
                log.info("%s closed", type(store).__name__)

    async def _lifespan(self, receive: ASGIReceive, send: ASGISend) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with self.lifespan():
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
        await send({"type": "lifespan.shutdown.complete"})


def http_app(
    server: Server,
    *,
    path: str = "/mcp",
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    authenticator: Authenticator | None = None,
    environ: Mapping[str, str] = os.environ,
) -> ServerApp:
    """The ASGI app serving `server` on `path`; keys from MRTR_STATE_KEYS, store from MRTR_STORE.

    Raises ValueError for a malformed key or store URL, or a path not starting with "/".
    """
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    text = environ.get(KEYS_ENV, "")
    dispatcher = with_keys(server, parse_keys(text) if text else None)
    store = store_from_env(environ) or MemoryStore()
    dispatcher = Dispatcher(server, sealer=dispatcher.sealer, store=store)
    return ServerApp(dispatcher, path=path, allowed_hosts=allowed_hosts,
                     allowed_origins=allowed_origins, authenticator=authenticator)


def run(
    server: Server,
    transport: Literal["stdio", "http"] = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    path: str = "/mcp",
    log_level: str = "info",
) -> None:
    """Serve `server` until EOF (stdio) or SIGINT/SIGTERM (http); see `mrtr serve`.

    Raises ValueError for an unknown transport or setting, or when `workers` > 1 and the server
    is not a module-level attribute that worker processes can import.
    """
    from mrtr.serving._serve import serve  # imports uvicorn's settings only when run

    if transport not in ("stdio", "http"):
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
    logging.basicConfig(stream=sys.stderr, level=log_level.upper(),
                        format="%(levelname)s %(name)s: %(message)s")
    ephemeral = os.environ.get(EPHEMERAL_ENV, "") not in ("", "0")
    target = locate(server) if workers > 1 else server.name
    stdout = sys.stdout
    if transport == "stdio":
        sys.stdout = sys.stderr  # stdout carries the protocol: a stray print() must not break it
    try:
        status = serve(target, loaded=server, host=host, port=port, workers=workers, path=path,
                       stdio=transport == "stdio", log_level=log_level,
                       key_file=None if ephemeral else default_key_file(os.environ))
    finally:
        sys.stdout = stdout
    if status:
        raise SystemExit(status)


def locate(server: Server) -> str:
    """`file.py:attribute` or `module:attribute` naming `server`, for worker processes.

    Raises ValueError when no imported module holds it at module level.
    """
    for name, module in list(sys.modules.items()):
        found = [attr for attr, value in vars(module).items() if value is server]
        if not found or name.startswith("mrtr."):
            continue
        attribute = next((a for a in _NAMES if a in found), found[0])
        if name == "__main__" or name.startswith("_"):
            file = getattr(module, "__file__", None)
            if file is None:
                continue
            return f"{os.path.abspath(file)}:{attribute}"
        return f"{name}:{attribute}"
    raise ValueError(f"workers > 1: Server {server.name!r} must be a module-level attribute "
                     "that worker processes can import (or use `mrtr serve module:attribute`)")
