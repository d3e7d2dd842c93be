"""Server CPU per operation, in process: McpApp driven through fake ASGI receive/send.

`python -m benchmarks.rounds [--ops N] [--concurrency C] [--stores none,sqlite,memory]
[--profile] [--watch-after S]`

Stores: `none`, `memory`, `sqlite`, and `memory-turn`: the memory store answering each
`put_if_absent` one loop turn later, as a store that commits a turn's writes together does.
`memory-turn` minus `memory` is what waiting for a commit costs a recorded round, apart from
the commit itself (docs/performance.md, round 14).

Each workload of the benchmark contract (benchmarks/server.py) runs `ops` times with `C` flows
in flight on one asyncio loop, and the CPU time of the process (time.process_time, so other
tenants of a shared machine do not count) is divided by the operations done. Targets are
interleaved, `--repeat` times, and the minimum counts: ratios between stores of one run are
what to read. `--profile` prints each workload's breakdown into the parts of a round instead
(cProfile).

Under a profiler or valgrind every request runs many times slower, so one waiting on the SQLite
store's group commit outlives the 50 ms after which McpApp starts a request's watcher task,
which at native speed it does not (round 6 of docs/performance.md: ≈ +95 k instructions per
mrtr2 op under callgrind, most of it garbage collection). `--watch-after S` sets that delay
(`watch_after()` for code driving `_cell` under callgrind); `--profile` holds it at 60 s or more
whatever S is.
"""

# Design: no sockets, so uvicorn and the kernel are left out (the floor pays for those too);
# one SQLite file per run in a temporary folder; the client side (building bodies, reading the
# reply) is inside the measured time but is the same for every store, and small.
from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.server import app as bench_app
from mrtr.http import McpApp
from mrtr.http._exchange import Exchange
from mrtr.protocol import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION,
    PROTOCOL_VERSION_KEY,
)
from mrtr.server import Dispatcher
from mrtr.stores import Claim, MemoryStore, SQLiteStore, Store

__all__ = ["META", "main", "measure", "watch_after"]

META = {PROTOCOL_VERSION_KEY: PROTOCOL_VERSION,
         CLIENT_INFO_KEY: {"name": "bench", "version": "1"},
         CLIENT_CAPABILITIES_KEY: {"elicitation": {"form": {}}}}
_CALLS = {"call1": ("echo", {"text": "hello"}), "mrtr2": ("greet", {"greeting": "hello"}),
          "mrtr3": ("deploy", {"service": "web"})}
WORKLOADS = (*_CALLS, "list")
_PROFILED_WATCH_AFTER = 60.0  # seconds: no request of a profiled run gets a watcher


@contextlib.contextmanager
def watch_after(seconds: float | None) -> Iterator[None]:
    """McpApp starts a request's watcher task after `seconds` within the block (None: after
    its own delay, Exchange.WATCH_AFTER)."""
    if seconds is None:
        yield
        return
    before = Exchange.WATCH_AFTER
    Exchange.WATCH_AFTER = seconds
    try:
        yield
    finally:
        Exchange.WATCH_AFTER = before


class _TurnStore(MemoryStore):
    """The memory store whose put_if_absent answers a loop turn later (`memory-turn`)."""

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        claim = await super().put_if_absent(key, outcome, expires=expires)
        await asyncio.sleep(0)  # resumed in the next turn, as after a group commit
        return claim


STORES = ("none", "memory", "memory-turn", "sqlite")


def _store(kind: str, folder: Path) -> Store | None:
    if kind == "none":
        return None
    if kind == "memory":
        return MemoryStore()
    if kind == "memory-turn":
        return _TurnStore()
    if kind == "sqlite":
        return SQLiteStore(folder / f"{kind}-{time.monotonic_ns()}.db")
    raise ValueError(f"unknown store {kind!r}; one of {', '.join(STORES)}")


