"""The server core: define tools, prompts and resources on a `Server`.

Nothing here does I/O: `mrtr.http` (`McpApp`) and `mrtr.stdio` carry bytes to the engine (the
`Dispatcher`; `SessionServer` for 2025 sessions), `mrtr.serving` runs processes. `mrtr.Server`
adds `run()` and `http_app()` to this `Server`.
"""

import warnings

from mrtr.server._asks import Ask, Declined, Elicited
from mrtr.server._consent import ConsentPolicy
from mrtr.server._context import Context
from mrtr.server._dispatch import Dispatcher, Reply
from mrtr.server._forms import Choices, Confirmation, Email, Form, FormInvalid, Uri
from mrtr.server._idempotency import IdempotencyPolicy
from mrtr.server._in_process import MemoryTransport
from mrtr.server._limits import StoreLimits
from mrtr.server._peer import Notifier, Peer, Principal
from mrtr.server._registry import CachePolicy, Server
from mrtr.server._results import ToolError
from mrtr.server._rounds import InputRequired
from mrtr.server._schema import AskIfMissing, Header
from mrtr.server._sealing import Binding, Sealer, generate_key, parse_keys
from mrtr.server._telemetry import ServerTelemetry
from mrtr.server.sessions import Session, SessionLimits, SessionServer
from mrtr.server.tasks import TaskPolicy

__all__ = [
    "Ask",
    "AskIfMissing",
    "Binding",
    "CachePolicy",
    "Choices",
    "Confirmation",
    "ConsentPolicy",
    "Context",
    "Declined",
    "Dispatcher",
    "Elicited",
    "Email",
    "Form",
    "FormInvalid",
    "generate_key",
    "Header",
    "IdempotencyPolicy",
    "InputRequired",
    "MemoryTransport",
    "Notifier",
    "parse_keys",
    "Peer",
    "Principal",
    "Reply",
    "Sealer",
    "Server",
    "ServerTelemetry",
    "Session",
    "SessionLimits",
    "SessionServer",
    "StoreLimits",
    "TaskPolicy",
    "ToolError",
    "Uri",
]

_DEPRECATED = {"NotificationSink": "Notifier", "Telemetry": "ServerTelemetry"}


def __getattr__(name: str) -> object:
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module 'mrtr.server' has no attribute {name!r}")
    warnings.warn(f"mrtr.server.{name} is now mrtr.server.{new}", DeprecationWarning,
                  stacklevel=2)
    return globals()[new]
