"""The server side: define tools, prompts and resources; serve them through a Dispatcher."""

from mrtr.server._asks import Ask, Declined, Elicited
from mrtr.server._context import Context
from mrtr.server._dispatch import Dispatcher, Reply
from mrtr.server._forms import Choices, Confirmation, Email, Form, FormInvalid, Uri
from mrtr.server._peer import NotificationSink, Peer, Principal
from mrtr.server._registry import CachePolicy, Server
from mrtr.server._results import ToolError
from mrtr.server._rounds import InputRequired
from mrtr.server._schema import AskIfMissing, Header
from mrtr.server._sealing import Binding, Sealer, generate_key, parse_keys
from mrtr.server._session import Session
from mrtr.server._session_server import SessionServer
from mrtr.server._task_records import TaskPolicy
from mrtr.server._telemetry import Telemetry

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
