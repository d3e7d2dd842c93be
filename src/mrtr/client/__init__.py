"""The client side: `Client`, the sans-I/O MRTR flow, input handlers and checkpoints."""

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
from mrtr.client._requests import ProgressHandler
from mrtr.client._session import VersionRefused
from mrtr.client._stepping import ManualFlow
from mrtr.client._tasks import Tasks
from mrtr.client._tasks_flow import TaskCancelled, TaskFailed, TaskObserver
from mrtr.client._telemetry import Telemetry
from mrtr.client._transport import (
    NotificationSink,
    SessionExpired,
    SessionTransport,
    Transport,
    TransportError,
)

__all__ = [
    "call_flow",
    "Client",
    "ClientError",
    "ClientLimits",
    "drive",
    "ElicitationHandler",
    "Fulfil",
    "Handlers",
    "InputRefused",
    "ListTooLong",
    "ManualFlow",
    "Mode",
    "NotificationSink",
    "ProgressHandler",
    "RootsHandler",
    "RoundHook",
    "SamplingHandler",
    "Send",
    "SessionExpired",
    "SessionTransport",
    "Sleep",
    "Step",
    "Suspended",
    "TaskCancelled",
    "TaskFailed",
    "TaskObserver",
    "Tasks",
    "Telemetry",
    "TooManyInputs",
    "TooManyRounds",
    "Transport",
    "TransportError",
    "UnexpectedResult",
    "VersionRefused",
]
