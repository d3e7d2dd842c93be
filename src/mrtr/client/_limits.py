"""`ClientLimits`: how much one call may make the client fetch from a server or ask its handlers."""

# Design: a server is not trusted to end what it starts. A `nextCursor` on every page, or ten
# rounds of many sampling requests each (model spend), must end in a clear ClientError, not in a
# loop. The caps are generous for honest servers; the checks are cheap and run before any
# request or handler they would bound.
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ClientLimits"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ClientLimits:
    """Per-call caps; a breach raises before anything more is sent or asked.

    `max_pages` and `max_items` bound one walk over a `*/list` method (ListTooLong).
    `max_round_inputs` bounds the input requests of one `input_required` round and
    `max_flow_inputs` those of a whole MRTR flow (TooManyInputs, before any handler runs).
    A task is polled every `pollIntervalMs`, clamped to `min_poll_interval`..`max_poll_interval`
    (seconds), or every `poll_interval` when the server names none; the call's `timeout`
    bounds the whole wait. A tools/call with an idempotency key, to a server that declared
    `tools.idempotency`, is resent up to `max_busy_retries` times while the server says the key
    is in progress or the outcome pending (waiting its `retryAfter`, at most
    `max_poll_interval`) and up to
    `max_transport_retries` times after a transport failure.
    """

    max_pages: int = 100
    max_items: int = 10_000
    max_round_inputs: int = 16
    max_flow_inputs: int = 64
    poll_interval: float = 1.0
    min_poll_interval: float = 0.1
    max_poll_interval: float = 30.0
    max_busy_retries: int = 60
    max_transport_retries: int = 2
