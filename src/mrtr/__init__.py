"""mrtr: MCP 2026-07-28 server framework, client and CLI built around Multi Round-Trip Requests."""

# Design: `Client` and `connect` are imported on first use (PEP 562), so a server process that
# imports `mrtr` never loads httpx and the client stack (tests/test_layers.py checks it).
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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
    Server,
    ToolError,
    Uri,
)

if TYPE_CHECKING:
    from mrtr.client import Client
    from mrtr.transports import connect

__version__ = "0.1.0"

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

_LAZY = {"Client": "mrtr.client", "connect": "mrtr.transports._connect"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
