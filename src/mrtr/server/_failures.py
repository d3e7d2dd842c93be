"""The error policy: what the client sees when anything fails, in both eras, on every transport.

Exceptions become wire outcomes here and only here: JSON-RPC error replies (2026-07-28 requests
and 2025 sessions), HTTP refusals (status, headers, body) and `isError` tool results. The
Dispatcher, the task runner, the session server and the transports write what these functions
return; tests/server/test_failures.py checks that they build none of it themselves.
"""

# Design: a tool's failure is a result the model reads (`isError: true`, spec: server/tools);
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
#   Under `mrtr dev` (Dispatcher `expose_errors=True`) the exception's type and message are
#   added for the developer; never in production, where they may carry paths or secrets.
# A 2025 session gets the same errors, except where its revision has its own answer (`legacy_*`).
# HTTP: a refusal before the body is read (Host/Origin, path, method, media type, size, headers,
# authentication) is a JSON-RPC -32600 body without an id; its status and headers come from here.
# A tool's missing scopes are one answer in both eras (MCP authorization, "scope challenge"):
# 403, with the guard's `WWW-Authenticate: Bearer error="insufficient_scope"` when there is one,
# and the request's id and `requiredScopes` in the body, before the handler runs or a stream opens.
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from mrtr.errors import (
    DPoPRefused,
    Forbidden,
    InsufficientScope,
    InternalError,
    InvalidParams,
    InvalidRequest,
    LimitExceeded,
    MissingRequiredClientCapability,
    MrtrError,
    OutcomeTooLarge,
    ParseError,
    ProtocolError,
    ResourceNotFound,
    SessionNotFound,
    TooManySessions,
    Unauthorized,
)
from mrtr.protocol import CallToolResult, JSONObject, TextContent
from mrtr.server._asks import Declined, Suspend
from mrtr.server._consent import ConsentRefused
from mrtr.server._reply import Reply
from mrtr.server._results import ToolError, tool_error
from mrtr.server._schema import ArgumentsInvalid

__all__ = [
    "ask_failed", "auth_refusal", "bad_request", "batch_refused", "body_timed_out",
    "error_refusal", "error_reply", "failed_reply", "host_refused", "http_refusal", "in_flight",
    "legacy_error", "line_too_long", "not_a_request", "not_found", "not_json", "outcome_too_large",
    "over_limit", "over_quota", "post_only", "probe_method", "Refusal", "scope_refusal",
    "session_not_found", "session_required", "session_version", "stand_in_answer", "task_error",
    "timed_out", "too_large", "too_many_rounds", "too_many_sessions", "too_many_tasks",
    "tool_failure", "unanswered", "unready", "unsupported_media_type", "wire_error",
]

RequestId = str | int | None
Headers = Sequence[tuple[bytes, bytes]]
_REFUSALS = (Declined, ArgumentsInvalid, ConsentRefused)  # the client's doing: message sent


# -- a handler's failure (both eras) ---------------------------------------------------------------
def tool_failure(exc: Exception, name: str, log: logging.Logger, *,
                 expose: bool = False) -> CallToolResult:
    """The `isError` result for `exc` raised by tool `name`.

    Re-raises a ProtocolError: it is a wire error even from a tool (see `wire_error`).
    `expose` (`mrtr dev` only) adds a server bug's exception to the frozen text.
    """
    if isinstance(exc, ProtocolError):
        raise exc
    if isinstance(exc, _REFUSALS):
        log.info("tool %s: %s", name, exc)
        return tool_error(str(exc))
    if isinstance(exc, ToolError):
        return tool_error(str(exc))
    log.error("tool %s failed", name, exc_info=exc)
    return tool_error(f"Tool {name} failed" + (f": {_exposed(exc)}" if expose else "."))


def wire_error(exc: BaseException, what: str, log: logging.Logger, *,
               expose: bool = False) -> ProtocolError:
    """The JSON-RPC error for `exc`, raised while serving `what` (the method and its target).

    `expose` (`mrtr dev` only) adds a server bug's exception to the -32603 message.
    """
    if isinstance(exc, ProtocolError):
        log.info("%s: %r", what, exc)
        return exc
    if isinstance(exc, _REFUSALS):
        log.info("%s: %s", what, exc)
        return InvalidParams(str(exc))
    if isinstance(exc, Suspend):
        # Only the round engine turns an unanswered ask into InputRequiredResult; a handler of
        # any other method (completion) that asks is a server bug (spec: basic/patterns/mrtr).
        log.error("%s: the handler asked for input, which this method may not", what)
        return InternalError("Internal error: the handler asked for input, which "
                             "this method may not" if expose else None)
    log.error("%s failed", what, exc_info=exc)
    return InternalError(f"Internal error: {_exposed(exc)}" if expose else None)


