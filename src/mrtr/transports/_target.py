"""load_dispatcher: turn a `mrtr serve` target into a Dispatcher sealing with this run's keys.

A target is `module:attribute` or `path/to/file.py:attribute`; the attribute is a Server, a
Dispatcher or a zero-argument factory of either.
"""

# Design: keys are a deployment setting, so `MRTR_STATE_KEYS` (or the key `--workers` shares)
# wins over a Dispatcher's own ephemeral key; a Dispatcher that already seals with those keys is
# kept as it is (its Sealer may carry a custom ttl). A file is imported under its stem with its
# directory first on sys.path, as `python file.py` would, so its sibling imports work.
from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from mrtr.errors import InvalidRequestState
from mrtr.server import Binding, Dispatcher, Sealer, Server

__all__ = ["KEYS_ENV", "absolute_target", "load_dispatcher"]

KEYS_ENV = "MRTR_STATE_KEYS"
log = logging.getLogger("mrtr.serve")
_PROBE = Binding(method="mrtr/serve", target="key-check", arguments_digest=b"", principal=None)


def load_dispatcher(target: str, keys: Sequence[bytes] | None) -> Dispatcher:
    """Import `target` and return a Dispatcher sealing with `keys[0]` (ephemeral without keys).

    Raises ValueError (one line) for a malformed target, a missing file or attribute, or an
    object that is neither a Server nor a Dispatcher; ImportError for a missing module.
    """
    obj = _import_target(target)
    if not isinstance(obj, Server | Dispatcher) and callable(obj):
        obj = obj()
    if isinstance(obj, Dispatcher):
        return _with_keys(obj, keys) if keys else obj
    if not isinstance(obj, Server):
        raise ValueError(f"{target} is neither a Server nor a Dispatcher (got {type(obj)})")
    if not keys:
        log.warning("no %s: using an ephemeral key; requestState will not survive a restart",
                    KEYS_ENV)
        return Dispatcher(obj)
    return Dispatcher(obj, sealer=Sealer(keys=list(keys), audience=obj.name))


def absolute_target(target: str) -> str:
    """`target` with a file path made absolute (worker processes may resolve it elsewhere)."""
    source, sep, attribute = target.rpartition(":")
    if sep and _is_path(source):
        return f"{Path(source).resolve()}:{attribute}"
    return target


def _import_target(target: str) -> object:
    source, sep, attribute = target.rpartition(":")
    if not sep or not source or not attribute:
        raise ValueError(
            f"target must look like module:attribute or path/to/file.py:attribute, got {target!r}"
        )
    obj: object = _import_file(source) if _is_path(source) else importlib.import_module(source)
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{source} has no attribute {attribute!r}") from None
    return obj


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


def _with_keys(dispatcher: Dispatcher, keys: Sequence[bytes]) -> Dispatcher:
    server = dispatcher.server
    # A silent, unregistered logger: a failed probe is expected, not a tampering report.
    quiet = logging.Logger("mrtr.serve.key-check", logging.CRITICAL + 1)
    shared = Sealer(keys=list(keys), audience=server.name, logger=quiet)
    try:
        shared.unseal(dispatcher.sealer.seal(b"", _PROBE), _PROBE)
    except InvalidRequestState:
        log.info("serving %r with the keys from %s instead of its Dispatcher's own key",
                 server.name, KEYS_ENV)
        sealer = Sealer(keys=list(keys), audience=server.name)
        return Dispatcher(server, sealer=sealer, max_rounds=dispatcher.max_rounds,
                          logger=dispatcher.log)
    return dispatcher  # it already seals with these keys: keep its own settings
