"""transport_for: the Transport that reaches a URL, a stdio command line or an in-process server.

A URL gets HTTPTransport, a command line StdioTransport; an in-process target (a Server,
Dispatcher or McpApp) offers its own transport through `in_process_transport()`, so the client
never imports the server.
"""

# Design: a string is a URL when it starts with http:// or https://, a Python file when it is
# one word ending in .py (run with this interpreter, as `python file.py` would), and otherwise a
# command line split like a shell would. Only the transport a target needs is imported: a URL
# never loads the stdio code, an in-process server never loads httpx.
from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from typing import cast

from mrtr.client.transports._base import Transport

__all__ = ["transport_for"]


def transport_for(target: object) -> Transport:
    """The Transport that reaches `target`: a URL, a command line (str or argv), a Server,
    a Dispatcher or an McpApp (called in process), or a Transport (returned as it is).

    Raises TypeError for anything else, ValueError for an empty command line.
    """
    if isinstance(target, str):
        if target.startswith(("http://", "https://")):
            from mrtr.client.transports._http import HTTPTransport

            return HTTPTransport(target)
        argv = shlex.split(target)
        if len(argv) == 1 and argv[0].endswith(".py"):
            argv = [sys.executable, argv[0]]
        return _stdio(argv)
    if isinstance(target, Sequence) and all(isinstance(part, str) for part in target):
        return _stdio(list(target))
    if hasattr(target, "request") and hasattr(target, "aclose"):
        return cast(Transport, target)  # a Transport is a Protocol: duck-typed
    offer = getattr(target, "in_process_transport", None)
    if callable(offer):
        return cast(Transport, offer())
    raise TypeError(f"cannot connect to {type(target).__name__!r}: give a URL, a command line, "
                    "a Server, a Dispatcher or a Transport")


def _stdio(argv: list[str]) -> Transport:
    if not argv:
        raise ValueError("empty command line: give the command that starts the server")
    from mrtr.client.transports._stdio import StdioTransport

    return StdioTransport(argv)
