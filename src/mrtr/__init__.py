"""mrtr: MCP 2026-07-28 server framework, client and CLI built around Multi Round-Trip Requests."""

from mrtr.errors import (
    HeaderMismatch,
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

__version__ = "0.1.0"

__all__ = [
    "AskIfMissing",
    "Choices",
    "Context",
    "Declined",
    "Elicited",
    "Email",
    "Form",
    "Header",
    "HeaderMismatch",
    "InputRequired",
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
