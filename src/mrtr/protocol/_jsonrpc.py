"""JSON-RPC envelopes and the shared bases of params and results."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Generic, Literal, TypeAlias, TypeVar

import msgspec

from ._meta import RequestId, RequestMeta
from ._wire import JSON, UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "CacheScope",
    "EmptyResult",
    "ErrorObject",
    "JSONRPCErrorResponse",
    "JSONRPCResultResponse",
    "MethodTagged",
    "TypeTagged",
    "NotificationParams",
    "PaginatedRequestParams",
    "RequestParams",
    "Result",
    "UnknownNotification",
]

CacheScope: TypeAlias = Literal["public", "private"]
ResultT = TypeVar("ResultT")


class _Tag:
    """The class's msgspec tag as a string, computed at the first read and then kept as a
    plain attribute of that class (which hides this descriptor from then on)."""

    def __get__(self, instance: object, owner: type) -> str:
        tag = str(owner.__struct_config__.tag)  # type: ignore[attr-defined]
        owner.method = tag  # type: ignore[attr-defined]
        return tag


class MethodTagged(Wire, frozen=True, kw_only=True):
    """Base of messages tagged by `method` on the wire; `.method` is the tag."""

    # `method` is a class attribute, the tag read once per class (_Tag): reading
    # `__struct_config__` builds an object on every access (≈0.2 µs), and a request's path
    # reads its method several times.
    if TYPE_CHECKING:
        method: ClassVar[str]  # the JSON-RPC method (the class's tag)
    else:
        method = _Tag()


class TypeTagged(Wire, frozen=True, kw_only=True):
    """Base of objects tagged by `type` on the wire (content blocks, references)."""

    @property
    def type(self) -> str:
        """The wire `type` (the class's tag)."""
        return str(self.__struct_config__.tag)


class RequestParams(Wire, frozen=True, kw_only=True):
    """Params of a request that carries only the required `_meta`."""

    meta: RequestMeta = msgspec.field(name="_meta")


class PaginatedRequestParams(Wire, frozen=True, kw_only=True):
    """Params of a list request: an opaque `cursor` (`""` is a valid cursor)."""

    cursor: str | UnsetType = UNSET
    meta: RequestMeta = msgspec.field(name="_meta")


class NotificationParams(Wire, frozen=True, kw_only=True):
    """Params of a notification that carries only an optional `_meta`."""

    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class Result(Wire, frozen=True, kw_only=True):
    """Base of results: `resultType` is always written (absent on decode means complete)."""

    result_type: str = "complete"
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class EmptyResult(Result, frozen=True, kw_only=True):
    """A result with no fields of its own (acks)."""


class ErrorObject(Wire, frozen=True, kw_only=True):
    """The JSON-RPC `error` member."""

    code: int
    message: str
    data: JSON | UnsetType = UNSET


class JSONRPCErrorResponse(Wire, frozen=True, kw_only=True):
    """An error response; `id` is omitted when the request's id was unreadable."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId | None | UnsetType = UNSET
    error: ErrorObject


class JSONRPCResultResponse(Wire, Generic[ResultT], frozen=True, kw_only=True):
    """A successful response carrying one result Struct."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    result: ResultT


class UnknownNotification(Wire, frozen=True, kw_only=True):
    """A notification with a method we do not know: decoders return it so callers can ignore it."""

    method: str
    params: JSON | UnsetType = UNSET
