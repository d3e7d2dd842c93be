"""What the client sees when a handler fails: exceptions become wire outcomes here, only here."""

# Design (STYLE S4): a tool's failure is a result the model reads (`isError: true`, TOOL-01);
# prompts, resources and every other method have no such field, so their failures are JSON-RPC
# errors. Three kinds of exception, one rule each, whatever the method:
# - ProtocolError: its code and message were chosen for the client; it goes out as it is, even
#   from a tool (unknown names, InvalidRequestState, -32021 capability errors). So do the store's
#   StoreUnavailable and the ledger's OutcomePending: retryable errors (HTTP 503, Retry-After),
#   never an `isError` result a model would answer with a new call (a second effect).
# - Declined and ArgumentsInvalid: the request cannot complete because of what the client (its
#   user) sent or refused. The message is sent: as isError text in a tool, as -32602 elsewhere
#   (JSON-RPC "invalid method parameters"; the spec uses -32602 for every client-caused refusal of
#   prompts and resources, e.g. missing arguments). Never -32603: the server did not fail.
#   ToolError is the tool author's message for the model: sent in a tool, frozen elsewhere.
# - Anything else is a server bug: a frozen text or -32603 "Internal error", the reason logged.
from __future__ import annotations

import logging
import math

from mrtr.errors import InternalError, InvalidParams, ProtocolError
from mrtr.protocol import CallToolResult
from mrtr.server._asks import Declined, Suspend
from mrtr.server._results import ToolError, tool_error
from mrtr.server._schema import ArgumentsInvalid

__all__ = ["retry_headers", "tool_failure", "wire_error"]

_REFUSALS = (Declined, ArgumentsInvalid)  # the client's doing: the message is sent


def tool_failure(exc: Exception, name: str, log: logging.Logger) -> CallToolResult:
    """The `isError` result for `exc` raised by tool `name`.

    Re-raises a ProtocolError: it is a wire error even from a tool (see `wire_error`).
    """
    if isinstance(exc, ProtocolError):
        raise exc
    if isinstance(exc, _REFUSALS):
        log.info("tool %s: %s", name, exc)
        return tool_error(str(exc))
    if isinstance(exc, ToolError):
        return tool_error(str(exc))
    log.error("tool %s failed", name, exc_info=exc)
    return tool_error(f"Tool {name} failed.")


def wire_error(exc: BaseException, what: str, log: logging.Logger) -> ProtocolError:
    """The JSON-RPC error for `exc`, raised while serving `what` (the method and its target)."""
    if isinstance(exc, ProtocolError):
        log.info("%s: %r", what, exc)
        return exc
    if isinstance(exc, _REFUSALS):
        log.info("%s: %s", what, exc)
        return InvalidParams(str(exc))
    if isinstance(exc, Suspend):
        # Only the round engine turns an unanswered ask into InputRequiredResult; a handler of
        # any other method (completion) that asks is a server bug (DIGEST §2.2).
        log.error("%s: the handler asked for input, which this method may not", what)
        return InternalError()
    log.error("%s failed", what, exc_info=exc)
    return InternalError()


def retry_headers(error: ProtocolError | None) -> list[tuple[bytes, bytes]]:
    """The HTTP headers of an error reply: `Retry-After` (whole seconds) when it is retryable."""
    after = error.retry_after if error is not None else None
    if after is None:
        return []
    return [(b"retry-after", str(max(1, math.ceil(after))).encode())]
