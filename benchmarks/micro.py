"""Micro-benchmarks of the per-round hot spots, in µs per op (timeit, best of several repeats).

`python -m benchmarks.micro [--json FILE] [--number N] [--repeat R]`
"""

# Design: inputs are built once, outside the timed call, so each item measures only the work a
# server does for every round: unseal the incoming requestState and seal the next one; decode a
# round-2 tools/call body and encode its final result. The binding is prebuilt because the
# server computes it once per request (`_LazyBinding`), not once per seal.
from __future__ import annotations

import argparse
import json
import sys
import timeit
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from benchmarks.report import SEAL, SEAL_LIMIT_US
from mrtr.protocol import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
    decode_client_message,
    encode_result,
)
from mrtr.server import Binding, Sealer
from mrtr.server._journal import Answer, FlowState, encode_flow
from mrtr.server._results import tool_result
from mrtr.server._sealing import digest_arguments

__all__ = ["main", "measure", "round_body", "sealed_round"]

ROUND = "decode+encode round"
_KEY = bytes(range(32))
_AUDIENCE = "mrtr-bench"
_ARGUMENTS = {"greeting": "hello"}
_ACCEPTED = {"action": "accept", "content": {"name": "bench"}}


def sealed_round() -> tuple[Sealer, bytes, Binding]:
    """A Sealer, the journal of `greet` after one accepted answer, and its request binding."""
    sealer = Sealer(keys=[_KEY], audience=_AUDIENCE)
    flow = FlowState(
        flow_id="9f8e7d6c5b4a39281706f5e4",
        round=1,
        journal={"name": Answer(shape="3b1f0c9a2d7e4f603b1f0c9a2d7e4f60", value=_ACCEPTED)},
        pending={"name": "3b1f0c9a2d7e4f603b1f0c9a2d7e4f60"},
    )
    binding = Binding(
        method="tools/call",
        target="greet",
        arguments_digest=digest_arguments(_ARGUMENTS),
        principal="sub:bench-user",
    )
    return sealer, encode_flow(flow), binding


def round_body(request_state: str) -> bytes:
    """The JSON of a round-2 `tools/call greet`: one accepted elicitation and the state."""
    message = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "greet",
            "arguments": _ARGUMENTS,
            "inputResponses": {"name": _ACCEPTED},
            "requestState": request_state,
            "_meta": {
                PROTOCOL_VERSION_KEY: PROTOCOL_VERSION,
                CLIENT_INFO_KEY: {"name": "mrtr-bench", "version": "1.0.0"},
                CLIENT_CAPABILITIES_KEY: {"elicitation": {"form": {}}},
            },
        },
    }
    return json.dumps(message, separators=(",", ":")).encode()


def _operations() -> dict[str, Callable[[], object]]:
    sealer, body, binding = sealed_round()
    state = sealer.seal(body, binding)
    wire = round_body(state)
    meta = {SERVER_INFO_KEY: {"name": _AUDIENCE, "version": "1.0.0"}}

    def seal_unseal() -> object:
        return sealer.unseal(sealer.seal(body, binding), binding)

    def decode_encode() -> object:
        request = decode_client_message(wire)
        result = tool_result("hello, bench", structured=False)
        return encode_result(request.id, msgspec.structs.replace(result, meta=meta))  # type: ignore[union-attr]

    return {SEAL: seal_unseal, ROUND: decode_encode}


def measure(number: int, repeat: int) -> dict[str, float]:
    """Best-of-`repeat` µs per op of each item, each repeat timing `number` calls."""
    out: dict[str, float] = {}
    for name, op in _operations().items():
        op()  # fail before timing, not inside timeit
        best = min(timeit.repeat(op, number=number, repeat=repeat))
        out[name] = best / number * 1e6
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.micro", description=__doc__)
    p.add_argument("--json", type=Path, help="also write the numbers to this file")
    p.add_argument("--number", type=int, default=20_000, help="calls per repeat (default 20000)")
    p.add_argument("--repeat", type=int, default=7, help="repeats; the best one counts (default 7)")
    a = p.parse_args(argv)
    if a.number < 1 or a.repeat < 1:
        p.error("--number and --repeat must be at least 1")
    us = measure(a.number, a.repeat)
    for name, value in us.items():
        print(f"{name:<20} {value:8.2f} µs/op")
    verdict = "PASS" if us[SEAL] <= SEAL_LIMIT_US else "MISS"
    print(f"{verdict}: {SEAL} {us[SEAL]:.2f} µs (target ≤ {SEAL_LIMIT_US:g} µs)")
    if a.json:
        record = {"us_per_op": us, "number": a.number, "repeat": a.repeat,
                  "python": sys.version.split()[0]}
        a.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
