"""A 2025 client's answer lands on another worker or replica and still counts (#13).

The tools/call POST's SSE stream (and the request waiting for the answer) lives in one worker;
the client POSTs its answer on another connection, which the kernel may hand to the other
worker. The default SQLite store carries it across.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from mrtr.server import generate_key
from tests.client.test_interop_mcp1 import mcp1_python  # noqa: F401 - a fixture
from tests.stores.conftest import REDIS_SERVER, start_redis, stop_redis
from tests.transports.conftest import cli_env, free_port, spawn_cli, stop
from tests.transports.conftest import wait_ready as wait_serving

VERSION = "2025-11-25"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": VERSION}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": VERSION, "capabilities": {"elicitation": {"form": {}}},
    "clientInfo": {"name": "legacy-test", "version": "1"}}}


def connections_on_two_workers(url: str, session: str) -> tuple[httpx.Client, httpx.Client]:
    """Two keep-alive connections (one client each) that two different workers serve."""
    found: dict[str, httpx.Client] = {}
    for n in range(60):
        client = httpx.Client(timeout=30, limits=httpx.Limits(max_connections=1))
        ping = {"jsonrpc": "2.0", "id": 100 + n, "method": "ping"}
        reply = client.post(url, json=ping, headers={**HEADERS, "mcp-session-id": session})
        assert reply.status_code == 200, reply.text
        pid = reply.headers["mcp-debug-worker"]
        if pid in found:
            client.close()
            continue
        found[pid] = client
        if len(found) == 2:
            first, second = found.values()
            return first, second
    raise AssertionError("the kernel never spread 60 connections over two workers")


def pay_with_the_answer_elsewhere(
    streaming: httpx.Client, stream_url: str, answering: httpx.Client, answer_url: str,
    session: str,
) -> tuple[str, str, httpx.Response, dict[str, Any]]:
    """tools/call `pay` streamed from one process, its answer POSTed to another:
    (stream worker, invoice, the answer's response, the final reply)."""
    invoice = f"L-{session[-6:]}"
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "pay", "arguments": {"invoice": invoice, "amount": 7}}}
    with streaming.stream("POST", stream_url, json=call,
                          headers={**HEADERS, "mcp-session-id": session}) as stream:
        worker = stream.headers.get("mcp-debug-worker", "")
        seen = events(stream.iter_lines())
        ask = next(seen)
        assert ask["method"] == "elicitation/create", ask
        answer = {"jsonrpc": "2.0", "id": ask["id"],
                  "result": {"action": "accept", "content": {"confirm": True}}}
        posted = answering.post(answer_url, json=answer,
                                headers={**HEADERS, "mcp-session-id": session})
        final: dict[str, Any] = next(seen)
    return worker, invoice, posted, final


def events(lines: Any) -> Any:
    for line in lines:
        if line.startswith("data:"):
            yield msgspec.json.decode(line[5:].strip())


@pytest.mark.slow
def test_13_a_legacy_answer_posted_to_the_other_worker_reaches_the_stream(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = spawn_cli("serve", "examples.payments:app", "--port", str(port), "--workers",
                            "2", "--debug-worker-header", "--ask-timeout", "10",
                            "--log-level", "warning", stdout=subprocess.DEVNULL, stderr=log,
                            env=cli_env())
    clients: tuple[httpx.Client, ...] = ()
    try:
        wait_serving(url, process)
        opened = httpx.post(url, json=INITIALIZE, headers=HEADERS, timeout=10)
        session = opened.headers["mcp-session-id"]
        clients = connections_on_two_workers(url, session)
        streaming, answering = clients
        worker, invoice, posted, final = pay_with_the_answer_elsewhere(
            streaming, url, answering, url, session)
        assert posted.status_code == 202
        assert posted.headers["mcp-debug-worker"] != worker  # it did land elsewhere
        assert final["id"] == 1 and final["result"]["content"][0]["text"] == (
            f"Paid 7 EUR for invoice {invoice}: receipt R-{invoice}-1."), final
    except AssertionError:
        print(log_path.read_text()[-3000:])
        raise
    finally:
        for client in clients:
            client.close()
        stop(process)


@pytest.mark.slow
@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_13_a_legacy_answer_posted_to_another_replica_reaches_it_through_redis(
    tmp_path: Path,
) -> None:
    redis, redis_url = start_redis(tmp_path)
    env = {**cli_env(), "MRTR_STATE_KEYS": generate_key(), "MRTR_STORE": redis_url}
    ports = [free_port(), free_port()]
    logs = [tmp_path / f"replica{n}.log" for n in range(2)]
    processes = []
    for port, log_path in zip(ports, logs, strict=True):
        with log_path.open("wb") as log:
            processes.append(spawn_cli("serve", "examples.payments:app", "--port", str(port),
                                       "--ask-timeout", "10", "--log-level", "warning",
                                       stdout=subprocess.DEVNULL, stderr=log, env=env))
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    try:
        for url, process in zip(urls, processes, strict=True):
            wait_serving(url, process)
        opened = httpx.post(urls[0], json=INITIALIZE, headers=HEADERS, timeout=10)
        session = opened.headers["mcp-session-id"]
        with httpx.Client(timeout=30) as one, httpx.Client(timeout=30) as two:
            _, invoice, posted, final = pay_with_the_answer_elsewhere(
                one, urls[0], two, urls[1], session)
        assert posted.status_code == 202
        assert final["result"]["content"][0]["text"] == (
            f"Paid 7 EUR for invoice {invoice}: receipt R-{invoice}-1."), final
    except AssertionError:
        for log_path in logs:
            print(log_path.name, log_path.read_text()[-3000:])
        raise
    finally:
        for process in processes:
            stop(process)
        stop_redis(redis)


@pytest.mark.slow
def test_13_the_official_mcp1_client_pays_across_two_workers(
    tmp_path: Path, mcp1_python: Path,  # noqa: F811 - the fixture
) -> None:
    # The mcp 1.x client POSTs answers on whichever pooled connection is free, so some land
    # on the worker that does not hold the stream: each would wait out --ask-timeout without
    # the answer channel and come back as "The client did not answer".
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = spawn_cli("serve", "examples.payments:app", "--port", str(port), "--workers",
                            "2", "--ask-timeout", "5", "--log-level", "warning",
                            stdout=subprocess.DEVNULL, stderr=log, env=cli_env())
    try:
        wait_serving(url, process)
        client = Path(__file__).with_name("mcp1_pay_client.py")
        ran = subprocess.run([str(mcp1_python), str(client), url, "8"], capture_output=True,
                             text=True, timeout=120, check=False)
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert ran.stdout.splitlines() == [
            f"Paid 3 EUR for invoice M-{n}: receipt R-M-{n}-1." for n in range(8)]
    except AssertionError:
        print(log_path.read_text()[-3000:])
        raise
    finally:
        stop(process)
