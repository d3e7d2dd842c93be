"""The server core: define tools, prompts and resources; serve them through a Dispatcher.

Nothing here does I/O of its own: `mrtr.http` and `mrtr.stdio` carry bytes to the Dispatcher,
`mrtr.serving` runs processes. `mrtr.Server` adds `run()` and `http_app()` to this `Server`.
"""

from mrtr.server._asks import Ask, Declined, Elicited
from mrtr.server._context import Context
from mrtr.server._dispatch import Dispatcher, Reply
from mrtr.server._forms import Choices, Confirmation, Email, Form, FormInvalid, Uri
from mrtr.server._in_process import MemoryTransport
from mrtr.server._peer import NotificationSink, Peer, Principal
from mrtr.server._registry import CachePolicy, Server
from mrtr.server._results import ToolError
from mrtr.server._rounds import InputRequired
from mrtr.server._schema import AskIfMissing, Header
from mrtr.server._sealing import Binding, Sealer, generate_key, parse_keys
from mrtr.server._telemetry import Telemetry
from mrtr.server.sessions import Session, SessionServer
from mrtr.server.tasks import TaskPolicy

__all__ = [
    "Ask",
    "AskIfMissing",
    "Binding",
    "CachePolicy",
    "Choices",
    "Confirmation",
    "Context",
    "Declined",
    "Dispatcher",
    "Elicited",
    "Email",
    "Form",
    "FormInvalid",
    "generate_key",
    "Header",
    "InputRequired",
    "MemoryTransport",
    "NotificationSink",
    "parse_keys",
    "Peer",
    "Principal",
    "Reply",
    "Sealer",
    "Server",
    "Session",
    "SessionServer",
    "TaskPolicy",
    "Telemetry",
    "ToolError",
    "Uri",
]
