"""PostgresStore: replicas on several machines share one PostgreSQL (asyncpg, `mrtr[postgres]`)."""

# Design: asyncpg with a pool (chosen by measurement over psycopg 3, docs/deploy.md). Each Store
# call is one statement, so one round trip and one transaction: it commits, or it did nothing;
# the put_if_absent calls of one loop turn share theirs (_put_batches.py).
# The calls that must read after a conflict are plpgsql functions (_pg_schema.py). The schema
# is created on first use (versioned migrations under an advisory lock) or ahead of time by
# `mrtr store init URL`; `?schema=NAME` in the URL keeps the tables in their own schema.
# Durable only: before its first command the store checks `fsync` (off: refused, as a Redis
# without appendonly is) and runs its sessions with synchronous_commit=on, so a call returns only
# after its commit is flushed to the WAL on disk; `allow_volatile=1` (or the keyword) is the
# operator's explicit opt-in to the server's own settings. The answer channel wakes waiters
# by LISTEN/NOTIFY on one listening connection (the notification names an md5 of the key and is
# sent on the delivering commit); without it, collect polls. `notify` is a NOTIFY on the same
# channel ("c:" + its name) that the listener turns into wake-ups of this process's `wait`s.
# Tracked leases are rows of mrtr_leases, kept in the same statement as the claim, renewal or
# release they follow; `lapsed` reads one index's due rows by (name, until). Expired rows are
# deleted by a bounded sweep (_SWEEP rows per table at most every `sweep_every` s, backgrounded).
# Every call is bounded by `timeout`; any failure is StoreUnavailable.
from __future__ import annotations

import asyncio
import hashlib
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mrtr.stores import _postgres_sql as sql
from mrtr.stores._local import Channels
from mrtr.stores._put_batches import Found, PutBatches
from mrtr.stores._redis import OPT_IN, split_opt_in
from mrtr.stores._store import NEW, RUNNING, Claim, ClaimStatus, StoreUnavailable, found_claim

__all__ = ["PostgresStore", "SCHEMES"]

T = TypeVar("T")
SCHEMES = ("postgresql://", "postgres://")
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SWEEP = 500
_PAYLOAD = 4000  # a channel name longer than this is notified by its md5

