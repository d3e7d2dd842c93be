"""The fault suite's harness: `mrtr serve` replicas, flows driven over HTTP, the provider's books.

A flow is `pay` from tests/faults/app.py: round 1 asks for a confirmation, the final round
charges inside `ctx.once` and stops once at the flow's point. The client re-sends the final
round (a new id each time) until it gets a result, honouring Retry-After; every answer before
that must be retryable (a cut connection, its own timeout, HTTP 503), or the flow is lost.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mrtr.server import generate_key
from tests.faults.app import POINTS
from tests.transports.conftest import call, cli_env, free_port, post_args, spawn_cli, stop
from tests.transports.conftest import wait_ready as wait_serving

CONFIRM = {"confirm": {"action": "accept", "content": {"confirm": True}}}
LEASE = 6.0  # longer than any store outage injected, far shorter than the default 30 s


def fault_env(folder: Path, store: str, **extra: str) -> dict[str, str]:
    """What every replica of one test shares: keys, store, lease and the provider's folder."""
    return {**cli_env(), "MRTR_STATE_KEYS": generate_key(), "FAULTS_DIR": str(folder),
            "FAULTS_STORE": store, "FAULTS_LEASE": repr(LEASE), **extra}


class Replicas:
    """`mrtr serve tests.faults.app:dispatcher` processes on their own ports."""

    def __init__(self, folder: Path, env: dict[str, str], count: int) -> None:
        self.folder = folder
        self.env = env
        self.ports = [free_port() for _ in range(count)]
        self.processes = [self._start(index) for index in range(count)]
        try:
            for index, process in enumerate(self.processes):
                wait_serving(self.url(index), process)
        except BaseException:
            self.stop()
            raise

    def _start(self, index: int) -> subprocess.Popen[bytes]:
        with (self.folder / f"replica{index}.log").open("ab") as log:
            return spawn_cli("serve", "tests.faults.app:dispatcher", "--port",
                             str(self.ports[index]), "--log-level", "warning",
                             stdout=subprocess.DEVNULL, stderr=log, env=self.env)

    def url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.ports[index]}/mcp"

    def kill(self, index: int) -> None:
        os.kill(self.processes[index].pid, signal.SIGKILL)
        self.processes[index].wait(10)

    def restart(self, index: int) -> None:
        self.processes[index] = self._start(index)
        wait_serving(self.url(index), self.processes[index])

    def logs(self) -> str:
        return "\n".join(f"{log.name}: {log.read_text()[-2000:]}"
                         for log in sorted(self.folder.glob("replica*.log")))

    def stop(self) -> None:
        for process in self.processes:
            stop(process)


@dataclass
class Flow:
    invoice: str
    point: str
    answers: list[str] = field(default_factory=list)  # each final-round answer not a result
    result: str | None = None
    replays: list[str] = field(default_factory=list)  # the final round sent again afterwards
    took: list[float] = field(default_factory=list)  # seconds each final-round attempt took
    attempts: int = 0  # times fn reached the provider
    charges: int = 0  # what the provider charged (per idempotency key)


class Lost(Exception):  # noqa: N818 - the flow's fate
    """The final round got an answer that is not retryable: the flow is lost."""


class FinalRound:
    """The final round of one flow, sent again (a new id each time) until it gets a result."""

    def __init__(self, flow: Flow, client: httpx.AsyncClient, urls: Callable[[int], str],
                 arguments: dict[str, Any], state: str) -> None:
        self.flow = flow
        self.client = client
        self.urls = urls
        self.arguments = arguments
        self.state = state
        self.sent = 0

    async def attempt(self, timeout: float) -> str | None:
        """The result text, or None after noting a retryable answer; raises Lost."""
        n, self.sent = self.sent, self.sent + 1
        body = call("pay", self.arguments, id=n + 1, requestState=self.state,
                    inputResponses=CONFIRM)
        started = time.monotonic()
        try:
            reply = await self.client.post(self.urls(n), timeout=timeout, **post_args(body))
        except httpx.TimeoutException:
            self.flow.answers.append("timeout")  # the client gives up: the server sees it go
            return None
        except httpx.TransportError:
            self.flow.answers.append("cut")  # refused or reset: the replica died
            return None
        self.flow.took.append(time.monotonic() - started)
        answer = reply.json()
        if reply.status_code == 200 and "result" in answer:
            return str(answer["result"]["content"][0]["text"])
        error = answer.get("error", {})
        if reply.status_code == 503 and "retry-after" in reply.headers:
            kind = (error.get("data") or {}).get("type", "store unavailable")
            self.flow.answers.append(f"503 {kind}")
            await asyncio.sleep(min(float(reply.headers["retry-after"]), 2.0))
            return None
        self.flow.answers.append(f"LOST: HTTP {reply.status_code} {error}")
        raise Lost(f"{self.flow.invoice}: not retryable: {reply.status_code} {answer}")

    async def until_result(self, deadline: float) -> str | None:
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            text = await self.attempt(20.0)
            if text is not None:
                return text
        return None


