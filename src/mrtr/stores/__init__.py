"""Stores: shared state that makes rounds and `ctx.once` exactly-once across processes."""

from mrtr.stores._memory import MemoryStore
from mrtr.stores._postgres import PostgresStore
from mrtr.stores._redis import RedisStore
from mrtr.stores._sqlite import SQLiteStore
from mrtr.stores._store import Claim, ClaimStatus, Store, StoreUnavailable
from mrtr.stores._urls import ENV_STORE, store_from_env, store_from_url

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
