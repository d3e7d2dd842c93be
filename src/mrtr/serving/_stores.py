"""Which store `mrtr serve` gives its Dispatcher: --store, MRTR_STORE, or a private SQLite file."""

# Design: exactly-once rounds are the default. Without a URL the parent process makes a private
# temp directory (0700) and a SQLite file in it, hands its URL to every worker the way it hands
# the generated key, and deletes the directory when serving ends: nothing to configure on one
# machine. Replicas on several machines name a shared Redis. "none" turns the store off.
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator

from mrtr.server import Dispatcher
from mrtr.stores import ENV_STORE, store_from_url

__all__ = ["store_url", "with_store"]

log = logging.getLogger("mrtr.serve")
NO_STORE = "none"


@contextlib.contextmanager
def store_url(given: str | None, workers: int) -> Iterator[str | None]:
    """The store URL to serve with (None: no store), valid until the block ends.

    Raises ValueError for an unknown scheme, or `memory:` with several workers.
    """
    url = (given if given is not None else os.environ.get(ENV_STORE, "")).strip()
    if url == NO_STORE:
        log.warning("no store: a replayed round runs again (see docs/deploy.md)")
        yield None
        return
    if url:
        if url.startswith("memory") and workers > 1:
            raise ValueError("store memory: lives in one process: with --workers use "
                             "sqlite:///path or redis://host")
        store_from_url(url)  # a bad URL fails here, before any worker starts
        log.info("exactly-once rounds: store %s", _shown(url))
        yield url
        return
    folder = tempfile.mkdtemp(prefix="mrtr-store-")
    try:
        log.info("exactly-once rounds: SQLite store in %s for this run (--store or %s to "
                 "share one)", folder, ENV_STORE)
        yield f"sqlite://{os.path.join(folder, 'store.db')}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def with_store(dispatcher: Dispatcher, url: str | None) -> Dispatcher:
    """`dispatcher` using the store at `url`; one that already has a store keeps its own."""
    if url is None or dispatcher.store is not None:
        return dispatcher
    return Dispatcher(dispatcher.server, sealer=dispatcher.sealer,
                      max_rounds=dispatcher.max_rounds, logger=dispatcher.log,
                      store=store_from_url(url), telemetry=dispatcher.telemetry)


def _shown(url: str) -> str:
    """The URL without a password (redis://:secret@host)."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    return url
