"""Serving: the process runner behind `mrtr serve`, `Server.run()` and `Server.http_app()`.

Targets, the per-user key file, the store a process uses, log configuration, uvicorn workers,
and the limits on what one HTTP connection may hold.
"""

import warnings

from mrtr.serving._connections import ConnectionLimits
from mrtr.serving._launch import http_app, run
from mrtr.serving._logging import JsonFormatter, RequestContext
from mrtr.serving._serve import serve

__all__ = ["ConnectionLimits", "http_app", "JsonFormatter", "RequestContext", "run", "serve"]


def __getattr__(name: str) -> object:
    if name == "ServerApp":  # deprecated: McpApp owns a store and honours root_path itself
        warnings.warn("mrtr.serving.ServerApp is now mrtr.http.McpApp", DeprecationWarning,
                      stacklevel=2)
        from mrtr.http import McpApp

        return McpApp
    raise AttributeError(f"module 'mrtr.serving' has no attribute {name!r}")
