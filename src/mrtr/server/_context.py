"""Context: what a handler sees of its request, and the ask API that spans rounds."""

# Design: the Context is what a handler sees of one round. It builds Asks (what to send, how to
# validate the answer) and hands them to the round's Settler, which answers them from the journal
# or this round's inputResponses, or suspends the handler. Nothing here touches I/O or the clock.
from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import msgspec

from mrtr.protocol import (
    JSON,
    UNSET,
    ClientCapabilities,
    CreateMessageRequestParams,
    CreateMessageResult,
    Implementation,
    RequestMeta,
    Root,
    SamplingMessage,
    TextContent,
    Tool,
    ToolChoice,
)
from mrtr.server._asks import (
    NO_FALLBACK,
    Ask,
    Asker,
    AskSpec,
    Declined,
    Elicited,
    Gathered,
    Reask,
    Settler,
    StartTask,
    TaskHooks,
    decode_elicit,
    form_spec,
    resolve_roots,
    resolve_sample,
    roots_spec,
    sampling_spec,
    schema_digest,
    url_spec,
)
from mrtr.server._completions import Completions, NotYet
from mrtr.server._forms import (
    Confirmation,
    FormInvalid,
    RenderedForm,
    render_form,
    validate_against_schema,
)
from mrtr.server._journal import FlowState
from mrtr.server._once import declared_type, restore, run_kept
from mrtr.server._peer import Notifier, Peer, Principal
from mrtr.server._reporting import Reporting

if TYPE_CHECKING:
    from mrtr.server._ledger import Ledger
    from mrtr.stores import Store

__all__ = ["Context", "StartTask", "TaskHooks"]

F = TypeVar("F")  # a Form, dataclass, TypedDict or Struct: render_form checks
T = TypeVar("T")

_ACCEPTED: dict[str, JSON] = {"action": "accept"}


