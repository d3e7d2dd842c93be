"""Reply: one JSON-RPC response, a result or an error, encoded when it is made."""

# Design: which error a client gets is decided in _failures.py, the only place that builds an
# error Reply; this module only encodes. A Reply is all a transport writes: `body`, with
# `http_status` over HTTP.
from __future__ import annotations

import math

import msgspec

from mrtr.errors import ProtocolError
from mrtr.protocol import encode_error, encode_result

__all__ = ["Reply"]


class Reply:
    """One JSON-RPC response, a result or an error, encoded when it is made.

    Raises TypeError or ValueError when the result holds what JSON cannot carry (the Dispatcher
    answers -32603 instead), so a transport only ever writes `body`.
    """

    __slots__ = ("body", "error", "request_id", "result")

    def __init__(
        self,
        request_id: str | int | None,
        result: msgspec.Struct | None = None,
        error: ProtocolError | None = None,
    ) -> None:
        self.request_id = request_id
        self.result = result
        self.error = error
        if error is not None:
            self.body = encode_error(request_id, error)
        else:
            assert result is not None
            self.body = encode_result(request_id, result)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Reply({self.request_id!r}, result={self.result!r}, error={self.error!r})"

    @property
    def http_status(self) -> int:
        return self.error.http_status if self.error is not None else 200

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        """HTTP headers the reply needs: `Retry-After` (whole seconds) for a retryable error."""
        after = self.error.retry_after if self.error is not None else None
        if after is None:
            return []
        return [(b"retry-after", str(max(1, math.ceil(after))).encode())]
