"""connect: a Client for a URL, a stdio command line or an in-process Server.

This is the layer above both the server and the client (DESIGN §3): `Client(target)` with a
target that is not a Transport imports this module inside its constructor.
"""

# Design: a string is a URL when it starts with http:// or https://, a Python file when it is
# one word ending in .py (run with this interpreter, as `python file.py` would), and otherwise a
# command line split like a shell would. Only the transport a target needs is imported: a URL
# never loads the server stack's stdio code, a Server never loads httpx.
from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from mrtr.client import Client, ClientLimits, Handlers, Mode, Transport
from mrtr.client._client import DEFAULT_TIMEOUT
from mrtr.protocol import ClientCapabilities

if TYPE_CHECKING:
    from mrtr.server import Dispatcher, Server

__all__ = ["Target", "connect", "transport_for"]

Target: TypeAlias = "Transport | str | Sequence[str] | Server | Dispatcher"


def transport_for(target: object) -> Transport:
    """The Transport that reaches `target`: a URL, a command line (str or argv), a Server,
    a Dispatcher or an McpApp (called in process), or a Transport (returned as it is).

    Raises TypeError for anything else, ValueError for an empty command line.
    """
    if isinstance(target, str):
        if target.startswith(("http://", "https://")):
            from mrtr.transports._http_client import HTTPTransport

            return HTTPTransport(target)
        argv = shlex.split(target)
        if len(argv) == 1 and argv[0].endswith(".py"):
            argv = [sys.executable, argv[0]]
        return _stdio(argv)
    if isinstance(target, Sequence) and all(isinstance(part, str) for part in target):
        return _stdio(list(target))
    if hasattr(target, "request") and hasattr(target, "aclose"):
        return target  # type: ignore[return-value]  # a Transport is a Protocol: duck-typed
    return _in_process(target)


def connect(
    target: Target,
    *,
    handlers: Handlers | None = None,
    capabilities: ClientCapabilities | None = None,
    max_rounds: int = 10,
    timeout: float | None = DEFAULT_TIMEOUT,
    limits: ClientLimits | None = None,
    mode: Mode = "auto",
) -> Client:
    """A Client for `target` (see `transport_for`); use it as `async with connect(url) as c:`."""
    return Client(transport_for(target), handlers=handlers, capabilities=capabilities,
                  max_rounds=max_rounds, timeout=timeout, limits=limits, mode=mode)


def _stdio(argv: list[str]) -> Transport:
    if not argv:
        raise ValueError("empty command line: give the command that starts the server")
    from mrtr.transports._stdio_client import StdioTransport

    return StdioTransport(argv)


def _in_process(target: object) -> Transport:
    from mrtr.server import Dispatcher, Server
    from mrtr.transports._asgi import McpApp
    from mrtr.transports._memory import MemoryTransport

    if isinstance(target, McpApp):
        target = target.dispatcher
    if isinstance(target, Server | Dispatcher):
        return MemoryTransport(target)
    raise TypeError(f"cannot connect to {type(target).__name__!r}: give a URL, a command line, "
                    "a Server, a Dispatcher or a Transport")
