"""Driving one tool's MRTR flow for `mrtr check`, every later round on a fresh connection."""

# Design: a Flow keeps each round's params and reply so the sealed-state probes can re-send a
# round with one thing changed. Later rounds go out on a fresh connection (HTTP: a new TCP
# connection, round-robin over --replica URLs; stdio: a new child process): that is the
# stateless check, and a round that fails there is retried on the first connection to tell
# "keyed to the connection" from "our generated answers did not fit".
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mrtr.check._observe import Recorder
from mrtr.check._probe import ANSWERS, Exchange, HttpProbe, Probe, meta
from mrtr.check._rules import Finding
from mrtr.check._values import answer

__all__ = ["Flow", "drive", "round_params"]

MAX_ROUNDS = 5


@dataclass
class Flow:
    """One tool call's rounds: `params[i]` was sent and `replies[i]` came back."""

    tool: str
    arguments: dict[str, Any]
    header_map: dict[str, str]
    params: list[dict[str, Any]] = field(default_factory=list)
    replies: list[Exchange] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    problem: str = ""

    @property
    def states(self) -> list[tuple[int, str, dict[str, Any]]]:
        """Every requestState the server minted: (the round that echoed it, the state, the
        answers sent with it). Round 1 may mint none (the TypeScript SDK's shape), so the
        sealed rules test each round's state, not only the first."""
        out = []
        for number, sent in enumerate(self.params[1:], start=2):
            state = sent.get("requestState")
            if isinstance(state, str):
                out.append((number, state, dict(sent.get("inputResponses") or {})))
        return out

    @property
    def first_state(self) -> tuple[str, dict[str, Any]] | None:
        """The first requestState and the answers sent with it."""
        found = self.states
        return (found[0][1], found[0][2]) if found else None

    @property
    def completed(self) -> bool:
        last = self.replies[-1].result if self.replies else None
        return last is not None and last.get("resultType", "complete") == "complete"


def round_params(flow: Flow, *, arguments: Mapping[str, Any] | None = None,
                 answers: Mapping[str, Any] | None = None, state: str | None = None,
                 tool: str | None = None) -> dict[str, Any]:
    # A fresh progressToken per request: tools that report progress then reply with an event
    # stream, which the transport.sse-buffering rule needs to see.
    token = {"progressToken": f"mrtr-check-{uuid.uuid4().hex[:12]}"}
    params: dict[str, Any] = {"_meta": {**meta(ANSWERS), **token}, "name": tool or flow.tool,
                              "arguments": dict(flow.arguments if arguments is None else arguments)}
    if answers is not None:
        params["inputResponses"] = dict(answers)
    if state is not None:
        params["requestState"] = state
    return params


def _answers(result: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any] | None:
    asks = result.get("inputRequests")
    out: dict[str, Any] = {}
    for key, ask in (asks.items() if isinstance(asks, dict) else ()):
        reply = given.get(key) if key in given else answer(ask if isinstance(ask, dict) else {})
        if reply is None:
            return None
        out[key] = reply
    return out


async def drive(probe: Probe, rec: Recorder, flow: Flow, given: Mapping[str, Any],
                replicas: list[str]) -> Flow:
    """Run the flow to its end (complete, error or MAX_ROUNDS), recording every reply."""
    params = round_params(flow)
    for number in range(1, MAX_ROUNDS + 1):
        reply = await _send(probe, flow, params, number, replicas)
        flow.params.append(params)
        flow.replies.append(rec.record(f"tools/call {flow.tool}, round {number}", reply))
        result = reply.result
        if result is None or result.get("resultType") != "input_required":
            return flow
        answers = _answers(result, given)
        if answers is None:
            flow.problem = "an input request of an unknown kind (give it with --answers)"
            return flow
        state = result.get("requestState")
        params = round_params(flow, answers=answers,
                              state=state if isinstance(state, str) else None)
    flow.problem = f"still asking after {MAX_ROUNDS} rounds"
    return flow


async def _send(probe: Probe, flow: Flow, params: dict[str, Any], number: int,
                replicas: list[str]) -> Exchange:
    if number == 1:
        return await probe.rpc("tools/call", params, header_map=flow.header_map)
    url = replicas[(number - 2) % len(replicas)] if replicas else None
    where = f"replica {url}" if url else "a fresh connection"
    reply = await _fresh(probe, flow, params, url)
    if reply.result is not None:
        flow.findings.append(Finding("stateless.fresh-connection", "pass",
                                     f"round {number} served on {where}", flow.tool))
        return reply
    # Retry where the state was minted (the process or connection that answered the round
    # before): success there means the state only works where it was made.
    minter = flow.replies[-1].channel if flow.replies else None
    again = await probe.rpc_on(minter, "tools/call", params, header_map=flow.header_map)
    what = "process" if not probe.http else "connection"
    if again.result is not None:
        flow.findings.append(Finding(
            "stateless.fresh-connection", "fail",
            f"round {number} failed on {where} ({_seen(reply)}) but succeeded on the {what} "
            f"that minted its state: a per-{what} key or in-memory state", flow.tool))
        return again
    flow.findings.append(Finding(
        "stateless.fresh-connection", "warn",
        f"round {number} failed on {where} and on the {what} that minted its state "
        f"({_seen(again)}): the generated answers may not fit (give them with --answers)",
        flow.tool))
    return again


def _seen(ex: Exchange) -> str:
    if ex.failure:
        return ex.failure
    code = ex.error_code
    return f"error {code}" if code is not None else f"HTTP {ex.status}, no JSON-RPC reply"


async def _fresh(probe: Probe, flow: Flow, params: dict[str, Any], url: str | None) -> Exchange:
    if isinstance(probe, HttpProbe):
        return await probe.rpc("tools/call", params, header_map=flow.header_map, fresh=True,
                               url=url, keep=True)
    return await probe.rpc("tools/call", params, fresh=True, keep=True)
