"""Deferred: what a Settler returns when it waits for the answers in place (#28)."""

# Design: an Ask's `__await__` is a plain generator that settles at once (values, or Suspend);
# a settler that can wait (a task whose runner is alive: server/tasks/_live.py) returns a
# Deferred instead, and the Ask yields from `wait()`: the handler suspends at its await like
# at any other, and goes on with the values (or Suspend, when the settler stops waiting).
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Deferred"]


class Deferred:
    """The values of asks, later: `await deferred.wait()` (may raise Suspend)."""

    __slots__ = ("wait",)

    def __init__(self, wait: Callable[[], Awaitable[list[Any]]]) -> None:
        self.wait = wait
