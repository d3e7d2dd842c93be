"""Old import paths of modules that moved (0.1 layout), kept working with a DeprecationWarning.

`import mrtr.transports._asgi` still gives the module now at `mrtr.http._app` (the same module
object, so patching it patches the real one); new code imports the new path.
"""

# Design: one meta-path finder instead of a shim file per old module, so the folder list shows
# only the new layout. It answers only the names in MOVED; any other import passes it by.
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "install"]

MOVED = {
    "mrtr.client._transport": "mrtr.client.transports._base",
    "mrtr.server._answers": "mrtr.server.sessions._answers",
    "mrtr.server._session": "mrtr.server.sessions._session",
    "mrtr.server._session_server": "mrtr.server.sessions._server",
    "mrtr.server._task_hooks": "mrtr.server._asks",
    "mrtr.server._task_listen": "mrtr.server.tasks._listen",
    "mrtr.server._task_methods": "mrtr.server.tasks._methods",
    "mrtr.server._task_records": "mrtr.server.tasks._records",
    "mrtr.server._tasks": "mrtr.server.tasks._runner",
    "mrtr.transports._asgi": "mrtr.http._app",
    "mrtr.transports._connect": "mrtr.client._connect",
    "mrtr.transports._exchange": "mrtr.http._exchange",
    "mrtr.transports._health": "mrtr.http._health",
    "mrtr.transports._hosts": "mrtr.http._hosts",
    "mrtr.transports._http_client": "mrtr.client.transports._http",
    "mrtr.transports._keyfile": "mrtr.serving._keyfile",
    "mrtr.transports._launch": "mrtr.serving._launch",
    "mrtr.transports._logging": "mrtr.serving._logging",
    "mrtr.transports._memory": "mrtr.server._in_process",
    "mrtr.transports._serve": "mrtr.serving._serve",
    "mrtr.transports._session_http": "mrtr.http._sessions",
    "mrtr.transports._stdio_client": "mrtr.client.transports._stdio",
    "mrtr.transports._stdio_server": "mrtr.stdio._server",
    "mrtr.transports._stores": "mrtr.serving._stores",
    "mrtr.transports._target": "mrtr.serving._target",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.target}; import it from there",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module already ran under its new name, whose spec it keeps."""
        module.__spec__ = self.spec


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder on `sys.meta_path` once (importing `mrtr` does it)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
