"""Probe: what one request's telemetry and log lines know about it (request id, flow, round)."""

# Design: the round engine learns the flow id and round deep below the Dispatcher, and log lines
# come from modules that never see the request (sealing, ledger, stores). Threading a record
# through every call would touch every signature, so the Dispatcher puts one Probe in a
# ContextVar for the request's duration: observability data only, never read to decide anything
# (every input to a decision stays an explicit argument). The hooks cost one ContextVar lookup.
from __future__ import annotations

import hashlib
from contextvars import ContextVar, Token
from typing import Protocol

__all__ = ["Probe", "current_probe", "note_open", "note_seal", "note_store_hit"]


class SpanHooks(Protocol):
    """What a Probe asks of the telemetry that traces it (see _telemetry.py)."""

    def link(self, span: object, trace: str) -> None: ...

    def traceparent(self, span: object) -> str: ...


class Probe:
    """One request as telemetry and logs see it; filled in as the request proceeds."""

    __slots__ = ("_digest", "attached", "flow_id", "hooks", "method", "principal", "request_id",
                 "round", "span", "started", "store_hit", "target", "token")

    def __init__(
        self, request_id: object, method: str, target: str | None, principal: str | None
    ) -> None:
        self.request_id = request_id
        self.method = method
        self.target = target
        self.principal = principal
        self.flow_id = ""  # "" until a state is opened or sealed
        self.round = 1  # 1-based: a request without requestState is round 1
        self.store_hit = False  # the round's outcome was replayed from the store
        self.span: object = None  # an OpenTelemetry span while tracing
        self.attached: object = None  # the OpenTelemetry context token making it current
        self.hooks: SpanHooks | None = None
        self.started = 0.0  # perf_counter() at the start, while metrics are recorded
        self.token: Token[Probe | None] | None = None
        self._digest: str | None = None

    @property
    def principal_digest(self) -> str:
        """A short SHA-256 of the principal: correlates one caller's lines without naming it."""
        if self._digest is None:
            principal = self.principal
            self._digest = (hashlib.sha256(principal.encode()).hexdigest()[:16]
                            if principal is not None else "-")
        return self._digest

    def enter(self) -> None:
        self.token = _CURRENT.set(self)

    def leave(self) -> None:
        if self.token is not None:
            _CURRENT.reset(self.token)
            self.token = None


_CURRENT: ContextVar[Probe | None] = ContextVar("mrtr_probe", default=None)


def current_probe() -> Probe | None:
    """The Probe of the request this task is serving, if any."""
    return _CURRENT.get()


def note_open(flow_id: str, round_done: int, trace: str) -> None:
    """A state was opened: `round_done` rounds came before; `trace` names the last one's span."""
    probe = _CURRENT.get()
    if probe is None:
        return
    probe.flow_id = flow_id
    probe.round = round_done + 1
    if trace and probe.hooks is not None:
        probe.hooks.link(probe.span, trace)


def note_seal(flow_id: str) -> str:
    """A state is being sealed for the next round: the span context to carry in it, or ""."""
    probe = _CURRENT.get()
    if probe is None:
        return ""
    probe.flow_id = flow_id
    return probe.hooks.traceparent(probe.span) if probe.hooks is not None else ""


def note_store_hit() -> None:
    """The round's outcome came from the store: a replay, the handler did not run."""
    probe = _CURRENT.get()
    if probe is not None:
        probe.store_hit = True
