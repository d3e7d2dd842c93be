"""Asks: one input request a handler awaits, with its key, shape, capability and answer type."""

# Design: an Ask is built eagerly (its key comes from call order at construction) but only
# registered when awaited or gathered, so `ctx.gather(ctx.elicit(...), ctx.sample(...))` sends
# both requests in one round. It settles through a Settler (the round that runs the handler),
# so this module knows nothing of contexts or rounds. Resolving is pure: a raw answer (this
# round's inputResponses or the journal) maps to the typed value and the validated JSON to
# journal, or raises Reask with a message for the user. An ask's shape digests everything the
# user or model sees (message, schema, URL, the whole sampling request): an answer counts only
# for the exact question it was given to. An Ask is not its answer, so it has no truth value
# (`if ctx.confirm(...)` without `await` raises instead of taking the yes branch unasked), and
# the Asker remembers every Ask of one handler run so the round can report those never awaited.
from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import msgspec

from mrtr.errors import InvalidParams, MrtrError
from mrtr.protocol import (
    JSON,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    InputRequest,
    ListRootsRequest,
    ListRootsResult,
    Root,
    decode_input_response,
)
from mrtr.server._capabilities import FORM_NEEDS, ROOTS_NEEDS, URL_NEEDS
from mrtr.server._deferred import Deferred

__all__ = [
    "NO_FALLBACK",
    "Ask",
    "Asker",
    "AskSpec",
    "Declined",
    "Elicited",
    "Gathered",
    "Reask",
    "Settler",
    "Suspend",
    "decode_elicit",
    "dropped_message",
    "form_spec",
    "request_shape",
    "resolve_roots",
    "resolve_sample",
    "roots_spec",
    "sampling_spec",
    "schema_digest",
    "url_spec",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)  # an Ask[Form] is an Ask[object] (InputRequired.asks)
NO_FALLBACK: Any = object()  # an ask without a fallback: a missing capability is -32021
Resolver = Callable[[object], tuple[T_co, JSON]]  # raw answer -> (value, validated JSON)


class Suspend(BaseException):  # noqa: N818 - control flow, like CancelledError
    """Raised inside a handler when an ask has no answer yet; never escapes the round engine.

    A BaseException so that a handler's `except Exception` cannot swallow it.
    """


class StartTask(BaseException):  # noqa: N818 - control flow, like Suspend
    """`ctx.begin_task()` in a task tool's MRTR phase: the rest of the handler runs as a task."""


class TaskHooks(Protocol):
    """What a Context of a task tool tells the task runner (the tasks extension)."""

    async def begin(self) -> None: ...

    async def status(self, message: str, progress: float | None = None) -> None: ...


class Declined(MrtrError):  # noqa: N818 - reads as an outcome
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


class AskSpec(msgspec.Struct, frozen=True):  # a Struct: built per ask, so cheap to create
    """What an ask sends, the digest of it (`shape`) and the client capability it needs."""

    request: InputRequest
    shape: str
    capability: dict[str, object]


class Settler(Protocol):
    """What an Ask settles through: the round running the handler (`caught_up`: False while
    the handler replays what ran before the last round suspended)."""

    caught_up: bool

    def settle(self, asks: Sequence[Ask[Any]], /) -> list[Any] | Deferred:
        """The asks' values, a Deferred waiting for them (_deferred.py), or raises Suspend."""
        ...


class Ask(Generic[T_co]):
    """An input the handler needs; `await` it (or pass several to `ctx.gather`)."""

    __slots__ = ("_settler", "key", "spec", "_resolve", "fallback", "accept_unasked", "awaited",
                 "method", "consent")

    def __init__(
        self,
        settler: Settler,
        key: str,
        spec: AskSpec,
        resolve: Resolver[T_co],
        fallback: object = NO_FALLBACK,
        *,
        accept_unasked: bool = False,
        method: str = "", consent: str = "",
    ) -> None:
        self._settler = settler
        self.key = key
        self.spec = spec
        self._resolve = resolve
        self.fallback = fallback
        self.accept_unasked = accept_unasked  # an answer counts even if this was never sent
        self.awaited = False  # set by `await` or ctx.gather: False at the end means it was dropped
        self.method = method  # the Context method that made it ("confirm"), for messages
        self.consent = consent  # a confirm's mode (server/_consent.py): "" for any other ask

    @property
    def request(self) -> InputRequest:
        return self.spec.request

    @property
    def label(self) -> str:
        """How the handler wrote this ask, e.g. `ctx.confirm('Delete every booking?')`."""
        return _label(self.method or "ask", self.spec)

    @property
    def has_fallback(self) -> bool:
        return self.fallback is not NO_FALLBACK

    def resolve(self, raw: object) -> tuple[T_co, JSON]:
        """The typed value of one raw answer and the validated JSON to journal.

        Raises Reask when it must be asked again.
        """
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

    def __await__(self) -> Generator[Any, None, T_co]:
        self.awaited = True
        values = self._settler.settle((self,))
        if type(values) is Deferred:  # a live task: wait here for the answer
            values = yield from values.wait().__await__()
        return values[0]  # type: ignore[index,no-any-return]

    def __repr__(self) -> str:
        return f"<Ask {self.key!r}: {self.label}>"

    if not TYPE_CHECKING:  # hidden from type checkers, so mypy's truthy-bool code flags it too
        def __bool__(self) -> bool:
            raise TypeError(_NOT_AN_ANSWER.format(self.label))


def _label(method: str, spec: AskSpec) -> str:
    request = spec.request
    shown = repr(request.params.message) if isinstance(request, ElicitRequest) else "..."
    return f"ctx.{method}({shown})"


