"""Request headers decoded once per request: lower-cased names, text values, a size bound."""

# Design: a client sends the same few names and values on every request (Content-Type, Accept,
# the protocol version, a method, a tool's name), so each McpApp keeps the ones it has seen
# decoded: one dict lookup instead of a decode and a lower-casing each. Only the bytes decide the
# text (a name is lower-cased whatever its case), so a remembered text is the one decoding would
# give. Bounded: past LIMIT entries, or for a value over VALUE_LIMIT bytes, each is decoded as it
# comes, so a client varying its headers costs memory once and no more.
from __future__ import annotations

from collections.abc import Sequence

from mrtr.server._failures import bad_request

__all__ = ["MAX_HEADER_BYTES", "HeaderDecoder"]

MAX_HEADER_BYTES = 64 * 1024


class HeaderDecoder:
    """Decodes an ASGI scope's headers; one per app (its memory of names and values)."""

    LIMIT = 256  # names, and values, remembered
    VALUE_LIMIT = 64  # bytes: longer values (tokens, trace ids) are not remembered

    __slots__ = ("names", "values")

    def __init__(self) -> None:
        self.names: dict[bytes, str] = {}
        self.values: dict[bytes, str] = {}

    def decode(self, raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
        """Lower-cased names; repeated headers joined with ", ". Raises a Refusal (400) on
        a header that is not UTF-8 (names: ASCII) or headers over MAX_HEADER_BYTES."""
        headers: dict[str, str] = {}
        total = 0
        names, values = self.names, self.values
        try:
            for name, value in raw:
                total += len(name) + len(value)
                key = names.get(name)
                if key is None:
                    key = name.decode("ascii").lower()
                    if len(names) < self.LIMIT:
                        names[name] = key
                text = values.get(value)
                if text is None:
                    text = value.decode("utf-8")
                    if len(value) <= self.VALUE_LIMIT and len(values) < self.LIMIT:
                        values[value] = text
                if key in headers:
                    headers[key] += ", " + text
                else:
                    headers[key] = text
        except UnicodeDecodeError:
            raise bad_request("header is not valid UTF-8") from None
        if total > MAX_HEADER_BYTES:
            raise bad_request("headers too large")
        return headers
