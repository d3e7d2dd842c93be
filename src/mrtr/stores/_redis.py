"""RedisStore: replicas on several machines share one Redis (redis-py asyncio, `mrtr[redis]`)."""

# Design: one key per entry under `prefix`. A value is b"r" + holder (claimed) or b"d" + outcome
# (done).
# claim is one Lua script (GET, else SET PX lease), so it is atomic and takes one round trip;
# complete is SET PX until the deadline, so Redis's own expiry is the cleanup. Counters are
# plain INCRBY + PEXPIRE in a MULTI. A key's slots are a sorted set scored by each member's
# deadline (this process's clock, as every deadline here) with a hash of their weights and
# total; admit is one script that drops the lapsed members, totals and adds. Every command is
# bounded by socket timeouts plus asyncio.timeout; any failure is StoreUnavailable.
# Durable only: a record lost in a Redis restart lets a finished round run again, so before its
# first command the store checks that Redis persists every write (appendonly yes: CONFIG GET,
# else INFO persistence where a managed Redis hides CONFIG) and refuses otherwise, naming the
# setting; `allow_volatile=1` in the URL (or the keyword) is the operator's explicit opt-in.
# The check runs once per store, not per command (one flag test on the hot path).
# Tracked leases: two sorted sets per index (lease ends, deadlines), kept by the claim, renew and
# release scripts (_redis_lua.py). Notifications are PUBLISH; `wait` subscribes one shared
# pub/sub connection to the channel (kept while waited on, dropped after _LINGER idle seconds)
# and one listener task wakes this process's waiters; when Redis cannot be reached it waits
# out its timeout, as a store without notifications does.
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from mrtr.stores import _redis_lua as lua
from mrtr.stores._local import Channels
from mrtr.stores._put_batches import Found, PutBatches
from mrtr.stores._store import NEW, Claim, StoreUnavailable, found_claim

__all__ = ["RedisStore"]

log = logging.getLogger("mrtr.serve")
_LINGER = 30.0  # seconds a channel nobody waits on stays subscribed (a waiter soon comes back)