def _exposed(exc: BaseException) -> str:
    """A server bug as `mrtr dev` shows it to the client: `ZeroDivisionError: division by zero`.

    Never in production (`mrtr serve`): the text may carry paths, queries or secrets.
    """
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failed_reply(request_id: RequestId, exc: BaseException, what: str,
                 log: logging.Logger, *, expose: bool = False) -> Reply:
    """The error Reply for `exc` raised while serving request `request_id` (`what`)."""
    error = wire_error(exc, what, log, expose=expose)
    try:
        return Reply(request_id, error=error)
    except (TypeError, ValueError) as bad:  # a handler's ProtocolError JSON cannot carry
        log.error("%s: cannot encode %r", what, error, exc_info=bad)
        return Reply(request_id, error=InternalError())


def task_error(exc: BaseException, what: str, log: logging.Logger, *,
               expose: bool = False) -> JSONObject:
    """The JSON-RPC error object a failed task's record keeps (`tasks/get` shows it)."""
    wire: JSONObject = msgspec.to_builtins(wire_error(exc, what, log, expose=expose).to_wire())
    return wire


def too_many_tasks(limit: int, meta: Mapping[str, object]) -> CallToolResult:
    """The `isError` result of a task tool called by a principal over its cap of live tasks."""
    text = (f"Too many tasks in progress (limit {limit}): wait for one to finish or cancel "
            "one, then call again.")
    if limit == 0:  # TaskPolicy.max_live_anonymous=0: tasks for authenticated callers only
        text = "This server runs tasks for authenticated callers only: sign in and call again."
    return CallToolResult(content=[TextContent(text=text)], is_error=True, meta=dict(meta))


# -- byte limits on what the store keeps for callers (server/_limits.py) -------------------------
def _limit_data(setting: str, limit: int, size: int) -> dict[str, object]:
    return {"type": LimitExceeded.DATA_TYPE, "setting": setting, "limit": limit, "size": size}


def over_limit(what: str, size: int, limit: int, setting: str, hint: str = "") -> LimitExceeded:
    """-32602 for input the server would keep that is over a byte limit: `what` ("The task's
    arguments") is `size` bytes, over `limit` set by `setting` ("StoreLimits.max_arguments")."""
    return LimitExceeded(f"{what}: {size:,} bytes, over the limit of {limit:,} bytes "
                         f"({setting}){hint}",
                         data=_limit_data(setting, limit, size))


def over_quota(size: int, quota: int, setting: str) -> LimitExceeded:
    """-32602 for input that would take what the store keeps for its principal past the quota."""
    return LimitExceeded(
        f"Storing {size:,} more bytes would take what this server keeps for you (task records "
        f"and answers) over its quota of {quota:,} bytes ({setting}): let your tasks end or "
        "expire (tasks/cancel frees them sooner), then send it again",
        data=_limit_data(setting, quota, size))


def outcome_too_large(what: str, size: int, limit: int, *, kept: bool) -> OutcomeTooLarge:
    """-32603 for an outcome over StoreLimits.max_outcome: `what` ("The result of task X") is
    `size` bytes; `kept` False: only a marker was stored, so this is a replay's answer."""
    tail = "" if kept else ": it was not kept, so a replay of it cannot be answered"
    return OutcomeTooLarge(f"{what}: {size:,} bytes, over the limit of {limit:,} bytes "
                           f"(StoreLimits.max_outcome){tail}",
                           data=_limit_data("StoreLimits.max_outcome", limit, size))


def stand_in_answer(request_id: RequestId, error: ProtocolError) -> bytes:
    """The JSON-RPC response a session's answer is replaced by when it cannot be kept (over a
    limit): the process awaiting it ends that request with `error`."""
    return Reply(request_id, error=error).body


# -- a message the Dispatcher could not serve -----------------------------------------------------
def error_reply(request_id: RequestId, error: ProtocolError) -> Reply:
    """The Reply refusing a message with `error` (a decode error, a session's own check)."""
    return Reply(request_id, error=error)


