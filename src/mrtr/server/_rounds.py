"""The round engine: run a handler for one round, then finish or suspend into a sealed state."""

# Design: one sealing path for both styles. Straight-line handlers suspend by raising Suspend from
# an unanswered ask; guard-style handlers return InputRequired themselves. Either way the engine
# seals FlowState (journal, onces, pending keys, guard state) bound to the request and principal.
from __future__ import annotations

import itertools
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from mrtr.errors import (
    InternalError,
    InvalidParams,
    InvalidRequestState,
    MissingRequiredClientCapability,
)
from mrtr.protocol import JSON, UNSET, InputRequest, InputRequiredResult, UnsetType
from mrtr.server._asks import Ask, Suspend, capability_missing, required_capability
from mrtr.server._context import Context
from mrtr.server._journal import FlowState, decode_flow, encode_flow
from mrtr.server._sealing import Binding, Sealer, StateTooLarge

__all__ = ["InputRequired", "RoundEngine"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class InputRequired:
    """Guard style: return this from a handler to ask for input and carry `state` to the retry.

    `asks` maps keys to input requests (or Asks built from the context); `state` is any JSON
    value, sealed by the framework and readable next round as `ctx.state`.
    """

    asks: Mapping[str, InputRequest | Ask[object]] = field(default_factory=dict)
    state: JSON = None


class RoundEngine:
    """Opens the flow a request continues, runs its handler, and seals what must be carried."""

    def __init__(
        self,
        sealer: Sealer,
        *,
        max_rounds: int = 16,
        random: Callable[[int], bytes] | None = None,
    ) -> None:
        self._sealer = sealer
        self._max_rounds = max_rounds
        self._random = random  # tests inject one; None: prefix + serial below
        # Flow ids label a flow inside its sealed state: unique, not secret. A random prefix per
        # engine and a serial number give that without a getrandom() system call per flow.
        self._prefix = os.urandom(6).hex()
        self._serial = itertools.count(1)

    def open(
        self, request_state: str | UnsetType, bind: Callable[[], Binding]
    ) -> tuple[FlowState, float | None]:
        """Unseal the presented state (or start a flow); raises InvalidRequestState."""
        if request_state is UNSET:
            return FlowState(), None
        unsealed = self._sealer.unseal(request_state, bind())
        try:
            flow = decode_flow(unsealed.body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InvalidRequestState("journal does not decode") from exc
        if flow.round >= self._max_rounds:
            raise InvalidParams(f"Too many input rounds for one request (limit {self._max_rounds})")
        return flow, unsealed.deadline

    async def run(
        self,
        handler: Callable[[Context], Awaitable[R]],
        ctx: Context,
        flow: FlowState,
        bind: Callable[[], Binding],
        deadline: float | None,
    ) -> R | InputRequiredResult:
        """Run one round; the value returned, or the InputRequiredResult that suspends it."""
        try:
            value = await handler(ctx)
        except Suspend:
            return self._suspend(ctx.pending, flow, bind(), deadline, flow.state)
        if isinstance(value, InputRequired):
            asks = {k: _request_of(v) for k, v in value.asks.items()}
            for request in asks.values():
                needed = required_capability(request)
                if capability_missing(ctx.client_capabilities, needed):
                    raise MissingRequiredClientCapability(needed)
            return self._suspend(asks, flow, bind(), deadline, value.state)
        return value

    def _suspend(
        self,
        asks: Mapping[str, InputRequest],
        flow: FlowState,
        binding: Binding,
        deadline: float | None,
        state: JSON,
    ) -> InputRequiredResult:
        following = FlowState(
            flow=flow.flow or self._new_flow_id(),
            round=flow.round + 1,
            journal=flow.journal,
            onces=flow.onces,
            pending=sorted(asks),
            state=state,
        )
        try:
            token = self._sealer.seal(encode_flow(following), binding, deadline=deadline)
        except StateTooLarge as exc:
            raise InternalError("Request state too large") from exc
        return InputRequiredResult(
            input_requests=dict(asks) if asks else UNSET, request_state=token
        )

    def _new_flow_id(self) -> str:
        if self._random is not None:
            return self._random(12).hex()
        return f"{self._prefix}{next(self._serial):012x}"


def _request_of(item: InputRequest | Ask[object]) -> InputRequest:
    return item.request if isinstance(item, Ask) else item
