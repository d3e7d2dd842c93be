"""2025 sessions against real `mrtr serve` processes (#26): ends everywhere, floods, strays.

Acceptance 2: after DELETE, 0 of 50 requests with the id succeed on any of `--workers 2`, on
either of two replicas sharing Redis, after a restart, and after 20,000 other sessions were
opened and ended. Acceptance 3: a flood of 20,000 `initialize` from one client leaves another
client's session and its call in flight alone, and is itself capped with a clear error.
Acceptance 4 (unknown ids): 500 × 1 MiB responses to server request ids never issued leave the
server's RSS within 50 MiB (memory store) and another user's round works.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest

from mrtr.server import generate_key
from tests.stores.conftest import REDIS_SERVER, start_redis, stop_redis
from tests.transports.conftest import call, cli_env, free_port, post_args, spawn_cli, stop
from tests.transports.conftest import wait_ready as wait_serving

pytestmark = pytest.mark.slow

VERSION = "2025-11-25"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INITIALIZE = msgspec.json.encode({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": VERSION, "capabilities": {"elicitation": {"form": {}}},
    "clientInfo": {"name": "flood-test", "version": "1"}}})
PING = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "ping"})
GREET = msgspec.json.encode({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                             "params": {"name": "greet", "arguments": {}}})
ANSWERS = [{"name": "Ada"}, {"color": "teal"}]


class Serve:
    """One `mrtr serve tests.transports.apps:app` process; `start()` again after `stop()`."""

    def __init__(self, tmp_path: Path, name: str, *args: str, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.args = args
        self.env = env
        self.log = tmp_path / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Serve:
        with self.log.open("ab") as log:
            self.process = spawn_cli("serve", "tests.transports.apps:app", "--port",
                                     str(self.port), "--log-level", "warning", *self.args,
                                     stdout=subprocess.DEVNULL, stderr=log, env=self.env)
        wait_serving(self.url, self.process)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)

    def tail(self) -> str:
        return f"--- {self.log.name}\n{self.log.read_text()[-3000:]}"


def session_headers(session: str) -> dict[str, str]:
    return {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": VERSION}


def open_session(client: httpx.Client, url: str) -> str:
    reply = client.post(url, content=INITIALIZE, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    return reply.headers["mcp-session-id"]


def fresh_pings(url: str, session: str, count: int) -> tuple[Counter[int], set[str]]:
    """`count` pings, each on a new connection (so the kernel spreads them over the workers):
    their statuses, and the workers that answered."""
    statuses: Counter[int] = Counter()
    workers: set[str] = set()
    for _ in range(count):
        reply = httpx.post(url, content=PING, timeout=10,
                           headers={**session_headers(session), "connection": "close"})
        statuses[reply.status_code] += 1
        workers.add(reply.headers.get("mcp-debug-worker", ""))
    return statuses, workers


class KeepAlive:
    """One keep-alive HTTP/1.1 connection per URL from `address` (stdlib http.client: the
    floods below send 20,000 requests or more, and httpx's own CPU per request was most of
    their time on a 2-core machine, where client and server share the cores)."""

    def __init__(self, address: str = "127.0.0.1") -> None:
        self.address = address
        self.connections: dict[str, http.client.HTTPConnection] = {}

    def send(self, method: str, url: str, body: bytes | None,
             headers: dict[str, str]) -> tuple[int, http.client.HTTPResponse, bytes]:
        """(status, response, body) of one request; the body is read whole."""
        connection = self.connections.get(url)
        if connection is None:
            parts = urlsplit(url)
            connection = http.client.HTTPConnection(
                parts.hostname or "127.0.0.1", parts.port, timeout=30,
                source_address=(self.address, 0))
            self.connections[url] = connection
        connection.request(method, urlsplit(url).path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response, response.read()

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()


def others_open_and_end(urls: list[str], total: int, clients: int = 4) -> Counter[int]:
    """`total` sessions opened and ended by `clients` other clients (127.0.0.10 and up), each
    on one keep-alive connection per URL, spread over `urls`: the DELETE statuses."""
    def one(n: int) -> Counter[int]:
        statuses: Counter[int] = Counter()
        client = KeepAlive(f"127.0.0.{10 + n}")
        try:
            for i in range(total // clients):
                url = urls[(n + i) % len(urls)]
                status, reply, text = client.send("POST", url, INITIALIZE, HEADERS)
                assert status == 200, text
                session = reply.getheader("mcp-session-id")
                assert session, reply.getheaders()
                status, _, _ = client.send("DELETE", url, None, session_headers(session))
                statuses[status] += 1
        finally:
            client.close()
        return statuses

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return sum(pool.map(one, range(clients)), Counter())


def test_26_a_deleted_session_is_gone_on_both_workers_after_a_restart_and_20000_more(
    tmp_path: Path,
) -> None:
    env = {**cli_env(), "MRTR_STATE_KEYS": generate_key()}
    server = Serve(tmp_path, "workers", "--workers", "2", "--debug-worker-header",
                   "--store", f"sqlite:///{tmp_path / 'state.db'}", env=env).start()
    try:
        with httpx.Client(timeout=10) as client:
            session = open_session(client, server.url)
        alive, workers = fresh_pings(server.url, session, 40)  # live on both workers now
        assert alive == {200: 40} and len(workers) == 2
        deleted = httpx.delete(server.url, headers=session_headers(session), timeout=10)
        assert deleted.status_code == 200
        gone, workers = fresh_pings(server.url, session, 50)
        assert gone == {404: 50} and len(workers) == 2  # 0 of 50, on either worker
        server.stop()
        server.start()  # the same keys and store: the id still unseals, and stays ended
        assert fresh_pings(server.url, session, 50)[0] == {404: 50}
        ended = others_open_and_end([server.url], 20_000)
        assert ended == {200: 20_000}
        assert fresh_pings(server.url, session, 50)[0] == {404: 50}
    except AssertionError:
        print(server.tail())
        raise
    finally:
        server.stop()


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_26_a_deleted_session_is_gone_on_both_replicas_sharing_redis(tmp_path: Path) -> None:
    redis, redis_url = start_redis(tmp_path)
    env = {**cli_env(), "MRTR_STATE_KEYS": generate_key(), "MRTR_STORE": redis_url}
    replicas = [Serve(tmp_path, f"replica{n}", env=env).start() for n in range(2)]
    urls = [replica.url for replica in replicas]
    try:
        with httpx.Client(timeout=10) as client:
            session = open_session(client, urls[0])
            assert client.post(urls[1], content=PING,
                               headers=session_headers(session)).status_code == 200
            assert client.delete(urls[1], headers=session_headers(session)).status_code == 200

            def fifty() -> list[int]:
                return [client.post(urls[n % 2], content=PING,
                                    headers=session_headers(session)).status_code
                        for n in range(50)]

            assert fifty() == [404] * 50
            replicas[0].stop()
            replicas[0].start()
            assert fifty() == [404] * 50
            assert others_open_and_end(urls, 20_000) == {200: 20_000}
            assert fifty() == [404] * 50
    except AssertionError:
        for replica in replicas:
            print(replica.tail())
        raise
    finally:
        for replica in replicas:
            replica.stop()
        stop_redis(redis)


def events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data:"):
            yield msgspec.json.decode(line[5:].strip())


def flood(url: str, total: int, threads: int = 4) -> tuple[Counter[int], dict[str, Any]]:
    """`total` initialize from 127.0.0.1 on keep-alive connections: statuses, one refusal."""
    def one(_: int) -> tuple[Counter[int], dict[str, Any]]:
        statuses: Counter[int] = Counter()
        refusal: dict[str, Any] = {}
        client = KeepAlive()
        try:
            for _ in range(total // threads):
                status, reply, body = client.send("POST", url, INITIALIZE, HEADERS)
                statuses[status] += 1
                if status == 429 and not refusal:
                    refusal = {"retry-after": reply.getheader("retry-after"),
                               **json.loads(body)}
        finally:
            client.close()
        return statuses, refusal

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(one, range(threads)))
    return sum((r[0] for r in results), Counter()), next(r[1] for r in results if r[1])


def test_26_a_flood_of_20000_initialize_leaves_another_clients_call_in_flight(
    tmp_path: Path,
) -> None:
    server = Serve(tmp_path, "flood", "--store", "memory:", env=cli_env()).start()
    victim = httpx.Client(timeout=60, transport=httpx.HTTPTransport(local_address="127.0.0.2"))
    try:
        session = open_session(victim, server.url)
        other = open_session(victim, server.url)  # an idle session of the victim's, too
        answers = iter(ANSWERS)
        seen: list[dict[str, Any]] = []
        started = time.monotonic()
        with httpx.Client(timeout=60, transport=httpx.HTTPTransport(
                local_address="127.0.0.2")) as answering, victim.stream(
                "POST", server.url, content=GREET, headers=session_headers(session)) as stream:
            for event in events(stream.iter_lines()):
                seen.append(event)
                if event.get("method") != "elicitation/create":
                    break
                if len(seen) == 1:  # the call waits on a pushed ask: now the flood
                    statuses, refusal = flood(server.url, 20_000)
                answer = {"jsonrpc": "2.0", "id": event["id"],
                          "result": {"action": "accept", "content": next(answers)}}
                posted = answering.post(server.url, content=json.dumps(answer),
                                        headers=session_headers(session))
                assert posted.status_code == 202
        elapsed = time.monotonic() - started
        assert seen[-1]["result"]["content"][0]["text"] == "Hello Ada, you like teal", seen
        assert statuses == {200: 100, 429: 19_900}, statuses
        assert refusal["error"]["data"] == {"limit": 100, "scope": "client"}
        assert "already holds 100 sessions" in refusal["error"]["message"]
        assert 1 <= int(refusal["retry-after"]) <= 600
        for kept in (session, other):
            assert victim.post(server.url, content=PING,
                               headers=session_headers(kept)).status_code == 200
        print(f"20,000 initialize while a call waited: {elapsed:.1f} s")
    except AssertionError:
        print(server.tail())
        raise
    finally:
        victim.close()
        server.stop()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_26_500_responses_of_1_mib_to_unknown_ids_leave_memory_and_other_users_alone(
    tmp_path: Path,
) -> None:
    # Before #26 each went to the store for --ask-timeout (600 s): 150 × 1 MiB took the RSS
    # from 45 to 242 MiB with --store memory:.
    server = Serve(tmp_path, "strays", "--store", "memory:", env=cli_env()).start()
    assert server.process is not None
    try:
        with httpx.Client(timeout=30) as client:
            session = open_session(client, server.url)
            blob = "x" * (1024 * 1024)
            forged = ["1.9999999999.AAAAAAAAAAAAAAAAAAAAAA", 4242, "s-1"]
            cold = rss_kib(server.process.pid)
            # Any 1 MiB bodies leave about 40 MiB with the allocator (glibc keeps freed heap):
            # 50 pings carrying a 1 MiB parameter, never stored either, take it there first.
            for n in range(50):
                ping = {"jsonrpc": "2.0", "id": 10_000 + n, "method": "ping",
                        "params": {"blob": blob}}
                assert client.post(server.url, content=json.dumps(ping),
                                   headers=session_headers(session)).status_code == 200
            before = rss_kib(server.process.pid)
            for n in range(500):
                request_id = forged[n % 3] if n % 2 else f"{n}.{int(time.time()) + 600}.x{n}"
                stray = {"jsonrpc": "2.0", "id": request_id, "result": {"blob": blob}}
                posted = client.post(server.url, content=json.dumps(stray),
                                     headers=session_headers(session))
                assert posted.status_code == 202
            grown = (rss_kib(server.process.pid) - before) / 1024
            # Another user's rounds: a 2026-07-28 flow of three rounds, and a 2025 session call.
            params: dict[str, Any] = {}
            result: dict[str, Any] = {}
            for answer in [None, *ANSWERS]:
                if answer is not None:
                    key = next(iter(result["inputRequests"]))
                    params = {"inputResponses": {key: {"action": "accept", "content": answer}},
                              "requestState": result["requestState"]}
                reply = client.post(server.url, **post_args(call("greet", {}, **params)))
                assert reply.status_code == 200, reply.text
                result = reply.json()["result"]
            assert result["content"][0]["text"] == "Hello Ada, you like teal"
            mine = open_session(client, server.url)
            listed = client.post(server.url, content=msgspec.json.encode(
                {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
                headers=session_headers(mine))
            assert listed.status_code == 200 and "greet" in listed.text
        print(f"RSS {cold / 1024:.0f} MiB at start, {before / 1024:.0f} MiB after 50 pings of "
              f"1 MiB; then grew by {grown:.1f} MiB over 500 × 1 MiB responses to unknown ids")
        assert grown < 50
        assert server.log.read_text().count("which this session never issued") == 1
    except AssertionError:
        print(server.tail())
        raise
    finally:
        server.stop()