_NOT_AN_ANSWER = ("{0} was used as true or false: did you forget `await`? An Ask is not its "
                  "answer (it would always be true, and nothing has been asked); write "
                  "`if await {0}:`")


class Gathered:
    """`ctx.gather(...)`: await it for the values of several asks, asked in one round."""

    __slots__ = ("_settler", "asks")

    def __init__(self, settler: Settler, asks: Sequence[Ask[Any]]) -> None:
        self._settler = settler
        self.asks = tuple(asks)

    def __await__(self) -> Generator[Any, None, list[Any]]:
        for ask in self.asks:
            ask.awaited = True
        values = self._settler.settle(self.asks)
        if type(values) is Deferred:
            values = yield from values.wait().__await__()
        return values  # type: ignore[return-value]

    if not TYPE_CHECKING:
        def __bool__(self) -> bool:
            raise TypeError(_NOT_AN_ANSWER.format("ctx.gather(...)"))


class Asker:
    """The asks of one handler run: their keys in call order, and which were never awaited.

    A sync handler (`def`, run in a worker thread) cannot await, so once `in_thread` is set
    every new ask raises TypeError at the call that made it.
    """

    __slots__ = ("_counter", "_settler", "in_thread", "made")

    def __init__(self, settler: Settler) -> None:
        self._settler = settler
        self._counter = 0
        self.in_thread = False
        self.made: list[Ask[Any]] = []

    def make(
        self, method: str, key: str | None, spec: AskSpec, resolve: Resolver[T],
        fallback: object = NO_FALLBACK, *, accept_unasked: bool = False, kind: str = "",
        consent: str = "",
    ) -> Ask[T]:
        """A new Ask for `ctx.<method>`, keyed `<kind>-<n>` unless the handler chose `key`."""
        if self.in_thread:
            raise TypeError(f"{_label(method, spec)} in a sync handler: a `def` handler runs in "
                            "a worker thread and cannot await an ask; make the handler "
                            f"`async def` and write `await ctx.{method}(...)`")
        self._counter += 1
        ask = Ask(self._settler, key if key is not None else f"{kind or method}-{self._counter}",
                  spec, resolve, fallback, accept_unasked=accept_unasked, method=method,
                  consent=consent)
        self.made.append(ask)
        return ask

    def gather(self, asks: Sequence[Ask[Any]]) -> Gathered:
        return Gathered(self._settler, asks)

    def dropped(self, sent: Sequence[object] = ()) -> list[Ask[Any]]:
        """The asks made but never awaited (nor `sent` as they are, guard style)."""
        return [a for a in self.made if not a.awaited and not any(a is s for s in sent)]


def dropped_message(asks: Sequence[Ask[Any]]) -> str:
    """The log line (or TestClient failure) for asks a handler made and never awaited."""
    named = "; ".join(f"{ask.label} (key {ask.key!r})" for ask in asks)
    return (f"the handler returned without awaiting {named}, so nothing was asked and no "
            "answer decided anything: did you forget `await`?")


# -- shapes and specs ---------------------------------------------------------------------------


def _digest(parts: object) -> str:
    # JSON of a list: unambiguous however the parts are spelled; 128 bits resist collisions a
    # server's own inputs (item names, amounts) could be chosen to produce.
    return hashlib.sha256(msgspec.json.encode(parts, order="sorted")).hexdigest()[:32]


def request_shape(request: InputRequest) -> str:
    """The shape of a complete input request (guard style: requests built by hand)."""
    return _digest(request)


def form_spec(message: str, schema: dict[str, object], schema_digest: str) -> AskSpec:
    """A form elicitation; `schema_digest` identifies `schema` (precomputed for Form classes)."""
    request = ElicitRequest(
        params=ElicitRequestParams(mode="form", message=message, requested_schema=schema)
    )
    return AskSpec(request, _form_shape(schema_digest, message), FORM_NEEDS)


@functools.lru_cache(maxsize=1024)  # a pure memo: most forms ask the same text every round
def _form_shape(schema_digest: str, message: str) -> str:
    return _digest(("form", schema_digest, message))


def schema_digest(schema: dict[str, object]) -> str:
    """A digest of a raw `requestedSchema` for `form_spec`."""
    return _digest(schema)


def url_spec(message: str, url: str) -> AskSpec:
    """A URL-mode elicitation."""
    request = ElicitRequest(params=ElicitRequestParams(mode="url", message=message, url=url))
    return AskSpec(request, _digest(("url", message, url)), URL_NEEDS)


def sampling_spec(params: CreateMessageRequestParams) -> AskSpec:
    """A sampling request; its shape covers every parameter (messages, tools, temperature...)."""
    uses_tools = bool(params.tools) or params.tool_choice is not msgspec.UNSET
    needs: dict[str, object] = {"sampling": {"tools": {}} if uses_tools else {}}
    return AskSpec(CreateMessageRequest(params=params), _digest(("sampling", params)), needs)


_ROOTS = AskSpec(ListRootsRequest(), _digest(("roots",)), ROOTS_NEEDS)


def roots_spec() -> AskSpec:
    """A roots/list request."""
    return _ROOTS


# -- answers ------------------------------------------------------------------------------------
def decode_elicit(raw: object) -> ElicitResult:
    return _typed("elicitation/create", raw, ElicitResult)


def resolve_sample(raw: object) -> tuple[CreateMessageResult, JSON]:
    result = _typed("sampling/createMessage", raw, CreateMessageResult)
    return result, msgspec.to_builtins(result)


def resolve_roots(raw: object) -> tuple[list[Root], JSON]:
    result = _typed("roots/list", raw, ListRootsResult)
    return list(result.roots), msgspec.to_builtins(result)


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
