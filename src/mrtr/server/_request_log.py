"""RequestLog: the one `info` line each MCP request ends with (logger `mrtr.requests`)."""

# Design: operators asked for one line per request naming what was called and how it ended
# (docs/operations.md lists the fields). Its fields travel as record attributes, so the JSON
# formatter writes them as keys and any formatter can pick them; the message alone reads well
# in text. The cost stays off the hot path: `start` asks `isEnabledFor` once per request and,
# when the logger is off, nothing is timed, built or formatted. The principal appears only as
# the Probe's digest; names and URIs sent by the client are escaped in the message, so a
# newline in one cannot forge a line of the text log.
from __future__ import annotations

import logging
import time

from mrtr.errors import ProtocolError
from mrtr.protocol import CreateTaskResult, InputRequiredResult
from mrtr.server._peer import Peer
from mrtr.server._probe import Probe

__all__ = ["REQUEST_LOGGER", "RequestLog", "outcome"]

REQUEST_LOGGER = "mrtr.requests"


def outcome(result: object, error: ProtocolError | None) -> str:
    """How a request ended: complete, input_required, task, error or cancelled (no reply)."""
    if error is not None:
        return "error"
    if result is None:
        return "cancelled"
    if isinstance(result, InputRequiredResult):
        return "input_required"
    if isinstance(result, CreateTaskResult):
        return "task"
    return "complete"


class RequestLog:
    """Writes the request line at `info` on `logger` (default `mrtr.requests`)."""

    __slots__ = ("logger",)

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger if logger is not None else logging.getLogger(REQUEST_LOGGER)

    def start(self) -> float | None:
        """The time now (`perf_counter`) when the line will be written, else None (logger off)."""
        return time.perf_counter() if self.logger.isEnabledFor(logging.INFO) else None

    def write(self, probe: Probe, started: float, result: object,
              error: ProtocolError | None) -> None:
        """The line of the request `probe` names, begun at `started`, that ended so."""
        ms = round((time.perf_counter() - started) * 1000.0, 3)
        ended = outcome(result, error)
        fields: dict[str, object] = {
            "method": probe.method, "outcome": ended, "duration_ms": ms,
            "request_id": str(probe.request_id), "flow_id": probe.flow_id or "-",
            "round": probe.round, "principal": probe.principal_digest,
        }
        shown = ended
        if probe.target is not None:
            fields["target"] = probe.target
        if error is not None:
            fields["code"] = error.code
            shown = f"error {error.code}"
        if getattr(result, "is_error", None) is True:
            fields["is_error"] = True
            shown += ", isError"
        if probe.store_hit:
            fields["replayed"] = True
            shown += ", replayed"
        what = probe.method if probe.target is None else f"{probe.method} {_safe(probe.target)}"
        self.logger.info("%s: %s (%.1f ms)", what, shown, ms, extra=fields)

    def answered(self, started: float | None, request_id: object, method: str, peer: Peer,
                 result: object, error: ProtocolError | None = None) -> None:
        """The line of a request served without the Dispatcher (a 2025 session's `ping`,
        `initialize`, `logging/setLevel`, …); nothing when `started` is None."""
        if started is not None:
            self.write(Probe(request_id, method, None, peer.principal), started, result, error)


def _safe(text: str) -> str:
    """`text` as it may stand in a line of text: quoted and escaped if it is not printable."""
    return text if text.isprintable() else repr(text)
