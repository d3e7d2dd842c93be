"""Context: what a handler sees of its request, and the ask API that spans rounds."""

# Design: the Context owns one round of the flow. Asks resolve from the journal (answers of earlier
# rounds, carried in the sealed requestState) or from this round's inputResponses (only for keys
# the previous round asked, once a state exists, so a client cannot re-answer a settled question).
# Unresolved asks are collected and the handler is suspended; the round engine then seals the
# journal and returns InputRequiredResult. Nothing here touches I/O or the clock.
from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

import msgspec

from mrtr.errors import MissingRequiredClientCapability
from mrtr.protocol import (
    JSON,
    UNSET,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    Implementation,
    InputRequest,
    ListRootsRequest,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    ProgressNotification,
    ProgressNotificationParams,
    RequestMeta,
    Root,
    SamplingMessage,
    TextContent,
    Tool,
    ToolChoice,
)
from mrtr.server._asks import (
    _NO_FALLBACK,
    Ask,
    Declined,
    Elicited,
    Reask,
    Suspend,
    _Spec,
    capability_missing,
    decode_elicit,
    decode_roots,
    decode_sample,
    form_spec,
    shape_of,
    url_spec,
)
from mrtr.server._forms import Confirmation, FormInvalid, render_form, validate_against_schema
from mrtr.server._journal import Answer, FlowState
from mrtr.server._peer import NotificationSink, Peer

__all__ = ["Context"]

F = TypeVar("F")  # a Form, dataclass, TypedDict or Struct: render_form checks
T = TypeVar("T")

_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(slots=True)
class _Round:
    """Mutable bookkeeping of one handler run."""

    state: FlowState
    responses: Mapping[str, object]
    accept_keys: frozenset[str] | None  # None: first round, any key may be answered
    pending: dict[str, InputRequest]
    counter: int = 0