def unanswered(request_id: RequestId, exc: BaseException, log: logging.Logger) -> Reply:
    """The reply of a request whose Dispatcher raised (a bug): -32603, the reason logged."""
    log.error("request %r: no reply from the dispatcher", request_id, exc_info=exc)
    return Reply(request_id, error=InternalError())


def timed_out(request_id: RequestId, seconds: float, log: logging.Logger) -> Reply:
    """The reply of a request cut off by the transport's deadline."""
    log.warning("request %r timed out", request_id)
    return Reply(request_id, error=InternalError(f"Request timed out after {seconds:g}s"))


def in_flight(request_id: RequestId) -> Reply:
    """A request reusing the id of one still running (stdio)."""
    return Reply(request_id, error=InvalidRequest("Invalid Request: this id is already in flight"))


def not_a_request() -> bytes:
    """The answer to a batch member that is not a request object."""
    return Reply(None, error=InvalidRequest("Invalid Request")).body


def line_too_long() -> bytes:
    """The last line written on a stdio stream whose client sent an over-long line."""
    return Reply(None, error=InvalidRequest("Message too large")).body


# -- 2025 sessions -------------------------------------------------------------------------------
def legacy_error(method: str, reply: Reply) -> Reply:
    """`reply` as a 2025 session gets it: a missing client capability fails the tool
    (`isError`), an unknown resource is -32002; anything else is unchanged."""
    error = reply.error
    if error is None:
        return reply
    if method == "tools/call" and isinstance(error, MissingRequiredClientCapability):
        needed = ", ".join(error.needed) or "one it did not name"
        text = (f"This tool needs a client capability the session did not declare at "
                f"initialize: {needed}.")
        return Reply(reply.request_id, result=tool_error(text))
    if method == "resources/read" and isinstance(error, InvalidParams):
        data = error.data
        if isinstance(data, dict) and "uri" in data:
            return Reply(reply.request_id, error=ResourceNotFound(data=data))
    return reply


def ask_failed(request_id: RequestId, method: object, text: str, log: logging.Logger) -> Reply:
    """A server→client request of a session got no usable answer: `text` ends the call, as
    the tool's `isError` result, or as -32603 for any other method."""
    log.info("request %r: %s", request_id, text)
    if method == "tools/call":
        return Reply(request_id, result=tool_error(text))
    return Reply(request_id, error=InternalError(text))


_SESSION_CAPS = {
    "client": "this client already holds {limit} sessions in this server process (its limit); "
              "end one (DELETE) or retry later",
    "server": "this server process already holds {limit} sessions (its limit); retry later",
    "ended": "this client ended {limit} sessions whose ids have not expired yet (its limit): "
             "this one stays open until it expires",
}


def too_many_sessions(scope: str, limit: int, retry_after: float) -> TooManySessions:
    """A session cap refused a session (`scope`: "client", "server" or "ended"): the error
    names the cap; sent as 429 with `Retry-After` (HTTP) or as its JSON-RPC error (stdio)."""
    text = _SESSION_CAPS[scope].format(limit=limit)
    return TooManySessions(f"Too many sessions: {text}", limit=limit, scope=scope,
                           retry_after=max(1.0, retry_after))


def too_many_rounds(request_id: RequestId, method: object, rounds: int,
                    log: logging.Logger) -> Reply:
    """A session's request still asking after `rounds` rounds of questions: the call ends, as
    the tool's `isError` result, or as -32603 for any other method."""
    text = f"Still asking after {rounds} rounds of questions, so the call stopped."
    return ask_failed(request_id, method, text, log)


# -- HTTP ----------------------------------------------------------------------------------------
class Refusal(MrtrError):
    """An HTTP answer refusing a request: written as it is (`status`, `headers`, `body`).

    Raised by McpApp's helpers and answered in one place; never seen by a handler.
    """

    def __init__(self, status: int, body: bytes, headers: Headers = ()) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = list(headers)


def _refused(status: int, message: str, headers: Headers = ()) -> Refusal:
    """A refusal before a message was read: a -32600 body without an id."""
    return Refusal(status, Reply(None, error=InvalidRequest(message)).body, headers)


def error_refusal(error: ProtocolError, request_id: RequestId = None) -> Refusal:
    """`error` as an HTTP answer: its class's status (and `Retry-After` when it is
    retryable), its id (default: the one decoded)."""
    reply = Reply(request_id if request_id is not None else error.request_id, error=error)
    return Refusal(reply.http_status, reply.body, reply.headers)


