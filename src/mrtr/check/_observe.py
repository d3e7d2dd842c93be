"""Rules judged over every reply the run saw: result shapes, sessions, pushes, buffering."""

# Design: probes record each 2026-07-28 exchange here with a label ("tools/call greet, round 2");
# the shape and transport rules are then decided once over all of them, so a defect seen on any
# reply is reported, with the first few places it was seen.
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mrtr.check._probe import Exchange
from mrtr.check._rules import Finding

__all__ = ["Recorder"]

_TYPES = ("complete", "input_required", "task")
_SHOWN = 3


def _result_type(result: dict[str, Any]) -> str | None:
    kind = result.get("resultType")
    if kind not in _TYPES:
        return f"resultType is {kind!r}" if "resultType" in result else "no resultType"
    return None


def _input_required(result: dict[str, Any]) -> str | None:
    if result.get("resultType") != "input_required":
        return None
    asks, state = result.get("inputRequests"), result.get("requestState")
    if asks is None and state is None:
        return "neither inputRequests nor requestState"
    if state is not None and not isinstance(state, str):
        return "requestState is not a string"
    if asks is not None and not (isinstance(asks, dict) and all(
            isinstance(a, dict) and isinstance(a.get("method"), str) for a in asks.values())):
        return "inputRequests is not a map of {method, params} objects"
    return None


def _complete(result: dict[str, Any]) -> str | None:
    if result.get("resultType", "complete") != "complete":
        return None
    stray = [k for k in ("inputRequests", "requestState") if k in result]
    return f"complete result carries {', '.join(stray)}" if stray else None


def _task(result: dict[str, Any]) -> str | None:
    undeclared = "a task result, though the request did not declare the tasks extension"
    return undeclared if result.get("resultType") == "task" else None


_SHAPES: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "shape.result-type": _result_type, "shape.input-required": _input_required,
    "shape.complete": _complete, "shape.task": _task,
}


@dataclass
class Recorder:
    """Every 2026-07-28 exchange of the run, by label."""

    seen: list[tuple[str, Exchange]] = field(default_factory=list)

    def record(self, label: str, exchange: Exchange) -> Exchange:
        self.seen.append((label, exchange))
        return exchange

    def findings(self, http: bool) -> list[Finding]:
        results = [(label, ex.result) for label, ex in self.seen if ex.result is not None]
        out = [self._judge(rule, [(lbl, test(r)) for lbl, r in results], len(results))
               for rule, test in _SHAPES.items()]
        out.append(self._judge("stateless.no-push", [
            (lbl, f"server sent {ex.pushed[0].get('method')!r}" if ex.pushed else None)
            for lbl, ex in self.seen], len(self.seen)))
        if http:
            out.append(self._judge("stateless.no-session", [
                (lbl, "Mcp-Session-Id minted" if "mcp-session-id" in ex.headers else None)
                for lbl, ex in self.seen], len(self.seen)))
            streams = [(lbl, ex) for lbl, ex in self.seen if ex.event_stream]
            out.append(self._judge("transport.sse-buffering", [
                (lbl, None if ex.headers.get("x-accel-buffering", "").lower() == "no"
                 else "event stream without X-Accel-Buffering: no") for lbl, ex in streams],
                len(streams)))
        return out

    @staticmethod
    def _judge(rule: str, verdicts: list[tuple[str, str | None]], total: int) -> Finding:
        if total == 0:
            return Finding(rule, "skip", "no reply of this kind was seen")
        bad = [f"{label}: {why}" for label, why in verdicts if why]
        if not bad:
            return Finding(rule, "pass", f"{total} replies checked")
        more = f" (and {len(bad) - _SHOWN} more)" if len(bad) > _SHOWN else ""
        return Finding(rule, "fail", "; ".join(bad[:_SHOWN]) + more)
