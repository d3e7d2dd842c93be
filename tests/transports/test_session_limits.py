"""2025 sessions over HTTP, in process (#26): ends everywhere, caps per client, store failures.

The real-process versions (`mrtr serve --workers 2`, replicas sharing Redis, a flood of 20,000
`initialize`, 500 × 1 MiB responses) are in test_session_floods.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import msgspec

from mrtr.errors import StoreUnavailable
from mrtr.http import McpApp
from mrtr.server import Dispatcher, Sealer, SessionLimits
from mrtr.stores import MemoryStore
from tests.transports import apps
from tests.transports.conftest import LiveServer, run

JSON_HEADERS = {"content-type": "application/json",
                "accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "raw", "version": "0"}}}
KEY = bytes(range(32))
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "greet", "arguments": {}}}


def worker(store: Any, **options: Any) -> McpApp:
    """One worker (or replica, or a restarted process): the shared key ring and store."""
    sealer = Sealer(keys=[KEY], audience=apps.app.name)
    return McpApp(Dispatcher(apps.app, sealer=sealer, store=store), **options)


def client_at(app: McpApp, address: str) -> httpx.AsyncClient:
    """An httpx client whose requests reach `app` from `address` (the ASGI scope's client)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 40000)),
                             base_url="http://127.0.0.1:8000")


async def initialize(client: httpx.AsyncClient) -> httpx.Response:
    return await client.post("/mcp", content=msgspec.json.encode(INITIALIZE),
                             headers=JSON_HEADERS)