async def _post(app: McpApp, method: str, params: dict[str, Any], name: str | None) -> Any:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                       "params": {**params, "_meta": META}}).encode()
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
               (b"accept", b"application/json, text/event-stream"),
               (b"mcp-protocol-version", PROTOCOL_VERSION.encode()),
               (b"mcp-method", method.encode()), (b"content-length", str(len(body)).encode())]
    if name is not None:
        headers.append((b"mcp-name", name.encode()))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers,
             "http_version": "1.1", "scheme": "http", "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}
    sent: list[bytes] = []
    done = asyncio.Event()
    read = False

    async def receive() -> dict[str, Any]:
        # As a server does: the body once, then nothing until the response is complete. (A
        # receive that gave the body again and again made McpApp's watcher of a slow request,
        # started under load, spin on it until the request's deadline.)
        nonlocal read
        if not read:
            read = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    await app(scope, receive, send)
    return json.loads(b"".join(sent))["result"]


async def _op(app: McpApp, workload: str) -> None:
    if workload == "list":
        await _post(app, "tools/list", {}, None)
        return
    tool, arguments = _CALLS[workload]
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    while True:
        result = await _post(app, "tools/call", params, tool)
        if result.get("resultType") != "input_required":
            return
        answers = {}
        for key, ask in result["inputRequests"].items():
            props = ask["params"]["requestedSchema"]["properties"]
            answers[key] = {"action": "accept", "content": {
                p: (True if s.get("type") == "boolean" else "bench") for p, s in props.items()}}
        params = {"name": tool, "arguments": arguments, "inputResponses": answers,
                  "requestState": result["requestState"]}


async def _run(app: McpApp, workload: str, ops: int, concurrency: int) -> float:
    """CPU µs per op for `ops` operations with `concurrency` in flight."""
    left = ops

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await _op(app, workload)

    left = min(ops, 200)
    await asyncio.gather(*(worker() for _ in range(concurrency)))  # warm up
    left = ops
    start = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - start) / ops * 1e6


def measure(workloads: Sequence[str], stores: Sequence[str], ops: int, concurrency: int,
            repeat: int) -> dict[str, dict[str, float]]:
    """{workload: {store: min CPU µs per op}}, the stores interleaved within each repeat."""
    best: dict[str, dict[str, float]] = {w: {} for w in workloads}
    with tempfile.TemporaryDirectory(prefix="mrtr-rounds-") as tmp:
        for _ in range(repeat):
            for workload in workloads:
                for kind in stores:
                    us = asyncio.run(_cell(kind, Path(tmp), workload, ops, concurrency))
                    cell = best[workload]
                    cell[kind] = min(us, cell.get(kind, us))
    return best


async def _cell(kind: str, folder: Path, workload: str, ops: int, concurrency: int) -> float:
    store = _store(kind, folder)
    app = McpApp(Dispatcher(bench_app, store=store))
    try:
        return await _run(app, workload, ops, concurrency)
    finally:
        if store is not None:
            await store.aclose()


# The parts of a round, as cumulative times of these functions (file suffix, function name).
# Coroutines count while they run (cProfile times each resumption), never while suspended.
_PARTS: dict[str, tuple[str, str]] = {
    "app": ("mrtr/http/_app.py", "__call__"),
    "receive": ("mrtr/server/_dispatch.py", "receive"),
    "handle": ("mrtr/server/_dispatch.py", "handle"),
    # tools/call: call_tool opens the round (unseal included) and returns the coroutine that
    # runs it (since round 11 call_tool is no coroutine itself): the Ledger's redeem, which
    # runs _tool_result inside, for a redeemed round with a store; else _tool_result.
    "route": ("mrtr/server/_runs.py", "call_tool"),
    "redeem": ("mrtr/server/_ledger.py", "redeem"),
    "run": ("mrtr/server/_runs.py", "_tool_result"),
    "list": ("mrtr/server/_listing.py", "tools"),
    "reply": ("mrtr/server/_reply.py", "__init__"),
    "unseal": ("mrtr/server/_sealing.py", "unseal"),
    "seal": ("mrtr/server/_sealing.py", "seal"),
    # The store's part of a round: the claim, recording the outcome (before issue 31 the ledger
    # called _record itself; now _keep_outcome does, or puts the outcome if absent), and the
    # SQLite commits (a loop callback of their own).
    "claim": ("mrtr/server/_ledger.py", "_claim"),
    "keep": ("mrtr/server/_ledger.py", "_keep_outcome"),
    "record": ("mrtr/server/_ledger.py", "_record"),
    "flush": ("mrtr/stores/_sqlite.py", "_flush"),
    "handler": ("benchmarks/server.py", ""),
    "client": ("benchmarks/rounds.py", "_op"),
}


