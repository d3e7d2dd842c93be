"""The round engine: open one round of a flow, settle its asks, then finish or suspend it."""

# Design: `RoundEngine.open` unseals the presented state into a Round, which carries the flow, the
# binding and the deadline to the end of the request, builds the Context and settles its asks.
# An answer counts only for the exact question it was given to: the sealed state remembers the
# shape of every ask the last round sent, and a response whose key was not sent, or whose ask
# has changed since, is ignored (the ask goes out again). On round 1 nothing was sent, so nothing
# counts (except asks that opt in with accept_unasked). Journal entries replay only under the
# same shape. One sealing path for both styles: straight-line handlers suspend by raising
# Suspend from an unanswered ask; guard-style handlers return InputRequired themselves.
from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from mrtr.errors import (
    InternalError,
    InvalidParams,
    InvalidRequestState,
    MissingRequiredClientCapability,
)
from mrtr.protocol import (
    JSON,
    UNSET,
    InputRequest,
    InputRequiredResult,
    RequestMeta,
    UnsetType,
)
from mrtr.server._asks import Ask, Reask, Suspend, dropped_message, request_shape
from mrtr.server._capabilities import capability_missing, required_capability
from mrtr.server._completions import RETRY_HINT_KEY, Completions, NotYet
from mrtr.server._consent import NATIVE, ConsentGate, Grant
from mrtr.server._context import Context
from mrtr.server._deferred import Deferred
from mrtr.server._journal import Answer, FlowState, decode_flow, encode_flow
from mrtr.server._ledger import Ledger
from mrtr.server._peer import Notifier, Peer
from mrtr.server._probe import note_open, note_seal
from mrtr.server._sealing import Binding, Sealer, StateTooLarge

