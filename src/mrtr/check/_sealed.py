"""Sealed-state probes: tampered, forged, re-bound, expired and replayed requestState."""

# Design: every probe re-sends round 2 of a completed-or-started flow with one thing changed and
# judges the reply alone: a JSON-RPC error means rejected (pass); a complete result means the
# handler ran on what the client made up (fail); another input_required is reported as a warning
# (the server neither rejected nor completed). The tamper variants are fixed, not random.
from __future__ import annotations

import asyncio
import base64
import binascii
import json
from typing import Any

from mrtr.check._flows import Flow, round_params
from mrtr.check._probe import Exchange, Probe
from mrtr.check._rules import Finding
from mrtr.check._values import other_arguments

__all__ = ["expiry", "probe_flow", "variants"]


def variants(state: str) -> dict[str, str]:
    """Flipped (one character in the middle), truncated and extended copies of `state`."""
    middle = len(state) // 2
    flipped = "B" if state[middle:middle + 1] == "A" else "A"
    return {"flipped": state[:middle] + flipped + state[middle + 1:],
            "truncated": state[: max(len(state) - 4, 0)],
            "extended": state + "AAAA"}


def _verdict(rule: str, ex: Exchange, what: str, tool: str) -> Finding:
    if ex.result is None:
        code = ex.error_code
        seen = f"error {code}" if code is not None else (ex.failure or "no reply")
        return Finding(rule, "pass", f"{what}: rejected ({seen})", tool)
    if ex.result.get("resultType") == "input_required":
        return Finding(rule, "warn", f"{what}: asked again instead of rejecting", tool)
    return Finding(rule, "fail", f"{what}: accepted, the handler ran", tool)


def _readable(state: str) -> Any:
    """The state as JSON if it is plain or base64/base64url JSON; None when opaque."""
    for text in (state, _b64(state)):
        if text is not None:
            try:
                return json.loads(text)
            except ValueError:
                continue
    return None


def _b64(state: str) -> str | None:
    padded = state + "=" * (-len(state) % 4)
    for decode in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            return decode(padded.encode()).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
    return None


def _encode_like(state: str, text: str) -> str:
    """`text` encoded as `state` was: plain JSON, or base64(url) with or without padding."""
    if state.lstrip().startswith(("{", "[")):
        return text
    encode = base64.b64encode if any(c in state for c in "+/") else base64.urlsafe_b64encode
    token = encode(text.encode()).decode()
    return token if state.endswith("=") else token.rstrip("=")


def _replace(tree: Any, old: Any, new: Any) -> tuple[Any, bool]:
    if tree == old and isinstance(tree, dict):
        return new, True
    if isinstance(tree, dict):
        pairs = [(k, *_replace(v, old, new)) for k, v in tree.items()]
        return {k: v for k, v, _ in pairs}, any(hit for _, _, hit in pairs)
    if isinstance(tree, list):
        items = [_replace(v, old, new) for v in tree]
        return [v for v, _ in items], any(hit for _, hit in items)
    return tree, False


async def _send(probe: Probe, flow: Flow, params: dict[str, Any]) -> Exchange:
    return await probe.rpc("tools/call", params, header_map=flow.header_map)


async def probe_flow(probe: Probe, flow: Flow, schema: dict[str, Any],
                     other: Flow | None) -> list[Finding]:
    """Every sealed-state probe that this flow allows; skips say why one could not run."""
    first = flow.first_state
    if first is None:
        why = "no requestState was issued" if flow.params else "the flow did not start"
        return [Finding(r, "skip", why, flow.tool) for r in
                ("sealed.tamper", "sealed.integrity", "sealed.bound-arguments",
                 "sealed.bound-tool", "sealed.replay")]
    state, answers = first
    out = []
    for name, changed in variants(state).items():
        ex = await _send(probe, flow, round_params(flow, answers=answers, state=changed))
        out.append(_verdict("sealed.tamper", ex, f"{name} state", flow.tool))
    out.append(await _integrity(probe, flow, schema, state, answers))
    out.append(await _bound_arguments(probe, flow, schema, state, answers))
    out.append(await _bound_tool(probe, flow, other, state, answers))
    out.append(await _replay(probe, flow))
    return out


async def _integrity(probe: Probe, flow: Flow, schema: dict[str, Any], state: str,
                     answers: dict[str, Any]) -> Finding:
    decoded = _readable(state)
    if decoded is None:
        return Finding("sealed.integrity", "pass", "the state is opaque", flow.tool)
    others = other_arguments(schema, flow.arguments)
    forged, hit = _replace(decoded, flow.arguments, others) if others else (decoded, False)
    if not hit or others is None:
        return Finding("sealed.integrity", "warn",
                       "the state is readable JSON (not encrypted); no forgery tried", flow.tool)
    token = _encode_like(state, json.dumps(forged, separators=(",", ":")))
    ex = await _send(probe, flow, round_params(flow, arguments=others, answers=answers,
                                               state=token))
    return _verdict("sealed.integrity", ex, "state rewritten with other arguments", flow.tool)


async def _bound_arguments(probe: Probe, flow: Flow, schema: dict[str, Any], state: str,
                           answers: dict[str, Any]) -> Finding:
    others = other_arguments(schema, flow.arguments)
    if others is None:
        return Finding("sealed.bound-arguments", "skip", "no other valid arguments", flow.tool)
    ex = await _send(probe, flow, round_params(flow, arguments=others, answers=answers,
                                               state=state))
    return _verdict("sealed.bound-arguments", ex, f"state replayed with {others}", flow.tool)


async def _bound_tool(probe: Probe, flow: Flow, other: Flow | None, state: str,
                      answers: dict[str, Any]) -> Finding:
    if other is None:
        return Finding("sealed.bound-tool", "skip", "no second callable tool", flow.tool)
    params = round_params(other, answers=answers, state=state)
    ex = await probe.rpc("tools/call", params, header_map=other.header_map)
    return _verdict("sealed.bound-tool", ex, f"state replayed against {other.tool!r}", flow.tool)


async def _replay(probe: Probe, flow: Flow) -> Finding:
    if not flow.completed:
        return Finding("sealed.replay", "skip", "the flow did not complete", flow.tool)
    ex = await _send(probe, flow, flow.params[-1])
    if ex.result is None:
        return Finding("sealed.replay", "info", "final round re-sent: rejected (single-use)",
                       flow.tool)
    same = ex.result == flow.replies[-1].result
    how = "the identical result (idempotent)" if same else "a different result (ran again?)"
    return Finding("sealed.replay", "info", f"final round re-sent: accepted with {how}",
                   flow.tool)


async def expiry(probe: Probe, flow: Flow, wait: float) -> Finding:
    first = flow.first_state
    if first is None:
        return Finding("sealed.expiry", "skip", "no requestState was issued", flow.tool)
    if wait <= 0:
        return Finding("sealed.expiry", "skip", "give --wait SECONDS (longer than the state's "
                       "lifetime) to test expiry", flow.tool)
    await asyncio.sleep(wait)
    state, answers = first
    ex = await _send(probe, flow, round_params(flow, answers=answers, state=state))
    return _verdict("sealed.expiry", ex, f"state re-sent after {wait:g} s", flow.tool)
