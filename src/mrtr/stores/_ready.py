"""ready(): the start-up check of a store that checks its server (Redis, PostgreSQL)."""

# Design: only RedisStore and PostgresStore check anything, and neither can exist before its
# module was imported (_postgres imports _redis), so a server on the SQLite or memory store
# never loads either module for this (#31). Runs once at start-up, never per request.
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mrtr.stores._store import Store

__all__ = ["checks_its_server", "ready"]


def checks_its_server(store: Store | None) -> bool:
    """A RedisStore or PostgresStore: one whose server `ready` checks. A store of a module not
    loaded is not of its class, so nothing is imported to tell (a Redis store loads no
    PostgreSQL module here)."""
    redis = sys.modules.get("mrtr.stores._redis")
    postgres = sys.modules.get("mrtr.stores._postgres")
    return store is not None and (
        (redis is not None and isinstance(store, redis.RedisStore))
        or (postgres is not None and isinstance(store, postgres.PostgresStore)))


async def ready(store: Store | None) -> None:
    """Check at start-up what a store checks before its first command (see _redis.ready)."""
    if not checks_its_server(store):
        return
    from mrtr.stores._redis import ready as check

    await check(store)