def profile(workload: str, kind: str, ops: int, concurrency: int) -> dict[str, float]:
    """µs per op of each part of a round (cProfile, so inflated: read the shares)."""
    with tempfile.TemporaryDirectory(prefix="mrtr-rounds-") as tmp:
        profiler = cProfile.Profile()
        with watch_after(max(Exchange.WATCH_AFTER, _PROFILED_WATCH_AFTER)):
            profiler.enable()
            asyncio.run(_cell(kind, Path(tmp), workload, ops, concurrency))
            profiler.disable()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    cum = dict.fromkeys(_PARTS, 0.0)
    for (file, _line, func), (_cc, _nc, _tt, ct, callers) in stats.items():
        for part, (suffix, name) in _PARTS.items():
            if file.endswith(suffix) and (func == name or (not name and func in _TOOLS)):
                if part == "run":  # what redeem ran is in redeem's time already
                    ct = sum(by[3] for (_, _, caller), by in callers.items()
                             if caller != "redeem")
                cum[part] += ct
    return {k: v / (ops + min(ops, 200)) * 1e6 for k, v in cum.items()}


_TOOLS = ("echo", "greet", "deploy")


def breakdown(workload: str, kind: str, ops: int, concurrency: int) -> dict[str, float]:
    """The parts of one op, in shares of the server's profiled time (HTTP = McpApp's own)."""
    c = profile(workload, kind, ops, concurrency)
    route = c["route"] + c["redeem"] + c["run"] or c["list"]
    in_route = c["claim"] + (c["keep"] or c["record"])  # the store's part inside the route
    store = in_route + c["flush"]
    parts = {
        "HTTP (McpApp, headers, body, reply)": c["app"] - c["handle"] - c["receive"],
        "decode + header checks": c["receive"],
        "dispatch (Probe, version, route)": c["handle"] - route - c["reply"],
        "unseal": c["unseal"],
        "handler (the tool's own code)": c["handler"],
        "round engine (journal, asks, result)": route - in_route - c["unseal"] - c["seal"]
                                                - c["handler"],
        "store (ledger + SQLite commits)": store,
        "seal": c["seal"],
        "encode the reply": c["reply"],
    }
    total = sum(parts.values())
    return {k: v / total for k, v in parts.items()}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.rounds", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", type=int, default=3000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--stores", default="none,sqlite,memory",
                   help=f"comma-separated, of {', '.join(STORES)} (default none,sqlite,memory)")
    p.add_argument("--profile", action="store_true",
                   help="print each workload's breakdown (shares of a round) for each store")
    p.add_argument("--watch-after", type=float, default=None, metavar="S",
                   help="start a request's watcher after S seconds (default: McpApp's own; "
                        "raise it under valgrind, where every request is slow; --profile "
                        "holds it at 60 s or more)")
    a = p.parse_args(argv)
    if a.watch_after is not None and not a.watch_after >= 0:
        p.error("--watch-after must be a number of seconds ≥ 0")
    unknown = [kind for kind in a.stores.split(",") if kind not in STORES]
    if unknown:
        p.error(f"--stores: no store {', '.join(unknown)} (there are {', '.join(STORES)})")
    with watch_after(a.watch_after):
        return _main(a)


def _main(a: argparse.Namespace) -> int:
    stores = a.stores.split(",")
    if a.profile:
        for kind in stores:
            shares = {w: breakdown(w, kind, a.ops, a.concurrency)
                      for w in a.workloads.split(",")}
            print(f"\nstore {kind}: share of the server's time per op (cProfile)")
            print("| part | " + " | ".join(shares) + " |")
            print("|---|" + "---:|" * len(shares))
            for part in next(iter(shares.values())):
                print(f"| {part} | " + " | ".join(f"{s[part]:.0%}" for s in shares.values())
                      + " |")
        return 0
    table = measure(a.workloads.split(","), stores, a.ops, a.concurrency, a.repeat)
    print("| workload | " + " | ".join(f"{s} µs/op" for s in stores) + " |")
    print("|---|" + "---:|" * len(stores))
    for workload, cells in table.items():
        base = cells.get(stores[0])
        row = [f"{cells[s]:,.0f}" + (f" ({cells[s] / base:.2f}×)" if base and s != stores[0]
                                      else "") for s in stores]
        print(f"| {workload} | " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
