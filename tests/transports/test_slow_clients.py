"""400 slow clients against a real `mrtr serve` (#26): each is closed at its deadline, others are
served meanwhile, the server's file descriptors come back, and beyond the limit it answers 503.

Raw sockets dribble a request one byte a second; httpx, in a thread of its own, measures a
normal request meanwhile. The deadlines are small (2 s), so the module takes about 30 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

import httpx
import msgspec
import pytest

from tests.transports.conftest import (
    call,
    free_port,
    post_args,
    request,
    spawn_cli,
    stop,
    wait_ready,
)
from tests.transports.dribble import HOST, Hangup, dribble, head, open_files, raise_open_files

pytestmark = pytest.mark.slow

CLIENTS = 400
DEADLINE = 2.0  # --header-timeout and --body-timeout of the server under test
SLACK = 2.0  # seconds a shared, busy machine may add to a deadline
FAST = 0.100  # seconds: a normal request's answer while the slow clients wait (median)
ATTEMPTS = 3  # latency on a shared machine is noisy: a slow measurement is taken again
DISCOVER = msgspec.json.encode(request("server/discover"))


class Served:
    """A running `mrtr serve` process on `port`."""

    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://{HOST}:{port}/mcp"

    def files(self) -> int:
        return open_files(self.process.pid)

    def files_settle(self, at_most: int, within: float = 5.0) -> int:
        """The descriptor count once it is at most `at_most` (else after `within` seconds)."""
        deadline = time.monotonic() + within
        while (count := self.files()) > at_most and time.monotonic() < deadline:
            time.sleep(0.05)
        return count

    def steady_files(self) -> int:
        """The descriptor count once it holds still for 0.25 s (a closed client's socket)."""
        count, still, deadline = self.files(), 0, time.monotonic() + 3
        while still < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.files()
            count, still = now, still + 1 if now == count else 0
        return count

    def call_fast(self, client: httpx.Client | None = None) -> httpx.Response:
        poster = client or httpx
        return poster.post(self.url, timeout=10, **post_args(call("fast")))


@contextlib.contextmanager
def serve(*flags: str) -> Iterator[Served]:
    raise_open_files(4 * CLIENTS)  # this process holds the slow clients' sockets
    port = free_port()
    process = spawn_cli("serve", "tests.transports.apps:app", "--port", str(port),
                        "--store", "none", "--allow-unshared-store", "--ephemeral-key",
                        "--log-level", "warning", *flags,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        served = Served(process, port)
        wait_ready(served.url, process)
        yield served
    finally:
        stop(process)


@pytest.fixture(scope="module")
def bounded() -> Iterator[Served]:
    with serve("--header-timeout", str(DEADLINE), "--body-timeout", str(DEADLINE)) as served:
        yield served


class Meanwhile(threading.Thread):
    """Normal requests, one every 50 ms, and the server's descriptor count, until stopped."""

    def __init__(self, served: Served) -> None:
        super().__init__(daemon=True)
        self.served = served
        self.latencies: list[float] = []
        self.statuses: set[int] = set()
        self.peak_files = 0
        self.done = threading.Event()

    def run(self) -> None:
        with httpx.Client() as client:
            while not self.done.is_set():
                self.peak_files = max(self.peak_files, self.served.files())
                began = time.perf_counter()
                status = self.served.call_fast(client).status_code
                self.latencies.append(time.perf_counter() - began)
                self.statuses.add(status)
                self.done.wait(0.05)

    def __enter__(self) -> Meanwhile:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join(15)


def storm(client: Callable[[], Awaitable[Hangup]]) -> list[Hangup]:
    async def all_of_them() -> list[Hangup]:
        return list(await asyncio.gather(*(client() for _ in range(CLIENTS))))

    return asyncio.run(all_of_them())


def survive(served: Served, client: Callable[[], Awaitable[Hangup]], status: int) -> None:
    """CLIENTS slow clients are each closed at the deadline while others are served fast."""
    baseline = served.steady_files()
    for attempt in range(1, ATTEMPTS + 1):
        with Meanwhile(served) as meanwhile:
            seen = storm(client)
        closed = sorted(hangup.after for hangup in seen if hangup.after is not None)
        assert len(closed) == CLIENTS, f"{CLIENTS - len(closed)} slow clients were never closed"
        assert 0.75 * DEADLINE <= closed[0] and closed[-1] <= DEADLINE + SLACK, (
            closed[0], closed[-1])
        assert {hangup.status for hangup in seen} == {status}
        assert meanwhile.statuses == {200} and len(meanwhile.latencies) >= 10
        # the slow clients did hold a descriptor each, and gave them all back
        assert meanwhile.peak_files >= baseline + 0.9 * CLIENTS, (baseline, meanwhile.peak_files)
        assert served.files_settle(baseline + 2) <= baseline + 2
        median = statistics.median(meanwhile.latencies)
        print(f"closed after {closed[0]:.2f}..{closed[-1]:.2f} s; {len(meanwhile.latencies)} "
              f"requests meanwhile: median {median * 1000:.1f} ms, max "
              f"{max(meanwhile.latencies) * 1000:.1f} ms; descriptors {baseline} -> "
              f"{meanwhile.peak_files} -> {served.files()}")
        if median <= FAST:
            return
        print(f"attempt {attempt}: median {median * 1000:.0f} ms over "
              f"{len(meanwhile.latencies)} requests")
    raise AssertionError(f"normal requests took {median * 1000:.0f} ms (median) meanwhile")


def test_26_400_clients_dribbling_headers_are_closed_at_the_deadline(bounded: Served) -> None:
    # One byte a second of a request line and headers: complete after about 200 s.
    survive(bounded, lambda: dribble(bounded.port, drip=head(), give_up=DEADLINE + 10), 408)


def test_26_400_clients_dribbling_bodies_are_closed_at_the_deadline(bounded: Served) -> None:
    def client() -> Awaitable[Hangup]:
        return dribble(bounded.port, head(length=len(DISCOVER)), DISCOVER,
                       give_up=DEADLINE + 10)

    survive(bounded, client, 408)


def test_26_beyond_max_connections_requests_get_503_then_service_resumes() -> None:
    limit = 20
    with serve("--max-connections", str(limit), "--header-timeout", "60") as served:
        baseline = served.steady_files()

        def hold(count: int) -> list[socket.socket]:
            held = [socket.create_connection((HOST, served.port)) for _ in range(count)]
            deadline = time.monotonic() + 5
            while served.files() < baseline + count and time.monotonic() < deadline:
                time.sleep(0.02)  # until the server has accepted them all
            return held

        def release(held: list[socket.socket]) -> None:
            for sock in held:
                sock.close()
            served.files_settle(baseline)

        held = hold(limit - 2)  # with the request's own connection: one under the limit
        assert served.call_fast().status_code == 200
        release(held)
        held = hold(limit - 1)  # the request's own connection is the limit-th
        refused = served.call_fast()
        assert (refused.status_code, refused.text) == (503, "Service Unavailable")
        held += hold(10)
        assert served.call_fast().status_code == 503
        release(held)
        assert served.call_fast().status_code == 200


def test_26_every_worker_closes_slow_clients_at_the_deadline() -> None:
    # The limits travel to each worker process inside uvicorn's pickled Config.
    with serve("--workers", "2", "--header-timeout", "1", "--body-timeout", "1") as served:
        async def clients() -> list[Hangup]:
            silent = [dribble(served.port, give_up=10) for _ in range(10)]
            heads = [dribble(served.port, drip=head(), every=0.2, give_up=10)
                     for _ in range(10)]
            bodies = [dribble(served.port, head(length=len(DISCOVER)), DISCOVER, every=0.2,
                              give_up=10) for _ in range(10)]
            return list(await asyncio.gather(*silent, *heads, *bodies))

        seen = asyncio.run(clients())
        assert all(h.after is not None and 0.9 <= h.after <= 1 + SLACK for h in seen), seen
        assert [h.status for h in seen] == [None] * 10 + [408] * 20
        assert served.call_fast().status_code == 200