async def drive(flow: Flow, urls: Callable[[int], str], *, hold: float,
                first_timeout: float = 30.0, give_up: float = 60.0,
                duplicates: int = 1) -> Flow:
    """Run one flow to its result, then replay its final round once more.

    `urls(n)` is where the n-th final-round attempt goes. With `duplicates`, the first final
    round goes out that many times at once, and each result among them counts as a replay.
    """
    arguments = {"invoice": flow.invoice, "point": flow.point, "hold": hold}
    deadline = time.monotonic() + give_up
    async with httpx.AsyncClient(timeout=20) as client:
        first = await client.post(urls(0), **post_args(call("pay", arguments, id=0)))
        final = FinalRound(flow, client, urls, arguments, first.json()["result"]["requestState"])
        try:
            texts = await asyncio.gather(*(final.attempt(first_timeout)
                                           for _ in range(duplicates)))
            results = [text for text in texts if text is not None]
            if not results:
                text = await final.until_result(deadline)
                if text is None:
                    return flow
                results.append(text)
            flow.result, *flow.replays = results
            again = await final.until_result(deadline)  # the recorded outcome, after the fault
            if again is not None:
                flow.replays.append(again)
        except Lost:
            pass
    return flow


async def marks_reached(folder: Path, flows: Sequence[Flow], timeout: float = 20.0) -> None:
    """Wait until every flow stopped at its point (its mark file exists)."""
    deadline = time.monotonic() + timeout
    marks = folder / "marks"
    while not all((marks / f"{f.invoice}.{f.point}").exists() for f in flows):
        if time.monotonic() > deadline:
            missing = [f.invoice for f in flows if not (marks / f"{f.invoice}.{f.point}").exists()]
            raise AssertionError(f"flows never reached their point: {missing}")
        await asyncio.sleep(0.02)


def books(folder: Path, flows: Sequence[Flow]) -> None:
    """Fill in each flow's attempts and charges from the provider's database."""
    db = sqlite3.connect(folder / "effects.db", timeout=30)
    try:
        for flow in flows:
            flow.attempts = db.execute("SELECT count(*) FROM attempts WHERE invoice = ?",
                                       (flow.invoice,)).fetchone()[0]
            flow.charges = db.execute("SELECT count(*) FROM charges WHERE invoice = ?",
                                      (flow.invoice,)).fetchone()[0]
    finally:
        db.close()


def flows_for(fault: str) -> list[Flow]:
    return [Flow(f"{fault}-{point}", point) for point in POINTS]


def summary(fault: str, setup: str, flows: Sequence[Flow]) -> str:
    """One line: what happened to the flows of one fault."""
    completed = sum(f.result is not None for f in flows)
    answers: dict[str, int] = {}
    for flow in flows:
        for answer in flow.answers:
            answers[answer] = answers.get(answer, 0) + 1
    shown = ", ".join(f"{n} {a}" for a, n in sorted(answers.items())) or "none"
    per_point = " ".join(f"{f.point}={f.charges}/{f.attempts}" for f in flows)
    return (f"{fault} [{setup}]: {len(flows)} flows, {completed} completed, "
            f"{len(flows) - completed} lost; per point, keyed charges/fn runs (an unkeyed "
            f"effect): {per_point}; max charges per flow {max(f.charges for f in flows)}, "
            f"max fn runs {max(f.attempts for f in flows)}; retryable answers: {shown}")


def check(flows: Sequence[Flow], *, reruns: Sequence[str] = ()) -> None:
    """Effects per flow <= 1, exactly 1 for completed flows, none lost, replays identical.

    `reruns` are the points where fn may run twice (a holder killed after charging): the
    provider's idempotency key keeps those at one charge.
    """
    for flow in flows:
        assert flow.charges <= 1, f"{flow.invoice} charged {flow.charges} times"
        assert flow.result is not None, f"{flow.invoice} lost: {flow.answers}"
        assert flow.charges == 1, f"{flow.invoice} completed with {flow.charges} charges"
        assert flow.result.endswith(f"receipt R-{flow.invoice}-1."), flow.result
        assert flow.replays and set(flow.replays) == {flow.result}, flow.replays
        allowed = 2 if flow.point in reruns else 1
        assert 1 <= flow.attempts <= allowed, f"{flow.invoice}: fn ran {flow.attempts} times"


class SQLiteLocker:
    """Another process, started ahead, that holds the SQLite file's write lock (BEGIN
    EXCLUSIVE) for `seconds` once told to: the lock starts within milliseconds of `lock()`."""

    SCRIPT = ("import sqlite3, sys, time\n"
              "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
              "sys.stdin.readline()\n"
              "db.execute('BEGIN EXCLUSIVE')\n"
              "print('locked', flush=True)\n"
              "time.sleep(float(sys.argv[2]))\n"
              "db.execute('ROLLBACK')\n")

    def __init__(self, path: Path, seconds: float) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", self.SCRIPT, str(path),
                                         repr(seconds)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)

    def lock(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == b"locked\n"

    def wait(self) -> None:
        self.process.communicate(timeout=30)


class DurableRedis:
    """redis-server with an fsync-always append-only file, on one port, killed and restarted."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        with (self.folder / "redis.log").open("ab") as log:
            process = subprocess.Popen(
                [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                 "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.folder)],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _pong(self.port):
                return process
            time.sleep(0.05)
        process.kill()
        raise RuntimeError(f"redis-server did not start: {(self.folder / 'redis.log').read_text()}")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def restart(self) -> None:
        self.process = self._start()

    def stop(self) -> None:
        stop(self.process)


def _pong(port: int) -> bool:
    """Whether a Redis on `port` answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False
