"""subscriptions/listen with notifications.taskIds: notifications/tasks until terminal (#14)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from mrtr.protocol import PROTOCOL_VERSION
from mrtr.server import Peer
from tests.server.tasks_harness import Replica, accept, capabilities, pair
from tests.server.test_tasks import app


async def listen(replica: Replica, notifications: dict[str, Any], *, tasks: bool = True,
                 principal: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The notifications a listen stream carried, and its closing reply."""
    seen: list[dict[str, Any]] = []

    async def sink(notification: msgspec.Struct) -> None:
        seen.append(msgspec.to_builtins(notification))

    meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": capabilities(tasks)}
    body = {"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
            "params": {"_meta": meta, "notifications": notifications}}
    async with asyncio.timeout(10):
        reply = await replica.dispatcher.handle_bytes(msgspec.json.encode(body),
                                                      Peer(principal=principal), sink=sink)
    assert reply is not None
    return seen, msgspec.json.decode(reply.body)


def test_listen_streams_each_change_of_a_task_until_it_is_terminal() -> None:
    async def go() -> None:
        a, b, _ = pair(app)
        task_id = (await a.call("confirm", {"what": "z"}))["taskId"]
        await a.wait(task_id, "input_required")

        async def answer() -> None:
            await asyncio.sleep(0.3)
            await a.update(task_id, {"confirm-1": accept({"confirm": True})})

        answering = asyncio.create_task(answer())
        seen, closing = await listen(b, {"taskIds": [task_id, "unknown-id"]})
        await answering
        ack, *updates = seen
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}  # unknown: not honoured
        sub = {"io.modelcontextprotocol/subscriptionId": "sub-1"}
        assert ack["params"]["_meta"] == sub
        assert all(n["method"] == "notifications/tasks" for n in updates)
        assert all(n["params"]["_meta"] == sub for n in updates)
        statuses = [n["params"]["status"] for n in updates]
        assert statuses[0] == "input_required" and statuses[-1] == "completed"
        assert updates[0]["params"]["inputRequests"]
        assert updates[-1]["params"]["result"]["content"][0]["text"] == "deleted z"
        assert closing["result"] == {"resultType": "complete", "_meta": sub}
    asyncio.run(go())


def test_a_listen_that_can_deliver_nothing_is_closed_at_once() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        done = (await a.call("slow"))["taskId"]
        await a.wait(done, "completed")
        foreign = (await a.call("slow", {"seconds": 5}, principal="other"))["taskId"]
        for filt in ({"toolsListChanged": True, "resourceSubscriptions": ["x://y"]},
                     {"taskIds": [foreign, "nope"]}, {}):
            seen, closing = await listen(a, filt)
            assert [n["method"] for n in seen] == ["notifications/subscriptions/acknowledged"]
            assert seen[0]["params"]["notifications"] == {}, filt
            assert closing["result"]["resultType"] == "complete"
        seen, _ = await listen(a, {"taskIds": [done]})  # terminal: its state once, then closed
        assert [n["params"].get("status") for n in seen[1:]] == ["completed"]
        await a.cancel(foreign, principal="other")
    asyncio.run(go())


def test_listening_to_tasks_needs_the_extension() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        seen, reply = await listen(a, {"taskIds": ["x"]}, tasks=False)
        assert reply["error"]["code"] == -32021 and seen == []
    asyncio.run(go())