class PostgresStore:
    """A Store in the PostgreSQL database at `url` (postgresql://user:pass@host:port/db).

    `?schema=NAME` in the URL (or `schema=`) keeps its tables in that schema, created if absent.
    Refuses (StoreUnavailable, on its first command or `check()`) a server running with
    fsync=off, unless `allow_volatile` (or `allow_volatile=1` in the URL) accepts it.
    Raises ValueError for a malformed URL option.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        timeout: float = 5.0,
        pool_size: int = 10,
        sweep_every: float = 10.0,
        clock: Callable[[], float] = time.time,
        allow_volatile: bool = False,
    ) -> None:
        try:
            import asyncpg  # type: ignore[import-untyped]
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError("PostgresStore needs asyncpg: pip install 'mrtr[postgres]'") from exc
        plain, volatile = split_opt_in(url)
        plain, given = _split_schema(plain)
        self.schema = schema or given or "public"
        if not _SCHEMA_NAME.fullmatch(self.schema):
            raise ValueError(f"schema={self.schema!r} in the store URL: use lower-case letters, "
                             "digits and _ (schema=mrtr)")
        self.allow_volatile = allow_volatile or volatile
        self.url = url
        self._dsn = plain
        self._asyncpg: Any = asyncpg
        self._errors: tuple[type[BaseException], ...] = (asyncpg.PostgresError,
                                                        asyncpg.InterfaceError, OSError)
        self._failures: tuple[type[BaseException], ...] = (TimeoutError, ValueError,
                                                          *self._errors)
        self._timeout = timeout
        self._pool_size = pool_size
        self._sweep_every = sweep_every
        self._clock = clock
        self._next_sweep = 0.0
        self._pool: Any = None
        self._opening = asyncio.Lock()
        self._channel = f"mrtr_m_{self.schema}"
        self._listener: Any = None  # the connection LISTENing on _channel
        self._waiting: dict[str, set[asyncio.Event]] = {}  # md5 of a key -> its collect() calls
        self._channels = Channels()  # wait() calls, woken by "c:" notifications
        self._background: set[asyncio.Task[None]] = set()
        # a turn's put_if_absent calls together, a lone one as a plain call
        self._puts = PutBatches(self._put_rows, self._put_one, "postgresql put_if_absent")
        self._closed = False  # aclose() ran: wait() opens no listener again
        self.durability = ""  # what check() found, e.g. "fsync on, synchronous_commit on"
        self.found_version = -1  # the schema version found at connect (0: none, created then)

    # -- connections -----------------------------------------------------------------------------
    def _settings(self) -> dict[str, str]:
        settings = {"search_path": self.schema, "application_name": "mrtr"}
        if not self.allow_volatile:
            settings["synchronous_commit"] = "on"
        return settings

    async def _open(self) -> Any:
        async with self._opening:
            if self._pool is None:
                if self._closed:  # a call racing aclose(): never a pool nobody closes
                    raise StoreUnavailable("postgresql: the store is closed")
                pool = self._asyncpg.create_pool(
                    self._dsn, min_size=1, max_size=self._pool_size, timeout=self._timeout,
                    command_timeout=self._timeout, server_settings=self._settings())
                try:  # awaited here, so a timeout or cancel mid-connect closes what it opened
                    await pool
                    async with pool.acquire() as db:
                        self.durability = await _durability(db, self.allow_volatile)
                        self.found_version = await sql.migrate(db, self.schema)
                    if self._closed:
                        raise StoreUnavailable("postgresql: the store is closed")
                except BaseException:
                    pool.terminate()
                    raise
                self._pool = pool
        return self._pool

    async def _run(self, what: str, work: Callable[[Any, float], Awaitable[T]]) -> T:
        """`work(connection, now)` on a pooled connection; `now` is read once it is held."""
        try:
            async with asyncio.timeout(self._timeout):
                pool = self._pool if self._pool is not None else await self._open()
                async with pool.acquire() as db:
                    result = await work(db, self._clock())
        except TimeoutError as exc:
            raise StoreUnavailable(f"postgresql {what}: no answer in {self._timeout}s") from exc
        except ValueError as exc:  # a refused server (fsync off)
            raise StoreUnavailable(f"postgresql {what}: {exc}") from exc
        except self._errors as exc:
            raise StoreUnavailable(f"postgresql {what}: {str(exc) or repr(exc)}") from exc
        now = self._clock()
        if not now < self._next_sweep:
            self._next_sweep = now + self._sweep_every
            task = asyncio.get_running_loop().create_task(self._sweep(now))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return result

    async def _sweep(self, now: float) -> None:
        """Delete up to _SWEEP expired rows per table; a failure waits for the next sweep."""
        try:
            async with asyncio.timeout(self._timeout), self._pool.acquire() as db:
                await _purge(db, now, _SWEEP)
        except self._failures:
            pass

    async def check(self) -> str:
        """How this server keeps commits, e.g. "fsync on, synchronous_commit on".

        Raises StoreUnavailable when it does not answer; ValueError, unless volatile is
        allowed, when it runs with fsync=off (naming the setting).
        """
        try:
            async with asyncio.timeout(self._timeout):
                await self._open()
        except TimeoutError as exc:
            raise StoreUnavailable(f"checking durability: no answer in {self._timeout}s") from exc
        except self._errors as exc:
            raise StoreUnavailable(f"checking durability: {str(exc) or repr(exc)}") from exc
        return self.durability

    # -- the Store protocol --------------------------------------------------------------------
    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "",
                    index: str | None = None) -> Claim:
        k, ix = _b(key), None if index is None else _b(index)
        found = await self._run("claim", lambda db, now: db.fetchval(
            "SELECT mrtr_claim($1, $2, $3, $4, $5, $6)", k, float(lease), float(expires), now,
            ix, holder))
        return NEW if found is None else found_claim(found)

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        await self._run("complete", lambda db, now: db.execute(
            sql.COMPLETE, _b(key), bytes(outcome), float(expires)))

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        found = await self._puts.put(_b(key), bytes(outcome), float(expires))
        return NEW if found is None else found_claim(found)

    async def _put_rows(self, keys: list[bytes], values: list[bytes],
                        expires: list[float]) -> list[Found]:
        rows = await self._run("put_if_absent", lambda db, now: db.fetch(
            sql.PUT_IF_ABSENT_ROWS, keys, values, expires, now))
        return [row[0] for row in rows]

    async def _put_one(self, key: bytes, value: bytes, expires: float) -> Found:
        return await self._run("put_if_absent", lambda db, now: db.fetchval(
            "SELECT mrtr_put_if_absent($1, $2, $3, $4)", key, value, expires, now))

    async def renew(self, key: str, *, lease: float, index: str | None = None) -> bool:
        k = _b(key)
        if index is None:
            found = await self._run("renew", lambda db, now: db.fetchval(
                sql.RENEW, k, now, float(lease)))
        else:
            found = await self._run("renew", lambda db, now: db.fetchval(
                sql.RENEW_TRACKED, k, now, float(lease), _b(index)))
        return found is not None

    async def release(self, key: str, *, holder: str | None = None,
                      index: str | None = None) -> None:
        if index is None:
            await self._run("release", lambda db, now: db.execute(sql.RELEASE, _b(key), holder))
        else:
            await self._run("release", lambda db, now: db.execute(
                sql.RELEASE_TRACKED, _b(key), _b(index), holder))

    async def lapsed(self, index: str, *, limit: int) -> list[str]:
        rows = await self._run("lapsed", lambda db, now: db.fetch(
            "SELECT mrtr_lapsed($1, $2, $3)", _b(index), int(limit), now))
        return [bytes(row[0]).decode("utf-8", "surrogatepass") for row in rows]

    async def purge(self, *, most: int) -> int:
        return await self._run("purge", lambda db, now: _purge(db, now, most))

    async def notify(self, channel: str) -> None:
        self._channels.wake(channel)  # this process's waiters at once
        await self._run("notify", lambda db, now: db.execute(
            sql.NOTIFY, self._channel, "c:" + _named(channel)))

    async def wait(self, channel: str, *, timeout: float) -> bool:
        await self._listen()  # False: not listening, the timeout decides
        return await self._channels.wait(_named(channel), timeout)

    async def get(self, key: str) -> Claim | None:
        row, now = await self._run("get", lambda db, now: _with(db.fetchrow(sql.GET, _b(key)),
                                                                 now))
        if row is None or not now < row[2]:
            return None
        if row[0] is not None:
            return Claim(ClaimStatus.DONE, bytes(row[0]))
        return RUNNING if now < row[1] else None

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        return int(await self._run("add", lambda db, now: db.fetchval(
            sql.ADD, _b(key), int(amount), float(expires), now)))

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        return int(await self._run("add_once", lambda db, now: db.fetchval(
            "SELECT mrtr_add_once($1, $2, $3, $4, $5)", _b(key), int(amount), _b(token),
            float(expires), now)))

    async def admit(self, key: str, member: str, *, limit: int, expires: float,
                    weight: int = 1) -> bool:
        return bool(await self._run("admit", lambda db, now: db.fetchval(
            "SELECT mrtr_admit($1, $2, $3, $4, $5, $6)", _b(key), _b(member), int(limit),
            float(expires), int(weight), now)))

    async def dismiss(self, key: str, member: str) -> None:
        await self._run("dismiss", lambda db, now: db.fetchval(sql.DISMISS, _b(key), _b(member)))

    async def admitted(self, key: str) -> int:
        return int(await self._run("admitted", lambda db, now: db.fetchval(
            sql.ADMITTED, _b(key), now)))

    async def deliver(self, key: str, message: bytes, *, expires: float) -> None:
        await self._run("deliver", lambda db, now: db.execute(
            sql.DELIVER, _b(key), bytes(message), float(expires), self._channel,
            "m:" + _digest(key)))

    async def collect(self, key: str, *, timeout: float) -> bytes | None:
        digest = _digest(key)
        woken = asyncio.Event()
        self._waiting.setdefault(digest, set()).add(woken)
        give_up = time.monotonic() + timeout
        try:
            listening = await self._listen()
            while True:
                woken.clear()
                found = await self._take(key)
                left = give_up - time.monotonic()
                if found is not None or left <= 0:
                    return found
                # Woken by NOTIFY; without a listener (or a notification lost when it
                # reconnects), polled: 50 ms without, 1 s with.
                with_listener = listening and not self._listener.is_closed()
                wait = min(left, 1.0 if with_listener else 0.05)
                try:
                    await asyncio.wait_for(woken.wait(), wait)
                except TimeoutError:
                    pass
        finally:
            waiters = self._waiting.get(digest)
            if waiters is not None:
                waiters.discard(woken)
                if not waiters:
                    del self._waiting[digest]

    async def _take(self, key: str) -> bytes | None:
        row, now = await self._run("collect", lambda db, now: _with(
            db.fetchrow(sql.TAKE, _b(key)), now))
        if row is None or not now < row[1]:
            return None
        return bytes(row[0])

    async def _listen(self) -> bool:
        """LISTEN on a connection of its own (opened once); False when that failed or closed."""
        if self._closed:
            return False
        if self._listener is not None and not self._listener.is_closed():
            return True
        try:
            async with asyncio.timeout(self._timeout):
                await self._open()
                listener = await self._asyncpg.connect(
                    self._dsn, timeout=self._timeout, server_settings=self._settings())
                try:
                    await listener.add_listener(self._channel, self._notified)
                except BaseException:
                    listener.terminate()
                    raise
        except self._failures:
            return False
        if self._closed or (self._listener is not None and not self._listener.is_closed()):
            await listener.close()  # closed meanwhile, or another call opened one
        else:
            self._listener = listener
        return True

    def _notified(self, connection: object, pid: int, channel: str, payload: str) -> None:
        kind, name = payload[:2], payload[2:]
        if kind == "m:":
            for woken in self._waiting.get(name, ()):
                woken.set()
        elif kind == "c:":
            self._channels.wake(name)

    async def aclose(self) -> None:
        self._closed = True
        await self._puts.drain(self._timeout)  # outcomes being written: written, not dropped
        for task in list(self._background):
            task.cancel()
        for held in (self._listener, self._pool):  # a connection, a pool: the same calls
            if held is not None:
                try:
                    await asyncio.wait_for(held.close(), self._timeout)
                except self._failures:
                    held.terminate()
        self._listener = self._pool = None


async def _durability(db: Any, allowed: bool) -> str:
    fsync = await db.fetchval("SHOW fsync")
    commit = await db.fetchval("SHOW synchronous_commit")
    described = f"fsync {fsync}, synchronous_commit {commit}"
    if allowed:
        return described if fsync == "on" and commit != "off" else (
            f"{described}; accepted by {OPT_IN}=1")
    if fsync != "on":
        raise ValueError(
            f"postgresql runs with fsync={fsync}: a crash of its machine can lose or corrupt "
            "committed records, and finished rounds would run again. Set fsync = on in "
            f"postgresql.conf, or accept losing records with {OPT_IN}=1 in the store URL")
    return described


async def _with(pending: Awaitable[T], now: float) -> tuple[T, float]:
    return await pending, now


async def _purge(db: Any, now: float, most: int) -> int:
    """Delete up to `most` expired rows of each table; how many went."""
    gone = 0
    for table in sql.TABLES:
        status = await db.execute(sql.PURGE.format(table=table), now, most)
        gone += int(status.rpartition(" ")[2] or 0)
    return gone + int(await db.fetchval(sql.SWEEP_SLOTS, now, most))


def _named(channel: str) -> str:
    """A notification's payload names `channel` (its md5 when too long for one)."""
    return channel if len(_b(channel)) <= _PAYLOAD else "#" + _digest(channel)


def _split_schema(url: str) -> tuple[str, str | None]:
    base, _, text = url.partition("?")
    query = urllib.parse.parse_qsl(text, keep_blank_values=True)
    given = [value for name, value in query if name == "schema"]
    rest = urllib.parse.urlencode([(n, v) for n, v in query if n != "schema"])
    return (f"{base}?{rest}" if rest else base), (given[-1] if given else None)


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _digest(key: str) -> str:
    return hashlib.md5(_b(key), usedforsecurity=False).hexdigest()
