"""`bounded`: await some work within the Client deadline, with an error that names it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["bounded"]

ResultT = TypeVar("ResultT")


async def bounded(work: Awaitable[ResultT], timeout: float | None) -> ResultT:
    """Await `work` within `timeout` seconds (None: no deadline).

    Raises TimeoutError naming the deadline when it expires (a TimeoutError from `work`
    itself passes through unchanged).
    """
    if timeout is None:
        return await work
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await work
    except TimeoutError:
        if not scope.expired():
            raise
        raise TimeoutError(f"no result within the {timeout:g} s deadline "
                           "(Client timeout)") from None
