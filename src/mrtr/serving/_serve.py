"""serve: run a Server over stdio or embedded uvicorn, with one or many worker processes.

Workers share the requestState key ring through `MRTR_STATE_KEYS` (docs/deploy.md), so any worker
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mrtr.http._app import McpApp
from mrtr.http._hosts import LOOPBACK
from mrtr.http._playground import Playground, PlaygroundMode
from mrtr.protocol._loopback import is_loopback
from mrtr.server import Dispatcher, Server, generate_key, parse_keys
from mrtr.serving._connections import ConnectionLimits, WebSocketsOnUpgrade
from mrtr.serving._gc import GcTuning, check_threshold
from mrtr.serving._keyfile import read_or_create_key
from mrtr.serving._logging import announce, log_config
from mrtr.serving._resource import (
    check_forwarded,
    resource_settings,
    warn_unset_resource,
)
from mrtr.serving._stores import EPHEMERAL, KeyOrigin, run_store, with_store
from mrtr.serving._target import (
    KEYS_ENV,
    ASGIApp,
    absolute_target,
    load_dispatcher,
    load_target,
    with_keys,
)
from mrtr.stdio._server import serve_stdio
from mrtr.stores import ENV_STORE

if TYPE_CHECKING:
    from mrtr.auth import AuthSettings

__all__ = ["KEYS_ENV", "load_dispatcher", "serve"]

_TARGET_ENV = "MRTR_SERVE_TARGET"
_PATH_ENV = "MRTR_SERVE_PATH"
_HOSTS_ENV = "MRTR_SERVE_ALLOWED_HOSTS"
_WORKER_ENV = "MRTR_SERVE_EXPOSE_WORKER"
_ASK_TIMEOUT_ENV = "MRTR_SERVE_ASK_TIMEOUT"
_AUTH_ENV = "MRTR_SERVE_AUTH"  # AuthSettings as JSON, for worker processes
ASK_TIMEOUT = 600.0  # seconds a server→client request of a 2025 session waits for its answer
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
    key_file: Path | None = None,
    allowed_hosts: Sequence[str] | None = None,
    expose_worker: bool = False,
    log_level: str = "info",
    ask_timeout: float = ASK_TIMEOUT,
    store: str | None = None,
    loaded: Server | None = None,
    log_format: str = "text",
    access_log: bool = False,
    auth: AuthSettings | None = None,
    allow_unshared_store: bool = False,
    limits: ConnectionLimits | None = None,
    forwarded_allow_ips: Sequence[str] = (),
    playground: PlaygroundMode = False,
    gc_threshold: int | None = None,
) -> int:
    """Serve `target` (`module:attribute` or `file.py:attribute`) until SIGINT/SIGTERM or EOF.

    `keys` default to `MRTR_STATE_KEYS`; without them, one process on a loopback address or
    stdio keeps its key in `key_file` (when given), so a restart keeps flows alive. The loopback
    names and `host` are accepted in Host and Origin on any port, plus `allowed_hosts` (`name`
    or `name:port`). `port` 0 picks a free port. `ask_timeout` (seconds) bounds each wait
    for a 2025 session client's answer to a server request. `store` is a store URL (default
    MRTR_STORE, else a SQLite file beside the key file, or in a private temp directory shared by
    the workers for a key made for this run; "none": no store); "none" and "memory:" with
    several workers need `allow_unshared_store`. `loaded` is the Server `target` names, when
    the caller holds it (`Server.run`).
    `log_format` is "text" or "json" (one object per line, docs/operations.md); `access_log`
    adds uvicorn's line per HTTP request. `auth` makes the HTTP endpoint an OAuth resource
    server (docs/auth.md); its resource URL (the audience tokens must name) is `auth.resource`,
    else `http://host:port/path` (refused off loopback). `forwarded_allow_ips` lists the
    proxies (addresses, networks, "*") whose X-Forwarded-For/-Proto uvicorn believes; none by
    default. `limits` bound what each HTTP connection may hold: deadlines for a
    request's headers and body, the idle keep-alive time, how many at once (default
    `ConnectionLimits()`, docs/deploy.md#slow-clients). `playground` serves the browser
    playground at `/` (docs/playground.md): one process, a loopback `host` unless "force".
    Each HTTP process freezes its start-up heap once its app is loaded; `gc_threshold` also sets
    its collector's generation 0 threshold (None: Python's; docs/deploy.md#garbage-collection).
    Returns the process exit status.
    Raises ValueError for a bad setting, target or key.
    """
    _check_settings(port, workers, path, ask_timeout)
    check_threshold(gc_threshold)
    logs = log_config(log_level, log_format, access_log)  # ValueError: before anything starts
    if auth is not None and stdio:
        raise ValueError("auth settings apply to HTTP only, not to --stdio")
    forwarded = check_forwarded(forwarded_allow_ips)
    _check_playground(playground, host, workers, stdio)
    if auth is not None:  # before anything binds: a public bind needs its resource URL
        auth = resource_settings(auth, host, port, path)
    _import_path()
    # fail early: before keys, sockets or worker processes
    obj = loaded if loaded is not None else load_target(target)
    keys, origin = _run_keys(keys, key_file, local=workers == 1 and (stdio or is_loopback(host)))
    with run_store(store, workers=workers, origin=origin, name=served_name(obj),
                   allow_unshared=allow_unshared_store) as url:
        return _serve(target, obj, host=host, port=port, workers=workers, path=path,
                      stdio=stdio, keys=keys, allowed_hosts=allowed_hosts,
                      expose_worker=expose_worker, logs=logs,
                      ask_timeout=ask_timeout, store=url, auth=auth,
                      limits=limits or ConnectionLimits(), forwarded=forwarded,
                      playground=playground, gc_threshold=gc_threshold)


def _serve(target: str, obj: Server | Dispatcher | ASGIApp, *, host: str, port: int,
           workers: int, path: str, stdio: bool, keys: Sequence[bytes] | None,
           allowed_hosts: Sequence[str] | None, expose_worker: bool,
           logs: dict[str, Any], ask_timeout: float, store: str,
           auth: AuthSettings | None, limits: ConnectionLimits, forwarded: list[str],
           playground: PlaygroundMode = False, gc_threshold: int | None = None) -> int:
    if stdio:
        asyncio.run(serve_stdio(with_store(_dispatcher(target, obj, keys), store),
                                ask_timeout=ask_timeout))
        return 0
    hosts = _allowed_hosts(host, allowed_hosts or ())
    if not isinstance(obj, Server | Dispatcher) and (path != "/mcp" or allowed_hosts
                                                     or expose_worker
                                                     or ask_timeout != ASK_TIMEOUT):
        log.warning("%s is an ASGI app with its own settings: --path, --allow-host, "
                    "--ask-timeout and --debug-worker-header do not apply to it", target)
    if not isinstance(obj, Server | Dispatcher) and auth is not None:
        raise ValueError(f"{target} is an ASGI app: --auth-* apply to a Server or Dispatcher "
                         "(give an McpApp its own ResourceServer, docs/auth.md)")
    if isinstance(obj, McpApp) and obj.guard is not None:
        warn_unset_resource(obj.guard, host)
    shown = path if isinstance(obj, Server | Dispatcher) else _endpoint(obj)
    if workers > 1:
        os.environ[_ASK_TIMEOUT_ENV] = repr(ask_timeout)  # read by each worker's _worker_app
        os.environ[_AUTH_ENV] = auth.to_json() if auth is not None else ""
        saved = os.environ.get(ENV_STORE)
        os.environ[ENV_STORE] = store  # like the key: every worker opens the same store
        try:
            return _serve_workers(target, host, port, workers, path, keys, hosts,
                                  expose_worker, logs, shown, limits, forwarded,
                                  gc_threshold)
        finally:  # the temp store is gone after this run: never leave its URL behind
            os.environ.pop(ENV_STORE, None)
            if saved is not None:
                os.environ[ENV_STORE] = saved
    app = _app(obj, keys, path, hosts, expose_worker, ask_timeout, store, auth, playground)
    return _run_uvicorn(app, host=host, port=port, workers=1, logs=logs, path=shown,
                        limits=limits, forwarded=forwarded, gc_threshold=gc_threshold)


def _worker_app() -> McpApp | ASGIApp:
    """uvicorn factory for worker processes: everything comes from the environment."""
    _import_path()
    env = os.environ
    hosts = [h for h in env.get(_HOSTS_ENV, "").split(",") if h]
    target = env[_TARGET_ENV]
    auth = None
    if env.get(_AUTH_ENV):
        from mrtr.auth import AuthSettings

        auth = AuthSettings.from_json(env[_AUTH_ENV])
    return _app(load_target(target), parse_keys(env[KEYS_ENV]),
                env.get(_PATH_ENV, "/mcp"), hosts, env.get(_WORKER_ENV) == "1",
                float(env.get(_ASK_TIMEOUT_ENV, ASK_TIMEOUT)), env.get(ENV_STORE) or None, auth)


def _check_settings(port: int, workers: int, path: str, ask_timeout: float) -> None:
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be 0..65535 (0 picks a free port), got {port}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    if not 0 < ask_timeout < float("inf"):
        raise ValueError(f"ask-timeout must be a positive number of seconds, got {ask_timeout}")


def _check_playground(playground: PlaygroundMode, host: str, workers: int, stdio: bool) -> None:
    if not playground:
        return
    if stdio or workers > 1:
        raise ValueError("--playground serves one HTTP process: not with --stdio or --workers")
    if playground is True and not is_loopback(host):
        raise ValueError(f"--playground is for this machine only: --host {host} is not a "
                         "loopback address (anyone reaching the port could run your tools "
                         "through it); add --force to serve it there anyway")


def _run_keys(keys: Sequence[bytes] | None, key_file: Path | None, *,
              local: bool) -> tuple[Sequence[bytes] | None, KeyOrigin]:
    """This run's keys (given, MRTR_STATE_KEYS, else a single local process's key file) and
    where they come from; (None, EPHEMERAL) when the run makes its own."""
    if keys is None and os.environ.get(KEYS_ENV):
        keys = parse_keys(os.environ[KEYS_ENV])
    if keys is not None:
        return keys, KeyOrigin(shared=True)
    if key_file is None or not local:
        return None, EPHEMERAL
    try:
        key = read_or_create_key(key_file)
    except (OSError, ValueError) as exc:
        log.warning("cannot use the key file (%s): this run's requestState key is ephemeral", exc)
        return None, EPHEMERAL
    log.info("requestState key kept in %s: flows survive a restart of this local server "
             "(--ephemeral-key: a fresh key per run)", key_file)
    return [key], KeyOrigin(key_file=key_file, key=key)


def served_name(obj: object) -> str | None:
    """The name of the Server behind `obj` (None for a foreign ASGI app)."""
    if isinstance(obj, McpApp):
        obj = obj.dispatcher
    if isinstance(obj, Dispatcher):
        return obj.server.name
    return obj.name if isinstance(obj, Server) else None


def _dispatcher(target: str, obj: Server | Dispatcher | ASGIApp,
                keys: Sequence[bytes] | None) -> Dispatcher:
    if isinstance(obj, McpApp):
        obj = obj.dispatcher
    if not isinstance(obj, Server | Dispatcher):
        raise ValueError(f"{target} is an ASGI app: serve it over HTTP, or name its Server")
    return with_keys(obj, keys)


def _endpoint(app: ASGIApp) -> str:
    """The path to show for an ASGI app target: an McpApp knows its own."""
    return app.path if isinstance(app, McpApp) else "/"


def _app(obj: Server | Dispatcher | ASGIApp, keys: Sequence[bytes] | None,
         path: str, hosts: Sequence[str], expose_worker: bool,
         ask_timeout: float = ASK_TIMEOUT, store: str | None = None,
         auth: AuthSettings | None = None,
         playground: PlaygroundMode = False) -> McpApp | ASGIApp:
    """The app one process serves: `obj` sealing with `keys`, with the store at `store`."""
    if isinstance(obj, Server | Dispatcher):
        guard = None
        if auth is not None:
            from mrtr.auth import ResourceServer  # only a server with auth loads JWT and httpx

            guard = ResourceServer(auth)
        # body_timeout=None: the connection's protocol enforces --body-timeout (_uvicorn.py).
        return McpApp(with_store(with_keys(obj, keys), store), path=path, allowed_hosts=hosts,
                      expose_worker=expose_worker, ask_timeout=ask_timeout, authenticator=guard,
                      body_timeout=None, playground=playground)
    if isinstance(obj, McpApp) and keys:
        obj.dispatcher = with_keys(obj.dispatcher, keys)  # states must open in every worker
    if isinstance(obj, McpApp):
        obj.dispatcher = with_store(obj.dispatcher, store)
        if playground and obj.playground is None:
            obj.playground = Playground(obj, playground)
    elif playground:
        log.warning("the served object is an ASGI app of its own: --playground does not apply")
    return obj


def _serve_workers(
    target: str,
    host: str,
    port: int,
    workers: int,
    path: str,
    keys: Sequence[bytes] | None,
    hosts: Sequence[str],
    expose_worker: bool,
    logs: dict[str, Any],
    shown: str,
    limits: ConnectionLimits,
    forwarded: list[str],
    gc_threshold: int | None,
) -> int:
    if not keys:
        # Design: one key generated here and handed to every worker, so states cross workers.
        log.warning("no %s: generated a key shared by the %d workers for this run only",
                    KEYS_ENV, workers)
        os.environ[KEYS_ENV] = generate_key()
    else:
        os.environ[KEYS_ENV] = ",".join(k.hex() for k in keys)
    log.warning(_STICKY, workers)
    os.environ.update({
        _TARGET_ENV: absolute_target(target),  # workers may resolve a relative path elsewhere
        _PATH_ENV: path,
        _HOSTS_ENV: ",".join(hosts),
        _WORKER_ENV: "1" if expose_worker else "0",
    })
    return _run_uvicorn("mrtr.serving._serve:_worker_app", host=host, port=port,
                        workers=workers, logs=logs, path=shown, limits=limits,
                        forwarded=forwarded, gc_threshold=gc_threshold)


def _run_uvicorn(app: McpApp | ASGIApp | str, *, host: str, port: int, workers: int,
                 logs: dict[str, Any], path: str, limits: ConnectionLimits,
                 forwarded: list[str], gc_threshold: int | None = None) -> int:
    import uvicorn  # the ASGI server is an optional dependency (mrtr[cli])

    from mrtr.serving._uvicorn import BoundedConfig, protocol_class

    limits.check_open_files()
    config = BoundedConfig(
        app,
        limits=limits,
        gc=GcTuning(gc_threshold),
        host=host,
        port=port,
        workers=workers,
        factory=isinstance(app, str),
        loop="uvloop" if _has("uvloop") else "asyncio",
        http=protocol_class("httptools" if _has("httptools") else "h11"),
        ws=WebSocketsOnUpgrade if _has("websockets") or _has("wsproto") else "none",
        lifespan="on",
        # uvicorn believes X-Forwarded-* from 127.0.0.1 by default (or FORWARDED_ALLOW_IPS):
        # only from the proxies the operator names here.
        proxy_headers=bool(forwarded),
        forwarded_allow_ips=forwarded,
        access_log=logs["loggers"]["uvicorn.access"]["propagate"],
        log_config=logs,  # applied in each worker process too
        server_header=False,
        timeout_graceful_shutdown=10,
    )
    if workers > 1:
        from uvicorn.supervisors import Multiprocess

        sock = config.bind_socket()
        announce(host, sock.getsockname()[1], path)
        Multiprocess(config, sockets=[sock]).run()
        return 0

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:  # the bound port: --port 0 picks one
                announce(host, self.servers[0].sockets[0].getsockname()[1], path)

    server = Announcing(config)
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
