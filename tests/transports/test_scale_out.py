"""Three `mrtr serve` replicas behind a real nginx round-robin, one Redis, one replica killed (#13).

Every flow is `pay`: round 1 asks for a confirmation, round 2 charges inside `ctx.once` and
returns a receipt whose number counts the invoice's charges. The client re-sends cut rounds,
then every final round once more, then asks the store how often each invoice was charged.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from mrtr.server import generate_key
from tests.stores.conftest import POSTGRES_BIN, REDIS_SERVER, Postgres, start_redis, stop_redis
from tests.transports.conftest import call, cli_env, free_port, post_args, spawn_cli, stop
from tests.transports.conftest import wait_ready as wait_serving
from tests.transports.test_nginx import NGINX, start_nginx

FLOWS = 1000
CONCURRENCY = 24
KILL_AFTER = 300  # completed flows before one replica is SIGKILLed
CONFIRM = {"confirm": {"action": "accept", "content": {"confirm": True}}}

# Beyond the reverse-proxy test's config: long rounds, and a cut connection retried elsewhere.
RETRIES = """\
            proxy_read_timeout 120s;
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries 3;"""


class Replicas:
    """`mrtr serve` processes on fixed ports, sharing keys and a store through the environment."""

    def __init__(self, tmp: Path, env: dict[str, str], count: int) -> None:
        self.tmp = tmp
        self.env = env
        self.ports = [free_port() for _ in range(count)]
        self.processes: list[subprocess.Popen[bytes]] = []
        for index in range(count):
            self.processes.append(self.start(index))

    def start(self, index: int) -> subprocess.Popen[bytes]:
        with (self.tmp / f"replica{index}.log").open("ab") as log:
            return spawn_cli("serve", "examples.payments:app", "--port", str(self.ports[index]),
                             "--log-level", "warning", stdout=subprocess.DEVNULL, stderr=log,
                             env=self.env)

    def url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.ports[index]}/mcp"

    def kill_and_restart(self, index: int) -> None:
        os.kill(self.processes[index].pid, signal.SIGKILL)
        self.processes[index].wait(10)
        self.processes[index] = self.start(index)

    def stop(self) -> None:
        for process in self.processes:
            stop(process)


class Run:
    def __init__(self, url: str) -> None:
        self.url = url
        self.done = 0
        self.retries = 0
        self.cut_final: set[int] = set()  # flows whose final round had to be re-sent
        self.receipts: dict[int, str] = {}
        self.mismatches: list[int] = []
        self.ledger: dict[int, int] = {}  # invoice number -> charges the store counted

    async def post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[bytes, bool]:
        """POST until a JSON-RPC result comes back (a cut round is re-sent as it was).

        Returns the reply and whether the round had to be re-sent.
        """
        for attempt in range(60):
            try:
                response = await client.post(self.url, **post_args(body))
                if response.status_code == 200 and b'"result"' in response.content:
                    return response.content, attempt > 0
            except httpx.TransportError:
                pass
            self.retries += 1
            await asyncio.sleep(0.2)
        raise AssertionError(f"round never answered: {body}")

    async def flow(self, client: httpx.AsyncClient, n: int) -> None:
        args = {"invoice": f"F{n}", "amount": n % 90 + 10}
        first = msgspec.json.decode((await self.post(client, call("pay", args, id=n)))[0])
        final = call("pay", args, id=n, requestState=first["result"]["requestState"],
                     inputResponses=CONFIRM)
        reply, cut = await self.post(client, final)
        if cut:
            self.cut_final.add(n)
        again, _ = await self.post(client, final)
        if again != reply:
            self.mismatches.append(n)
        self.receipts[n] = msgspec.json.decode(reply)["result"]["content"][0]["text"]
        self.done += 1


async def drive(run: Run, kill: Callable[[], None]) -> None:
    queue = list(range(FLOWS))
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        async def worker() -> None:
            while queue:
                await run.flow(client, queue.pop())

        async def killer() -> None:
            while run.done < KILL_AFTER:
                await asyncio.sleep(0.05)
            await asyncio.to_thread(kill)

        await asyncio.gather(killer(), *(worker() for _ in range(CONCURRENCY)))

        async def count(n: int) -> None:
            reply, _ = await run.post(client, call("charges", {"invoice": f"F{n}"}, id=n))
            run.ledger[n] = int(msgspec.json.decode(reply)["result"]["content"][0]["text"])

        for start in range(0, FLOWS, CONCURRENCY):
            await asyncio.gather(*(count(n) for n in range(start, min(FLOWS, start + CONCURRENCY))))


def progress_streams_through(url: str) -> None:
    """A final round that asks for progress comes back as SSE through nginx, events in order."""
    args = {"invoice": "SSE-1", "amount": 12}
    with httpx.Client(timeout=30) as client:
        first = client.post(url, **post_args(call("pay", args, id="s1"))).json()
        final = call("pay", args, id="s2", requestState=first["result"]["requestState"],
                     inputResponses=CONFIRM, extra_meta={"progressToken": "sse"})
        reply = client.post(url, **post_args(final))
    assert reply.headers["content-type"].startswith("text/event-stream")
    events = [line for line in reply.text.splitlines() if line.startswith("data: ")]
    assert [("notifications/progress" in e, '"result"' in e) for e in events] == [
        (True, False), (True, False), (False, True)], reply.text
    assert "receipt R-SSE-1-1" in events[-1]


def check(run: Run, elapsed: float) -> None:
    executions = {n: int(text.rsplit("-", 1)[1].rstrip(".")) for n, text in run.receipts.items()}
    doubled = sorted(n for n, count in executions.items() if count > 1)
    print(f"{FLOWS} flows in {elapsed:.1f}s, {run.retries} re-sent rounds, "
          f"{len(run.cut_final)} cut final rounds, charges run twice: {doubled}")
    assert len(run.receipts) == FLOWS  # 0 flows lost
    assert run.mismatches == []  # every re-sent final round: the identical reply
    # Exactly once, even for a flow the kill cut inside ctx.once's fn: the charge passes
    # ctx.idempotency_key to the store's add_once, so a re-run after the lease charges nothing.
    assert doubled == [] and set(executions.values()) == {1}
    assert run.ledger == dict.fromkeys(range(FLOWS), 1)  # the provider's own count per invoice


def scale_out(tmp_path: Path, store_url: str) -> None:
    """3 replicas sharing `store_url` behind nginx, FLOWS paying flows, one replica SIGKILLed
    and restarted mid-run: 0 lost, 0 double."""
    env = {**cli_env(), "MRTR_STATE_KEYS": generate_key(), "MRTR_STORE": store_url}
    replicas = Replicas(tmp_path, env, 3)
    proxy: subprocess.Popen[bytes] | None = None
    try:
        for index, process in enumerate(replicas.processes):
            wait_serving(replicas.url(index), process)
        port = free_port()
        proxy = start_nginx(tmp_path, port, replicas.ports, extra=RETRIES)
        run = Run(f"http://127.0.0.1:{port}/mcp")
        started = time.monotonic()
        asyncio.run(asyncio.wait_for(drive(run, lambda: replicas.kill_and_restart(1)), 420))
        check(run, time.monotonic() - started)
        progress_streams_through(run.url)
    except AssertionError:
        for log in sorted(tmp_path.glob("replica*.log")):
            print(log.name, log.read_text()[-3000:])
        raise
    finally:
        if proxy is not None:
            stop(proxy)
        replicas.stop()


@pytest.mark.slow
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx)")
@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_13_scale_out_behind_nginx_with_a_replica_killed(tmp_path: Path) -> None:
    redis, redis_url = start_redis(tmp_path)
    try:
        scale_out(tmp_path, redis_url)
    finally:
        stop_redis(redis)


@pytest.mark.slow
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx)")
@pytest.mark.skipif(POSTGRES_BIN is None, reason="PostgreSQL is not installed")
def test_28_scale_out_on_postgresql_behind_nginx_with_a_replica_killed(tmp_path: Path) -> None:
    server = Postgres()
    try:
        scale_out(tmp_path, server.url)
    finally:
        server.stop()


@pytest.mark.slow
def test_13_workers_with_the_default_sqlite_store_and_a_worker_killed(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = spawn_cli("serve", "examples.payments:app", "--port", str(port), "--workers",
                            "3", "--debug-worker-header", "--log-level", "warning",
                            stdout=subprocess.DEVNULL, stderr=log, env=cli_env())

    def kill_a_worker() -> None:  # the supervisor starts a new one in its place
        pid = httpx.post(url, timeout=10, **post_args(call("charges", {"invoice": "x"})))
        os.kill(int(pid.headers["mcp-debug-worker"]), signal.SIGKILL)

    try:
        wait_serving(url, process)
        run = Run(url)
        started = time.monotonic()
        asyncio.run(asyncio.wait_for(drive(run, kill_a_worker), 420))
        check(run, time.monotonic() - started)
    except AssertionError:
        print(log_path.read_text()[-3000:])
        raise
    finally:
        stop(process)


async def inside_a_charge(client: httpx.AsyncClient, url: str, pid: int) -> None:
    """Wait (at most ~20 s: the flows keep both workers charging) until worker `pid` is
    inside a charge of tests/transports/slow_payments.py."""
    for _ in range(400):
        busy = await client.post(url, **post_args(call("inside", {"pid": pid})))
        if busy.json()["result"]["content"][0]["text"] != "0":
            return
        await asyncio.sleep(0.05)


@pytest.mark.slow
def test_13_a_worker_killed_inside_the_charge_never_charges_twice(tmp_path: Path) -> None:
    # Every charge sleeps 0.2 s inside ctx.once's fn after charging; the SIGKILL waits until
    # the worker is inside one (its `inside` count), so it lands inside fn for those flows.
    # Their retries meet the claim (outcome pending) until the 30 s lease lapses, run fn again
    # (attempts 2) with the same idempotency key, and charge nothing more.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = spawn_cli("serve", "tests.transports.slow_payments:app", "--port", str(port),
                            "--workers", "2", "--debug-worker-header", "--log-level", "warning",
                            stdout=subprocess.DEVNULL, stderr=log, env=cli_env())
    flows = 120

    async def drive_slow(run: Run) -> dict[int, int]:
        queue = list(range(flows))
        async with httpx.AsyncClient(timeout=120) as client:
            async def worker() -> None:
                while queue:
                    await run.flow(client, queue.pop())

            async def killer() -> None:
                while run.done < 30:
                    await asyncio.sleep(0.05)
                reply = await client.post(url, **post_args(call("charges", {"invoice": "x"})))
                pid = int(reply.headers["mcp-debug-worker"])
                await inside_a_charge(client, url, pid)
                os.kill(pid, signal.SIGKILL)

            await asyncio.gather(killer(), *(worker() for _ in range(CONCURRENCY)))
            tried: dict[int, int] = {}
            for n in range(flows):
                for tool, into in (("charges", run.ledger), ("attempts", tried)):
                    reply, _ = await run.post(client, call(tool, {"invoice": f"F{n}"}, id=n))
                    into[n] = int(msgspec.json.decode(reply)["result"]["content"][0]["text"])
            return tried

    try:
        wait_serving(url, process)
        run = Run(url)
        tried = asyncio.run(asyncio.wait_for(drive_slow(run), 300))
        rerun = sorted(n for n, count in tried.items() if count > 1)
        print(f"{flows} flows, {len(run.cut_final)} cut final rounds, fn re-run for {rerun}")
        assert len(run.receipts) == flows and run.mismatches == []
        assert rerun, "no worker died inside the charge: the test proved nothing"
        assert run.ledger == dict.fromkeys(range(flows), 1)  # 0 double charges
        assert {text.rsplit("-", 1)[1] for text in run.receipts.values()} == {"1."}
    except AssertionError:
        print(log_path.read_text()[-3000:])
        raise
    finally:
        stop(process)
