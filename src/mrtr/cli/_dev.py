"""`mrtr dev TARGET`: serve over HTTP with debug logging, restarting when a source file changes.

For development only, a handler's exception is sent to the client (`expose_errors`).
"""

# Design: uvicorn's reloader (watchfiles, from uvicorn[standard]) binds the socket in this process
# and runs the app in a child that it restarts on every change, so the child builds the app by
# name (`dev_app`) from environment variables set here, as `mrtr serve --workers` does. One key
# (MRTR_STATE_KEYS, else the per-user key file, else one made for this run) and one store, the
# one mrtr.serving._stores picks for that key, serve every restart: a form in progress survives
# a reload. The log is `mrtr serve`'s text format (the request line of every MCP request, with
# its request, flow and round), and failures show their exception to the developer's client,
# which production (`mrtr serve`) never does.
from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mrtr.http._playground import PlaygroundMode
    from mrtr.serving._stores import KeyOrigin

__all__ = ["dev_app", "register"]

_TARGET_ENV = "MRTR_DEV_TARGET"
_PATH_ENV = "MRTR_DEV_PATH"
_LEVEL_ENV = "MRTR_DEV_LOG_LEVEL"
_PLAYGROUND_ENV = "MRTR_DEV_PLAYGROUND"  # "1", "force" or "0"
_TYPES = {"string": "TEXT", "integer": "INT", "number": "NUMBER", "boolean": "true",
          "array": "'[...]'", "object": "'{...}'"}

