"""`mrtr store init URL`: create a store's schema ahead of the servers that use it."""

# Design: the servers create the schema on first use (PostgresStore migrates under an advisory
# lock), so `init` is for operators whose servers run as a role that may not create tables, or
# who want the schema and the durability check settled before any replica starts. It opens
# the store as a server would (the same URL and options), which checks durability and brings
# the schema to the current version, then prints what it found. Only PostgreSQL has a schema
# worth creating ahead: a SQLite file and a Redis need nothing, and the command says so.
from __future__ import annotations

import argparse
import asyncio
import sys

from mrtr.stores import PostgresStore, StoreUnavailable, store_from_url
from mrtr.stores._postgres_sql import VERSION

__all__ = ["register"]

_EPILOG = """examples:
  mrtr store init postgresql://mrtr@db.internal/mrtr
  mrtr store init 'postgresql://mrtr@db.internal/mrtr?schema=mcp_prod'

exit status: 0 ready, 1 the store refused or did not answer, 2 a usage error
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mrtr store init` to the `mrtr` parser (sets `run`)."""
    store = subparsers.add_parser(
        "store", help="prepare a shared store (create the PostgreSQL schema)",
        description="Prepare a shared store before the servers that use it start.")
    actions = store.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = actions.add_parser(
        "init", help="create or upgrade the store's schema and check its durability",
        description="Create (or upgrade) the tables and functions of a PostgreSQL store and "
                    "check that the server keeps commits (fsync on); idempotent.",
        usage="mrtr store init URL", epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    init.add_argument("url", metavar="URL", help="the store URL the servers use "
                      "(postgresql://user@host/db, ?schema=NAME)")
    init.set_defaults(run=_init)


def _init(args: argparse.Namespace) -> int:
    try:
        store = store_from_url(args.url)
    except ValueError as exc:
        print(f"mrtr store init: {exc}", file=sys.stderr)
        return 2
    if not isinstance(store, PostgresStore):
        asyncio.run(store.aclose())
        print(f"{type(store).__name__}: nothing to create ahead (it makes what it needs on "
              "first use)")
        return 0
    try:
        asyncio.run(_migrate(store))
    except (StoreUnavailable, ValueError) as exc:
        reason = exc.reason if isinstance(exc, StoreUnavailable) else str(exc)
        print(f"mrtr store init: {reason}", file=sys.stderr)
        return 1
    found = store.found_version
    done = ("created" if found == 0 else "already current" if found == VERSION
            else f"upgraded from version {found}")
    print(f"schema {store.schema}: version {VERSION} ({done}); {store.durability}")
    return 0


async def _migrate(store: PostgresStore) -> None:
    try:
        await store.check()
    finally:
        await store.aclose()
