"""Decode and encode wire messages: one typed decoder per direction, errors as `mrtr.errors`."""

# Design: the fast path is one msgspec call over a tagged union. Only when it fails do we decode
# again, untyped, to say *why* (in the order ParseError, InvalidRequest, MethodNotFound /
# InvalidParams for `_meta`, UnsupportedProtocolVersion, InvalidParams), so well-formed traffic
# pays nothing for good errors. Results are not tagged on the wire (an absent `resultType` means
# complete), so the client decodes the envelope with the result kept raw, then the result by kind.
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

import msgspec

from mrtr.errors import (
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    ProtocolError,
)

from ._content import resolve_contents
from ._input import (
    CreateMessageResult,
    ElicitResult,
    InputRequiredResult,
    InputResponse,
    ListRootsResult,
)
from ._jsonrpc import ErrorObject, JSONRPCErrorResponse, JSONRPCResultResponse, UnknownNotification
from ._meta import (
    CLIENT_CAPABILITIES_KEY,
    PROTOCOL_VERSION_KEY,
    SUPPORTED_VERSIONS,
    ClientCapabilities,
    RequestId,
    RequestMeta,
)
from ._meta import check_version as check_version
from ._methods import METHODS, ClientMessage, MethodSpec, ServerNotification, ServerResult
from ._tasks import CreateTaskResult
from ._wire import JSON, UNSET, JSONObject, UnsetType

__all__ = [
    "ServerMessage",
    "check_version",
    "decode",
    "decode_client_message",
    "decode_input_response",
    "decode_server_message",
    "encode",
    "encode_error",
    "encode_message",
    "encode_result",
]

T = TypeVar("T")

ServerMessage = (
    JSONRPCResultResponse[ServerResult]
    | JSONRPCErrorResponse
    | ServerNotification
    | UnknownNotification
)

_CLIENT_NOTIFICATIONS = frozenset({"notifications/cancelled"})
_SERVER_NOTIFICATIONS = frozenset(
    {
        "notifications/progress",
        "notifications/message",
        "notifications/cancelled",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/subscriptions/acknowledged",
        "notifications/tasks",
    }
)
_INPUT_RESPONSE_TYPES: Mapping[str, type[InputResponse]] = MappingProxyType(
    {
        "elicitation/create": ElicitResult,
        "sampling/createMessage": CreateMessageResult,
        "roots/list": ListRootsResult,
    }
)
_INT64 = (-(2**63), 2**64 - 1)


class _ServerEnvelope(msgspec.Struct, frozen=True):
    """A server message with its payload left raw, to be decoded by kind."""

    jsonrpc: JSON = UNSET
    id: JSON = UNSET
    method: JSON = UNSET
    params: msgspec.Raw | UnsetType = UNSET
    result: msgspec.Raw | UnsetType = UNSET
    error: msgspec.Raw | UnsetType = UNSET


class _ResultKind(msgspec.Struct, frozen=True, rename={"result_type": "resultType"}):
    result_type: str | UnsetType = UNSET


_CLIENT_DECODER: msgspec.json.Decoder[ClientMessage] = msgspec.json.Decoder(
    ClientMessage, dec_hook=resolve_contents
)
_NOTIFICATION_DECODER: msgspec.json.Decoder[ServerNotification] = msgspec.json.Decoder(
    ServerNotification, dec_hook=resolve_contents
)
_ENVELOPE_DECODER = msgspec.json.Decoder(_ServerEnvelope)
_KIND_DECODER = msgspec.json.Decoder(_ResultKind)
_ERROR_DECODER = msgspec.json.Decoder(JSONRPCErrorResponse)
_RESULT_DECODERS: Mapping[type, msgspec.json.Decoder[ServerResult]] = MappingProxyType(
    {
        t: msgspec.json.Decoder(t, dec_hook=resolve_contents)
        for t in {s.result_type for s in METHODS.values()} | {InputRequiredResult, CreateTaskResult}
    }
)
_ENCODER = msgspec.json.Encoder()
_NO_CAPS = ClientCapabilities()


# -- generic -----------------------------------------------------------------------------------


def encode(obj: object) -> bytes:
    """Encode any wire Struct (or JSON value) to compact JSON bytes."""
    return _ENCODER.encode(obj)