_EXAMPLES = """\
examples:
  mrtr dev examples/bookings.py                 reload on changes next to the file
  mrtr dev examples.bookings:app --port 9000    module:attribute, from the working directory
  mrtr dev app.py --reload-dir src --reload-dir lib
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `dev` subcommand."""
    dev = subparsers.add_parser(
        "dev", help="serve over HTTP for development: reload on file changes, debug logs",
        description="Serve TARGET over Streamable HTTP with debug logging (a line per MCP "
        "request) and a failing handler's exception sent to the client; the server restarts "
        "when a .py file under the watched folders changes. Prints the URL and an `mrtr call` "
        "line to try.", epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    dev.add_argument("target", metavar="TARGET",
                     help="module:attribute, path/to/file.py:attribute or path/to/file.py")
    dev.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    dev.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one")
    dev.add_argument("--path", default="/mcp", help="the MCP endpoint path (default /mcp)")
    dev.add_argument("--reload-dir", action="append", default=None, metavar="DIR",
                     help="watch this folder (repeatable; default: the target file's folder, "
                     "or the working directory for a module)")
    dev.add_argument("--log-level", default="debug",
                     choices=["critical", "error", "warning", "info", "debug"])
    dev.add_argument("--no-playground", action="store_true",
                     help="do not serve the browser playground at / (docs/playground.md)")
    dev.add_argument("--force", action="store_true",
                     help="serve the playground on a non-loopback --host too (anyone who can "
                     "reach the port can run your tools through it)")
    dev.set_defaults(run=_run_dev)


def _run_dev(args: argparse.Namespace) -> int:
    from mrtr.serving._target import absolute_target, load_target

    if not args.path.startswith("/"):
        print(f"mrtr dev: --path must start with '/', got {args.path!r}", file=sys.stderr)
        return 2
    sys.path.insert(0, os.getcwd())
    try:
        target = absolute_target(args.target)
        obj = load_target(target)
    except (ValueError, ImportError) as exc:
        print(f"mrtr dev: {exc}", file=sys.stderr)
        return 2
    from mrtr.protocol._loopback import is_loopback

    playground = "0" if args.no_playground else "force" if args.force else "1"
    if playground == "1" and not is_loopback(args.host):
        print(f"mrtr dev: the playground is for this machine only: --host {args.host} is not "
              "a loopback address; add --force to serve it there anyway, or --no-playground",
              file=sys.stderr)
        return 2
    source = target.rpartition(":")[0]
    dirs = args.reload_dir or [str(Path(source).parent) if source.endswith(".py")
                               else os.getcwd()]
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # one line per change is enough
    os.environ.update({_TARGET_ENV: target, _PATH_ENV: args.path,
                       _LEVEL_ENV: args.log_level.upper(), _PLAYGROUND_ENV: playground})
    origin = _share_key()
    try:
        return _serve(args, obj, [str(Path(d).resolve()) for d in dirs], origin)
    except ValueError as exc:  # the store: an unknown URL, a Redis that does not persist
        print(f"mrtr dev: {exc}", file=sys.stderr)
        return 2


def _share_key() -> KeyOrigin:
    """Put this run's key in MRTR_STATE_KEYS for every child; say where it came from."""
    from mrtr.server import generate_key
    from mrtr.serving._keyfile import default_key_file, read_or_create_key
    from mrtr.serving._stores import EPHEMERAL, KeyOrigin
    from mrtr.serving._target import KEYS_ENV

    if os.environ.get(KEYS_ENV):
        return KeyOrigin(shared=True)
    ephemeral = os.environ.get("MRTR_EPHEMERAL_KEY", "") not in ("", "0")
    path = None if ephemeral else default_key_file(os.environ)
    origin = EPHEMERAL
    try:
        if path is not None:
            raw = read_or_create_key(path)
            origin = KeyOrigin(key_file=path, key=raw)
            key = raw.hex()
        else:
            key = generate_key()
    except (OSError, ValueError) as exc:
        logging.getLogger("mrtr.dev").warning("cannot use the key file (%s): a key for this "
                                              "run only", exc)
        key = generate_key()
    os.environ[KEYS_ENV] = key  # every restarted child seals and opens with it
    return origin


def _serve(args: argparse.Namespace, obj: object, dirs: list[str], origin: KeyOrigin) -> int:
    import uvicorn
    from uvicorn.supervisors import ChangeReload

    from mrtr.serving._serve import served_name
    from mrtr.serving._stores import run_store
    from mrtr.stores import ENV_STORE

    config = uvicorn.Config("mrtr.cli._dev:dev_app", factory=True, host=args.host,
                            port=args.port, reload=True, reload_dirs=dirs,
                            log_level=args.log_level, access_log=False, lifespan="on")
    # One process at a time: the store, made here in the parent, outlives each child.
    with run_store(None, workers=1, origin=origin, name=served_name(obj)) as url:
        os.environ[ENV_STORE] = url
        sock = config.bind_socket()
        host = f"[{args.host}]" if ":" in args.host else args.host
        endpoint = f"http://{host}:{sock.getsockname()[1]}{args.path}"
        print(f"mrtr dev: serving on {endpoint}; restarts when a .py file under "
              f"{', '.join(dirs)} changes", flush=True)
        print(f"  try: {try_line(endpoint, obj)}", flush=True)
        if os.environ.get(_PLAYGROUND_ENV, "0") != "0":
            print(f"  playground: {endpoint.removesuffix(args.path)}/", flush=True)
        ChangeReload(config, target=uvicorn.Server(config).run, sockets=[sock]).run()
    return 0


def try_line(endpoint: str, obj: object) -> str:
    """An `mrtr call` command for the first tool, with a placeholder per required argument."""
    from mrtr.http import McpApp
    from mrtr.server import Dispatcher, Server

    server = obj.dispatcher.server if isinstance(obj, McpApp) else obj
    server = server.server if isinstance(server, Dispatcher) else server
    if not isinstance(server, Server) or not server.tables.tools:
        return f"mrtr tools {endpoint}"
    name, entry = next(iter(server.tables.tools.items()))
    schema = entry.tool.input_schema
    properties = schema.get("properties", {})
    words = ["mrtr", "call", endpoint, name]
    for argument in schema.get("required", []):
        kind = properties.get(argument, {}).get("type") if isinstance(properties, dict) else None
        words.append(f"{argument}={_TYPES.get(str(kind), 'VALUE')}")
    return " ".join(word if word.startswith("'") or "=" in word else shlex.quote(word)
                    for word in words)


def dev_app() -> object:
    """The uvicorn factory run in each (re)started child: everything comes from the env."""
    import logging.config

    from mrtr.http import McpApp
    from mrtr.http._playground import Playground
    from mrtr.server import Dispatcher, Server, parse_keys
    from mrtr.serving._logging import log_config
    from mrtr.serving._stores import with_store
    from mrtr.serving._target import KEYS_ENV, load_target, with_keys
    from mrtr.stores import ENV_STORE

    env = os.environ
    chosen = env.get(_PLAYGROUND_ENV, "0")
    mode: PlaygroundMode = "force" if chosen == "force" else chosen == "1"
    logging.config.dictConfig(log_config(env.get(_LEVEL_ENV, "DEBUG").lower(), "text"))
    sys.path.insert(0, os.getcwd())
    obj = load_target(env[_TARGET_ENV])
    if isinstance(obj, Server | Dispatcher):
        dispatcher = with_keys(obj, parse_keys(env[KEYS_ENV]))
        dispatcher = with_store(dispatcher, env.get(ENV_STORE) or None)
        return McpApp(dispatcher.replace(expose_errors=True), path=env[_PATH_ENV],
                      playground=mode)
    if isinstance(obj, McpApp):
        dispatcher = with_store(obj.dispatcher, env.get(ENV_STORE) or None)
        obj.dispatcher = dispatcher.replace(expose_errors=True)
        if mode and obj.playground is None:
            obj.playground = Playground(obj, mode)
    return obj


