"""`ctx.once` gives the same type in every round (server/_once.py): the round that runs fn,
later rounds rebuilt from the journal, and replays rebuilt from the store."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, TypeVar

import msgspec
import pytest

from mrtr import Context, Server
from mrtr.errors import InvalidParams
from mrtr.stores import MemoryStore
from mrtr.testing import Clock, TestClient

T = TypeVar("T")


class Booking(msgspec.Struct):
    ref: str
    seats: int


@dataclasses.dataclass
class Receipt:
    number: str
    at: dt.date


class Seat(NamedTuple):
    row: str
    number: int


def two_rounds(fn: Callable[[], object], **once: Any) -> Server:
    """A tool that runs `ctx.once("book", fn)`, asks, and reports the type it got each round."""
    app = Server("once")

    @app.tool()
    async def book(ctx: Context) -> str:
        value = await ctx.once("book", fn, **once)
        seen = f"round {ctx.round}: {type(value).__name__} {value!r}"
        await ctx.confirm("Sure?", key="sure")
        return seen

    return app


def run(app: Server) -> str:
    """What the second (last) round saw."""
    with TestClient(app) as client:
        flow = client.call_tool("book", answers={"sure": True})
    assert flow.rounds == 2, flow.replies
    return flow.text


@pytest.mark.parametrize(("fn", "shown"), [
    (lambda: Booking("B-1", 2), "Booking Booking(ref='B-1', seats=2)"),
    (lambda: Receipt("R-1", dt.date(2026, 7, 28)),
     "Receipt Receipt(number='R-1', at=datetime.date(2026, 7, 28))"),
    (lambda: (1, "a"), "tuple (1, 'a')"),
    (lambda: Seat("C", 7), "Seat Seat(row='C', number=7)"),
    (lambda: {"x", "y"} and frozenset({"x"}), "frozenset frozenset({'x'})"),
    (lambda: dt.datetime(2026, 7, 28, 9, 30), "datetime datetime.datetime(2026, 7, 28, 9, 30)"),
    (lambda: {"ref": "B-1", "seats": [1, 2]}, "dict {'ref': 'B-1', 'seats': [1, 2]}"),
    (lambda: "RMA-1", "str 'RMA-1'"),
    (lambda: None, "NoneType None"),
], ids=["struct", "dataclass", "tuple", "namedtuple", "frozenset", "datetime", "json", "str",
        "none"])
def test_27_a_lambda_value_comes_back_as_its_own_type_in_a_later_round(
    fn: Callable[[], object], shown: str,
) -> None:
    # Before: round 2 got the journaled JSON (a dict, a list, a string) for anything not JSON.
    assert run(two_rounds(fn)) == f"round 2: {shown}"


def test_27_the_return_annotation_decides_the_type_in_every_round() -> None:
    async def book() -> Booking:
        return Booking("B-2", 1)

    assert run(two_rounds(book)) == "round 2: Booking Booking(ref='B-2', seats=1)"

    def tagged() -> list[Booking]:  # the annotation rebuilds what a lambda could not
        return [Booking("B-3", 1)]

    assert run(two_rounds(tagged)) == "round 2: list [Booking(ref='B-3', seats=1)]"


def test_27_returns_overrides_the_annotation_and_rebuilds_any_convertible_type() -> None:
    app = two_rounds(lambda: [Booking("B-4", 3)], returns=list[Booking])
    assert run(app) == "round 2: list [Booking(ref='B-4', seats=3)]"


def test_27_a_once_replayed_from_the_store_keeps_its_type() -> None:
    # Round 2 runs fn and then fails; its retry (the same state and answers) runs the handler
    # again, and `once` finds fn's value in the store, not in the journal of round 1.
    app = Server("once")
    runs: list[str] = []
    failed: list[bool] = []

    @app.tool()
    async def book(ctx: Context) -> str:
        await ctx.confirm("Go?", key="go")
        value = await ctx.once("book", lambda: runs.append("ran") or Booking("B-5", 2))
        if not failed:
            failed.append(True)
            raise InvalidParams("try again")  # a wire error: the round's claim is released
        return f"{type(value).__name__} {value!r}"

    clock = Clock()
    with TestClient(app, clock=clock, store=MemoryStore(clock=clock)) as client:
        flow = client.call_tool("book", answers={"go": True})
        assert flow.rounds == 2 and flow.replies[-1]["error"]["code"] == -32602
        again = client.send("tools/call", flow.requests[-1])
    assert runs == ["ran"] and failed  # fn ran once
    assert again["result"]["content"][0]["text"] == "Booking Booking(ref='B-5', seats=2)"


def test_27_a_value_no_round_can_rebuild_fails_in_the_round_that_ran_fn_naming_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A list of Structs from a lambda: round 2 would see a list of dicts. Refused in round 1.
    app = two_rounds(lambda: [Booking("B-6", 1)])
    with caplog.at_level(logging.ERROR, logger="mrtr.server"), TestClient(app) as client:
        flow = client.call_tool("book", answers={"sure": True})
    assert flow.rounds == 1 and flow.result["isError"] is True
    assert ("ctx.once('book'): fn returned a list[Booking], which later rounds cannot rebuild "
            "from JSON") in caplog.text
    assert "returns=list[Booking]" in caplog.text


def test_27_a_class_defined_inside_a_function_needs_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Local(msgspec.Struct):
        n: int

    with caplog.at_level(logging.ERROR, logger="mrtr.server"), TestClient(
        two_rounds(lambda: Local(1))
    ) as client:
        assert client.call_tool("book").result["isError"] is True
    assert "returns=Local" in caplog.text
    assert run(two_rounds(lambda: Local(1), returns=Local)) == "round 2: Local Local(n=1)"


def test_27_a_value_that_breaks_its_annotation_fails_in_round_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def count() -> int:
        return "seven"  # type: ignore[return-value]  # the bug

    with caplog.at_level(logging.ERROR, logger="mrtr.server"), TestClient(two_rounds(count)) as c:
        flow = c.call_tool("book", answers={"sure": True})
    assert flow.rounds == 1 and flow.result["isError"] is True
    assert "ctx.once('book'): fn's value does not convert to int" in caplog.text
    assert "pass the type fn returns as returns=" in caplog.text


def test_27_plain_json_that_looks_like_the_record_comes_back_unchanged() -> None:
    value = {"mrtr.once": "builtins:int", "value": 3}
    assert run(two_rounds(lambda: dict(value))) == f"round 2: dict {value!r}"


def test_27_annotations_that_say_nothing_leave_the_value_to_decide() -> None:
    from mrtr.server._once import declared_type

    def generic(fn: Callable[[], T]) -> T:
        return fn()

    def sync_awaitable() -> Awaitable[Booking]:
        raise NotImplementedError

    assert declared_type(functools.partial(generic, lambda: 1), None) is None
    assert declared_type(sync_awaitable, None) is Booking
    assert declared_type(functools.partial(two_rounds, lambda: 1), None) is Server
    assert declared_type(lambda: 1, returns=int) is int
    assert declared_type(print, None) is None  # a builtin: no annotation
