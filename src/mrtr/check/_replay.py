"""Replay and expiry probes: a completed final round re-sent, a state re-sent after --wait."""

# Design: a replayed final round that comes back with the same result says nothing by itself: a
# stored outcome and a re-run that prints the same text look alike. So the verdict is only as
# strong as what the checker can observe: with `--effects-probe TOOL` (a read-only tool of the
# server that returns a count of effects, e.g. bookings made) the count is read before and after
# the replay, and a rise is a re-run (WARN: where single use matters the spec says MUST). Without
# a probe the verdict states that limit instead of calling the server idempotent.
from __future__ import annotations

import asyncio
import re
from typing import Any

from mrtr.check._flows import Flow, round_params
from mrtr.check._probe import Exchange, Probe, meta
from mrtr.check._rules import Finding
from mrtr.check._sealed import verdict

__all__ = ["count", "expiry", "replay"]

_NUMBER = re.compile(r"-?\d+")


def count(result: dict[str, Any] | None) -> int | None:
    """The effects count a probe tool returned: the first integer of its structuredContent,
    else the first integer in its text content; None when there is none."""
    if result is None or result.get("isError"):
        return None
    found = _first_int(result.get("structuredContent"))
    if found is not None:
        return found
    for block in result.get("content") or []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            match = _NUMBER.search(block["text"])
            if match:
                return int(match.group())
    return None


def _first_int(tree: Any) -> int | None:
    if isinstance(tree, bool):
        return None
    if isinstance(tree, int):
        return tree
    values = tree.values() if isinstance(tree, dict) else tree if isinstance(tree, list) else ()
    for value in values:
        found = _first_int(value)
        if found is not None:
            return found
    return None


async def _effects(probe: Probe, tool: str, arguments: dict[str, Any]) -> int | None:
    params = {"_meta": meta(), "name": tool, "arguments": dict(arguments)}
    return count((await probe.rpc("tools/call", params)).result)


async def replay(probe: Probe, flow: Flow, effects: tuple[str, dict[str, Any]] | None) -> Finding:
    """Re-send the completed final round; with an effects probe, count what it did."""
    if not flow.completed:
        return Finding("sealed.replay", "skip", "the flow did not complete", flow.tool)
    before = await _effects(probe, *effects) if effects else None
    ex = await probe.rpc("tools/call", flow.params[-1], header_map=flow.header_map)
    if ex.result is None:
        return Finding("sealed.replay", "info", "final round re-sent: rejected (single-use)",
                       flow.tool)
    same = ex.result == flow.replies[-1].result
    if effects is not None:
        after = await _effects(probe, *effects)
        if before is None or after is None:
            return Finding("sealed.replay", "info", f"final round re-sent: accepted; the "
                           f"effects probe {effects[0]!r} returned no count", flow.tool)
        if after > before:
            return Finding("sealed.replay", "warn", f"final round re-sent: accepted and ran "
                           f"again (effects probe {effects[0]!r}: {before} -> {after}"
                           f"{', the same result printed' if same else ''})", flow.tool)
        return Finding("sealed.replay", "info", f"final round re-sent: accepted, no new effect "
                       f"counted (effects probe {effects[0]!r}: {before} -> {after})", flow.tool)
    if same:
        return Finding("sealed.replay", "info", "final round re-sent: accepted with the same "
                       "result; a stored outcome and a re-run printing the same text look alike "
                       "(give --effects-probe TOOL to tell)", flow.tool)
    return Finding("sealed.replay", "info", "final round re-sent: accepted with a different "
                   "result (it ran again)", flow.tool)


async def expiry(probe: Probe, flow: Flow, wait: float) -> Finding:
    first = flow.first_state
    if first is None:
        return Finding("sealed.expiry", "skip", "no requestState was issued", flow.tool)
    if wait <= 0:
        return Finding("sealed.expiry", "skip", "give --wait SECONDS (longer than the state's "
                       "lifetime) to test expiry", flow.tool)
    await asyncio.sleep(wait)
    state, answers = first
    ex: Exchange = await probe.rpc_on(flow.replies[flow.states[0][0] - 2].channel, "tools/call",
                                      round_params(flow, answers=answers, state=state),
                                      header_map=flow.header_map)
    return verdict("sealed.expiry", ex, f"state re-sent after {wait:g} s", flow.tool)
