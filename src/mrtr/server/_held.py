"""The round being redeemed in this task, and the timer-started renewal of a held claim."""

# Design: Ledger.redeem (_ledger.py) puts a HeldRound in CURRENT_ROUND while the round's handler
# runs; the first effect (Ledger.hold_round: `ctx.once`, a task started) claims the round through
# it, and Redeemed stops a run whose round another redemption recorded first.
from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any

__all__ = ["CURRENT_ROUND", "HeldRound", "Keeper", "Redeemed"]


class Redeemed(BaseException):
    """hold_round() found the round recorded by another redemption: this run stops before it
    acts. A BaseException, so the handler's `except Exception` does not turn it into an error."""


class Keeper:
    """Starts (from a timer) and stops the task renewing one claim."""

    __slots__ = ("keep", "task")

    def __init__(self, keep: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.keep = keep
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.keep())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()


class HeldRound:
    """The round being redeemed in this task (CURRENT_ROUND), claimed by its first effect."""

    __slots__ = ("deadline", "held", "holder", "keeper", "key", "ledger", "redeemed", "timer")

    def __init__(self, ledger: object, key: str, deadline: float) -> None:
        self.ledger = ledger  # whose round it is (a nested Dispatcher's rounds are its own)
        self.key = key
        self.deadline = deadline
        self.held = False
        self.holder = ""  # the holder name of its claim, once held
        self.redeemed: bytes | None = None  # the recorded outcome hold_round() met
        self.keeper: Keeper | None = None
        self.timer: asyncio.TimerHandle | None = None

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.keeper is not None:
            self.keeper.stop()


CURRENT_ROUND: ContextVar[HeldRound | None] = ContextVar("mrtr_round", default=None)