async def open_session(client: httpx.AsyncClient) -> dict[str, str]:
    reply = await initialize(client)
    assert reply.status_code == 200, reply.text
    return {**JSON_HEADERS, "mcp-session-id": reply.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25"}


async def ping(client: httpx.AsyncClient, session: dict[str, str], id: int = 5) -> int:
    reply = await client.post("/mcp", content=msgspec.json.encode(
        {"jsonrpc": "2.0", "id": id, "method": "ping"}), headers=session)
    return reply.status_code


def test_26_delete_ends_the_session_on_every_worker_and_after_a_restart() -> None:
    # Before #26 the ending lived in the process that served the DELETE only.
    store = MemoryStore()
    one, two = worker(store), worker(store)

    async def go() -> tuple[int, int, list[int]]:
        async with client_at(one, "10.0.0.1") as first, client_at(two, "10.0.0.1") as second:
            session = await open_session(first)
            before = await ping(second, session)  # live on both workers
            deleted = (await second.delete("/mcp", headers=session)).status_code
            async with client_at(worker(store), "10.0.0.1") as restarted:
                after = [await ping(c, session, n) for n in range(50)
                         for c in (first, second, restarted)]
        return before, deleted, after

    before, deleted, after = run(go())
    assert (before, deleted) == (200, 200)
    assert after == [404] * 150


def test_26_a_delete_on_another_worker_closes_this_workers_get_stream() -> None:
    store = MemoryStore()
    streaming, deleting = worker(store, keepalive=0.2), worker(store)

    async def go(url: str) -> float:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client, \
                client_at(deleting, "127.0.0.1") as other:
            session = await open_session(client)
            async with client.stream("GET", "/mcp", headers=session) as stream:
                assert stream.status_code == 200
                started = asyncio.get_running_loop().time()
                assert (await other.delete("/mcp", headers=session)).status_code == 200
                async for _ in stream.aiter_bytes():
                    pass  # keep-alives, until the stream ends
                return asyncio.get_running_loop().time() - started

    with LiveServer(streaming) as server:
        assert run(go(server.url), timeout=20) < 2.0


def test_26_a_flood_of_initialize_is_capped_and_leaves_another_clients_call_in_flight() -> None:
    # Before #26 one table of 10,000 held every client's sessions, oldest evicted first: 10,050
    # initialize from anyone ended a victim's session and its call waiting on a pushed ask.
    # uvicorn, for the call's SSE stream (httpx's ASGI transport buffers a whole response);
    # the victim connects from 127.0.0.2, the flood from 127.0.0.1.
    app = worker(MemoryStore())

    async def go(url: str) -> tuple[list[int], httpx.Response, list[dict[str, Any]], int]:
        victim = httpx.AsyncClient(base_url=url, timeout=30, transport=httpx.AsyncHTTPTransport(
            local_address="127.0.0.2"))
        async with victim, httpx.AsyncClient(base_url=url, timeout=30) as flood:
            session = await open_session(victim)
            events: list[dict[str, Any]] = []
            answers = iter([{"name": "Ada"}, {"color": "teal"}])
            statuses: list[int] = []
            refused: httpx.Response | None = None
            async with victim.stream("POST", "/mcp", content=msgspec.json.encode(CALL),
                                     headers=session) as stream:
                async for line in stream.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    events.append(json.loads(line[5:]))
                    if events[-1].get("method") != "elicitation/create":
                        continue
                    if not statuses:  # the call waits on its first ask: flood now
                        for _ in range(1_000):
                            reply = await initialize(flood)
                            statuses.append(reply.status_code)
                            refused = reply if reply.status_code != 200 else refused
                    answer = {"jsonrpc": "2.0", "id": events[-1]["id"],
                              "result": {"action": "accept", "content": next(answers)}}
                    await victim.post("/mcp", content=msgspec.json.encode(answer),
                                      headers=session)
            assert refused is not None
            return statuses, refused, events, await ping(victim, session)

    with LiveServer(app) as server:
        statuses, refused, events, after = run(go(server.url), timeout=120)
    assert statuses[:100] == [200] * 100 and set(statuses[100:]) == {429}
    error = refused.json()["error"]
    assert 500 <= int(refused.headers["retry-after"]) <= 600  # when its oldest is idle enough
    assert error["data"] == {"limit": 100, "scope": "client"}
    assert "already holds 100 sessions" in error["message"] and refused.json()["id"] == 1
    assert events[-1]["result"]["content"][0]["text"] == "Hello Ada, you like teal"
    assert after == 200


def test_26_the_process_cap_refuses_a_new_client_rather_than_take_a_session() -> None:
    app = worker(MemoryStore(), session_limits=SessionLimits(per_client=5, total=10))

    async def go() -> tuple[list[int], list[int]]:
        clients = [client_at(app, f"10.0.1.{n}") for n in range(3)]
        opened = [await open_session(clients[n]) for n in (0, 1) for _ in range(5)]
        newcomer = (await initialize(clients[2])).status_code
        kept = [await ping(clients[n // 5], session) for n, session in enumerate(opened)]
        for client in clients:
            await client.aclose()
        return [newcomer], kept

    newcomer, kept = run(go())
    assert newcomer == [429] and kept == [200] * 10


class DownStore(MemoryStore):
    """A store that answers nothing but the first session's records: it went down."""

    down = False

    async def get(self, key: str) -> Any:
        if self.down:
            raise StoreUnavailable("down")
        return await super().get(key)

    async def admit(self, key: str, member: str, *, limit: int, expires: float) -> bool:
        if self.down:
            raise StoreUnavailable("down")
        return await super().admit(key, member, limit=limit, expires=expires)


def test_26_a_store_that_cannot_say_whether_a_session_ended_gets_503_never_a_guess() -> None:
    store = DownStore()
    app = worker(store)

    async def go() -> tuple[httpx.Response, httpx.Response, int]:
        async with client_at(app, "10.0.0.1") as client:
            session = await open_session(client)
            store.down = True
            pinged = await client.post("/mcp", content=b'{"jsonrpc":"2.0","id":3,"method":'
                                       b'"ping"}', headers=session)
            deleted = await client.delete("/mcp", headers=session)
            store.down = False
            return pinged, deleted, await ping(client, session)

    pinged, deleted, after = run(go())
    for reply in (pinged, deleted):
        assert reply.status_code == 503 and reply.headers["retry-after"] == "1"
        assert reply.json()["error"]["code"] == -32603
    assert pinged.json()["id"] == 3
    assert after == 200  # the refused DELETE ended nothing


def test_26_sessions_opened_over_the_limits_of_a_principal_are_its_own() -> None:
    async def authenticate(headers: Any) -> str | None:
        return headers.get("x-user")

    app = worker(MemoryStore(), authenticator=authenticate,
                 session_limits=SessionLimits(per_client=2))

    async def go() -> list[int]:
        async with client_at(app, "10.0.0.1") as client:  # one address, two users
            statuses = []
            for user in ("ann", "ann", "ann", "bob", "bob"):
                reply = await client.post("/mcp", content=msgspec.json.encode(INITIALIZE),
                                          headers={**JSON_HEADERS, "x-user": user})
                statuses.append(reply.status_code)
            return statuses

    assert run(go()) == [200, 200, 429, 200, 200]


def test_26_stdio_answers_a_capped_initialize_with_the_json_rpc_error() -> None:
    from mrtr.stdio import serve_stdio
    from tests.transports.test_stdio_sessions import Lines

    async def go() -> list[dict[str, Any]]:
        reader = asyncio.StreamReader()
        out = Lines()
        dispatcher = Dispatcher(apps.app)
        for n in range(101):
            reader.feed_data(msgspec.json.encode({**INITIALIZE, "id": n}) + b"\n")
        reader.feed_eof()
        await serve_stdio(dispatcher, reader=reader, writer=out)
        return out.messages

    replies = run(go())
    assert all("result" in r for r in replies[:100])
    assert replies[100]["id"] == 100 and replies[100]["error"]["data"] == {
        "limit": 100, "scope": "client"}