class Context:
    """The request a handler serves: metadata, the caller, asks, once, progress and logging."""

    def __init__(
        self,
        *,
        request_id: str | int,
        meta: RequestMeta,
        peer: Peer,
        flow: FlowState,
        input_responses: Mapping[str, object],
        sink: NotificationSink | None = None,
    ) -> None:
        self.request_id = request_id
        self.meta = meta
        self.peer = peer
        self._sink = sink
        self._progress_last: float | None = None
        accept = frozenset(flow.pending) if flow.round > 0 else None
        self._round = _Round(flow, input_responses, accept, {})

    # -- what the request says -------------------------------------------------------------
    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self.meta.client_capabilities

    @property
    def client_info(self) -> Implementation | None:
        info = self.meta.client_info
        return None if info is UNSET else info

    @property
    def principal(self) -> str | None:
        return self.peer.principal

    @property
    def round(self) -> int:
        """1 for the first request of a flow, 2 for its first retry, and so on."""
        return self._round.state.round + 1

    _cancelled: threading.Event | None = None  # made on first use: only sync handlers need it

    @property
    def cancelled(self) -> threading.Event:
        """Set when the request is cancelled (client gone, timeout) while a sync handler runs.

        A sync handler keeps running in its worker thread after cancellation; poll this, or
        `wait()` on it, to stop early. Async handlers see `asyncio.CancelledError` instead.
        """
        if self._cancelled is None:
            self._cancelled = threading.Event()
        return self._cancelled

    @property
    def input_responses(self) -> Mapping[str, object]:
        """This round's raw `inputResponses` (guard style)."""
        return self._round.responses

    @property
    def state(self) -> JSON:
        """The value a guard-style handler returned in `InputRequired(state=...)` last round."""
        return self._round.state.state

    # -- asks --------------------------------------------------------------------------------
    @overload
    def elicit(
        self, message: str, form: type[F], *, key: str | None = ..., outcome: Literal[False] = ...
    ) -> Ask[F]: ...
    @overload
    def elicit(
        self, message: str, form: type[F], *, key: str | None = ..., outcome: Literal[True]
    ) -> Ask[Elicited[F]]: ...
    def elicit(
        self, message: str, form: type[F], *, key: str | None = None, outcome: bool = False
    ) -> Ask[F] | Ask[Elicited[F]]:
        """Ask the user to fill `form` (form-mode elicitation).

        Awaiting gives the validated form; a decline or cancel raises Declined (the tool then
        returns a clear "declined" result) unless `outcome=True`, which gives Elicited instead.
        """
        rendered = render_form(form)
        spec = form_spec(message, rendered.schema, rendered.digest)

        def resolve(raw: object) -> Any:
            answer = decode_elicit(raw)
            if answer.action != "accept":
                if outcome:
                    return Elicited(answer.action, None)
                raise Declined(answer.action, message)
            content = answer.content if answer.content is not UNSET else {}
            try:
                value = rendered.validate(content)
            except FormInvalid as exc:
                raise Reask(str(exc)) from exc
            return Elicited("accept", value) if outcome else value

        return Ask(self, self._key(key, "elicit"), spec, resolve)

    def elicit_schema(
        self, message: str, schema: dict[str, object], *, key: str | None = None
    ) -> Ask[dict[str, object]]:
        """Ask with a raw restricted `requestedSchema`; gives the validated content dict."""
        spec = form_spec(message, schema, shape_of("elicitation/create", schema))

        def resolve(raw: object) -> dict[str, object]:
            answer = decode_elicit(raw)
            if answer.action != "accept":
                raise Declined(answer.action, message)
            content = answer.content if answer.content is not UNSET else {}
            try:
                return validate_against_schema(schema, content)
            except FormInvalid as exc:
                raise Reask(str(exc)) from exc

        return Ask(self, self._key(key, "elicit"), spec, resolve)

    async def elicit_fields(
        self, fields: Mapping[str, tuple[str | None, dict[str, object]]]
    ) -> dict[str, object]:
        """Elicit missing tool arguments (AskIfMissing) in one form, keyed by their names."""
        schema: dict[str, object] = {
            "type": "object",
            "properties": {name: prop for name, (_, prop) in fields.items()},
            "required": sorted(fields),
        }
        lines = [msg for msg, _ in fields.values() if msg]
        message = " ".join(lines) or "Please provide: " + ", ".join(sorted(fields))
        key = "args:" + ",".join(sorted(fields))
        return await self.elicit_schema(message, schema, key=key)

    def confirm(self, message: str, *, key: str | None = None) -> Ask[bool]:
        """Ask a yes/no question; decline and cancel count as no."""
        rendered = render_form(Confirmation)
        spec = form_spec(message, rendered.schema, rendered.digest)

        def resolve(raw: object) -> bool:
            answer = decode_elicit(raw)
            if answer.action != "accept":
                return False
            content = answer.content if answer.content is not UNSET else {}
            try:
                return bool(rendered.validate(content).confirm)
            except FormInvalid as exc:
                raise Reask(str(exc)) from exc

        return Ask(self, self._key(key, "confirm"), spec, resolve)

    def elicit_url(self, message: str, url: str, *, key: str | None = None) -> Ask[None]:
        """Send the user to `url` (URL-mode elicitation); resolves once the user consented."""

        def resolve(raw: object) -> None:
            answer = decode_elicit(raw)
            if answer.action != "accept":
                raise Declined(answer.action, message)

        return Ask(self, self._key(key, "url"), url_spec(message, url), resolve)

    def sample(
        self,
        prompt: str | Sequence[SamplingMessage],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        tools: Sequence[Tool] | None = None,
        tool_choice: ToolChoice | None = None,
        temperature: float | None = None,
        key: str | None = None,
    ) -> Ask[CreateMessageResult]:
        """Ask the client's model for a completion (needs `sampling`; tools need sampling.tools)."""
        messages = (
            [SamplingMessage(role="user", content=TextContent(text=prompt))]
            if isinstance(prompt, str)
            else list(prompt)
        )
        params = CreateMessageRequestParams(
            messages=messages,
            max_tokens=max_tokens,
            system_prompt=UNSET if system_prompt is None else system_prompt,
            tools=UNSET if tools is None else list(tools),
            tool_choice=UNSET if tool_choice is None else tool_choice,
            temperature=UNSET if temperature is None else temperature,
        )
        needed: dict[str, object] = {"sampling": {"tools": {}} if tools or tool_choice else {}}
        shape = shape_of("sampling/createMessage", msgspec.to_builtins(params))
        spec = _Spec("sampling/createMessage", CreateMessageRequest(params=params), shape, needed)
        return Ask(self, self._key(key, "sample"), spec, decode_sample)

    def roots(self, *, key: str | None = None, fallback: object = _NO_FALLBACK) -> Ask[list[Root]]:
        """Ask the client for its roots; with `fallback`, clients without `roots` get it instead."""
        spec = _Spec("roots/list", ListRootsRequest(), shape_of("roots/list", None), {"roots": {}})
        return Ask(self, self._key(key, "roots"), spec, decode_roots, fallback)

    async def gather(self, *asks: Ask[Any]) -> list[Any]:
        """Await several asks at once: all unanswered ones travel in the same round."""
        return self._settle(list(asks))

    async def once(self, key: str, fn: Callable[[], T | Awaitable[T]], *, type: Any = None) -> T:
        """Run `fn` once per flow and journal its JSON-serialisable result under `key`.

        Later rounds get the journaled value (converted back to `type` when given).
        """
        onces = self._round.state.onces
        if key in onces:
            stored = onces[key]
            return msgspec.convert(stored, type) if type is not None else stored  # type: ignore[no-any-return]
        value = fn()
        if inspect.isawaitable(value):
            value = await value
        onces[key] = msgspec.to_builtins(value)
        return value

    # -- progress and logging ------------------------------------------------------------------
    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send notifications/progress if the request carried a progressToken (else no-op)."""
        token = self.meta.progress_token
        if token is UNSET or self._sink is None:
            return
        if self._progress_last is not None and progress <= self._progress_last:
            return  # progress MUST increase (DIGEST §4.4)
        self._progress_last = progress
        params = ProgressNotificationParams(
            progress_token=token,
            progress=progress,
            total=UNSET if total is None else total,
            message=UNSET if message is None else message,
        )
        await self._sink(ProgressNotification(params=params))

    async def log(self, level: str, data: JSON, *, logger: str | None = None) -> None:
        """Send notifications/message at `level`, only when the request set a logLevel."""
        wanted = self.meta.log_level
        if wanted is UNSET or self._sink is None or level not in _LEVELS:
            return
        if _LEVELS.index(level) < _LEVELS.index(str(wanted)):
            return
        params = LoggingMessageNotificationParams(
            level=level,  # type: ignore[arg-type]
            data=data,
            logger=UNSET if logger is None else logger,
        )
        await self._sink(LoggingMessageNotification(params=params))

    # -- the engine side ----------------------------------------------------------------------
    @property
    def pending(self) -> dict[str, InputRequest]:
        return self._round.pending

    def _key(self, key: str | None, kind: str) -> str:
        self._round.counter += 1
        return key if key is not None else f"{kind}-{self._round.counter}"

    def _settle(self, asks: list[Ask[Any]]) -> list[Any]:
        values = [self._resolve(ask) for ask in asks]
        if any(value is _UNANSWERED for value in values):
            raise Suspend()
        return values

    def _resolve(self, ask: Ask[Any]) -> Any:
        rnd = self._round
        journal = rnd.state.journal
        known = journal.get(ask.key)
        problem: str | None = None
        if known is not None and known.shape == ask.spec.shape:
            try:
                return ask.resolve(known.value)
            except Reask as exc:  # valid when given, not now (e.g. after an upgrade): ask again
                del journal[ask.key]
                problem = exc.problem
        if ask.key in rnd.responses and (rnd.accept_keys is None or ask.key in rnd.accept_keys):
            raw = rnd.responses[ask.key]
            try:
                value = ask.resolve(raw)
            except Reask as exc:
                problem = exc.problem
            else:
                journal[ask.key] = Answer(shape=ask.spec.shape, value=raw)
                return value
        if capability_missing(self.meta.client_capabilities, ask.spec.capability):
            if ask.has_fallback:
                return ask.fallback
            raise MissingRequiredClientCapability(ask.spec.capability)
        self._emit(ask, problem)
        return _UNANSWERED

    def _emit(self, ask: Ask[Any], problem: str | None) -> None:
        existing = self._round.pending.get(ask.key)
        request = ask.with_problem(problem) if problem else ask.request
        if existing is not None and existing != request:
            raise RuntimeError(f"two different asks share the key {ask.key!r}")
        self._round.pending[ask.key] = request


_UNANSWERED: Any = object()  # _resolve's "emitted, not answered yet"
