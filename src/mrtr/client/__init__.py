"""The client side: `Client`, the sans-I/O MRTR flow, input handlers, checkpoints, transports."""

# Design: the HTTP and stdio transports are imported on first use (PEP 562): `import mrtr.client`
# loads neither httpx nor the subprocess code, and never the server (tests/test_layers.py).
from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING

from mrtr.client._client import Client
from mrtr.client._era import Mode
from mrtr.client._errors import (
    ClientError,
    InputRefused,
    ListTooLong,
    TooManyInputs,
    TooManyRounds,
    UnexpectedResult,
)
from mrtr.client._flow import Fulfil, Send, Sleep, Step, Suspended, call_flow, drive
from mrtr.client._handlers import (
    ElicitationHandler,
    Handlers,
    RootsHandler,
    RoundHook,
    SamplingHandler,
)
from mrtr.client._limits import ClientLimits
from mrtr.client._requests import LogHandler, ProgressHandler
from mrtr.client._session import VersionRefused
from mrtr.client._stepping import ManualFlow
from mrtr.client._tasks import Tasks
from mrtr.client._tasks_flow import TaskCancelled, TaskFailed, TaskObserver
from mrtr.client._telemetry import ClientTelemetry
from mrtr.client.transports._base import (
    MessageSink,
    SessionExpired,
    SessionTransport,
    Transport,
    TransportError,
)
from mrtr.client.transports._targets import transport_for

if TYPE_CHECKING:
    from mrtr.client._connect import connect
    from mrtr.client.transports._http import HTTPTransport
    from mrtr.client.transports._stdio import TAIL, ServerExited, StdioTransport

__all__ = [
    "call_flow",
    "Client",
    "ClientError",
    "ClientLimits",
    "ClientTelemetry",
    "connect",
    "drive",
    "ElicitationHandler",
    "Fulfil",
    "Handlers",
    "HTTPTransport",
    "InputRefused",
    "ListTooLong",
    "LogHandler",
    "ManualFlow",
    "MessageSink",
    "Mode",
    "ProgressHandler",
    "RootsHandler",
    "RoundHook",
    "SamplingHandler",
    "Send",
    "ServerExited",
    "SessionExpired",
    "SessionTransport",
    "Sleep",
    "StdioTransport",
    "Step",
    "Suspended",
    "TAIL",
    "TaskCancelled",
    "TaskFailed",
    "TaskObserver",
    "Tasks",
    "TooManyInputs",
    "TooManyRounds",
    "Transport",
    "transport_for",
    "TransportError",
    "UnexpectedResult",
    "VersionRefused",
]

_LAZY = {"connect": "mrtr.client._connect",
         "HTTPTransport": "mrtr.client.transports._http",
         "StdioTransport": "mrtr.client.transports._stdio",
         "ServerExited": "mrtr.client.transports._stdio",
         "TAIL": "mrtr.client.transports._stdio"}

_DEPRECATED = {"NotificationSink": "MessageSink", "Telemetry": "ClientTelemetry"}


def __getattr__(name: str) -> object:
    if name in _DEPRECATED:
        warnings.warn(f"mrtr.client.{name} is now mrtr.client.{_DEPRECATED[name]}",
                      DeprecationWarning, stacklevel=2)
        return globals()[_DEPRECATED[name]]
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
