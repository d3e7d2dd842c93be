"""Serving: the process runner behind `mrtr serve`, `Server.run()` and `Server.http_app()`.

Targets, the per-user key file, the store a process uses, log configuration, uvicorn workers.
"""

from mrtr.serving._launch import ServerApp, http_app, run
from mrtr.serving._logging import JsonFormatter, RequestContext
from mrtr.serving._serve import serve

__all__ = ["http_app", "JsonFormatter", "RequestContext", "run", "serve", "ServerApp"]
