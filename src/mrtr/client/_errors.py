"""Errors raised by the client itself (as opposed to JSON-RPC errors sent by the server)."""

from __future__ import annotations

from mrtr.errors import MrtrError

__all__ = [
    "ClientError",
    "InputRefused",
    "ListTooLong",
    "TooManyInputs",
    "TooManyRounds",
    "UnexpectedResult",
]


class ClientError(MrtrError):
    """A local client-side failure; nothing was sent to the server about it."""


class TooManyRounds(ClientError):
    """The server kept answering `input_required` beyond the client's round cap."""

    def __init__(self, max_rounds: int) -> None:
        super().__init__(f"gave up after {max_rounds} input_required rounds")
        self.max_rounds = max_rounds


class InputRefused(ClientError):
    """An input request could not be fulfilled, so the call was abandoned.

    MRTR has no per-input error channel: the only way to refuse is to stop retrying.
    """


class TooManyInputs(InputRefused):
    """The server asked for more input requests than `ClientLimits` allows (none was answered)."""


class ListTooLong(ClientError):
    """A `*/list` walk went past `ClientLimits.max_pages` or `max_items` (an endless cursor)."""


class UnexpectedResult(ClientError):
    """The server sent a result the client cannot accept (wrong shape or `resultType`)."""