def host_refused(reason: str) -> Refusal:
    """A Host or Origin outside the allow-list (DNS rebinding): 403 saying what to allow."""
    return _refused(403, reason)


def not_found(path: str) -> Refusal:
    return _refused(404, f"Not Found: the MCP endpoint is POST {path}")


def post_only() -> Refusal:
    return _refused(405, "Method Not Allowed: use POST", [(b"allow", b"POST")])


def unsupported_media_type() -> Refusal:
    return _refused(415, "Unsupported Media Type: Content-Type must be application/json")


def bad_request(reason: str) -> Refusal:
    """400 for a request whose headers cannot be read (`reason` says which)."""
    return _refused(400, f"Bad Request: {reason}")


def too_large(limit: int) -> Refusal:
    return _refused(413, f"Payload Too Large: the limit is {limit} bytes")


def body_timed_out(seconds: float) -> Refusal:
    """A body that did not arrive within the app's deadline: 408, and the connection closed."""
    return _refused(408, f"Request Timeout: the body did not arrive within {seconds:g} s",
                    [(b"connection", b"close")])


def auth_refusal(exc: Unauthorized, request_id: RequestId = None) -> Refusal:
    """An authenticator's or guard's refusal: its status, `WWW-Authenticate` (or `Retry-After`
    for 503), a frozen message; `request_id` once the message was read."""
    headers = ([(b"www-authenticate", exc.challenge.encode("latin-1", "replace"))] if exc.challenge
               else [(b"retry-after", b"5")] if exc.status == 503 else [])
    if isinstance(exc, DPoPRefused) and exc.nonce:  # RFC 9449 §9: retry with this nonce
        headers.append((b"dpop-nonce", exc.nonce.encode("ascii")))
    error: ProtocolError = (InsufficientScope(exc.scopes, exc.message)
                            if isinstance(exc, Forbidden) and exc.scopes
                            else InvalidRequest(exc.message))
    return Refusal(exc.status, Reply(request_id, error=error).body, headers)


def scope_refusal(request_id: RequestId, scopes: Iterable[str]) -> Refusal:
    """A tool call refused for missing `scopes` without a guard: the Runner's answer (403)."""
    return error_refusal(InsufficientScope(sorted(scopes)), request_id)


def http_refusal(exc: Exception, log: logging.Logger) -> Refusal:
    """What an HTTP request that raised `exc` is answered: a Refusal as it is, an
    authenticator's refusal with its challenge, anything else 500 with the reason logged."""
    if isinstance(exc, Refusal):
        return exc
    if isinstance(exc, Unauthorized):
        return auth_refusal(exc)
    log.error("unexpected error in the HTTP transport", exc_info=exc)
    return Refusal(500, Reply(None, error=InternalError()).body)


def session_required(request_id: RequestId) -> Refusal:
    """A 2025 message that is neither `initialize` nor sent within a session."""
    return error_refusal(InvalidRequest(
        "Bad Request: Mcp-Session-Id header is required (send initialize first, or send a "
        "2026-07-28 request with params._meta)"), request_id)


def session_not_found(request_id: RequestId) -> Refusal:
    """An unknown, forged, expired or terminated session id: 404, -32001 (as the SDKs)."""
    return error_refusal(SessionNotFound(), request_id)


def session_version(request_id: RequestId, version: str) -> Refusal:
    """`MCP-Protocol-Version` disagrees with the version the session negotiated."""
    return error_refusal(InvalidRequest(
        f"Bad Request: MCP-Protocol-Version must be {version} in this session"), request_id)


def batch_refused() -> Refusal:
    return error_refusal(InvalidRequest(
        "Invalid Request: batches are only accepted in 2025-03-26 sessions"))


def not_json(fallback: ProtocolError | None) -> Refusal:
    """A session POST that is no JSON-RPC of ours: the 2026-07-28 error it earned, if any."""
    return error_refusal(fallback or ParseError("Parse error: invalid JSON"))


def probe_method() -> Refusal:
    """A health probe asked with a method other than GET or HEAD (its own JSON body)."""
    return Refusal(405, msgspec.json.encode({"status": "method not allowed"}),
                   [(b"allow", b"GET, HEAD")])


def unready(checks: Mapping[str, str]) -> Refusal:
    """`GET /readyz` while a check fails: 503 naming the failing check (reason logged)."""
    return Refusal(503, msgspec.json.encode({"status": "unavailable", "checks": dict(checks)}))
