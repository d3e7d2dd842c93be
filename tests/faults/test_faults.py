"""Fault injection at every point of the once/round protocol: effects per flow stay <= 1 (#25).

For each fault, five flows run at once, one per point of tests/faults/app.py (before claim,
after claim, inside fn, after fn before its outcome is written, after the record); each stops
at its point, the fault is injected while they are stopped, and each client retries its final
round until it gets a result. The provider outside the server counts fn's runs and charges.
The numbers go to the terminal summary (tests/faults/conftest.py).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.harness import (
    DurableRedis,
    Flow,
    Replicas,
    SQLiteLocker,
    books,
    check,
    drive,
    fault_env,
    flows_for,
    marks_reached,
    summary,
)
from tests.stores.conftest import POSTGRES_BIN, REDIS_SERVER, Postgres

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sqlite_replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """Three `mrtr serve` replicas sharing one SQLite store file (and one key ring)."""
    folder = tmp_path_factory.mktemp("faults-sqlite")
    replicas = Replicas(folder, fault_env(folder, f"sqlite://{folder / 'store.db'}"), 3)
    yield replicas
    replicas.stop()


def run_flows(flows: list[Flow], replicas: Replicas, **options: object) -> list[Flow]:
    async def main() -> list[Flow]:
        return await asyncio.gather(*(drive(flow, **options) for flow in flows))  # type: ignore[arg-type]

    try:
        return asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        books(replicas.folder, flows)


def test_25_client_disconnect_at_every_point_then_a_retry_elsewhere(
    sqlite_replicas: Replicas, report: list[str],
) -> None:
    # The client gives up after 0.5 s while the server is stopped at the point for 1.5 s, and
    # retries on the next replica: the first run's fn goes on in the background.
    replicas = sqlite_replicas
    flows = run_flows(flows_for("disconnect"), replicas, hold=1.5, first_timeout=0.5,
                      urls=lambda n: replicas.url(n % 3))
    report.append(summary("client disconnect", "3 replicas, SQLite, timeout 0.5 s", flows))
    try:
        check(flows)
        assert [f.answers[0] for f in flows] == ["timeout"] * 5  # every first try was cut off
    except AssertionError:
        print(replicas.logs())
        raise


def test_25_concurrent_duplicates_across_three_processes(
    sqlite_replicas: Replicas, report: list[str],
) -> None:
    replicas = sqlite_replicas
    flows = run_flows(flows_for("duplicates"), replicas, hold=1.0, duplicates=3,
                      urls=lambda n: replicas.url(n % 3))
    report.append(summary("3 concurrent duplicates", "3 replicas, SQLite", flows))
    try:
        check(flows)
        assert all(len(f.replays) == 3 for f in flows)  # both duplicates and the replay agree
    except AssertionError:
        print(replicas.logs())
        raise


def test_25_sqlite_locked_by_another_process_while_flows_run(
    sqlite_replicas: Replicas, report: list[str],
) -> None:
    # Another process holds the write lock (BEGIN EXCLUSIVE) for 4.5 s, longer than the store's
    # 1 s timeout (the 12 s against the default 5 s, scaled down); every flow meets it
    # when it leaves its point.
    replicas = sqlite_replicas
    flows = flows_for("sqlite-locked")
    locker = SQLiteLocker(replicas.folder / "store.db", 4.5)

    async def main() -> list[Flow]:
        running = [asyncio.ensure_future(drive(flow, hold=2.5,
                                               urls=lambda n: replicas.url(n % 3)))
                   for flow in flows]
        await marks_reached(replicas.folder, flows)
        await asyncio.to_thread(locker.lock)
        return await asyncio.gather(*running)

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        locker.wait()
        books(replicas.folder, flows)
    report.append(summary("store outage: SQLite locked 4.5 s", "3 replicas, SQLite", flows))
    try:
        check(flows)
        pending = {f.point: "503 outcome_pending" in f.answers for f in flows}
        # fn ran (or the round finished) and the write failed: the retryable answer, never a
        # success a replay would contradict. Before the claim: the store's own 503.
        assert pending == {"before-claim": False, "after-claim": True, "inside-fn": True,
                           "after-fn": True, "after-record": True}, [f.answers for f in flows]
        assert "503 store unavailable" in flows[0].answers
    except AssertionError:
        print(replicas.logs())
        raise


def test_25_sigterm_after_a_disconnect_records_what_still_runs_before_exiting(
    sqlite_replicas: Replicas, report: list[str],
) -> None:
    # Every client gives up on replica 0 after 0.5 s, leaving fn running there in the
    # background; replica 0 is then stopped (SIGTERM). It finishes that work and records it
    # before it exits (Dispatcher.drain in the ASGI lifespan), so no retry runs fn again.
    replicas = sqlite_replicas
    flows = flows_for("sigterm")

    async def main() -> list[Flow]:
        running = [asyncio.ensure_future(drive(
            flow, hold=2.0, first_timeout=0.5, urls=lambda n: replicas.url(0 if n == 0 else 1)))
            for flow in flows]
        await marks_reached(replicas.folder, flows)
        await asyncio.sleep(0.6)  # every first try timed out: the handlers were cancelled
        replicas.processes[0].terminate()
        exited = await asyncio.to_thread(replicas.processes[0].wait, 30)
        await asyncio.to_thread(replicas.restart, 0)
        assert exited in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
        return await asyncio.gather(*running)

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        books(replicas.folder, flows)
    report.append(summary("SIGTERM after a disconnect", "3 replicas, SQLite", flows))
    try:
        check(flows)  # fn ran once everywhere: inside-fn and after-fn were finished, not cut
        assert [f.answers[0] for f in flows] == ["timeout"] * 5
    except AssertionError:
        print(replicas.logs())
        raise


def test_25_sigkill_of_the_serving_process_at_every_point(
    sqlite_replicas: Replicas, report: list[str],
) -> None:
    sigkill_at_every_point(sqlite_replicas, report, "3 replicas, SQLite")


@pytest.fixture(scope="module")
def postgres_replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """Three `mrtr serve` replicas sharing one PostgreSQL of their own (and one key ring)."""
    if POSTGRES_BIN is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    folder = tmp_path_factory.mktemp("faults-postgres")
    server = Postgres()
    try:
        replicas = Replicas(folder, fault_env(folder, server.url), 3)
        yield replicas
        replicas.stop()
    finally:
        server.stop()


@pytest.mark.slow
def test_28_sigkill_of_the_serving_process_at_every_point_on_postgresql(
    postgres_replicas: Replicas, report: list[str],
) -> None:
    sigkill_at_every_point(postgres_replicas, report, "3 replicas, PostgreSQL")


def sigkill_at_every_point(replicas: Replicas, report: list[str], setup: str) -> None:
    # Every flow stops on replica 0, which is SIGKILLed; the retries go to replicas 1 and 2,
    # and wait for the dead holder's claims to lapse (the lease, 6 s here).
    flows = flows_for("sigkill")

    async def main() -> list[Flow]:
        running = [asyncio.ensure_future(drive(
            flow, hold=3.0, urls=lambda n: replicas.url(0 if n == 0 else 1 + n % 2)))
            for flow in flows]
        await marks_reached(replicas.folder, flows)
        replicas.kill(0)
        await asyncio.to_thread(replicas.restart, 0)
        return await asyncio.gather(*running)

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        books(replicas.folder, flows)
    report.append(summary("SIGKILL of the serving process", setup, flows))
    try:
        check(flows, reruns=("inside-fn", "after-fn"))
        assert [f.answers[0] for f in flows] == ["cut"] * 5
        # Killed after charging, before the outcome was written: the retry ran fn again, and
        # the provider's idempotency key (ctx.idempotency_key) kept it at one charge.
        assert {f.point: f.attempts for f in flows} == {
            "before-claim": 1, "after-claim": 1, "inside-fn": 2, "after-fn": 2,
            "after-record": 1}
    except AssertionError:
        print(replicas.logs())
        raise


def through_outage(tmp_path: Path, replicas: Replicas, flows: list[Flow],
                   stop: Callable[[], None], start: Callable[[], None]) -> None:
    """Drive `flows` over two replicas; once every flow holds at its point, `stop` the store,
    wait 3 s, `start` it again (in a thread: it waits until the store serves), then gather."""
    async def main() -> list[Flow]:
        running = [asyncio.ensure_future(drive(flow, hold=2.0,
                                               urls=lambda n: replicas.url(n % 2)))
                   for flow in flows]
        await marks_reached(tmp_path, flows)
        stop()
        await asyncio.sleep(3.0)
        await asyncio.to_thread(start)
        return await asyncio.gather(*running)

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        books(tmp_path, flows)


def assert_pending_after_claim(flows: list[Flow]) -> None:
    """A retry of every flow that had claimed before the outage met its claim held (503
    outcome_pending); the flow that had not claimed yet never did."""
    pending = {f.point: "503 outcome_pending" in f.answers for f in flows}
    assert pending == {"before-claim": False, "after-claim": True, "inside-fn": True,
                       "after-fn": True, "after-record": True}, [f.answers for f in flows]


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_25_redis_killed_while_flows_run(tmp_path: Path, report: list[str]) -> None:
    # A durable Redis (append-only file, fsync always) SIGKILLed for 3 s, then restarted.
    # Before the claim, the flow also meets a claim that lands with its answer lost (the store
    # timing out as the restarted Redis writes it; FAULTS_LOSE): fn never ran under it, so the
    # replica drops it by its holder once Redis answers, and a retry runs fn at once instead of
    # meeting it held (outcome pending) until the 6 s lease.
    assert REDIS_SERVER is not None
    redis = DurableRedis(REDIS_SERVER, tmp_path)
    replicas: Replicas | None = None
    flows = flows_for("redis-killed")
    try:
        replicas = Replicas(tmp_path, fault_env(tmp_path, redis.url,
                                                FAULTS_LOSE="before-claim"), 2)
        through_outage(tmp_path, replicas, flows, redis.kill, redis.restart)
        report.append(summary("store outage: Redis killed 3 s", "2 replicas, Redis (AOF)",
                              flows))
        check(flows)
        assert_pending_after_claim(flows)
        assert (tmp_path / "marks" / f"{flows[0].invoice}.lost").exists()  # it was injected
        # No retry of it blocked on a claim until the poll bound (5 s) or the lease (6 s); the
        # first attempt holds 2 s at its point.
        assert max(flows[0].took[1:]) < 4.0, flows[0].took
    except AssertionError:
        if replicas is not None:
            print(replicas.logs())
        raise
    finally:
        if replicas is not None:
            replicas.stop()
        redis.stop()


@pytest.mark.slow
@pytest.mark.skipif(POSTGRES_BIN is None, reason="PostgreSQL is not installed")
def test_28_postgresql_crashed_while_flows_run(tmp_path: Path, report: list[str]) -> None:
    # PostgreSQL stopped immediately (SIGQUIT: no checkpoint, every connection cut) for 3 s,
    # then started again on its data directory (crash recovery replays the WAL).
    server = Postgres()
    replicas: Replicas | None = None
    flows = flows_for("postgres-crashed")
    try:
        replicas = Replicas(tmp_path, fault_env(tmp_path, server.url), 2)
        through_outage(tmp_path, replicas, flows, server.crash, server.restart)
        report.append(summary("store outage: PostgreSQL crashed 3 s", "2 replicas, PostgreSQL",
                              flows))
        check(flows)
        assert_pending_after_claim(flows)
    except AssertionError:
        if replicas is not None:
            print(replicas.logs())
        raise
    finally:
        if replicas is not None:
            replicas.stop()
        server.stop()
