"""`params.idempotencyKey` end to end over real HTTP (#25, acceptance 5).

A real uvicorn on 127.0.0.1 serving McpApp with a SQLite store and a bearer authenticator;
effects are lines in a file outside the store (tests/transports/idempotent_app.py). Raw httpx
requests check the wire; mrtr Clients check the retries a caller makes.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr.client import Client, Handlers
from mrtr.http import McpApp
from mrtr.protocol import ElicitRequestParams, ElicitResult
from mrtr.server import Dispatcher, Sealer, generate_key, parse_keys
from mrtr.stores import SQLiteStore
from tests.transports import idempotent_app
from tests.transports.conftest import (
    LiveServer,
    call,
    cli_env,
    free_port,
    post_args,
    request,
    spawn_cli,
    stop,
    wait_ready,
)

CONFIRM = {"action": "accept", "content": {"confirm": True}}


async def bearer(headers: Mapping[str, str]) -> str | None:
    token = headers.get("authorization", "").removeprefix("Bearer ")
    return token or None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("idempotency")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MRTR_TEST_EFFECTS", str(folder / "effects.log"))
        store = SQLiteStore(folder / "store.db")
        sealer = Sealer(keys=parse_keys(generate_key()), audience=idempotent_app.app.name)
        dispatcher = Dispatcher(idempotent_app.app, sealer=sealer, store=store)
        with LiveServer(McpApp(dispatcher, authenticator=bearer)) as live:
            yield live


def post(server: LiveServer, body: dict[str, Any], token: str | None = None,
         timeout: float = 10.0) -> httpx.Response:
    extra = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{server.url}/mcp", timeout=timeout, **post_args(body, **extra))


def body_without_id(response: httpx.Response) -> str:
    return json.dumps(response.json()["result"], sort_keys=True)


def charged(invoice: str) -> int:
    return idempotent_app.effects(invoice)


def test_25_the_same_key_twice_is_one_effect_and_the_same_result_bytes(server: LiveServer) -> None:
    discover = post(server, request("server/discover")).json()["result"]
    assert discover["capabilities"]["tools"] == {"idempotency": {}}
    body = call("charge", {"invoice": "A1", "amount": 5}, idempotencyKey="k-A1")
    first = post(server, {**body, "id": 1})
    second = post(server, {**body, "id": 2})
    assert first.status_code == second.status_code == 200
    assert first.content.replace(b'"id":1', b'"id":2') == second.content  # byte for byte
    assert "R-A1-1" in first.text and charged("A1") == 1


def test_25_the_same_key_with_other_arguments_is_a_conflict(server: LiveServer) -> None:
    post(server, call("charge", {"invoice": "B1", "amount": 5}, idempotencyKey="k-B1"))
    other = post(server, call("charge", {"invoice": "B1", "amount": 6}, idempotencyKey="k-B1"))
    assert other.status_code == 400
    assert other.json()["error"] == {"code": -32602,
                                     "message": "Idempotency key already used for another call",
                                     "data": {"type": "idempotency_key_conflict"}}
    assert charged("B1") == 1


def test_25_a_duplicate_while_the_first_runs_is_409_then_the_outcome(server: LiveServer) -> None:
    body = call("charge", {"invoice": "C1", "amount": 5, "seconds": 1.5}, idempotencyKey="k-C1")
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(post, server, body)
        for _ in range(200):
            if charged("C1"):
                break
            time.sleep(0.01)
        busy = post(server, body)
        done = first.result()
    assert busy.status_code == 409 and busy.headers["retry-after"] == "1"
    error = busy.json()["error"]
    assert error["code"] == -32603
    assert error["data"] == {"type": "idempotency_key_in_progress", "retryAfter": 1.0}
    assert done.status_code == 200
    assert body_without_id(post(server, body)) == body_without_id(done)
    assert charged("C1") == 1


def test_25_keys_are_per_principal(server: LiveServer) -> None:
    alice = post(server, call("charge", {"invoice": "D1", "amount": 5}, idempotencyKey="same"),
                 token="alice")
    bob = post(server, call("charge", {"invoice": "D2", "amount": 7}, idempotencyKey="same"),
               token="bob")
    anonymous = post(server, call("charge", {"invoice": "D3", "amount": 9},
                                  idempotencyKey="same"))
    assert [r.status_code for r in (alice, bob, anonymous)] == [200, 200, 200]
    again = post(server, call("charge", {"invoice": "D1", "amount": 5}, idempotencyKey="same"),
                 token="alice")
    assert body_without_id(again) == body_without_id(alice)
    assert (charged("D1"), charged("D2"), charged("D3")) == (1, 1, 1)


def test_25_across_rounds_the_key_names_the_call_and_round_1_again_gets_the_final_result(
    server: LiveServer,
) -> None:
    args = {"invoice": "E1", "amount": 5}
    one = post(server, call("pay", args, idempotencyKey="k-E1")).json()["result"]
    assert one["resultType"] == "input_required"
    assert post(server, call("pay", args, idempotencyKey="k-E1")).json()["result"] == one
    final = post(server, call("pay", args, idempotencyKey="k-E1",
                              requestState=one["requestState"],
                              inputResponses={"confirm": CONFIRM}))
    assert "R-E1-1" in final.text
    after = post(server, call("pay", args, idempotencyKey="k-E1"))
    assert body_without_id(after) == body_without_id(final)
    assert charged("E1") == 1


def test_25_an_invalid_key_is_refused_before_anything_runs(server: LiveServer) -> None:
    reply = post(server, call("charge", {"invoice": "F1", "amount": 5}, idempotencyKey="a b"))
    assert reply.status_code == 400 and reply.json()["error"]["code"] == -32602
    assert charged("F1") == 0


# -- an mrtr Client ------------------------------------------------------------------------------

def test_25_a_client_that_timed_out_retries_with_its_key_and_books_once(server: LiveServer) -> None:
    # The case: the tool books, then waits for its provider; the client gives up
    # (its stream closes, the server cancels the request) and retries. With the key: one
    # booking, and the retry gets the first call's receipt. Without: a second booking.
    args = {"invoice": "G1", "amount": 5, "seconds": 1.0}

    async def go(key: str | None) -> str:
        async with Client(f"{server.url}/mcp", timeout=0.3) as client:
            with pytest.raises(TimeoutError):
                await client.call_tool("charge", args, idempotency_key=key)
            client.timeout = 10
            result = await client.call_tool("charge", args, idempotency_key=key)
            return str(result.content[0].text)  # type: ignore[union-attr]

    assert asyncio.run(go("pay-G1")) == "Charged 5 for G1: receipt R-G1-1."
    assert charged("G1") == 1
    args["invoice"] = "G2"
    assert asyncio.run(go(None)).endswith("R-G2-2.")  # a fresh key per call: two bookings
    assert charged("G2") == 2


def test_25_the_client_sends_one_key_per_call_across_its_rounds(server: LiveServer) -> None:
    asked: list[str] = []

    async def confirm(params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True})

    async def go() -> list[str]:
        async with Client(f"{server.url}/mcp", handlers=Handlers(elicitation=confirm)) as client:
            first = await client.call_tool("pay", {"invoice": "H1", "amount": 5},
                                           idempotency_key="k-H1")
            again = await client.call_tool("pay", {"invoice": "H1", "amount": 5},
                                           idempotency_key="k-H1")
            fresh = await client.call_tool("pay", {"invoice": "H2", "amount": 5})
        return [str(r.content[0].text) for r in (first, again, fresh)]  # type: ignore[union-attr]

    texts = asyncio.run(go())
    assert texts[0] == texts[1] == "Paid 5 for H1: receipt R-H1-1."
    assert len(asked) == 2  # the replayed call asked nothing: it got the final result
    assert (charged("H1"), charged("H2")) == (1, 1)


def test_25_a_2025_session_client_gets_the_same_guarantee(server: LiveServer) -> None:
    async def go() -> tuple[object, list[str]]:
        async with Client(f"{server.url}/mcp", mode="legacy") as client:
            tools = (await client.discover()).capabilities.tools
            texts = []
            for _ in range(2):
                result = await client.call_tool("charge", {"invoice": "J1", "amount": 5},
                                                idempotency_key="k-J1")
                texts.append(str(result.content[0].text))  # type: ignore[union-attr]
        return tools, texts

    tools, texts = asyncio.run(go())
    assert tools == {"idempotency": {}}
    assert texts == ["Charged 5 for J1: receipt R-J1-1."] * 2
    assert charged("J1") == 1


# -- `mrtr serve`: declared with its default store, not with --store none ----------------------

def serve(tmp_path: Path, *options: str) -> tuple[Any, str, dict[str, str]]:
    port = free_port()
    env = {**cli_env(), "MRTR_TEST_EFFECTS": str(tmp_path / "effects.log")}
    process = spawn_cli("serve", "tests.transports.idempotent_app:app", "--port", str(port),
                        *options, env=env)
    return process, f"http://127.0.0.1:{port}/mcp", env


@pytest.mark.slow
def test_25_mrtr_serve_declares_keys_with_its_default_store_across_two_workers(
    tmp_path: Path,
) -> None:
    process, url, env = serve(tmp_path, "--workers", "2")
    body = call("charge", {"invoice": "K1", "amount": 5}, idempotencyKey="k-K1")
    try:
        wait_ready(url, process)
        discover = httpx.post(url, timeout=10, **post_args(request("server/discover")))
        assert discover.json()["result"]["capabilities"]["tools"] == {"idempotency": {}}
        with ThreadPoolExecutor(8) as pool:  # duplicates reach both workers at once
            replies = list(pool.map(lambda i: httpx.post(url, timeout=10, **post_args(
                {**body, "id": i})), range(16)))
    finally:
        stop(process)
    done = [r for r in replies if r.status_code == 200]
    assert done and all(r.status_code in (200, 409) for r in replies)
    assert {json.dumps(r.json()["result"]) for r in done} == {json.dumps(done[0].json()["result"])}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MRTR_TEST_EFFECTS", env["MRTR_TEST_EFFECTS"])
        assert idempotent_app.effects("K1") == 1


@pytest.mark.slow
def test_25_mrtr_serve_with_store_none_declares_nothing_and_keys_change_nothing(
    tmp_path: Path,
) -> None:
    process, url, env = serve(tmp_path, "--store", "none")
    body = call("charge", {"invoice": "L1", "amount": 5}, idempotencyKey="k-L1")
    try:
        wait_ready(url, process)
        discover = httpx.post(url, timeout=10, **post_args(request("server/discover")))
        assert discover.json()["result"]["capabilities"]["tools"] == {}
        for _ in range(2):
            assert httpx.post(url, timeout=10, **post_args(body)).status_code == 200
    finally:
        stop(process)
    assert os.path.exists(env["MRTR_TEST_EFFECTS"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MRTR_TEST_EFFECTS", env["MRTR_TEST_EFFECTS"])
        assert idempotent_app.effects("L1") == 2  # as declared: no store, no deduplication
