"""ConnectionLimits: how long and how many connections a client may hold (`mrtr serve`).

The deadlines are enforced by the uvicorn protocols in `_uvicorn.py`; this module is the setting
alone, so `mrtr.serving` imports without uvicorn.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from mrtr.http._headers import MAX_HEADER_BYTES

__all__ = ["ConnectionLimits", "MAX_HEAD_BYTES", "WebSocketsOnUpgrade"]

# The request line and headers as sent: McpApp's bound on names and values, plus the request
# line, ": " and CRLFs. Longer heads are refused before they reach the app.
MAX_HEAD_BYTES = MAX_HEADER_BYTES + 16 * 1024
_SPARE_FILES = 64  # open files a server needs besides its connections (store, logs, pipes)
log = logging.getLogger("mrtr.serve")


@dataclass(frozen=True)
class ConnectionLimits:
    """What one HTTP connection may hold, per worker process (docs/deploy.md#slow-clients).

    `header_timeout`: seconds from the connection opening (or, on a kept-alive connection, from
    the first byte of the next request) to the end of the request's headers. `body_timeout`:
    seconds from the end of the headers to the end of the body. On either deadline the
    connection is closed, with a 408 if the client had started sending. `idle_timeout`: seconds
    a kept-alive connection may wait for its next request (uvicorn's `timeout_keep_alive`).
    `max_connections`: open connections (and running requests) per worker; a request arriving
    beyond it gets 503 (uvicorn's `limit_concurrency`). `backlog`: connections the kernel queues
    before they are accepted. Raises ValueError when a value is not positive.
    """

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    idle_timeout: float = 5.0
    max_connections: int = 1000
    backlog: int = 2048

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "idle_timeout"):
            value = getattr(self, name)
            if not 0 < value < math.inf:
                raise ValueError(f"{name.replace('_', '-')} must be a positive number of "
                                 f"seconds, got {value}")
        for name in ("max_connections", "backlog"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name.replace('_', '-')} must be a whole number of at "
                                 f"least 1, got {value}")

    def uvicorn_options(self) -> dict[str, Any]:
        """The uvicorn.Config keywords that carry the limits uvicorn enforces itself."""
        return {"limit_concurrency": self.max_connections,
                "timeout_keep_alive": self.idle_timeout,
                "backlog": self.backlog,
                "h11_max_incomplete_event_size": MAX_HEAD_BYTES}

    def check_open_files(self) -> None:
        """Warn when this process may not open `max_connections` sockets (RLIMIT_NOFILE)."""
        try:
            import resource
        except ImportError:  # Windows: no such limit to check
            return
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        needed = self.max_connections + _SPARE_FILES
        if soft != resource.RLIM_INFINITY and soft < needed:
            log.warning("max-connections %d needs about %d open files per worker, but this "
                        "process may open %d: raise `ulimit -n` or lower --max-connections",
                        self.max_connections, needed, soft)


class WebSocketsOnUpgrade:
    """uvicorn's "auto" WebSocket protocol, imported at the first upgrade rather than at startup.

    McpApp refuses WebSockets (close 1008), but the refusal is uvicorn's WebSocket protocol's
    to send; importing it and websockets up front costs every server 1.4 MiB of RSS (issue 31).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

        assert AutoWebSocketsProtocol is not None  # serve checked a library is installed
        return AutoWebSocketsProtocol(*args, **kwargs)