class Context(Reporting):
    """The request a handler serves: metadata, the caller, asks, once, progress and logging.

    Progress and log messages (`report_progress`, `log`, `info`, …) come from Reporting.
    """

    def __init__(
        self,
        *,
        request_id: str | int,
        meta: RequestMeta,
        peer: Peer,
        flow: FlowState,
        input_responses: Mapping[str, object],
        settler: Settler,
        sink: Notifier | None = None,
        ledger: Ledger | None = None,
        flow_deadline: Callable[[], float] | None = None,
    ) -> None:
        self.request_id = request_id
        self.meta = meta
        self.peer = peer
        self._flow = flow
        self._responses = input_responses
        self.asker = Asker(settler)  # every ask this run made; the round reports the dropped ones
        self._settler = settler
        self._sink = sink
        self._ledger = ledger  # with a store: once runs once per flow across processes
        self._flow_deadline = flow_deadline  # with a ledger: fixes the flow id and deadline
        self._progress_last: float | None = None

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
        """The authenticated caller as a plain string (what requestState is bound to)."""
        principal = self.peer.principal
        return principal if principal is None or type(principal) is str else str(principal)

    @property
    def identity(self) -> Principal | None:
        """The caller's issuer, subject, client id and scopes (OAuth, docs/auth.md), or None."""
        principal = self.peer.principal
        return principal if isinstance(principal, Principal) else None

    @property
    def store(self) -> Store | None:
        """The Dispatcher's store (shared by every process serving it); None without one."""
        return self._ledger.store if self._ledger is not None else None

    @property
    def round(self) -> int:
        """1 for the first request of a flow, 2 for its first retry, and so on."""
        return self._flow.round + 1

    _cancelled: threading.Event | None = None  # made on first use: only sync handlers need it
    task_hooks: TaskHooks | None = None  # set for task tools (tasks extension), else None
    task_id: str | None = None  # the task this handler runs as, None outside a task
    completions: Completions | None = None  # URL elicitation ids and records (the round's)

    async def begin_task(self) -> None:
        """Run the rest of this handler as a task (tools declared with `task=`).

        Asks before this point are answered in MRTR rounds of the `tools/call` itself; the round
        that reaches it returns the task. A no-op inside a task, or for a client served
        synchronously (`task="optional"` without the tasks extension).
        """
        if self.task_hooks is not None:
            await self.task_hooks.begin()

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
        """This round's raw `inputResponses` (guard style), for the keys asked last round only.

        Answers to keys that were never sent are dropped (on round 1 all are); the handler
        checks the rest itself.
        """
        asked = self._flow.pending
        self._settler.caught_up = True  # guard style: reading the answers is the new part
        return {k: v for k, v in self._responses.items() if k in asked}

    @property
    def state(self) -> JSON:
        """The value a guard-style handler returned in `InputRequired(state=...)` last round."""
        return self._flow.state

    # -- asks --------------------------------------------------------------------------------
    @overload
    def elicit(
        self, message: str, form: type[F], *, key: str | None = ...,
        outcome: Literal[False] = ..., accept_unasked: bool = ...
    ) -> Ask[F]: ...
    @overload
    def elicit(
        self, message: str, form: type[F], *, key: str | None = ..., outcome: Literal[True],
        accept_unasked: bool = ...
    ) -> Ask[Elicited[F]]: ...
    def elicit(
        self, message: str, form: type[F] | None = None, *, key: str | None = None,
        outcome: bool = False, accept_unasked: bool = False, **other: object,
    ) -> Ask[F] | Ask[Elicited[F]]:
        """Ask the user to fill `form` (form-mode elicitation).

        Awaiting gives the validated form; a decline or cancel raises Declined (the tool then
        returns a clear "declined" result) unless `outcome=True`, which gives Elicited instead.
        `accept_unasked=True` takes an answer sent before the form was asked (plain data only:
        the user never saw this message). Raises TypeError, naming this spelling, for
        FastMCP's `response_type=` or the SDK's `schema=`.
        """
        if form is None or other:
            raise TypeError(_elicit_misspelt(form, other))
        rendered = render_form(form)
        spec = _rendered_spec(rendered, message)

        def resolve(raw: object) -> tuple[Any, JSON]:
            answer = decode_elicit(raw)
            if answer.action != "accept":
                if outcome:
                    return Elicited(answer.action, None), {"action": answer.action}
                raise Declined(answer.action, message)
            content = answer.content if answer.content is not UNSET else {}
            try:
                value = rendered.validate(content)
            except FormInvalid as exc:
                raise Reask(str(exc)) from exc
            kept = {"action": "accept", "content": rendered.content(value)}
            return (Elicited("accept", value) if outcome else value), kept

        return self.asker.make("elicit", key, spec, resolve, accept_unasked=accept_unasked)

    def elicit_schema(
        self, message: str, schema: dict[str, object], *, key: str | None = None
    ) -> Ask[dict[str, object]]:
        """Ask with a raw restricted `requestedSchema`; gives the validated content dict."""
        spec = form_spec(message, schema, schema_digest(schema))

        def resolve(raw: object) -> tuple[dict[str, object], JSON]:
            answer = decode_elicit(raw)
            if answer.action != "accept":
                raise Declined(answer.action, message)
            content = answer.content if answer.content is not UNSET else {}
            try:
                value = validate_against_schema(schema, content)
            except FormInvalid as exc:
                raise Reask(str(exc)) from exc
            return value, {"action": "accept", "content": value}

        return self.asker.make("elicit_schema", key, spec, resolve, kind="elicit")

    def confirm(self, message: str, *, key: str | None = None,
                consent: Literal["native", "auto", "token"] | None = None) -> Ask[bool]:
        """Ask a yes/no question; decline and cancel count as no.

        `consent` (tools only, docs/consent.md): "native" asks in a form or fails with -32021
        on a client without elicitation; "token" asks through the model with a single-use
        confirmation token; "auto" asks natively when the client renders forms, else by token.
        None: the tool's `consent=` (default "auto" for destructive tools, else "native").
        """
        rendered = render_form(Confirmation)
        spec = _rendered_spec(rendered, message)

        def resolve(raw: object) -> tuple[bool, JSON]:
            answer = decode_elicit(raw)
            if answer.action != "accept":
                return False, {"action": answer.action}
            content = answer.content if answer.content is not UNSET else {}
            try:
                yes = bool(rendered.validate(content).confirm)
            except FormInvalid as exc:
                raise Reask(str(exc)) from exc
            return yes, {"action": "accept", "content": {"confirm": yes}}

        return self.asker.make("confirm", key, spec, resolve, consent=consent or "tool")

    def elicit_url(self, message: str, url: str, *, key: str | None = None) -> Ask[None]:
        """Send the user to `url` (URL-mode elicitation); resolves once the user consented."""

        def resolve(raw: object) -> tuple[None, JSON]:
            answer = decode_elicit(raw)
            if answer.action != "accept":
                raise Declined(answer.action, message)
            return None, _ACCEPTED

        return self.asker.make("elicit_url", key, url_spec(message, url), resolve, kind="url")

    async def elicit_url_done(self, message: str, url: Callable[[str], str], *,
                              key: str = "url") -> object:
        """Send the user to `url(elicitation_id)` and return once the page completed (the data
        the completion route recorded: its query parameters, docs/consent.md).

        Until then each retry is a "not yet" round (state only, with a retry hint) that never
        blocks and does not count against max_rounds. The completion is recorded in the
        Dispatcher's store, which every replica reads; a decline or cancel raises Declined.
        """
        links = self.completions
        if links is None:
            raise RuntimeError("ctx.elicit_url_done is served by a Dispatcher's tools only")
        record = self.idempotency_key(f"elicitation-url\x00{key}")
        elicitation_id = await self.once(f"elicitation-url:{key}", lambda: links.mint(record),
                                         returns=str)
        await self.elicit_url(message, url(elicitation_id), key=key)
        done, data = await links.completed(record)
        if not done:
            raise NotYet(links.retry_after)
        return data

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
        return self.asker.make("sample", key, sampling_spec(params), resolve_sample)

    def roots(self, *, key: str | None = None, fallback: object = NO_FALLBACK) -> Ask[list[Root]]:
        """Ask the client for its roots; with `fallback`, clients without `roots` get it instead."""
        return self.asker.make("roots", key, roots_spec(), resolve_roots, fallback)

    def gather(self, *asks: Ask[Any]) -> Gathered:
        """Await several asks at once: all unanswered ones travel in the same round."""
        return self.asker.gather(asks)

    def idempotency_key(self, key: str) -> str:
        """The idempotency key of `ctx.once(key, ...)` in this flow: 32 hex characters.

        The same in every round, replay and process of the flow, and different for every flow
        and `key`: the hex SHA-256 of "mrtr-once", the flow id and `key` (NUL-separated),
        cut to 128 bits. Pass it to the payment API (or any side effect that dedupes by key) so
        that `fn` running again after a crash inside it cannot repeat the effect.
        """
        if self._flow_deadline is not None:
            self._flow_deadline()  # round 1 fixes the flow id here
        if not self._flow.flow_id:  # round 1 without a store: the id the next round carries
            self._flow.flow_id = os.urandom(12).hex()
        material = f"mrtr-once\x00{self._flow.flow_id}\x00{key}".encode()
        return hashlib.sha256(material).hexdigest()[:32]

    async def once(
        self, key: str, fn: Callable[[], T | Awaitable[T]], *, returns: Any = None
    ) -> T:
        """Run `fn` once per flow and journal its JSON-serialisable result under `key`.

        Every round gets the same type (`returns=`, else fn's return annotation, else the type
        fn's value had if a later round can rebuild it; else TypeError: _once.py). With a
        store, `fn` runs once per flow across processes, and a client that goes away does not
        stop it; a process dying inside it lets it run again after the lease, so make its
        effect idempotent with `ctx.idempotency_key(key)` (docs/deploy.md).
        """
        declared = declared_type(fn, returns)
        onces = self._flow.onces
        if key not in onces:
            if self._ledger is not None and self._flow_deadline is not None:
                await self._ledger.hold_round()  # a later round: claimed before it acts
                deadline = self._flow_deadline()  # before flow_id: round 1 assigns it here
                _, found = await self._ledger.once(self._flow.flow_id, key, deadline,
                                                   lambda: run_kept(fn, declared))
            else:
                found = await run_kept(fn, declared)
            onces[key] = msgspec.to_builtins(found)
        return restore(key, onces[key], declared)  # type: ignore[return-value]


@functools.lru_cache(maxsize=1024)  # a pure memo: a handler asks the same form every round
def _rendered_spec(rendered: RenderedForm[Any], message: str) -> AskSpec:
    """The spec of a form elicitation of a rendered form type (its schema is never mutated,
    so one request serves every round that asks it)."""
    return form_spec(message, rendered.schema, rendered.digest)


def _elicit_misspelt(form: object, other: Mapping[str, object]) -> str:
    given = next(iter(other), None)
    if given is None:
        return "ctx.elicit(message, form) needs the form type: ctx.elicit('Seats?', Seats)"
    if form is not None or given not in ("response_type", "schema"):
        return f"ctx.elicit() got an unexpected keyword argument {given!r}"
    what = getattr(other.get(given), "__name__", "Form")
    return (f"ctx.elicit takes the form type as its second argument, not {given}=: `await "
            f"ctx.elicit(message, {what})` gives the filled {what} (a decline ends the tool with "
            f"a 'declined' result), and outcome=True gives an Elicited with .action and .value")
