"""Reading a request body, bounded in size and, only when it must wait, in time."""

# Design: a body timeout guards against a client that sends its body slowly or never. Almost
# every request's body is already read when the app is called (uvicorn's receive() returns it
# without waiting), and `asyncio.timeout` costs ~5 µs per request (a Timeout, a timer handle,
# the context manager). So the first receive() is driven by hand: when it finishes without
# waiting and holds the whole body, no timer is started at all. When it does wait, the started
# coroutine is resumed inside `asyncio.timeout` (`_resume` forwards what the task sends or
# throws into it, as `await` would), and the rest of the body is read under the same timer.
from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from mrtr.server._failures import body_timed_out, too_large

__all__ = ["receive_body"]

Receive = Callable[[], Awaitable[Any]]


async def receive_body(receive: Receive, max_body: int, timeout: float | None) -> bytes | None:
    """The body (None when the client disconnected first); raises a Refusal when it is over
    `max_body` bytes or (`timeout`, seconds) the client does not send it in time."""
    if timeout is None:
        return await _read(receive, max_body, None)
    first = receive()
    pending: Awaitable[Any] = first
    if isinstance(first, types.CoroutineType):
        try:
            waits_on = first.send(None)
        except StopIteration as done:  # answered without waiting: the usual case
            message = done.value
            if message["type"] == "http.request" and not message.get("more_body", False):
                body: bytes = message.get("body", b"")
                if len(body) > max_body:
                    raise too_large(max_body) from None
                return body
            pending = _ready(message)
        else:
            pending = _resume(first, waits_on)
    try:
        async with asyncio.timeout(timeout):
            return await _read(receive, max_body, pending)
    except TimeoutError:
        raise body_timed_out(timeout) from None


async def _read(receive: Receive, max_body: int, first: Awaitable[Any] | None) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await (first if first is not None else receive())
        first = None
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > max_body:
            raise too_large(max_body)
        if not message.get("more_body", False):
            # The usual case is one message holding the whole body: no join, no copy.
            return b"".join((*chunks, chunk)) if chunks else chunk
        chunks.append(chunk)


async def _ready(value: Any) -> Any:
    return value


@types.coroutine
def _resume(coro: types.CoroutineType[Any, Any, Any], waits_on: Any) -> Generator[Any, Any, Any]:
    """Go on with `coro`, which yielded `waits_on` to its task the first time it was sent to."""
    while True:
        try:
            sent = yield waits_on
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # the task's cancellation (the timeout), thrown in
            try:
                waits_on = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                waits_on = coro.send(sent)
            except StopIteration as done:
                return done.value