def decode(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into `type_` (any protocol type); raises msgspec.DecodeError.

    Not the hot path: use the direction decoders for messages off the wire.
    """
    return msgspec.json.decode(data, type=type_, dec_hook=resolve_contents)


# -- server side: decode what the client sent, encode replies ------------------------------------


def decode_client_message(data: bytes | str) -> ClientMessage | UnknownNotification:
    """Decode one client message into its request or notification Struct.

    Raises ParseError, InvalidRequest, MethodNotFound, InvalidParams or
    UnsupportedProtocolVersion with `request_id` set whenever the id was readable. A
    notification with an unknown method is returned as UnknownNotification (to be ignored).
    The fast path does not check the protocol version: callers use `check_version`.
    """
    try:
        return _CLIENT_DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        outcome = _classify_client(data, str(exc))
    if isinstance(outcome, UnknownNotification):
        return outcome
    try:
        raise outcome
    finally:  # the traceback keeps this frame, and with it `data`: no cycle back through it
        del outcome


def _classify_client(data: bytes | str, reason: str) -> ProtocolError | UnknownNotification:
    try:
        obj = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return ParseError("Parse error: invalid JSON")
    if not isinstance(obj, dict):
        return InvalidRequest("Invalid Request: a message must be a JSON object")
    request_id = _readable_id(obj)
    problem = _envelope_problem(obj)
    if problem is not None:
        return _with_id(InvalidRequest(f"Invalid Request: {problem}"), request_id)
    method: str = obj["method"]
    if "id" not in obj:
        if method in METHODS:
            return InvalidRequest(f"Invalid Request: {method} requires an id")
        if method in _CLIENT_NOTIFICATIONS:
            return InvalidParams(f"Invalid params: {reason}")
        return UnknownNotification(method=method, params=obj.get("params", UNSET))
    return _with_id(_classify_request(method, obj.get("params"), reason), request_id)


def _envelope_problem(obj: JSONObject) -> str | None:
    if obj.get("jsonrpc", "2.0") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "id" in obj and _readable_id(obj) is None:
        return "id must be a string or an integer"
    if not isinstance(obj.get("method"), str):
        return "method must be a string"
    return None


def _classify_request(method: str, params: object, reason: str) -> ProtocolError:
    # Design: an unknown or removed method (legacy `initialize`, `ping`) is MethodNotFound even
    # without `_meta`, since it could never be served; the version is still checked first when
    # it is readable because it applies to every method.
    meta = params.get("_meta") if isinstance(params, dict) else None
    known = method in METHODS
    if not isinstance(meta, dict):
        return (
            InvalidParams("Invalid params: params._meta is required") if known else _missing(method)
        )
    version = meta.get(PROTOCOL_VERSION_KEY)
    if not known:
        if isinstance(version, str):
            check = _version_error(version)
            if check is not None:
                return check
        return _missing(method)
    for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY):
        if key not in meta:
            return InvalidParams(f"Invalid params: params._meta is missing {key!r}")
    try:
        parsed = msgspec.convert(meta, RequestMeta)
    except msgspec.ValidationError as exc:
        return InvalidParams(f"Invalid params: params._meta: {exc}")
    return _version_error(parsed.protocol_version) or InvalidParams(f"Invalid params: {reason}")


def _version_error(version: str) -> ProtocolError | None:
    try:
        check_version(RequestMeta(protocol_version=version, client_capabilities=_NO_CAPS))
    except ProtocolError as exc:
        return exc
    return None


def _missing(method: str) -> MethodNotFound:
    if method == "initialize":
        # A server answering `initialize` this way names what it speaks (versioning: a
        # modern-only server SHOULD), so a 2025 client can tell why and a 2026 one what to send.
        supported = list(SUPPORTED_VERSIONS)
        return MethodNotFound(
            f"Method not found: initialize (2026-07-28 requests carry _meta; supported "
            f"versions: {', '.join(supported)})", data={"supported": supported})
    return MethodNotFound(f"Method not found: {method}")


def _readable_id(obj: JSONObject) -> RequestId | None:
    value = obj.get("id")
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]:
        return value
    return None


def _with_id(error: ProtocolError, request_id: RequestId | None) -> ProtocolError:
    error.request_id = request_id
    return error


def encode_message(message: msgspec.Struct) -> bytes:
    """Encode a request or notification Struct (it already carries `jsonrpc` and `method`)."""
    return _ENCODER.encode(message)


def encode_result(request_id: RequestId, result: msgspec.Struct) -> bytes:
    """Encode a full JSON-RPC result response."""
    return _ENCODER.encode(JSONRPCResultResponse(id=request_id, result=result))


def encode_error(request_id: RequestId | None, error: ProtocolError) -> bytes:
    """Encode a JSON-RPC error response; the id is omitted when None (it was unreadable).

    Error `data` that cannot be encoded is dropped rather than failing the reply.
    """
    rid: RequestId | UnsetType = UNSET if request_id is None else request_id
    data: JSON = UNSET if error.data is None else error.data
    wire = ErrorObject(code=error.code, message=error.message, data=data)
    try:
        return _ENCODER.encode(JSONRPCErrorResponse(id=rid, error=wire))
    except (TypeError, ValueError, OverflowError):
        wire = ErrorObject(code=error.code, message=error.message)
        return _ENCODER.encode(JSONRPCErrorResponse(id=rid, error=wire))


# -- client side: decode what the server sent ------------------------------------------------


def decode_server_message(data: bytes | str, method: str) -> ServerMessage:
    """Decode one server message received for a `method` request.

    A result is decoded as that method's complete result, as InputRequiredResult when
    `resultType` is "input_required" and the method may return it, or as CreateTaskResult for
    "task" on methods that may create tasks; an absent `resultType` means complete.
    Raises ParseError for bad JSON and InvalidRequest for anything else malformed, including an
    unknown or disallowed `resultType` (with `request_id` set when readable); MethodNotFound if
    `method` is not one we know.
    """
    spec = METHODS.get(method)
    if spec is None:
        raise _missing(method)
    try:
        env = _ENVELOPE_DECODER.decode(data)
    except msgspec.ValidationError:
        raise InvalidRequest("Invalid message: not a JSON object") from None
    except (msgspec.DecodeError, RecursionError):
        raise ParseError("Parse error: invalid JSON") from None
    rid = _readable_id({"id": env.id})
    if env.jsonrpc not in ("2.0", UNSET):
        raise _with_id(InvalidRequest('Invalid message: jsonrpc must be "2.0"'), rid)
    if env.method is not UNSET:
        return _decode_notification(data, env)
    if env.error is not UNSET:
        return _decode_error(data, rid)
    if not isinstance(env.result, msgspec.Raw) or rid is None:
        raise _with_id(InvalidRequest("Invalid message: expected a result with an id"), rid)
    result_type = _result_type(spec, _result_kind(env.result, rid), rid)
    try:
        result = _RESULT_DECODERS[result_type].decode(env.result)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _with_id(InvalidRequest(f"Invalid result: {exc}"), rid) from None
    return JSONRPCResultResponse(id=rid, result=result)


def _result_type(spec: MethodSpec, kind: str | UnsetType, rid: RequestId) -> type:
    if kind is UNSET or kind == "complete":
        return spec.result_type
    if kind == "input_required" and spec.may_input_required:
        return InputRequiredResult
    if kind == "task" and spec.may_create_task:
        return CreateTaskResult
    raise _with_id(InvalidRequest(f"Invalid result: resultType {kind!r} for {spec.method}"), rid)


def _decode_notification(
    data: bytes | str, env: _ServerEnvelope
) -> ServerNotification | UnknownNotification:
    if env.id is not UNSET:
        raise InvalidRequest("Invalid message: servers must not send requests")
    if not isinstance(env.method, str):
        raise InvalidRequest("Invalid message: method must be a string")
    try:
        return _NOTIFICATION_DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        if env.method in _SERVER_NOTIFICATIONS:
            raise InvalidRequest(f"Invalid notification: {exc}") from None
    params: JSON = msgspec.json.decode(env.params) if isinstance(env.params, msgspec.Raw) else UNSET
    return UnknownNotification(method=env.method, params=params)


def _decode_error(data: bytes | str, rid: RequestId | None) -> JSONRPCErrorResponse:
    try:
        return _ERROR_DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _with_id(InvalidRequest(f"Invalid error response: {exc}"), rid) from None


def _result_kind(raw: msgspec.Raw, rid: RequestId) -> str | UnsetType:
    try:
        return _KIND_DECODER.decode(raw).result_type
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _with_id(InvalidRequest(f"Invalid result: {exc}"), rid) from None


def decode_input_response(method: str, obj: JSONObject) -> InputResponse:
    """Type one `inputResponses` entry by the input-request `method` asked under its key.

    Raises InvalidParams if the entry does not match (or the method is not an input request).
    """
    type_ = _INPUT_RESPONSE_TYPES.get(method)
    if type_ is None:
        raise InvalidParams(f"Invalid params: {method!r} is not an input request method")
    try:
        return msgspec.convert(obj, type_, dec_hook=resolve_contents)
    except (msgspec.ValidationError, RecursionError) as exc:
        raise InvalidParams(f"Invalid params: input response for {method}: {exc}") from None
