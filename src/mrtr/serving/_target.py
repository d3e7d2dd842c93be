"""load_target: turn a `mrtr serve` target into what it serves, sealing with this run's keys.

A target is `module:attribute` or `path/to/file.py:attribute`; the attribute is a Server, a
Dispatcher, an ASGI app, or a zero-argument factory function returning one of these. Without
`:attribute`, the module's `app`, `mcp` or `server` (else its only Server) is the target.
"""

# Design: keys are a deployment setting, so `MRTR_STATE_KEYS` (or the key `--workers` shares)
# wins over a Dispatcher's own ephemeral key; a Dispatcher that already seals with those keys is
# kept as it is (its Sealer may carry a custom ttl). A file is imported under its stem with its
# directory first on sys.path, as `python file.py` would, so its sibling imports work.
# Only a plain function is called as a factory, and only when it takes no arguments and is not
# a handler registered on a Server of the target's module: calling a class (a Form) or running
# a resource function by mistake must be a one-line refusal, not a traceback or a side effect.
from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeGuard

from mrtr.errors import InvalidRequestState
from mrtr.http._app import McpApp
from mrtr.server import Binding, Dispatcher, Form, Sealer, Server

__all__ = ["KEYS_ENV", "ASGIApp", "absolute_target", "load_dispatcher", "load_target",
           "with_keys"]

KEYS_ENV = "MRTR_STATE_KEYS"
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]  # scope, receive, send
log = logging.getLogger("mrtr.serve")
_PROBE = Binding(method="mrtr/serve", target="key-check", arguments_digest=b"", principal=None)
_WANTED = "not a Server, a Dispatcher, an ASGI app or a function returning one"
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_DEFAULT_NAMES = ("app", "mcp", "server")  # what FastMCP and the official SDK look for


def load_target(target: str) -> Server | Dispatcher | ASGIApp:
    """Import `target`: its Server, Dispatcher or ASGI app, calling a zero-argument factory.

    Raises ValueError (one line) for a malformed target, a missing file or attribute, or an
    object that is none of these (a class, a handler, a function needing arguments) without
    calling it; ImportError for a missing module.
    """
    module, obj = _import_target(target)
    if _servable(obj):
        return obj
    refusal = _not_a_factory(obj, module, target.rpartition(":")[0])
    if refusal is not None:
        raise ValueError(f"{target} {refusal}")
    made = obj()  # type: ignore[operator]  # _not_a_factory checked it is a plain function
    if not _servable(made):
        raise ValueError(f"{target} returned {_kind(made)}, {_WANTED}")
    return made


def load_dispatcher(target: str, keys: Sequence[bytes] | None) -> Dispatcher:
    """Import `target` and return a Dispatcher sealing with `keys[0]` (ephemeral without keys).

    An McpApp target gives its Dispatcher. Raises ValueError (one line) as `load_target` does,
    and for an ASGI app that is not an McpApp; ImportError for a missing module.
    """
    obj = load_target(target)
    if isinstance(obj, McpApp):
        obj = obj.dispatcher
    if not isinstance(obj, Server | Dispatcher):
        raise ValueError(f"{target} is an ASGI app: serve it over HTTP, or name its Server")
    return with_keys(obj, keys)


def with_keys(obj: Server | Dispatcher, keys: Sequence[bytes] | None) -> Dispatcher:
    """A Dispatcher for `obj` sealing with `keys[0]` (a Server without keys: an ephemeral key)."""
    if isinstance(obj, Dispatcher):
        return _rekeyed(obj, keys) if keys else obj
    if not keys:
        log.warning("no %s: using an ephemeral key; requestState will not survive a restart",
                    KEYS_ENV)
        return Dispatcher(obj)
    return Dispatcher(obj, sealer=Sealer(keys=list(keys), audience=obj.name))


def absolute_target(target: str) -> str:
    """`target` with a file path made absolute (worker processes may resolve it elsewhere)
    and its attribute named (a bare `file.py` imports the file to find it)."""
    source, attribute = _split(target)
    if attribute is None:
        attribute = _default_attribute(_import_module(source), source)
    if _is_path(source):
        source = str(Path(source).resolve())
    return f"{source}:{attribute}"


def _split(target: str) -> tuple[str, str | None]:
    source, sep, attribute = target.rpartition(":")
    if not sep and target and not target.endswith(":"):
        return target, None  # module or file.py alone
    if not source or not attribute:
        raise ValueError(f"target must look like module:attribute, path/to/file.py:attribute "
                         f"or path/to/file.py, got {target!r}")
    return source, attribute


def _import_module(source: str) -> ModuleType:
    return _import_file(source) if _is_path(source) else importlib.import_module(source)


