"""An in-process harness for task tests: Dispatchers sharing one Store, raw JSON-RPC in and out."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import msgspec

from mrtr import Server
from mrtr.protocol import PROTOCOL_VERSION, TASKS_EXTENSION
from mrtr.server import Dispatcher, Peer, Sealer
from mrtr.server.tasks._records import TaskPolicy
from mrtr.stores import MemoryStore, Store

FAST = TaskPolicy(poll_interval_ms=10, lease=0.6, hold=0)  # the park/replay path (#28: live
# continuation is the default; tests/server/test_live_tasks.py covers it)
_IDS = itertools.count(1)


def capabilities(tasks: bool = True) -> dict[str, Any]:
    caps: dict[str, Any] = {"elicitation": {}}
    if tasks:
        caps["extensions"] = {TASKS_EXTENSION: {}}
    return caps


class Replica:
    """One Dispatcher (a replica or worker) on a shared store."""

    def __init__(self, app: Server, store: Store, policy: TaskPolicy = FAST,
                 sealer: Sealer | None = None) -> None:
        self.dispatcher = Dispatcher(app, store=store, tasks=policy, sealer=sealer)

    async def send(self, method: str, params: dict[str, Any] | None = None, *,
                   tasks: bool = True, principal: str | None = None) -> dict[str, Any]:
        """The decoded reply: {"result": ...} or {"error": ...}."""
        meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                "io.modelcontextprotocol/clientCapabilities": capabilities(tasks)}
        body = {"jsonrpc": "2.0", "id": next(_IDS), "method": method,
                "params": {"_meta": meta, **(params or {})}}
        reply = await self.dispatcher.handle_bytes(msgspec.json.encode(body),
                                                   Peer(principal=principal))
        assert reply is not None
        return msgspec.json.decode(reply.body)  # type: ignore[no-any-return]

    async def call(self, tool: str, arguments: dict[str, Any] | None = None,
                   **kw: Any) -> dict[str, Any]:
        reply = await self.send("tools/call", {"name": tool, "arguments": arguments or {}}, **kw)
        assert "result" in reply, reply
        return reply["result"]  # type: ignore[no-any-return]

    async def get(self, task_id: str, **kw: Any) -> dict[str, Any]:
        return await self.send("tasks/get", {"taskId": task_id}, **kw)

    async def wait(self, task_id: str, *statuses: str, timeout: float = 5.0,
                   **kw: Any) -> dict[str, Any]:
        """Poll tasks/get until the task reaches one of `statuses`; its DetailedTask."""
        async with asyncio.timeout(timeout):
            while True:
                reply = await self.get(task_id, **kw)
                assert "result" in reply, reply
                if reply["result"]["status"] in statuses:
                    return reply["result"]  # type: ignore[no-any-return]
                await asyncio.sleep(0.01)

    async def update(self, task_id: str, responses: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return await self.send("tasks/update", {"taskId": task_id, "inputResponses": responses},
                               **kw)

    async def cancel(self, task_id: str, **kw: Any) -> dict[str, Any]:
        return await self.send("tasks/cancel", {"taskId": task_id}, **kw)


def pair(app: Server, policy: TaskPolicy = FAST) -> tuple[Replica, Replica, MemoryStore]:
    """Two replicas of `app` on one MemoryStore."""
    store = MemoryStore()
    sealer = Sealer.ephemeral(audience=app.name)  # replicas share their key ring
    return Replica(app, store, policy, sealer), Replica(app, store, policy, sealer), store


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}
