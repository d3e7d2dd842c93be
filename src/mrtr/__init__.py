"""mrtr: MCP 2026-07-28 server framework, client and CLI built around Multi Round-Trip Requests."""

# Design: every name is imported on first use (PEP 562), so `import mrtr.client` loads no server
# code and a server process never loads httpx and the client stack (tests/test_layers.py).
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mrtr import _moved

if TYPE_CHECKING:
    from mrtr._app import Server
    from mrtr.client import Client, connect
    from mrtr.errors import (
        HeaderMismatch,
        InsufficientScope,
        InternalError,
        InvalidParams,
        InvalidRequest,
        InvalidRequestState,
        MethodNotFound,
        MissingRequiredClientCapability,
        MrtrError,
        ParseError,
        ProtocolError,
        UnsupportedProtocolVersion,
    )
    from mrtr.server import (
        AskIfMissing,
        Choices,
        Context,
        Declined,
        Elicited,
        Email,
        Form,
        Header,
        InputRequired,
        Sealer,
        ToolError,
        Uri,
    )

__version__ = "0.1.0"

_ERRORS = ("HeaderMismatch", "InsufficientScope", "InternalError", "InvalidParams",
           "InvalidRequest", "InvalidRequestState", "MethodNotFound",
           "MissingRequiredClientCapability", "MrtrError", "ParseError", "ProtocolError",
           "UnsupportedProtocolVersion")
_SERVER = ("AskIfMissing", "Choices", "Context", "Declined", "Elicited", "Email", "Form", "Header",
           "InputRequired", "Sealer", "ToolError", "Uri")
_LAZY = {
    **dict.fromkeys(_ERRORS, "mrtr.errors"),
    **dict.fromkeys(_SERVER, "mrtr.server"),
    "Server": "mrtr._app",
    "Client": "mrtr.client",
    "connect": "mrtr.client._connect",
}

__all__ = [
    "AskIfMissing",
    "Choices",
    "Client",
    "connect",
    "Context",
    "Declined",
    "Elicited",
    "Email",
    "Form",
    "Header",
    "HeaderMismatch",
    "InputRequired",
    "InsufficientScope",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "InvalidRequestState",
    "MethodNotFound",
    "MissingRequiredClientCapability",
    "MrtrError",
    "ParseError",
    "ProtocolError",
    "Sealer",
    "Server",
    "ToolError",
    "UnsupportedProtocolVersion",
    "Uri",
]

_moved.install()


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
