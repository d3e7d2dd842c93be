"""The fault suite's server: `pay` charges inside `ctx.once` and stops once at a named point.

Served as `mrtr serve tests.faults.app:dispatcher` by every replica of a test, configured by
the environment the test gives it:

- FAULTS_DIR: a directory shared by the test and every replica. `effects.db` in it is the
  payment provider, outside the server and its store: `attempts` gets a row each time the
  charge's fn reaches the provider, `charges` one per idempotency key (the provider dedupes,
  as a real one does). `marks/` holds one file per point reached (see `pause`).
- FAULTS_STORE: the store URL (sqlite:///path, redis://... or postgresql://...), opened with
  short timeouts.
- FAULTS_LEASE: the claim lease in seconds (short, so a SIGKILLed holder's claim lapses soon).
- MRTR_STATE_KEYS: the key ring every replica seals with.
- FAULTS_LOSE: a point ("before-claim"): the first `once` claim of a flow stopped there that
  the store grants lands, but its answer is lost (StoreUnavailable, as when the store times
  out while a restarting Redis writes it): a claim held by nobody, that fn never ran under.

`pay(invoice, point, hold)` stops for `hold` seconds the first time any replica reaches
`point` for that invoice (the mark file is created exclusively), after leaving the mark
file the test waits for before it injects its fault. The points follow the protocol of a
final round: "before-claim" (in the handler, before ctx.once claims), "after-claim" (fn
started, nothing charged yet), "inside-fn" (charged, the provider's answer still to come),
"after-fn" (fn returned, its outcome not yet written: the store wrapper below stops before
the write) and "after-record" (ctx.once returned; the round's outcome is still to come).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import sqlite3
from pathlib import Path

from mrtr import Context, Server
from mrtr.server import Dispatcher, Sealer, parse_keys
from mrtr.stores import (
    Claim,
    ClaimStatus,
    PostgresStore,
    RedisStore,
    SQLiteStore,
    Store,
    StoreUnavailable,
)

POINTS = ("before-claim", "after-claim", "inside-fn", "after-fn", "after-record")
_pause_at: contextvars.ContextVar[tuple[str, str, float]] = contextvars.ContextVar("pause_at")


def _folder() -> Path:
    return Path(os.environ["FAULTS_DIR"])


def _provider() -> sqlite3.Connection:
    db = sqlite3.connect(_folder() / "effects.db", timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS attempts (invoice TEXT, key TEXT, pid INTEGER)")
    db.execute("CREATE TABLE IF NOT EXISTS charges (invoice TEXT, key TEXT,"
               " PRIMARY KEY (invoice, key))")
    return db


def charge(invoice: str, key: str) -> int:
    """What the payment provider does: note the attempt, charge once per key; the count."""
    db = _provider()
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO attempts VALUES (?, ?, ?)", (invoice, key, os.getpid()))
        db.execute("INSERT OR IGNORE INTO charges VALUES (?, ?)", (invoice, key))
        (count,) = db.execute("SELECT count(*) FROM charges WHERE invoice = ?",
                              (invoice,)).fetchone()
        db.execute("COMMIT")
        return int(count)
    finally:
        db.close()


def _first(invoice: str, event: str) -> bool:
    """Whether this is the first time any replica meets `event` for `invoice` (a mark file)."""
    marks = _folder() / "marks"
    marks.mkdir(exist_ok=True)
    try:
        os.close(os.open(marks / f"{invoice}.{event}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


async def pause(here: str) -> None:
    """Stop for the flow's hold if `here` is its point and no replica stopped there yet."""
    invoice, point, hold = _pause_at.get(("", "", 0.0))
    if point != here or not _first(invoice, here):
        return  # another point, or a retry passing it again: the fault was injected already
    await asyncio.sleep(hold)


class PausingStore:
    """The configured store; stops before writing a `once` outcome ("after-fn")."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "") -> Claim:
        claim = await self.store.claim(key, lease=lease, expires=expires, holder=holder)
        invoice, point, _ = _pause_at.get(("", "", 0.0))
        if (key.startswith("once:") and claim.status is ClaimStatus.NEW
                and point == os.environ.get("FAULTS_LOSE") and _first(invoice, "lost")):
            raise StoreUnavailable("injected: the claim landed, its answer was lost")
        return claim

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        if key.startswith("once:"):
            await pause("after-fn")
        await self.store.complete(key, outcome, expires=expires)

    async def renew(self, key: str, *, lease: float) -> bool:
        return await self.store.renew(key, lease=lease)

    async def release(self, key: str, *, holder: str | None = None) -> None:
        await self.store.release(key, holder=holder)

    async def get(self, key: str) -> Claim | None:
        return await self.store.get(key)

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        return await self.store.add(key, amount, expires=expires)

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        return await self.store.add_once(key, amount, token=token, expires=expires)

    async def deliver(self, key: str, message: bytes, *, expires: float) -> None:
        await self.store.deliver(key, message, expires=expires)

    async def collect(self, key: str, *, timeout: float) -> bytes | None:
        return await self.store.collect(key, timeout=timeout)

    async def aclose(self) -> None:
        await self.store.aclose()


def _store(url: str) -> Store:
    if url.startswith("sqlite://"):
        return SQLiteStore(url[len("sqlite://"):], timeout=1.0)  # an outage shows within 1 s
    if url.startswith("postgresql://"):
        return PostgresStore(url, timeout=1.0)
    return RedisStore(url, timeout=0.5)


app = Server("faults", version="1")


@app.tool()
async def pay(ctx: Context, invoice: str, point: str = "", hold: float = 0.0) -> str:
    """Pay an invoice after a confirmation, stopping once at `point` for `hold` seconds."""
    if not await ctx.confirm(f"Pay invoice {invoice}?", key="confirm"):
        return f"Invoice {invoice} not paid."
    _pause_at.set((invoice, point, hold))  # fn's task and the store wrapper see it too
    await pause("before-claim")

    async def pay_once() -> str:
        await pause("after-claim")
        count = charge(invoice, ctx.idempotency_key("charge"))
        await pause("inside-fn")  # charged; the provider is slow to answer
        return f"R-{invoice}-{count}"

    receipt = await ctx.once("charge", pay_once)
    await pause("after-record")
    return f"Paid invoice {invoice}: receipt {receipt}."


dispatcher = Dispatcher(
    app,
    sealer=Sealer(keys=parse_keys(os.environ.get("MRTR_STATE_KEYS", "")), audience=app.name)
    if os.environ.get("MRTR_STATE_KEYS") else None,
    store=PausingStore(_store(os.environ["FAULTS_STORE"])) if os.environ.get("FAULTS_STORE")
    else None,
    lease=float(os.environ.get("FAULTS_LEASE", "30")),
)
