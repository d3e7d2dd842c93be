"""Keep-alive: one timer per idle spell of a connection, not one per response (`mrtr serve`).

uvicorn's httptools protocol arms a timer (`call_later`) each time a response completes and
cancels it when the next bytes arrive: a timer made and cancelled for every request, ≈ 3 µs of
uvloop's (timeit) on a `call1` request that costs the whole server ≈ 35 µs. `LazyKeepAlive`
keeps the connection's timer armed across requests and closes it at the same idle time.
"""

# Design: a response completing with no timer armed arms one for timeout_keep_alive; one
# completing while it is armed only notes when the connection went idle. Bytes arriving mark
# it busy (uvicorn calls _unset_keepalive_if_required for that, and at connection_lost). When
# the timer fires: a busy connection lets it lapse (the next response arms it), one idle for
# less than timeout_keep_alive gets it again for the rest, and one idle for that long is closed
# through timeout_keep_alive_handler, as uvicorn would. A closed connection cancels its timer.
# uvicorn's on_response_complete is repeated here (counting, resuming reads, the pipeline)
# because the timer is armed inside it; tests/transports/test_keepalive.py pins its behaviour.
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

__all__ = ["LazyKeepAlive"]

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    _Base = HttpToolsProtocol
else:
    _Base = object


class LazyKeepAlive(_Base):
    """Mixed in before uvicorn's HttpToolsProtocol (after the direct path, _direct.py)."""

    # Loop time the connection last went idle; None while a request is under way.
    idle_since: float | None = None

    def on_response_complete(self) -> None:
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # FlowControl.resume_reading's test, without the call
            self.flow.resume_reading()
        if self.pipeline:  # the next pipelined request starts: not idle
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self.idle_since = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self._keep_alive_due)

    def _unset_keepalive_if_required(self) -> None:
        self.idle_since = None  # bytes arrived: busy, whatever the armed timer finds later

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        timer: asyncio.TimerHandle | None = self.timeout_keep_alive_task
        if timer is not None:
            timer.cancel()
            self.timeout_keep_alive_task = None

    def _keep_alive_due(self) -> None:
        self.timeout_keep_alive_task = None
        since = self.idle_since
        if since is None:
            return  # a request is under way: its response arms the timer again
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self._keep_alive_due)
        else:
            self.timeout_keep_alive_handler()
