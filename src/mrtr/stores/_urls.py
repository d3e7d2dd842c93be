"""Choose a store from a URL: `memory:`, `sqlite:///path`, `redis://host:port/db`."""

from __future__ import annotations

from collections.abc import Mapping

from mrtr.stores._memory import MemoryStore
from mrtr.stores._sqlite import SQLiteStore
from mrtr.stores._store import Store

__all__ = ["ENV_STORE", "store_from_env", "store_from_url"]

ENV_STORE = "MRTR_STORE"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def store_from_url(url: str) -> Store:
    """The Store `url` names; raises ValueError for an unknown scheme or an empty path."""
    if url in ("memory:", "memory://"):
        return MemoryStore()
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if not path:
            raise ValueError("sqlite store URL needs a path: sqlite:///var/lib/mrtr/store.db")
        return SQLiteStore(path)
    if url.startswith(_REDIS_SCHEMES):
        from mrtr.stores._redis import RedisStore  # redis-py is an optional extra

        return RedisStore(url)
    raise ValueError(f"unknown store URL {url!r}: use memory:, sqlite:///path or redis://host")


def store_from_env(environ: Mapping[str, str]) -> Store | None:
    """The Store named by MRTR_STORE in `environ`, None when unset or empty."""
    url = environ.get(ENV_STORE, "").strip()
    return store_from_url(url) if url else None
