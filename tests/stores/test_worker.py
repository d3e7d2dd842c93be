"""The stores' private worker thread: order, errors, batching, cancellation, stop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from mrtr.stores._worker import Worker


def test_jobs_run_in_order_on_one_thread_and_errors_reach_the_caller() -> None:
    worker = Worker("test-worker")
    ran: list[tuple[int, str]] = []

    def job(n: int) -> int:
        ran.append((n, threading.current_thread().name))
        if n == 3:
            raise ValueError("three")
        return n * 10

    async def main() -> list[object]:
        futures = [worker.submit(lambda n=n: job(n)) for n in range(6)]  # type: ignore[misc]
        return await asyncio.gather(*futures, return_exceptions=True)

    results = asyncio.run(main())
    worker.stop()
    assert [n for n, _ in ran] == list(range(6))
    assert {name for _, name in ran} == {"test-worker"}
    assert results[:3] == [0, 10, 20] and results[4:] == [40, 50]
    assert isinstance(results[3], ValueError)


def test_a_caller_that_timed_out_is_skipped_and_later_calls_still_answer() -> None:
    worker = Worker("test-worker")
    gate = threading.Event()

    async def main() -> int:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await worker.submit(lambda: gate.wait(5))
        gate.set()
        return await worker.submit(lambda: 7)

    assert asyncio.run(main()) == 7
    worker.stop()


def test_stop_ends_the_thread_and_a_later_call_starts_a_new_one() -> None:
    worker = Worker("test-worker-stop")

    async def name() -> str:
        return await worker.submit(lambda: threading.current_thread().name)

    assert asyncio.run(name()) == "test-worker-stop"
    worker.stop()
    assert asyncio.run(name()) == "test-worker-stop"
    worker.stop()
    for _ in range(100):
        if not any(t.name == "test-worker-stop" for t in threading.enumerate()):
            break
        threading.Event().wait(0.01)
    assert not any(t.name == "test-worker-stop" for t in threading.enumerate())
