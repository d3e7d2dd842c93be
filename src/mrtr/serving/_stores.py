"""Which store a process serves with: the one place `mrtr serve`, `mrtr dev`, `Server.run()`
and `http_app()` ask, from --store, MRTR_STORE, where the key comes from and the workers."""

# Design: the record of a round must live as long as its state can be replayed.
# - `--store URL`, else MRTR_STORE, wins; "none" turns the store off, "memory:" keeps it in one
#   process. Several processes (--workers N) must share theirs: "none" and "memory:" are refused
#   there unless the operator accepts it (--allow-unshared-store), and then warned about.
# - Without a URL the store pairs with the key. A key kept in the per-user key file (it outlives
#   the run) pairs with a SQLite file beside it, one per key and server name (a fingerprint, so
#   two servers with other keys or other apps never share one, and a restart finds its records).
#   Any other key gets a SQLite file in a private temp directory (0700) that the parent process
#   makes, hands to every worker the way it hands the generated key, and deletes when serving
#   ends; with MRTR_STATE_KEYS (states outlive the run, that store does not) a warning says so.
# - An app built inside a process it does not run (http_app) keeps a MemoryStore without a URL.
# - A Redis must persist every write (RedisStore.check), a PostgreSQL run with fsync on
#   (PostgresStore.check): checked here before anything serves.
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from mrtr.server import Dispatcher
from mrtr.serving._target import KEYS_ENV
from mrtr.stores import ENV_STORE, MemoryStore, Store, store_from_url
from mrtr.stores._ready import checks_its_server, ready

__all__ = ["EPHEMERAL", "KeyOrigin", "NO_STORE", "app_store", "open_store", "ready",
           "run_store", "store_file", "with_store"]

log = logging.getLogger("mrtr.serve")
NO_STORE = "none"
_SHARED = ("a shared store: leave --store out for a SQLite file every worker opens, or give "
           "sqlite:///path, redis://host or postgresql://host/db")


@dataclass(frozen=True)
class KeyOrigin:
    """Where this run's requestState key comes from: it decides the default store."""

    key_file: Path | None = None  # the per-user key file that holds `key`
    key: bytes | None = None
    shared: bool = False  # MRTR_STATE_KEYS (or keys given): states outlive this run


EPHEMERAL = KeyOrigin()  # a key made for this run


@contextlib.contextmanager
def run_store(given: str | None, *, workers: int, origin: KeyOrigin = EPHEMERAL,
              name: str | None = None, allow_unshared: bool = False,
              environ: Mapping[str, str] = os.environ) -> Iterator[str]:
    """The store URL every process of this run opens ("none": no store), valid in the block.

    `given` is --store (None: MRTR_STORE, else the default for `origin`); `name` the served
    Server's name. Raises ValueError for an unknown or malformed URL, a store several workers
    cannot share (unless `allow_unshared`), or a Redis that does not persist every write.
    """
    url = (given if given is not None else environ.get(ENV_STORE, "")).strip()
    if url:
        _check(url, workers, allow_unshared)
        yield url
        return
    if origin.key_file is not None and origin.key is not None:
        path = store_file(origin.key_file, origin.key, name)
        log.info("exactly-once rounds: SQLite store %s, beside the key file: a restart replays "
                 "finished rounds from it (--store or %s to choose another)", path, ENV_STORE)
        yield f"sqlite://{path}"
        return
    folder = tempfile.mkdtemp(prefix="mrtr-store-")
    try:
        log.info("exactly-once rounds: SQLite store in %s for this run (--store or %s to "
                 "share one)", folder, ENV_STORE)
        if origin.shared:
            log.warning("%s outlive this run but its store does not: a final round re-sent "
                        "after a restart runs again; give --store sqlite:///path (one machine) "
                        "or redis://host (replicas)", KEYS_ENV)
        yield f"sqlite://{os.path.join(folder, 'store.db')}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def store_file(key_file: Path, key: bytes, name: str | None) -> Path:
    """The default store beside `key_file`: one SQLite file per key and server name."""
    material = b"mrtr-store\x00" + key + b"\x00" + (name or "").encode()
    return key_file.parent / f"store-{hashlib.sha256(material).hexdigest()[:16]}.db"


def open_store(url: str) -> Store | None:
    """The Store `url` names; None for "none". Raises ValueError for an unknown URL."""
    return None if url == NO_STORE else store_from_url(url)


def with_store(dispatcher: Dispatcher, url: str | None) -> Dispatcher:
    """`dispatcher` using the store at `url` ("none": none); one given its own keeps it."""
    if url is None or dispatcher.store_given:
        return dispatcher
    return dispatcher.replace(store=open_store(url))


def app_store(environ: Mapping[str, str]) -> Store | None:
    """The store of an app built in a process it does not run: MRTR_STORE, else in memory.

    Raises ValueError for an unknown URL.
    """
    url = environ.get(ENV_STORE, "").strip()
    if url:
        return open_store(url)
    if environ.get(KEYS_ENV):
        log.warning("%s without %s: this app's store is in memory, so a round re-sent after a "
                    "restart or to another process runs again (%s=sqlite:///path or "
                    "redis://host)", KEYS_ENV, ENV_STORE, ENV_STORE)
    return MemoryStore()


def _check(url: str, workers: int, allow_unshared: bool) -> None:
    store = None if url == NO_STORE else store_from_url(url)  # a bad URL fails here
    if store is None or isinstance(store, MemoryStore):
        kind = ("no store: a replayed round runs again" if store is None
                else "store memory: lives in one process")
        if workers > 1 and not allow_unshared:
            raise ValueError(f"{kind}, and with {workers} workers each would keep its own tasks "
                             "and 2025 answers (tasks/get on another worker answers \"Unknown "
                             "task\") and a round replayed to another worker would run again: "
                             f"give {_SHARED}, or --allow-unshared-store to serve so anyway")
        if workers > 1:
            log.warning("--allow-unshared-store: %s, and each of the %d workers keeps its own "
                        "tasks, 2025 answers and records: a round replayed to another worker "
                        "runs again (see docs/deploy.md)", kind, workers)
        elif store is None:
            log.warning("%s (see docs/deploy.md)", kind)
        else:
            log.info("exactly-once rounds: store %s (this process only)", url)
        return
    if checks_its_server(store):  # before any worker starts
        try:
            asyncio.run(_ready_and_close(store))
        except ValueError as exc:
            raise ValueError(f"store {_shown(url)}: {exc}") from None
    log.info("exactly-once rounds: store %s", _shown(url))


async def _ready_and_close(store: Store) -> None:
    try:
        await ready(store)
    finally:
        await store.aclose()


def _shown(url: str) -> str:
    """The URL without a password (redis://:secret@host)."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    return url