T = TypeVar("T")
Row = tuple[bytes, bytes, int]  # a put's key, value and time to live (ms)
OPT_IN = "allow_volatile"  # the URL parameter: accept a Redis that may lose records
_YES = ("1", "true", "yes", "on")
_NO = ("0", "false", "no", "off")
class RedisStore:
    """A Store in Redis at `url` (redis://, rediss://, unix://).

    Refuses (StoreUnavailable, on its first command or `check()`) a Redis that does not persist
    every write, unless `allow_volatile` (or `allow_volatile=1` in the URL's query) accepts it.
    Raises ValueError for a malformed `allow_volatile` value in the URL.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "mrtr:",
        timeout: float = 2.0,
        clock: Callable[[], float] = time.time,
        allow_volatile: bool = False,
    ) -> None:
        try:
            import redis.asyncio as redis
            from redis.exceptions import NoScriptError
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError("RedisStore needs redis-py: pip install 'mrtr[redis]'") from exc
        plain, volatile = split_opt_in(url)
        self.allow_volatile = allow_volatile or volatile
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._failures = (TimeoutError, *self._errors)
        self._refused: type[BaseException] = redis.ResponseError
        self._redis: Any = redis.Redis.from_url(
            plain, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._unchecked = not self.allow_volatile
        self._checking = asyncio.Lock()
        self._claim = self._redis.register_script(lua.CLAIM)
        self._release = self._redis.register_script(lua.RELEASE)
        self._renew = self._redis.register_script(lua.RENEW)
        self._add_once = self._redis.register_script(lua.ADD_ONCE)
        self._put_new = self._redis.register_script(lua.PUT_NEW)
        # a turn's put_if_absent calls together, a lone one as a plain call
        self._puts = PutBatches(self._put_rows, self._put_one, "redis put_if_absent")
        self._no_script: type[BaseException] = NoScriptError
        self._admit = self._redis.register_script(lua.ADMIT)
        self._dismiss = self._redis.register_script(lua.DISMISS)
        self._admitted = self._redis.register_script(lua.ADMITTED)
        self._claim_tracked = self._redis.register_script(lua.CLAIM_TRACKED)
        self._renew_tracked = self._redis.register_script(lua.RENEW_TRACKED)
        self._release_tracked = self._redis.register_script(lua.RELEASE_TRACKED)
        self._lapsed = self._redis.register_script(lua.LAPSED)
        self._channels = Channels()
        self._pubsub: Any = None
        self._listener: asyncio.Task[None] | None = None
        self._subscribed: dict[str, float] = {}  # channel -> when it was last waited on
        self._closed = False
        self._prefix = prefix
        self._timeout = timeout
        self._clock = clock
        self.url = url

    async def _call(self, what: str, awaitable: Awaitable[T]) -> T:
        if self._unchecked:
            await self._first_check(what, awaitable)
        try:
            async with asyncio.timeout(self._timeout):
                return await awaitable
        except TimeoutError as exc:
            raise StoreUnavailable(f"redis {what}: no answer in {self._timeout}s") from exc
        except self._errors as exc:
            raise StoreUnavailable(f"redis {what}: {exc!r}") from exc

    async def _first_check(self, what: str, awaitable: Awaitable[object]) -> None:
        try:
            async with self._checking:
                if self._unchecked:
                    await self.check()
        except BaseException as exc:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never sent: the command must not run on a refused Redis
            if isinstance(exc, StoreUnavailable | ValueError):
                reason = exc.reason if isinstance(exc, StoreUnavailable) else str(exc)
                raise StoreUnavailable(f"redis {what}: {reason}") from exc
            raise

    async def check(self) -> str:
        """How this Redis persists writes, e.g. "appendonly yes, appendfsync everysec".

        Raises StoreUnavailable when Redis does not answer; ValueError, unless volatile is
        allowed, when it does not persist every write or hides its settings (naming them).
        """
        try:
            async with asyncio.timeout(self._timeout):
                durable, described = await self._persistence()
        except TimeoutError as exc:
            raise StoreUnavailable(f"checking persistence: no answer in {self._timeout}s") from exc
        except self._errors as exc:
            raise StoreUnavailable(f"checking persistence: {str(exc) or repr(exc)}") from exc
        if not durable and not self.allow_volatile:
            raise ValueError(
                f"redis at {self._where()} does not persist every write ({described}): a "
                "restart would forget which rounds ran, and they would run again. Set "
                "appendonly yes (in redis.conf, or CONFIG SET appendonly yes), or accept "
                f"losing records with {OPT_IN}=1 in the store URL")
        self._unchecked = False
        return described if durable else f"{described}; accepted by {OPT_IN}=1"

    async def _persistence(self) -> tuple[bool, str]:
        """(durable, description) from CONFIG GET, else INFO persistence."""
        try:
            found = {**_texts(await self._redis.config_get("append*")),
                     **_texts(await self._redis.config_get("save"))}
        except self._refused as config:
            try:
                info = await self._redis.info("persistence")
            except self._refused as refused:
                return False, (f"its persistence is unknown: CONFIG GET refused ({config}) "
                               f"and INFO persistence refused ({refused})")
            aof = str(info.get("aof_enabled", "0")) == "1"
            return aof, f"aof_enabled:{int(aof)} in INFO persistence (CONFIG GET refused)"
        if found.get("appendonly") == "yes":
            return True, f"appendonly yes, appendfsync {found.get('appendfsync', '?')}"
        save = found.get("save", "")
        snapshots = (f"save {save!r} snapshots lose the writes since the last one" if save
                     else "save is empty: no snapshots either")
        return False, f"appendonly is {found.get('appendonly', '?')}; {snapshots}"

    def _where(self) -> str:
        options = self._redis.connection_pool.connection_kwargs
        if "path" in options:
            return str(options["path"])
        return f"{options.get('host', '?')}:{options.get('port', '?')}"

    def _ms(self, expires: float) -> int:
        return max(1, int((expires - self._clock()) * 1000))

    def _index_keys(self, index: str) -> list[str]:
        return [self._prefix + "ix:" + index, self._prefix + "ixe:" + index]

    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "",
                    index: str | None = None) -> Claim:
        ms = min(max(1, int(lease * 1000)), self._ms(expires))
        if index is None:
            found = await self._call("claim", self._claim(keys=[self._prefix + key],
                                                          args=[ms, holder]))
        else:
            args: list[str | int] = [ms, repr(self._clock() + lease), repr(expires), key, holder]
            found = await self._call("claim", self._claim_tracked(
                keys=[self._prefix + key, *self._index_keys(index)], args=args))
        return NEW if found is None else found_claim(found)

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        value = b"d" + outcome
        await self._call("complete", self._redis.set(self._prefix + key, value,
                                                     px=self._ms(expires)))

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        found = await self._puts.put((self._prefix + key).encode(), outcome, expires)
        return NEW if found is None else found_claim(found)

    async def _put_rows(self, keys: list[bytes], values: list[bytes],  # keys: prefixed
                        expires: list[float]) -> list[Found | StoreUnavailable]:
        rows = [(k, b"d" + v, self._ms(e)) for k, v, e in zip(keys, values, expires, strict=True)]
        return await self._call("put_if_absent", self._put_pipeline(rows))

    async def _put_one(self, key: bytes, value: bytes, expires: float) -> Found:
        return await self._call("put_if_absent", self._put_new(
            keys=[key], args=[b"d" + value, self._ms(expires)]))

    async def _put_pipeline(self, rows: list[Row]) -> list[Found | StoreUnavailable]:
        """The put script per row, one pipeline; rows Redis had no script for, once loaded."""
        found = await self._evalsha(rows)
        missing = [i for i, answer in enumerate(found) if isinstance(answer, self._no_script)]
        if missing:
            await self._redis.script_load(lua.PUT_NEW)
            again = await self._evalsha([rows[i] for i in missing])
            for i, answer in zip(missing, again, strict=True):
                found[i] = answer
        return [StoreUnavailable(f"redis put_if_absent: {str(answer) or repr(answer)}")
                if isinstance(answer, BaseException) else answer for answer in found]

    async def _evalsha(self, rows: list[Row]) -> list[Any]:
        pipe = self._redis.pipeline(transaction=False)
        for key, value, ms in rows:
            pipe.evalsha(self._put_new.sha, 1, key, value, ms)
        return list(await pipe.execute(raise_on_error=False))

    async def renew(self, key: str, *, lease: float, index: str | None = None) -> bool:
        ms = max(1, int(lease * 1000))
        if index is None:
            return bool(await self._call("renew", self._renew(keys=[self._prefix + key],
                                                              args=[ms])))
        keys = [self._prefix + key, self._index_keys(index)[0]]
        return bool(await self._call("renew", self._renew_tracked(
            keys=keys, args=[ms, repr(self._clock() + lease), key])))

    async def release(self, key: str, *, holder: str | None = None,
                      index: str | None = None) -> None:
        which = ["1", ""] if holder is None else ["0", holder]  # any claim, or holder's alone
        if index is None:
            await self._call("release", self._release(keys=[self._prefix + key], args=which))
        else:
            await self._call("release", self._release_tracked(
                keys=[self._prefix + key, *self._index_keys(index)], args=[key, *which]))

    async def lapsed(self, index: str, *, limit: int) -> list[str]:
        found = await self._call("lapsed", self._lapsed(
            keys=self._index_keys(index), args=[repr(self._clock()), limit, self._prefix]))
        return [_text(key) for key in found]

    async def purge(self, *, most: int) -> int:
        return 0  # Redis expires its keys itself

    async def notify(self, channel: str) -> None:
        self._channels.wake(channel)  # this process's waiters at once
        await self._call("notify", self._redis.publish(self._prefix + "c:" + channel, b"1"))

    async def wait(self, channel: str, *, timeout: float) -> bool:
        try:
            if not self._closed:
                await self._subscribe(channel)
        except self._failures as exc:
            log.debug("redis: cannot subscribe to %s (%r): waiting out %ss", channel, exc,
                      timeout)
        return await self._channels.wait(channel, timeout)

    async def _subscribe(self, channel: str) -> None:
        if channel not in self._subscribed:
            if self._pubsub is None:
                self._pubsub = self._redis.pubsub()
            async with asyncio.timeout(self._timeout):
                await self._pubsub.subscribe(self._prefix + "c:" + channel)
        self._subscribed[channel] = time.monotonic()
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        """Wake this process's waiters on each message; drop channels idle for _LINGER."""
        skip = len(self._prefix + "c:")
        try:
            while self._subscribed:
                message = await self._pubsub.get_message(ignore_subscribe_messages=True,
                                                         timeout=1.0)
                if message is not None and message.get("type") == "message":
                    self._channels.wake(_text(message["channel"])[skip:])
                now = time.monotonic()
                idle = [c for c, at in self._subscribed.items()
                        if c not in self._channels and now - at > _LINGER]
                for channel in idle:
                    del self._subscribed[channel]
                if idle:
                    await self._pubsub.unsubscribe(*(self._prefix + "c:" + c for c in idle))
        except self._failures as exc:  # waiters wait out their timeouts
            log.warning("redis: notifications stopped (%r); subscribing again on next wait",
                        exc)
            self._subscribed.clear()
            pubsub, self._pubsub = self._pubsub, None
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def get(self, key: str) -> Claim | None:
        found = await self._call("get", self._redis.get(self._prefix + key))
        return None if found is None else found_claim(found)

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        async def run() -> int:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.incrby(self._prefix + "n:" + key, amount)
                pipe.pexpire(self._prefix + "n:" + key, self._ms(expires))
                value, _ = await pipe.execute()
            return int(value)

        return await self._call("add", run())

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        keys = [self._prefix + "n:" + key, self._prefix + "t:" + key + "\x00" + token]
        found = await self._call("add_once", self._add_once(
            keys=keys, args=[amount, self._ms(expires)]))
        return int(found)

    def _slot_keys(self, key: str) -> list[str]:
        return [self._prefix + "z:" + key, self._prefix + "zw:" + key]

    async def admit(self, key: str, member: str, *, limit: int, expires: float,
                    weight: int = 1) -> bool:
        args: list[str | int] = [repr(self._clock()), member, limit, repr(expires), weight]
        return bool(await self._call("admit", self._admit(keys=self._slot_keys(key), args=args)))

    async def dismiss(self, key: str, member: str) -> None:
        await self._call("dismiss", self._dismiss(keys=self._slot_keys(key), args=[member]))

    async def admitted(self, key: str) -> int:
        found = await self._call("admitted", self._admitted(keys=self._slot_keys(key),
                                                            args=[repr(self._clock())]))
        return int(found)

    async def deliver(self, key: str, message: bytes, *, expires: float) -> None:
        async def run() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._prefix + "m:" + key)
                pipe.rpush(self._prefix + "m:" + key, bytes(message))
                pipe.pexpire(self._prefix + "m:" + key, self._ms(expires))
                await pipe.execute()

        await self._call("deliver", run())

    async def collect(self, key: str, *, timeout: float) -> bytes | None:
        # BLPOP in slices shorter than the socket timeout, so a dead Redis still shows.
        give_up = time.monotonic() + timeout
        while True:
            left = give_up - time.monotonic()
            if left <= 0:
                return None
            wait = max(0.01, min(left, self._timeout / 2))
            found = await self._call("collect", self._redis.blpop(
                [self._prefix + "m:" + key], timeout=wait))
            if found is not None:
                return bytes(found[1])

    async def aclose(self) -> None:
        self._closed = True
        await self._puts.drain(self._timeout)  # outcomes being written: written, not dropped
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(BaseException):
                await self._listener
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()
            self._pubsub = None
        self._subscribed.clear()
        await self._redis.aclose()


def split_opt_in(url: str) -> tuple[str, bool]:
    """`url` without its `allow_volatile` parameter, and whether that parameter says yes.

    Raises ValueError for a value other than 1/0, true/false, yes/no, on/off.
    """
    base, _, text = url.partition("?")
    query = urllib.parse.parse_qsl(text, keep_blank_values=True)
    given = [value.lower() for name, value in query if name == OPT_IN]
    if not given:
        return url, False
    if given[-1] not in _YES + _NO:
        raise ValueError(f"{OPT_IN}={given[-1]!r} in the store URL: use 1 or 0")
    rest = urllib.parse.urlencode([(n, v) for n, v in query if n != OPT_IN])
    return f"{base}?{rest}" if rest else base, given[-1] in _YES


def _texts(found: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in found.items()}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

