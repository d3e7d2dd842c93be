"""serve: run a Server over stdio or embedded uvicorn, with one or many worker processes.

Workers share the requestState key ring through `MRTR_STATE_KEYS` (DESIGN §7), so any worker
can continue a flow another worker started.
"""

# Design: with --workers > 1 uvicorn spawns fresh interpreters that import `_worker_app` by name,
# so everything a worker needs (target, path, keys, flags) travels in environment variables set
# by the parent before spawning. The parent imports the target once first so errors show early.
from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence

from mrtr.server import Dispatcher, Sealer, Server, generate_key, parse_keys
from mrtr.transports._asgi import LOOPBACK, McpApp
from mrtr.transports._stdio_server import serve_stdio

__all__ = ["load_dispatcher", "serve"]

KEYS_ENV = "MRTR_STATE_KEYS"
_TARGET_ENV = "MRTR_SERVE_TARGET"
_PATH_ENV = "MRTR_SERVE_PATH"
_HOSTS_ENV = "MRTR_SERVE_ALLOWED_HOSTS"
_WORKER_ENV = "MRTR_SERVE_EXPOSE_WORKER"
log = logging.getLogger("mrtr.serve")


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
    """Serve `target` (`module:attribute`) until SIGINT/SIGTERM or, for stdio, EOF.

    `keys` default to `MRTR_STATE_KEYS`; `allowed_hosts` default to the loopback names on `port`
    plus `host`. Returns the process exit status. Raises ValueError for a bad target or key.
    """
    _import_path()
    if keys is None and os.environ.get(KEYS_ENV):
        keys = parse_keys(os.environ[KEYS_ENV])
    if stdio:
        dispatcher = load_dispatcher(target, keys)
        asyncio.run(serve_stdio(dispatcher))
        return 0
    hosts = list(allowed_hosts) if allowed_hosts else _bound_hosts(host, port)
    if workers > 1:
        return _serve_workers(target, host, port, workers, path, keys, hosts, expose_worker,
                              log_level)
    dispatcher = load_dispatcher(target, keys)
    app = McpApp(dispatcher, path=path, allowed_hosts=hosts, expose_worker=expose_worker)
    return _run_uvicorn(app, host=host, port=port, workers=1, log_level=log_level)


def load_dispatcher(target: str, keys: Sequence[bytes] | None) -> Dispatcher:
    """Import `module:attribute` (a Server, a Dispatcher or a zero-argument factory of either).

    A Server gets a Dispatcher sealing with `keys[0]`; without keys, an ephemeral key.
    A Dispatcher is used as it is, with its own Sealer. Raises ValueError when unusable.
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"target must look like module:attribute, got {target!r}")
    obj: object = importlib.import_module(module_name)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, Server | Dispatcher) and callable(obj):
        obj = obj()
    if isinstance(obj, Dispatcher):
        return obj
    if not isinstance(obj, Server):
        raise ValueError(f"{target} is neither a Server nor a Dispatcher (got {type(obj)})")
    if not keys:
        log.warning("no %s: using an ephemeral key; requestState will not survive a restart",
                    KEYS_ENV)
        return Dispatcher(obj)
    return Dispatcher(obj, sealer=Sealer(keys=list(keys), audience=obj.name))


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
    os.environ.update({
        _TARGET_ENV: target,
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


def _bound_hosts(host: str, port: int) -> list[str]:
    names = list(LOOPBACK)
    if host not in ("0.0.0.0", "::", "") and host.lower() not in names:
        names.append(f"[{host}]" if ":" in host else host)
    elif host in ("0.0.0.0", "::"):
        log.warning("bound to %s: only loopback Host headers are accepted (see --allow-host)",
                    host)
    hosts = [f"{name}:{port}" for name in names]
    if port == 80:
        hosts += names  # clients omit the default port from Host and Origin
    return hosts


def _import_path() -> None:
    # `mrtr serve examples.bookings:app` must import from the working directory, as uvicorn does.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
