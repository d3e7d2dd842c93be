"""A small TTL cache for list and discover results (spec: server/utilities/caching)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["TTLCache"]

T = TypeVar("T")


class TTLCache:
    """Values keyed by method; a missing, zero or negative `ttlMs` is not cached."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: dict[str, tuple[float, object]] = {}

    def get(self, key: str, type_: type[T]) -> T | None:
        """The live value under `key`, or None."""
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock():
            self._entries.pop(key, None)
            return None
        value = entry[1]
        return value if isinstance(value, type_) else None

    def put(self, key: str, value: object, ttl_ms: int) -> None:
        """Keep `value` for `ttl_ms` milliseconds."""
        if ttl_ms > 0:
            self._entries[key] = (self._clock() + ttl_ms / 1000.0, value)

    def invalidate(self, key: str | None = None) -> None:
        """Forget `key` (or everything)."""
        if key is None:
            self._entries.clear()
        else:
            self._entries.pop(key, None)
