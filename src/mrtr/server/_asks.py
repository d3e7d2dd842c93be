"""Asks: one input request a handler awaits, with its key, shape, capability and answer type."""

# Design: an Ask is built eagerly (its key comes from call order at construction) but only
# registered when awaited or gathered, so `ctx.gather(ctx.elicit(...), ctx.sample(...))` sends
# both requests in one round. Resolving an ask is pure: it maps a raw answer object (from this
# round's inputResponses or from the journal) to the typed value, or raises Reask with a message
# for the user. The capability each ask needs is checked only when it has to be emitted.
from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import msgspec

from mrtr.errors import InvalidParams
from mrtr.protocol import (
    CreateMessageRequest as CreateMessageRequestType,
)
from mrtr.protocol import (
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    InputRequest,
    ListRootsResult,
    Root,
    decode_input_response,
)

if TYPE_CHECKING:
    from mrtr.server._context import Context

__all__ = [
    "Ask",
    "Declined",
    "Elicited",
    "Reask",
    "Suspend",
    "capability_missing",
    "required_capability",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)  # an Ask[Form] is an Ask[object] (InputRequired.asks)
_NO_FALLBACK: object = object()


class Suspend(BaseException):  # noqa: N818 - control flow, like CancelledError
    """Raised inside a handler when an ask has no answer yet; never escapes the round engine.

    A BaseException so that a handler's `except Exception` cannot swallow it.
    """


class Declined(Exception):  # noqa: N818 - reads as an outcome
    """The user declined or cancelled an elicitation the handler could not do without."""

    def __init__(self, action: str, message: str) -> None:
        verb = {"decline": "declined", "cancel": "cancelled"}.get(action, action)
        super().__init__(f"The user {verb} the request: {message}")
        self.action = action
        self.prompt = message


class Reask(Exception):  # noqa: N818 - internal signal
    """An answer was present but invalid; the ask goes out again with this explanation."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Elicited(Generic[T]):
    """The full outcome of a form elicitation: `value` is set only when `action == "accept"`."""

    action: str
    value: T | None


class _Spec(msgspec.Struct, frozen=True):  # a Struct: built per ask, so cheap to create
    method: str
    request: InputRequest
    shape: str
    capability: dict[str, object]


class Ask(Generic[T_co]):
    """An input the handler needs; `await` it (or pass several to `ctx.gather`)."""

    __slots__ = ("_ctx", "key", "spec", "_resolve", "fallback")

    def __init__(
        self,
        ctx: Context,
        key: str,
        spec: _Spec,
        resolve: Callable[[object], T_co],
        fallback: object = _NO_FALLBACK,
    ) -> None:
        self._ctx = ctx
        self.key = key
        self.spec = spec
        self._resolve = resolve
        self.fallback = fallback

    @property
    def request(self) -> InputRequest:
        return self.spec.request

    @property
    def has_fallback(self) -> bool:
        return self.fallback is not _NO_FALLBACK

    def resolve(self, raw: object) -> T_co:
        """Type and validate one raw answer; raises Reask when it must be asked again."""
        return self._resolve(raw)

    def with_problem(self, problem: str) -> InputRequest:
        """The same request, its message prefixed with why the last answer was refused."""
        request = self.spec.request
        if isinstance(request, ElicitRequest):
            params = msgspec.structs.replace(
                request.params, message=f"{problem}\n\n{request.params.message}"
            )
            return msgspec.structs.replace(request, params=params)
        return request

    def __await__(self) -> Generator[object, None, T_co]:
        values = self._ctx._settle([self])
        return values[0]  # type: ignore[no-any-return]
        yield  # pragma: no cover - makes this a generator without suspending


def shape_of(method: str, detail: object) -> str:
    """A short digest of what an ask asks, so a changed ask under the same key re-asks."""
    body = msgspec.json.encode([method, detail], order="sorted")
    return hashlib.sha256(body).hexdigest()[:16]


def form_spec(message: str, schema: dict[str, object], digest: str) -> _Spec:
    request = ElicitRequest(
        params=ElicitRequestParams(mode="form", message=message, requested_schema=schema)
    )
    return _Spec("elicitation/create", request, digest, {"elicitation": {"form": {}}})


def url_spec(message: str, url: str) -> _Spec:
    request = ElicitRequest(params=ElicitRequestParams(mode="url", message=message, url=url))
    return _Spec(
        "elicitation/create", request, shape_of("url", url), {"elicitation": {"url": {}}}
    )


def decode_elicit(raw: object) -> ElicitResult:
    return _typed("elicitation/create", raw, ElicitResult)


def decode_sample(raw: object) -> CreateMessageResult:
    return _typed("sampling/createMessage", raw, CreateMessageResult)


def decode_roots(raw: object) -> list[Root]:
    result = _typed("roots/list", raw, ListRootsResult)
    return list(result.roots)


def _typed(method: str, raw: object, cls: type[T]) -> T:
    if not isinstance(raw, dict):
        raise Reask("The previous answer was malformed.")
    try:
        value = decode_input_response(method, raw)
    except InvalidParams as exc:
        raise Reask("The previous answer was malformed.") from exc
    if not isinstance(value, cls):
        raise Reask("The previous answer was malformed.")
    return value


def capability_missing(declared: object, needed: dict[str, object]) -> bool:
    """True when the client's declared capabilities lack what `needed` asks for.

    `{"elicitation": {}}` counts as form support (DIGEST §2.6); `{"elicitation": {"url": {}}}`
    alone does not.
    """
    if not isinstance(declared, msgspec.Struct | dict):
        return True
    for name, sub in needed.items():
        # The capabilities Struct's fields are single words, so attribute == wire name.
        have = (declared.get(name) if isinstance(declared, dict)
                else getattr(declared, name, None))
        if not isinstance(have, dict):
            return True
        if name == "elicitation" and isinstance(sub, dict) and "form" in sub:
            if have and "form" not in have:
                return True
            continue
        if isinstance(sub, dict):
            for inner in sub:
                if not isinstance(have.get(inner), dict):
                    return True
    return False


def required_capability(request: InputRequest) -> dict[str, object]:
    """The client capability an input request needs (DIGEST §2.6)."""
    if isinstance(request, ElicitRequest):
        mode = "url" if request.params.mode == "url" else "form"
        return {"elicitation": {mode: {}}}
    if isinstance(request, CreateMessageRequestType):
        params = request.params
        uses_tools = params.tools is not msgspec.UNSET or params.tool_choice is not msgspec.UNSET
        return {"sampling": {"tools": {}} if uses_tools else {}}
    return {"roots": {}}