__all__ = ["InputRequired", "Round", "RoundEngine", "SuspendSwallowed"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class InputRequired:
    """Guard style: return this from a handler to ask for input and carry `state` to the retry.

    `asks` maps keys to input requests (or Asks built from the context); `state` is any JSON
    value, sealed by the framework and readable next round as `ctx.state`.
    """

    asks: Mapping[str, InputRequest | Ask[object]] = field(default_factory=dict)
    state: JSON = None


class SuspendSwallowed(RuntimeError):
    """A handler returned although an ask had suspended it (it caught BaseException)."""


class RoundEngine:
    """Opens the round a request continues and seals what the next round needs."""

    def __init__(
        self,
        sealer: Sealer,
        *,
        max_rounds: int = 16,
        random: Callable[[int], bytes] | None = None,
        ledger: Ledger | None = None,
        on_unawaited: Callable[[str], None] | None = None,
    ) -> None:
        self._sealer = sealer
        # Told when a handler returned with asks it never awaited: a warning unless replaced
        # (TestClient fails the test instead).
        self.on_unawaited = on_unawaited or logging.getLogger("mrtr.server").warning
        self.ledger = ledger  # None: rounds may be redeemed again (no store)
        self.consent: ConsentGate | None = None  # confirmation tokens (set by the Dispatcher)
        self.completions: Completions | None = None  # URL elicitations (set by the Dispatcher)
        self._max_rounds = max_rounds
        self._random = random  # tests inject one; None: prefix + serial below
        # Flow ids label a flow inside its sealed state: unique, not secret. A random prefix per
        # engine and a serial number give that without a getrandom() system call per flow.
        self._prefix = os.urandom(6).hex()
        self._serial = itertools.count(1)

    def open(self, request_state: str | UnsetType, bind: Callable[[], Binding]) -> Round:
        """Unseal the presented state (or start a flow); raises InvalidRequestState.

        `bind` computes the request's Binding; it is called only when a state is opened or sealed.
        """
        if request_state is UNSET:
            return Round(self, FlowState(), bind, None)
        unsealed = self._sealer.unseal(request_state, bind())
        try:
            flow = decode_flow(unsealed.body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InvalidRequestState("journal does not decode") from exc
        note_open(flow.flow_id, flow.round, flow.trace)
        if flow.round >= self._max_rounds:
            raise InvalidParams(f"Too many input rounds for one request (limit {self._max_rounds})")
        return Round(self, flow, bind, unsealed.deadline)

    def seal(
        self, following: FlowState, binding: Binding, deadline: float | None, *, answered: bool
    ) -> str:
        """Seal the next round's state; an oversized state is the answers' fault if any came."""
        following.trace = note_seal(following.flow_id)
        try:
            if self.ledger is None:  # nothing keys on the round: no round id
                return self._sealer.seal(encode_flow(following), binding, deadline=deadline)
            return self._sealer.seal(lambda name: _named(following, name), binding,
                                     deadline=deadline)
        except StateTooLarge as exc:
            if answered:
                raise InvalidParams(
                    "The answers are too large to carry to the next round; send shorter ones"
                ) from exc
            raise InternalError("Request state too large") from exc

    def flow_deadline(self) -> float:
        return self._sealer.flow_deadline()

    def new_flow_id(self) -> str:
        if self._random is not None:
            return self._random(12).hex()
        return f"{self._prefix}{next(self._serial):012x}"


class Round:
    """One request of a flow: settles the handler's asks, then finishes or suspends."""

    __slots__ = ("_answered", "_bind", "_capabilities", "_deadline", "_engine", "_info",
                 "_responses", "_sent", "_shapes", "asked", "caught_up", "consent", "flow", "grant",
                 "meta")

    def __init__(
        self,
        engine: RoundEngine,
        flow: FlowState,
        bind: Callable[[], Binding],
        deadline: float | None,
    ) -> None:
        self._engine = engine
        self.flow = flow
        self._bind = bind
        self._deadline = deadline  # None on round 1 until flow_deadline() fixes it
        self._responses: Mapping[str, object] = {}
        self._capabilities: object = None
        self._info: object = None  # clientInfo, for the operator's consent policy
        self.consent = ""  # a tool's default consent mode (set by the Runner); "": not a tool
        self.grant: Grant | None = None  # a redeemed confirmation token (server/_consent.py)
        # The `_meta` of the InputRequiredResult a suspension builds (the Runner sets the
        # server's; built in, so that the result is not copied once more to add it).
        self.meta: dict[str, Any] | UnsetType = UNSET
        self._shapes: dict[str, str] = {}  # key -> shape of every ask settled in this run
        self._answered = False  # an answer was journaled this round
        self.asked: dict[str, InputRequest] = {}  # what this round sends
        self._sent: dict[str, str] = {}  # and the shapes of those asks
        # Until the handler reaches an ask the last round sent, it replays code that ran then:
        # its log and progress notifications were sent already (_reporting.py).
        self.caught_up = not flow.pending

    def context(
        self,
        *,
        request_id: str | int,
        meta: RequestMeta,
        peer: Peer,
        input_responses: Mapping[str, object],
        sink: Notifier | None = None,
    ) -> Context:
        """The Context the handler runs with in this round."""
        self._responses = input_responses
        self._capabilities, self._info = meta.client_capabilities, meta.client_info
        engine = self._engine
        ledger = engine.ledger
        ctx = Context(request_id=request_id, meta=meta, peer=peer, flow=self.flow,
                      input_responses=input_responses, settler=self, sink=sink,
                      ledger=ledger, flow_deadline=self.flow_deadline if ledger else None)
        ctx.completions = engine.completions
        return ctx

    @property
    def deadline(self) -> float | None:
        """The flow's deadline (epoch seconds); None on round 1 until flow_deadline()."""
        return self._deadline

    def flow_deadline(self) -> float:
        """The flow's deadline; round 1 fixes it (and the flow id `once` keys on) at first use.

        Lazy so that a first round that finishes without `once` or a suspension costs nothing.
        """
        if self._deadline is None:
            if not self.flow.flow_id:
                self.flow.flow_id = self._engine.new_flow_id()
            self._deadline = self._engine.flow_deadline()
        return self._deadline

    async def run(
        self, handler: Callable[[Context], Awaitable[R]], ctx: Context
    ) -> R | InputRequiredResult:
        """Run the handler; the value it returned, or the InputRequiredResult that suspends it.

        Raises SuspendSwallowed when the handler returned although an ask suspended it.
        """
        try:
            value = await handler(ctx)
        except NotYet as wait:  # a URL elicitation not completed yet (server/_completions.py)
            return self._not_yet(wait.retry_after)
        except Suspend:
            return self._suspend(self.asked, self._sent, self.flow.state)
        except BaseExceptionGroup as group:  # asks inside task groups: one round, like gather
            rest = group.split(Suspend)[1]
            if rest is not None:
                raise rest from group  # a real failure wins over the suspension
            return self._suspend(self.asked, self._sent, self.flow.state)
        if self.asked:
            raise SuspendSwallowed(
                f"the handler returned after asking for {sorted(self.asked)}: it caught mrtr's "
                "Suspend (a bare `except:` or `except BaseException`); re-raise it")
        sent = list(value.asks.values()) if isinstance(value, InputRequired) else []
        dropped = ctx.asker.dropped(sent)  # guard style sends its Asks without awaiting them
        if dropped:
            self._engine.on_unawaited(dropped_message(dropped))
        if isinstance(value, InputRequired):
            return self._suspend_guard(value)
        return value

    def returned(self, value: InputRequired) -> InputRequiredResult:
        """Suspend with what a handler that took no Context returned (the Runner ran it
        without one: it cannot have asked, so nothing was sent or dropped)."""
        return self._suspend_guard(value)

    # -- the Settler protocol (called by Ask) ----------------------------------------------------
    def settle(self, asks: Sequence[Ask[Any]], /) -> list[Any] | Deferred:
        if len(asks) == 1:  # one ask awaited (the usual `await ctx.elicit(...)`)
            value = self._resolve(asks[0])
            if value is _UNANSWERED:
                raise Suspend()
            return [value]
        values = [self._resolve(ask) for ask in asks]
        if any(value is _UNANSWERED for value in values):
            raise Suspend()
        return values

    def _resolve(self, ask: Ask[Any]) -> Any:
        key, shape, flow = ask.key, ask.spec.shape, self.flow
        if key in flow.pending:
            self.caught_up = True
        if key not in self._shapes:
            self._shapes[key] = shape
        elif self._shapes[key] != shape:
            raise RuntimeError(f"two different asks share the key {key!r}")
        problem: str | None = None
        if key in flow.journal and flow.journal[key].shape == shape:
            try:
                return ask.resolve(flow.journal[key].value)[0]
            except Reask as exc:  # valid when given, not now (e.g. after an upgrade): ask again
                del flow.journal[key]
                problem = exc.problem
        # A response answers this very ask only if the last round sent it, as it is now; an
        # ask never sent (round 1, a settled key, a key asked earlier) only if it opted in.
        if key in self._responses and (flow.pending[key] == shape if key in flow.pending
                                       else ask.accept_unasked):
            try:
                value, kept = ask.resolve(self._responses[key])
            except Reask as exc:
                problem = exc.problem
            else:
                flow.journal[key] = Answer(shape=shape, value=kept)
                self._answered = True
                if ask.consent and self.consent and self._engine.consent is not None:
                    self._decided(self._engine.consent, value, shape)
                return value
        return self._emit(ask, problem)

    def _named_flow(self) -> str:
        """The flow's id, fixed now if it has none (a token and its audit line carry it)."""
        self.flow_deadline()
        return self.flow.flow_id

    def _decided(self, gate: ConsentGate, value: object, shape: str) -> None:
        binding = self._bind()
        gate.decided("form" if value is True else "declined", binding.target, binding.principal,
                     shape, self.flow.flow_id)

    def _emit(self, ask: Ask[Any], problem: str | None) -> Any:
        gate = self._engine.consent
        # A confirm in a tool that may take the token path (its mode or the tool's is not
        # "native"); every other ask goes straight on.
        if (ask.consent and self.consent and gate is not None
                and (ask.consent != "tool" or self.consent != "native")):
            granted = gate.decide(ask, self.consent, self._capabilities, self._info, self.grant,
                                  self._bind, self._named_flow)  # may raise ConsentRequired
            if granted is not NATIVE:
                self.flow.journal[ask.key] = Answer(shape=ask.spec.shape, value=_CONFIRMED)
                return granted
        if capability_missing(self._capabilities, ask.spec.capability):
            if ask.has_fallback:
                return ask.fallback
            raise MissingRequiredClientCapability(ask.spec.capability)
        self.asked[ask.key] = ask.with_problem(problem) if problem else ask.request
        self._sent[ask.key] = ask.spec.shape
        return _UNANSWERED

    # -- suspending ------------------------------------------------------------------------------
    def _suspend_guard(self, value: InputRequired) -> InputRequiredResult:
        asks: dict[str, InputRequest] = {}
        shapes: dict[str, str] = {}
        for key, item in value.asks.items():
            if isinstance(item, Ask):
                asks[key], shapes[key] = item.request, item.spec.shape
            else:
                asks[key], shapes[key] = item, request_shape(item)
            needed = required_capability(asks[key])
            if capability_missing(self._capabilities, needed):
                raise MissingRequiredClientCapability(needed)
        return self._suspend(asks, shapes, value.state)

    def _not_yet(self, retry_after: float) -> InputRequiredResult:
        """A state-only round with a retry hint; it does not count against max_rounds."""
        flow = self.flow
        following = FlowState(flow_id=flow.flow_id or self._engine.new_flow_id(),
                              round=flow.round, journal=flow.journal, onces=flow.onces,
                              state=flow.state)
        token = self._engine.seal(following, self._bind(), self._deadline,
                                  answered=self._answered)
        return InputRequiredResult(request_state=token,
                                   meta={RETRY_HINT_KEY: round(retry_after * 1000)})

    def _suspend(
        self, asks: dict[str, InputRequest], shapes: dict[str, str], state: JSON
    ) -> InputRequiredResult:
        flow = self.flow
        following = FlowState(
            flow_id=flow.flow_id or self._engine.new_flow_id(),
            round=flow.round + 1,
            journal=flow.journal,
            onces=flow.onces,
            pending=shapes,
            state=state,
        )
        token = self._engine.seal(following, self._bind(), self._deadline,
                                  answered=self._answered)
        return InputRequiredResult(
            input_requests=asks if asks else UNSET, request_state=token, meta=self.meta
        )


def _named(following: FlowState, round_id: str) -> bytes:
    """The body of a state whose round is named `round_id` (the token's nonce, _sealing.py):
    unique among all rounds of all flows, and sealed, so the store key derived from it can be
    neither forged nor varied."""
    following.round_id = round_id
    return encode_flow(following)


_CONFIRMED: JSON = {"action": "accept", "content": {"confirm": True}}  # what a token journals
_UNANSWERED: Any = object()  # _resolve's "emitted, not answered yet"; also "no response"
