"""Task create + get throughput, in process (no HTTP): `python -m benchmarks.tasks [--tasks N]`.

Creates N tasks of a tool that returns at once, then reads each with tasks/get until completed,
on the default SQLite store (a temp file) and on the MemoryStore. Prints operations per second.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from mrtr import Server
from mrtr.protocol import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION, PROTOCOL_VERSION_KEY
from mrtr.server import Dispatcher, Peer, TaskPolicy
from mrtr.stores import MemoryStore, SQLiteStore, Store

app = Server("bench-tasks", tasks=TaskPolicy(max_live=1_000_000))
META = {PROTOCOL_VERSION_KEY: PROTOCOL_VERSION,
        CLIENT_CAPABILITIES_KEY: {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
IDS = itertools.count(1)


@app.tool(task="required")
async def quick(n: int) -> str:
    """Returns at once."""
    return f"done {n}"


async def send(dispatcher: Dispatcher, method: str, params: dict[str, object]) -> dict[str, object]:
    body = {"jsonrpc": "2.0", "id": next(IDS), "method": method,
            "params": {"_meta": META, **params}}
    reply = await dispatcher.handle_bytes(msgspec.json.encode(body), Peer())
    assert reply is not None
    result: dict[str, object] = msgspec.json.decode(reply.body)["result"]
    return result


async def measure(store: Store, tasks: int) -> tuple[float, float]:
    """(creates per second, gets per second) for `tasks` tasks on `store`."""
    dispatcher = Dispatcher(app, store=store)
    start = time.perf_counter()
    ids = [str((await send(dispatcher, "tools/call", {"name": "quick", "arguments": {"n": n}}))
               ["taskId"]) for n in range(tasks)]
    created = time.perf_counter() - start
    await asyncio.sleep(0.2)  # let the tasks finish
    gets, start = 0, time.perf_counter()
    for task_id in ids:
        while (await send(dispatcher, "tasks/get", {"taskId": task_id}))["status"] != "completed":
            gets += 1
            await asyncio.sleep(0.001)
        gets += 1
    read = time.perf_counter() - start
    await store.aclose()
    return tasks / created, gets / read


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=1000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        for name, store in (("sqlite", SQLiteStore(Path(folder) / "store.db")),
                            ("memory", MemoryStore())):
            creates, gets = asyncio.run(measure(store, args.tasks))
            print(f"{name:7} create {creates:8.0f}/s   get {gets:8.0f}/s   ({args.tasks} tasks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
