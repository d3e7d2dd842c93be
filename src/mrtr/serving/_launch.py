"""`Server.run()` and `Server.http_app()`: serve a Server from its own file, as `mrtr serve` does.

The server core never imports the process runner (docs/architecture.md): `mrtr.Server`
(`mrtr/_app.py`) imports this module inside these two methods, only when one is called.
"""

# Design: run() goes through the same code as `mrtr serve` (keys from MRTR_STATE_KEYS or the
# per-user key file, the store _stores.py picks for them, uvicorn settings), so the two cannot
# drift. http_app() is for an app someone else serves (uvicorn, a FastAPI mount): it cannot know
# the bind address, so without MRTR_STATE_KEYS it seals with an ephemeral key (the rule for any
# process not started by `mrtr serve`), and without MRTR_STORE its store is in memory
# (_stores.app_store). The app owns that store (`owns_store`): the McpApp lifespan checks it at
# start-up (a Redis must persist every write) and closes it at shutdown.
from __future__ import annotations

import logging
import logging.config
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Literal

from mrtr.http._app import Authenticator, McpApp
from mrtr.server import Server, parse_keys
from mrtr.serving._keyfile import default_key_file
from mrtr.serving._logging import log_config
from mrtr.serving._stores import app_store
from mrtr.serving._target import KEYS_ENV, with_keys

__all__ = ["EPHEMERAL_ENV", "http_app", "run"]

EPHEMERAL_ENV = "MRTR_EPHEMERAL_KEY"  # the same variable `mrtr serve --ephemeral-key` reads
_NAMES = ("app", "mcp", "server")


def http_app(
    server: Server,
    *,
    path: str = "/mcp",
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    authenticator: Authenticator | None = None,
    environ: Mapping[str, str] = os.environ,
) -> McpApp:
    """The ASGI app serving `server` on `path`; keys from MRTR_STATE_KEYS, store from MRTR_STORE
    (else a MemoryStore; "none": no store).

    The app owns the store: its ASGI lifespan (or `lifespan`, for a parent app) closes it.

    Raises ValueError for a malformed key or store URL, or a path not starting with "/".
    """
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    text = environ.get(KEYS_ENV, "")
    dispatcher = with_keys(server, parse_keys(text) if text else None)
    dispatcher = dispatcher.replace(store=app_store(environ))
    return McpApp(dispatcher, path=path, allowed_hosts=allowed_hosts,
                  allowed_origins=allowed_origins, authenticator=authenticator, owns_store=True)


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
    if not logging.getLogger().handlers:  # as basicConfig: a logging setup of yours stays
        logging.config.dictConfig(log_config(log_level))  # mrtr serve's text lines
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