def _default_attribute(module: ModuleType, source: str) -> str:
    """`app`, `mcp` or `server` when servable, else the module's only Server."""
    for name in _DEFAULT_NAMES:
        if _servable(getattr(module, name, None)):
            return name
    found = [name for name, value in vars(module).items() if isinstance(value, Server)]
    if len(found) == 1:
        return found[0]
    listed = f"Servers {', '.join(found)}" if found else "no Server"
    raise ValueError(f"{source} has no app, mcp or server attribute and {listed}: "
                     f"name one, e.g. {source}:{found[0] if found else 'app'}")


def _import_target(target: str) -> tuple[ModuleType, object]:
    source, attribute = _split(target)
    module = _import_module(source)
    if attribute is None:
        attribute = _default_attribute(module, source)
    obj: object = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{source} has no attribute {attribute!r}") from None
    return module, obj


def _servable(obj: object) -> TypeGuard[Server | Dispatcher | ASGIApp]:
    return isinstance(obj, Server | Dispatcher | McpApp) or _is_asgi(obj)


def _is_asgi(obj: object) -> bool:
    """An async callable taking (scope, receive, send), as uvicorn expects."""
    if isinstance(obj, type) or not callable(obj):
        return False
    call = obj if inspect.isroutine(obj) else type(obj).__call__
    if not inspect.iscoroutinefunction(call):
        return False
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return False
    return sum(p.kind in _POSITIONAL for p in params) == 3


def _not_a_factory(obj: object, module: ModuleType, source: str) -> str | None:
    """Why `obj` must not be called as a factory, or None when it may be."""
    if isinstance(obj, type):
        what = "a Form class" if issubclass(obj, Form) else f"the class {obj.__qualname__}"
        return f"is {what}, {_WANTED}"
    if not (inspect.isfunction(obj) or inspect.ismethod(obj)
            or isinstance(obj, functools.partial)):
        return f"is {_kind(obj)}, {_WANTED}"
    handler = _handler_of(obj, module, source)
    if handler is not None:
        return handler
    if inspect.iscoroutinefunction(obj):
        return f"is an async function, {_WANTED} (a factory is a plain function)"
    needed = [name for name, p in inspect.signature(obj).parameters.items()
              if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if needed:
        return f"takes arguments ({', '.join(needed)}); a factory takes none"
    return None


def _handler_of(fn: object, module: ModuleType, source: str) -> str | None:
    """'is the tool …' when `fn` is registered on a Server of `module`."""
    for attribute, server in _servers(module):
        for kind, name, call in _handlers(server):
            if call is fn or getattr(call, "__wrapped__", None) is fn:
                return (f"is the {kind} {name!r} of Server {server.name!r}, not a factory; "
                        f"serve the Server: {source}:{attribute}")
    return None


def _servers(module: ModuleType) -> Iterator[tuple[str, Server]]:
    for attribute, value in vars(module).items():
        if isinstance(value, McpApp):
            value = value.dispatcher
        if isinstance(value, Dispatcher):
            value = value.server
        if isinstance(value, Server):
            yield attribute, value


def _handlers(server: Server) -> Iterator[tuple[str, str, object]]:
    tables = server.tables
    yield from (("tool", name, entry.call) for name, entry in tables.tools.items())
    yield from (("prompt", name, entry.call) for name, entry in tables.prompts.items())
    for uri, res in [*tables.resources.items(), *tables.templates.items()]:
        yield "resource", uri, res.call
    for (_, name), completion in tables.completions.items():
        yield "completion handler", name, completion.call


def _kind(obj: object) -> str:
    name = type(obj).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _is_path(source: str) -> bool:
    return source.endswith(".py") or "/" in source or os.sep in source


def _import_file(source: str) -> ModuleType:
    path = Path(source).resolve()
    if not path.is_file():
        raise ValueError(f"no such file: {source}")
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None:
        if getattr(existing, "__file__", None) == str(path):
            return existing
        raise ValueError(f"{source}: a module named {name!r} is already imported; rename the file")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: msgspec and dataclasses look it up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _rekeyed(dispatcher: Dispatcher, keys: Sequence[bytes]) -> Dispatcher:
    server = dispatcher.server
    # A silent, unregistered logger: a failed probe is expected, not a tampering report.
    quiet = logging.Logger("mrtr.serve.key-check", logging.CRITICAL + 1)
    shared = Sealer(keys=list(keys), audience=server.name, logger=quiet)
    try:
        shared.unseal(dispatcher.sealer.seal(b"", _PROBE), _PROBE)
    except InvalidRequestState:
        log.info("serving %r with this run's keys (%s or the key file) instead of its "
                 "Dispatcher's own key", server.name, KEYS_ENV)
        # replace() keeps the Dispatcher's store (or its choice of none) and its task policy.
        return dispatcher.replace(sealer=Sealer(keys=list(keys), audience=server.name))
    return dispatcher  # it already seals with these keys: keep its own settings
