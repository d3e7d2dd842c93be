"""A loop turn's put_if_absent calls written together (#31): what each caller gets is what its
call alone would get. On a fake writer; on real servers in test_postgres.py and test_redis.py."""

from __future__ import annotations

import asyncio

import pytest

from mrtr.stores import StoreUnavailable
from mrtr.stores._put_batches import Found, PutBatches


class Writer:
    """A fake statement: answers each row with its value reversed, or fails when told."""

    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[list[bytes]] = []  # the batches written, by their keys
        self.ones: list[bytes] = []  # the keys written alone
        self.fail = fail

    async def __call__(self, keys: list[bytes], values: list[bytes],
                       expires: list[float]) -> list[Found]:
        self.calls.append(list(keys))
        await asyncio.sleep(0)
        if self.fail is not None:
            raise StoreUnavailable(self.fail)
        return [value[::-1] for value in values]

    async def one(self, key: bytes, value: bytes, expires: float) -> Found:
        self.ones.append(key)
        await asyncio.sleep(0)
        if self.fail is not None:
            raise StoreUnavailable(self.fail)
        return value[::-1]


def batches_of(writer: Writer) -> PutBatches:
    return PutBatches(writer, writer.one, "test put_if_absent")


def test_each_caller_gets_its_own_rows_answer_and_a_turn_is_one_write_in_key_order() -> None:
    writer = Writer()
    batches = batches_of(writer)

    async def body() -> list[Found]:
        keys = [f"k{i:03d}".encode() for i in (5, 1, 9, 3, 7)]
        return await asyncio.gather(*(batches.put(k, b"v" + k, 1.0) for k in keys))

    assert asyncio.run(body()) == [b"500kv", b"100kv", b"900kv", b"300kv", b"700kv"]
    assert writer.calls == [[b"k001", b"k003", b"k005", b"k007", b"k009"]]


def test_a_call_alone_in_its_turn_writes_its_row_itself_and_gets_its_errors() -> None:
    writer = Writer()
    batches = batches_of(writer)

    async def body() -> tuple[Found, int]:
        tasks = len(asyncio.all_tasks())
        putting = asyncio.ensure_future(batches.put(b"k", b"v1", 1.0))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the turn ended: no task writes for a lone call
        started = len(asyncio.all_tasks()) - tasks - 1
        return await putting, started

    assert asyncio.run(body()) == (b"1v", 0)
    assert writer.calls == [] and writer.ones == [b"k"]
    failing = batches_of(Writer(fail="test put_if_absent: refused"))
    with pytest.raises(StoreUnavailable) as refused:
        asyncio.run(failing.put(b"k", b"v", 1.0))
    assert refused.value.reason == "test put_if_absent: refused"


def test_a_large_turn_is_split_into_statements_of_at_most_max_rows() -> None:
    writer = Writer()
    batches = batches_of(writer)
    count = 2 * PutBatches.MAX_ROWS + 3

    async def body() -> list[Found]:
        return await asyncio.gather(*(batches.put(b"%05d" % i, b"%d" % i, 1.0)
                                      for i in range(count)))

    found = asyncio.run(body())
    assert found == [(b"%d" % i)[::-1] for i in range(count)]
    assert [len(call) for call in writer.calls] == [PutBatches.MAX_ROWS, PutBatches.MAX_ROWS, 3]


def test_a_failed_write_fails_every_caller_of_its_batch_with_the_reason() -> None:
    batches = batches_of(Writer(fail="test put_if_absent: no answer in 5s"))

    async def body() -> list[BaseException | Found]:
        return await asyncio.gather(*(batches.put(b"k%d" % i, b"v", 1.0) for i in range(3)),
                                    return_exceptions=True)

    errors = asyncio.run(body())
    assert all(isinstance(e, StoreUnavailable) and "no answer" in e.reason for e in errors)
    assert len({id(e) for e in errors}) == 3  # one exception each: no shared traceback


def test_a_row_that_failed_alone_fails_its_own_caller_only() -> None:
    async def write(keys: list[bytes], values: list[bytes],
                    expires: list[float]) -> list[Found | StoreUnavailable]:
        return [StoreUnavailable("test put_if_absent: WRONGTYPE") if k == b"bad" else None
                for k in keys]

    batches = PutBatches(write, Writer().one, "test put_if_absent")

    async def body() -> list[BaseException | Found]:
        return await asyncio.gather(batches.put(b"ok", b"v", 1.0), batches.put(b"bad", b"v", 1.0),
                                    return_exceptions=True)

    ok, bad = asyncio.run(body())
    assert ok is None and isinstance(bad, StoreUnavailable) and "WRONGTYPE" in bad.reason


def test_a_caller_cancelled_before_its_turn_ends_is_left_out_of_the_batch() -> None:
    writer = Writer()
    batches = batches_of(writer)

    async def body() -> Found:
        gone = asyncio.ensure_future(batches.put(b"gone", b"v", 1.0))
        kept = asyncio.ensure_future(batches.put(b"kept", b"v", 1.0))
        await asyncio.sleep(0)  # both wait for the batch, not yet flushed
        gone.cancel()
        return await kept

    assert asyncio.run(body()) == b"v"
    assert writer.calls == [] and writer.ones == [b"kept"]  # alone once the other left


def test_calls_left_by_a_loop_that_stopped_do_not_strand_the_next_loops_calls() -> None:
    writer = Writer()
    batches = batches_of(writer)
    first = asyncio.new_event_loop()
    first.create_task(batches.put(b"old", b"v", 1.0))
    first.call_soon(first.stop)
    first.run_forever()  # the put ran and waits; the loop stopped before its turn's flush
    first.close()

    async def body() -> Found:
        return await asyncio.wait_for(batches.put(b"new", b"w", 1.0), 5)

    assert asyncio.run(body()) == b"w"
    assert writer.calls == [] and writer.ones == [b"new"]
