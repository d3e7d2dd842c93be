"""ready(): the start-up check of a store that checks its server (Redis, PostgreSQL)."""

# Design: only RedisStore and PostgresStore check anything, and neither can exist before its
# module was imported (_postgres imports _redis), so a server on the SQLite or memory store
# never loads either module for this (#31). Runs once at start-up, never per request.
from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, cast

from mrtr.errors import StoreUnavailable

if TYPE_CHECKING:
    from mrtr.stores._postgres import PostgresStore
    from mrtr.stores._store import Store

__all__ = ["checks_its_server", "ready"]

log = logging.getLogger("mrtr.serve")


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
    """Check at start-up what a store checks before its first command (a Redis's persistence,
    a PostgreSQL's fsync).

    Raises ValueError (the reason names the setting) for a store that refuses to serve. One
    that does not answer yet is only warned about: it is checked again on first use.
    """
    if not checks_its_server(store):
        return
    from mrtr.stores._redis import RedisStore  # loaded: the store is a Redis or PostgreSQL one

    checked = cast("RedisStore | PostgresStore", store)
    kind = "redis" if isinstance(checked, RedisStore) else "postgresql"
    try:
        described = await checked.check()
    except StoreUnavailable as exc:
        log.warning("cannot check the %s store now (%s): it is checked again before its "
                    "first command", kind, exc.reason)
        return
    log.info("%s store: %s", kind, described)
    if checked.allow_volatile and kind == "redis":
        log.warning("redis store accepted without durable persistence (allow_volatile=1): "
                    "a Redis restart forgets which rounds ran, and they run again")
    elif checked.allow_volatile:
        log.warning("postgresql store accepted without durable commits (allow_volatile=1): "
                    "a crash of its machine can forget which rounds ran, and they run again")
