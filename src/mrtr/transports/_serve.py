"""serve: run a Server over stdio or embedded uvicorn, with one or many worker processes.

Workers share the requestState key ring through `MRTR_STATE_KEYS` (DESIGN §7), so any worker
can continue a flow another worker started.
"""

# Design: with --workers > 1 uvicorn spawns fresh interpreters that import `_worker_app` by name,
# so everything a worker needs (target, path, keys, flags) travels in environment variables set
# by the parent before spawning. The parent imports the target once first so errors show early.
from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence

from mrtr.server import generate_key, parse_keys
from mrtr.transports._asgi import McpApp
from mrtr.transports._hosts import LOOPBACK
from mrtr.transports._stdio_server import serve_stdio
from mrtr.transports._target import KEYS_ENV, absolute_target, load_dispatcher

__all__ = ["KEYS_ENV", "load_dispatcher", "serve"]

_TARGET_ENV = "MRTR_SERVE_TARGET"
_PATH_ENV = "MRTR_SERVE_PATH"
_HOSTS_ENV = "MRTR_SERVE_ALLOWED_HOSTS"
_WORKER_ENV = "MRTR_SERVE_EXPOSE_WORKER"
log = logging.getLogger("mrtr.serve")
_STICKY = (
    "%d workers: 2025 clients (initialize sessions) need every request of a session on one "
    "worker (its answers to server requests and GET stream live there): use --workers 1 for "
    "them, or route on Mcp-Session-Id in front (nginx: hash $http_mcp_session_id consistent); "
    "2026-07-28 clients need nothing (docs/legacy.md)"
)


def serve(
    target: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    path: str = "/mcp",
    stdio: bool = False,
    keys: Sequence[bytes] | None = None,
    allowed_hosts: Sequence[str] | None = None,
    expose_worker: bool = False,
    log_level: str = "info",
) -> int:
    """Serve `target` (`module:attribute` or `file.py:attribute`) until SIGINT/SIGTERM or EOF.

    `keys` default to `MRTR_STATE_KEYS`. The loopback names and `host` are accepted in Host and
    Origin on any port, plus `allowed_hosts` (`name` or `name:port`). Returns the process exit
    status. Raises ValueError for a bad target or key.
    """
    _import_path()
    if keys is None and os.environ.get(KEYS_ENV):
        keys = parse_keys(os.environ[KEYS_ENV])
    if stdio:
        dispatcher = load_dispatcher(target, keys)
        asyncio.run(serve_stdio(dispatcher))
        return 0
    hosts = _allowed_hosts(host, allowed_hosts or ())
    if workers > 1:
        return _serve_workers(target, host, port, workers, path, keys, hosts, expose_worker,
                              log_level)
    dispatcher = load_dispatcher(target, keys)
    app = McpApp(dispatcher, path=path, allowed_hosts=hosts, expose_worker=expose_worker)
    return _run_uvicorn(app, host=host, port=port, workers=1, log_level=log_level)


def _worker_app() -> McpApp:
    """uvicorn factory for worker processes: everything comes from the environment."""
    _import_path()
    env = os.environ
    keys = parse_keys(env[KEYS_ENV])
    hosts = [h for h in env.get(_HOSTS_ENV, "").split(",") if h] or None
    return McpApp(
        load_dispatcher(env[_TARGET_ENV], keys),
        path=env.get(_PATH_ENV, "/mcp"),
        allowed_hosts=hosts,
        expose_worker=env.get(_WORKER_ENV) == "1",
    )


def _serve_workers(
    target: str,
    host: str,
    port: int,
    workers: int,
    path: str,
    keys: Sequence[bytes] | None,
    hosts: Sequence[str],
    expose_worker: bool,
    log_level: str,
) -> int:
    if not keys:
        # Design: one key generated here and handed to every worker, so states cross workers.
        log.warning("no %s: generated a key shared by the %d workers for this run only",
                    KEYS_ENV, workers)
        os.environ[KEYS_ENV] = generate_key()
    else:
        os.environ[KEYS_ENV] = ",".join(k.hex() for k in keys)
    load_dispatcher(target, parse_keys(os.environ[KEYS_ENV]))  # fail early, in the parent
    log.warning(_STICKY, workers)
    os.environ.update({
        _TARGET_ENV: absolute_target(target),  # workers may resolve a relative path elsewhere
        _PATH_ENV: path,
        _HOSTS_ENV: ",".join(hosts),
        _WORKER_ENV: "1" if expose_worker else "0",
    })
    return _run_uvicorn("mrtr.transports._serve:_worker_app", host=host, port=port,
                        workers=workers, log_level=log_level)


def _run_uvicorn(app: McpApp | str, *, host: str, port: int, workers: int, log_level: str) -> int:
    import uvicorn  # the ASGI server is an optional dependency (mrtr[cli])

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        workers=workers,
        factory=isinstance(app, str),
        loop="uvloop" if _has("uvloop") else "asyncio",
        http="httptools" if _has("httptools") else "h11",
        lifespan="on",
        access_log=False,
        log_level=log_level,
        server_header=False,
        timeout_graceful_shutdown=10,
    )
    if workers > 1:
        from uvicorn.supervisors import Multiprocess

        Multiprocess(config, sockets=[config.bind_socket()]).run()
        return 0
    server = uvicorn.Server(config)
    server.run()  # installs SIGINT/SIGTERM handlers for a graceful shutdown
    return 0 if server.started else 1


def _allowed_hosts(host: str, extra: Sequence[str]) -> list[str]:
    # Design: names, not name:port, so a reverse proxy on another port is accepted (see _hosts).
    names = [*LOOPBACK, *extra]
    if host in ("0.0.0.0", "::", ""):
        if not extra:
            log.warning("bound to %s: only loopback Host headers are accepted (see --allow-host)",
                        host or "all interfaces")
    elif host.lower() not in names:
        names.append(f"[{host}]" if ":" in host else host)
    return names


def _import_path() -> None:
    # `mrtr serve examples.bookings:app` must import from the working directory, as uvicorn does.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
