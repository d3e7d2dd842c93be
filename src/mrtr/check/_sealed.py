"""Sealed-state probes: tampered, forged, re-bound, expired and replayed requestState."""

# Design: every probe re-sends a round that echoed a requestState (each one: round 2, 3, ...,
# to the process or connection that minted the state) with one thing changed, and judges the
# reply alone: a JSON-RPC error means rejected (pass); a complete result means the
# handler ran on what the client made up (fail); so does an input_required that asks the
# genuine next question (the server took the state and moved on: the TypeScript SDK's deploy
# does this with a state replayed for other arguments); any other input_required is a warning
# (the server neither rejected nor completed). The tamper variants are fixed, not random.
from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from functools import partial
from typing import Any

from mrtr.check._flows import Flow, round_params
from mrtr.check._probe import Exchange, Probe
from mrtr.check._rules import Finding
from mrtr.check._values import other_arguments

__all__ = ["next_question", "probe_flow", "readable", "variants", "verdict"]


def variants(state: str) -> dict[str, str]:
    """Flipped (one character in the middle), truncated and extended copies of `state`."""
    middle = len(state) // 2
    flipped = "B" if state[middle:middle + 1] == "A" else "A"
    return {"flipped": state[:middle] + flipped + state[middle + 1:],
            "truncated": state[: max(len(state) - 4, 0)],
            "extended": state + "AAAA"}


def verdict(rule: str, ex: Exchange, what: str, tool: str,
            next_ask: frozenset[str] = frozenset()) -> Finding:
    """Judge one probe's reply; `next_ask` names the keys of the genuine next question (what
    the server asked after the unchanged round), when no earlier round asked them."""
    if ex.result is None:
        code = ex.error_code
        seen = f"error {code}" if code is not None else (ex.failure or "no reply")
        return Finding(rule, "pass", f"{what}: rejected ({seen})", tool)
    if ex.result.get("resultType") == "input_required":
        if next_ask and _asked(ex) == next_ask:
            return Finding(rule, "fail", f"{what}: accepted, the server moved on to the next "
                           f"question ({', '.join(sorted(next_ask))})", tool)
        return Finding(rule, "warn", f"{what}: asked again instead of rejecting", tool)
    return Finding(rule, "fail", f"{what}: accepted, the handler ran", tool)


def _asked(ex: Exchange) -> frozenset[str]:
    requests = (ex.result or {}).get("inputRequests")
    return frozenset(requests) if isinstance(requests, dict) else frozenset()


def next_question(flow: Flow, number: int) -> frozenset[str]:
    """The keys the server asked after round `number` was sent unchanged, if no earlier round
    asked them (so a probe reply asking them moved on; empty when that cannot be told)."""
    if number > len(flow.replies):
        return frozenset()
    keys = _asked(flow.replies[number - 1])
    earlier = [_asked(ex) for ex in flow.replies[: number - 1]]
    return keys if keys and keys not in earlier else frozenset()


def readable(state: str) -> Any:
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


def _leaves(tree: Any, wanted: list[Any]) -> Any:
    """`tree` with the first scalar leaf changed (one of `wanted`'s values first): a forgery
    of what the state says the client chose or was asked (e.g. how many boxes to book)."""
    def walk(node: Any, pick: Any) -> tuple[Any, bool]:
        if isinstance(node, dict):
            out, done = {}, False
            for key, value in node.items():
                out[key], hit = (value, False) if done else walk(value, pick)
                done = done or hit
            return out, done
        if isinstance(node, list):
            items, done = [], False
            for value in node:
                new, hit = (value, False) if done else walk(value, pick)
                items.append(new)
                done = done or hit
            return items, done
        if pick(node) and isinstance(node, int) and not isinstance(node, bool):
            return (99 if node != 99 else 98), True
        if pick(node) and isinstance(node, str):
            return node + "-forged", True
        return node, False
    for pick in (lambda v: v in wanted, lambda v: True):
        forged, hit = walk(tree, pick)
        if hit:
            return forged
    return None


def _told(flow: Flow, number: int) -> list[Any]:
    """Scalar values the client sent up to round `number`: arguments and answered content."""
    values = [v for v in flow.arguments.values() if not isinstance(v, dict | list)]
    for sent in flow.params[:number]:
        for reply in (sent.get("inputResponses") or {}).values():
            content = reply.get("content") if isinstance(reply, dict) else None
            if isinstance(content, dict):
                values += [v for v in content.values() if not isinstance(v, dict | list)]
    return values


