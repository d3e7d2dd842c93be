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
from __future__ import annotations

import asyncio
import inspect
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from mrtr.stores._store import NEW, RUNNING, Claim, ClaimStatus, Store, StoreUnavailable

__all__ = ["RedisStore", "ready"]

log = logging.getLogger("mrtr.serve")

T = TypeVar("T")
OPT_IN = "allow_volatile"  # the URL parameter: accept a Redis that may lose records
_YES = ("1", "true", "yes", "on")
_NO = ("0", "false", "no", "off")
_CLAIM = """
local v = redis.call('GET', KEYS[1])
if v and not (ARGV[2] ~= '' and v == 'r' .. ARGV[2]) then return v end
redis.call('SET', KEYS[1], 'r' .. ARGV[2], 'PX', ARGV[1])
return false
"""
_PUT_NEW = """
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""
# KEYS: the set (member -> its deadline), its weights (w:<member> -> weight, t -> their total;
# a set from before weights has none: each member weighs 1). ARGV: now, member, limit, the
# member's deadline (epoch seconds), its weight. Lapsed members go first; both keys live as
# long as the last member. 1 when the member holds a slot.
_ADMIT = """
local now, limit, weight = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[5])
local total = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  total = tonumber(redis.call('HGET', KEYS[2], 't') or redis.call('ZCARD', KEYS[1]))
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, m in ipairs(gone) do
  total = total - tonumber(redis.call('HGET', KEYS[2], 'w:' .. m) or '1')
  redis.call('HDEL', KEYS[2], 'w:' .. m)
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1]) end
local granted = 0
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  local old = tonumber(redis.call('HGET', KEYS[2], 'w:' .. ARGV[2]) or '1')
  if weight <= old or total - old + weight <= limit then
    total = total - old + weight
    redis.call('HSET', KEYS[2], 'w:' .. ARGV[2], weight)
    granted = 1
  end
elseif tonumber(ARGV[4]) > now and total + weight <= limit then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
  redis.call('HSET', KEYS[2], 'w:' .. ARGV[2], weight)
  total = total + weight
  granted = 1
end
if granted == 0 and #gone == 0 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  return granted
end
redis.call('HSET', KEYS[2], 't', total)
local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
local ms = math.max(1, math.ceil((last - now) * 1000))
redis.call('PEXPIRE', KEYS[1], ms)
redis.call('PEXPIRE', KEYS[2], ms)
return granted
"""
_DISMISS = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local t = redis.call('HGET', KEYS[2], 't')
  if t then
    local w = tonumber(redis.call('HGET', KEYS[2], 'w:' .. ARGV[1]) or '1')
    redis.call('HSET', KEYS[2], 't', tonumber(t) - w)
  end
  redis.call('HDEL', KEYS[2], 'w:' .. ARGV[1])
end
return 0
"""
# The live members' total weight: the stored total less the lapsed members' weights.
_ADMITTED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local total = tonumber(redis.call('HGET', KEYS[2], 't') or redis.call('ZCARD', KEYS[1]))
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])) do
  total = total - tonumber(redis.call('HGET', KEYS[2], 'w:' .. m) or '1')
end
return total
"""
_RENEW = """
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'r' then return redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return 0
"""
# ARGV: '1' to drop any claim, else '0' and the holder whose claim alone is dropped.
_RELEASE = """
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'r' and (ARGV[1] == '1' or v == 'r' .. ARGV[2]) then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
# A token applied once per counter: SET NX is the idempotency record, in the same script as the
# INCRBY, so a crash can never split them.
_ADD_ONCE = """
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  local v = redis.call('INCRBY', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return v
end
return tonumber(redis.call('GET', KEYS[1]) or '0')
"""


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
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError("RedisStore needs redis-py: pip install 'mrtr[redis]'") from exc
        plain, volatile = split_opt_in(url)
        self.allow_volatile = allow_volatile or volatile
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._refused: type[BaseException] = redis.ResponseError
        self._redis: Any = redis.Redis.from_url(
            plain, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._unchecked = not self.allow_volatile
        self._checking = asyncio.Lock()
        self._claim = self._redis.register_script(_CLAIM)
        self._release = self._redis.register_script(_RELEASE)
        self._renew = self._redis.register_script(_RENEW)
        self._add_once = self._redis.register_script(_ADD_ONCE)
        self._put_new = self._redis.register_script(_PUT_NEW)
        self._admit = self._redis.register_script(_ADMIT)
        self._dismiss = self._redis.register_script(_DISMISS)
        self._admitted = self._redis.register_script(_ADMITTED)
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

    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "") -> Claim:
        ms = min(max(1, int(lease * 1000)), self._ms(expires))
        found = await self._call("claim", self._claim(keys=[self._prefix + key],
                                                      args=[ms, holder]))
        return NEW if found is None else _decode(found)

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        value = b"d" + outcome
        await self._call("complete", self._redis.set(self._prefix + key, value,
                                                     px=self._ms(expires)))

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        found = await self._call("put_if_absent", self._put_new(
            keys=[self._prefix + key], args=[b"d" + outcome, self._ms(expires)]))
        return NEW if found is None else _decode(found)

    async def renew(self, key: str, *, lease: float) -> bool:
        ms = max(1, int(lease * 1000))
        return bool(await self._call("renew", self._renew(keys=[self._prefix + key], args=[ms])))

    async def release(self, key: str, *, holder: str | None = None) -> None:
        args = ["1", ""] if holder is None else ["0", holder]
        await self._call("release", self._release(keys=[self._prefix + key], args=args))

    async def get(self, key: str) -> Claim | None:
        found = await self._call("get", self._redis.get(self._prefix + key))
        return None if found is None else _decode(found)

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


def _decode(value: bytes) -> Claim:
    if value[:1] == b"d":
        return Claim(ClaimStatus.DONE, bytes(value[1:]))
    return RUNNING


async def ready(store: Store | None) -> None:
    """Check at start-up what a store checks before its first command (a Redis's persistence).

    Raises ValueError (the reason names the setting) for a store that refuses to serve. One
    that does not answer yet is only warned about: it is checked again on first use.
    """
    if isinstance(store, RedisStore):
        try:
            described = await store.check()
        except StoreUnavailable as exc:
            log.warning("cannot check the redis store now (%s): it is checked again before its "
                        "first command", exc.reason)
            return
        log.info("redis store: %s", described)
        if store.allow_volatile:
            log.warning("redis store accepted without durable persistence (allow_volatile=1): "
                        "a Redis restart forgets which rounds ran, and they run again")
