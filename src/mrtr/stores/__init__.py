"""Stores: shared state that makes rounds and `ctx.once` exactly-once across processes."""

# Design: RedisStore and PostgresStore load on first use (PEP 562): their modules (Lua scripts,
# SQL, notification listeners) are RSS a server on the default SQLite store never needs (#31).
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mrtr.stores._memory import MemoryStore
from mrtr.stores._sqlite import SQLiteStore
from mrtr.stores._store import Claim, ClaimStatus, Store, StoreUnavailable
from mrtr.stores._urls import ENV_STORE, store_from_env, store_from_url

if TYPE_CHECKING:
    from mrtr.stores._postgres import PostgresStore
    from mrtr.stores._redis import RedisStore

_LAZY = {"PostgresStore": "mrtr.stores._postgres", "RedisStore": "mrtr.stores._redis"}

__all__ = [
    "Claim",
    "ClaimStatus",
    "ENV_STORE",
    "MemoryStore",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "Store",
    "store_from_env",
    "store_from_url",
    "StoreUnavailable",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mrtr.stores' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