async def _send(probe: Probe, flow: Flow, params: dict[str, Any], number: int,
                tool: Flow | None = None) -> Exchange:
    """Re-send round `number` changed, to the process or connection that minted its state."""
    channel = flow.replies[number - 2].channel if number >= 2 else None
    target = tool or flow
    return await probe.rpc_on(channel, "tools/call", params, header_map=target.header_map)


_SEALED = ("sealed.tamper", "sealed.integrity", "sealed.bound-arguments", "sealed.bound-tool")


async def probe_flow(probe: Probe, flow: Flow, schema: dict[str, Any],
                     other: Flow | None) -> list[Finding]:
    """Every sealed-state probe on every state the server minted (each round, not only the
    first: a server may first send state on round 2); skips say why one could not run."""
    if not flow.states:
        why = "no requestState was issued" if flow.params else "the flow did not start"
        return [Finding(r, "skip", why, flow.tool) for r in _SEALED]
    out = []
    for number, state, answers in flow.states:
        at = f"round {number} state"
        for name, changed in variants(state).items():
            ex = await _send(probe, flow, round_params(flow, answers=answers, state=changed),
                             number)
            out.append(verdict("sealed.tamper", ex, f"{at} {name}", flow.tool,
                               next_question(flow, number)))
        out.append(await _integrity(probe, flow, schema, number, state, answers))
        out.append(await _bound_arguments(probe, flow, schema, number, state, answers))
        out.append(await _bound_tool(probe, flow, other, number, state, answers))
    return out


def _signed_payload(state: str) -> tuple[Any, Callable[[str], str]] | None:
    """A dotted token (`v1.<base64url JSON>.<mac>`, the TypeScript SDK's codec, or a JWT) whose
    payload is readable: (the payload, how to put a rewritten payload back, old MAC kept)."""
    parts = state.split(".")
    for i, part in enumerate(parts if len(parts) > 1 else []):
        payload = readable(part)
        if isinstance(payload, dict):
            return payload, partial(_rejoin, parts, i)
    return None


def _rejoin(parts: list[str], i: int, text: str) -> str:
    return ".".join([*parts[:i], _encode_like(parts[i], text), *parts[i + 1:]])


async def _integrity(probe: Probe, flow: Flow, schema: dict[str, Any], number: int, state: str,
                     answers: dict[str, Any]) -> Finding:
    decoded = readable(state)
    at = f"round {number} state"
    encode: Callable[[str], str] = lambda text: _encode_like(state, text)  # noqa: E731
    if decoded is None:
        signed = _signed_payload(state)
        if signed is None:
            return Finding("sealed.integrity", "pass", f"{at} is opaque", flow.tool)
        (decoded, encode), at = signed, f"{at} (a token with a readable payload)"
    nxt = next_question(flow, number)
    others = other_arguments(schema, flow.arguments)
    forged, hit = _replace(decoded, flow.arguments, others) if others else (decoded, False)
    if hit and others is not None:
        token = encode(json.dumps(forged, separators=(",", ":")))
        ex = await _send(probe, flow, round_params(flow, arguments=others, answers=answers,
                                                   state=token), number)
        return verdict("sealed.integrity", ex, f"{at} rewritten with other arguments",
                       flow.tool, nxt)
    rewritten = _leaves(decoded, _told(flow, number))
    if rewritten is None:
        return Finding("sealed.integrity", "warn",
                       f"{at} is readable JSON (not encrypted); nothing to forge in it",
                       flow.tool)
    token = encode(json.dumps(rewritten, separators=(",", ":")))
    ex = await _send(probe, flow, round_params(flow, answers=answers, state=token), number)
    return verdict("sealed.integrity", ex, f"{at} rewritten (a value the client chose "
                   "changed)", flow.tool, nxt)


async def _bound_arguments(probe: Probe, flow: Flow, schema: dict[str, Any], number: int,
                           state: str, answers: dict[str, Any]) -> Finding:
    others = other_arguments(schema, flow.arguments)
    if others is None:
        return Finding("sealed.bound-arguments", "skip", "no other valid arguments", flow.tool)
    ex = await _send(probe, flow, round_params(flow, arguments=others, answers=answers,
                                               state=state), number)
    return verdict("sealed.bound-arguments", ex,
                    f"round {number} state replayed with {others}", flow.tool,
                    next_question(flow, number))


async def _bound_tool(probe: Probe, flow: Flow, other: Flow | None, number: int, state: str,
                      answers: dict[str, Any]) -> Finding:
    if other is None:
        return Finding("sealed.bound-tool", "skip", "no second callable tool", flow.tool)
    params = round_params(other, answers=answers, state=state)
    ex = await _send(probe, flow, params, number, tool=other)
    return verdict("sealed.bound-tool", ex,
                    f"round {number} state replayed against {other.tool!r}", flow.tool)
