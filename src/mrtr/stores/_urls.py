"""Choose a store from a URL: `memory:`, `sqlite:///path`, `redis://host:port/db`,
`postgresql://user@host/db`."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping

from mrtr.stores._memory import MAX_BYTES, MAX_ENTRIES, MemoryStore
from mrtr.stores._sqlite import SQLiteStore
from mrtr.stores._store import Store

__all__ = ["ENV_STORE", "store_from_env", "store_from_url"]

ENV_STORE = "MRTR_STORE"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_MEMORY_OPTIONS = ("max_bytes", "max_entries")
_SIZE = re.compile(r"(\d+)\s*([kmg]?)(i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def store_from_url(url: str) -> Store:
    """The Store `url` names; raises ValueError for an unknown scheme or an empty path."""
    base, _, query = url.partition("?")
    if base in ("memory:", "memory://"):
        options = _memory_options(query)
        return MemoryStore(max_bytes=options.get("max_bytes", MAX_BYTES),
                           max_entries=options.get("max_entries", MAX_ENTRIES))
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if not path:
            raise ValueError("sqlite store URL needs a path: sqlite:///var/lib/mrtr/store.db")
        return SQLiteStore(path)
    if url.startswith(_REDIS_SCHEMES):
        from mrtr.stores._redis import RedisStore  # redis-py is an optional extra

        return RedisStore(url)
    if url.startswith(_POSTGRES_SCHEMES):
        from mrtr.stores._postgres import PostgresStore  # asyncpg is an optional extra

        return PostgresStore(url)
    raise ValueError(f"unknown store URL {url!r}: use memory:, sqlite:///path, redis://host "
                     "or postgresql://host/db")


def _memory_options(query: str) -> dict[str, int]:
    """`max_bytes=64M&max_entries=50000` as MemoryStore's keywords (K, M, G: 1024, 1024², …)."""
    options: dict[str, int] = {}
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if name not in _MEMORY_OPTIONS:
            raise ValueError(f"unknown memory store option {name!r}: use "
                             f"{' or '.join(_MEMORY_OPTIONS)} (memory:?max_bytes=64M)")
        found = _SIZE.fullmatch(value.strip())
        if found is None or int(found[1]) < 1:
            raise ValueError(f"memory store option {name}={value!r}: give a positive whole "
                             "number, for bytes with K, M or G after it (max_bytes=64M)")
        options[name] = int(found[1]) * _UNITS[found[2].lower()]
    return options


def store_from_env(environ: Mapping[str, str]) -> Store | None:
    """The Store named by MRTR_STORE in `environ`, None when unset or empty."""
    url = environ.get(ENV_STORE, "").strip()
    return store_from_url(url) if url else None
