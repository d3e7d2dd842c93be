"""Sessions: the 2025 sessions of one process, their caps, and terminations every process sees."""

# Design: the table holds what a session keeps in this process, least recently used first,
# once overall and once per client (the principal, or the address of an anonymous caller, sealed
# into the id as its `tenant`, so every process counts a session against the same client). A
# client at its cap, or a process at its cap, makes room only by dropping a session idle for
# `SessionLimits.idle` (nothing in flight, no GET stream); dropping forgets in-process state,
# not the id, which opens afresh on its next request. Otherwise `initialize` gets 429: one client
# never pushes out another's sessions, and nobody's call in flight ends. DELETE records the
# termination in the Store under the id's digest, expiring with the id, and every process
# checks it on each request (the local `_ended` memory only answers faster); the terminations a
# client may keep recorded are capped by a set of slots per client, so ending sessions in a loop
# cannot fill the store.
from __future__ import annotations

import base64
import hashlib
import ipaddress
import logging
import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass

import msgspec

from mrtr.errors import InvalidRequestState, StoreUnavailable
from mrtr.server._failures import too_many_sessions
from mrtr.server._sealing import Binding, Sealer, digest_arguments
from mrtr.server.sessions._session import Session, SessionInfo, UnknownSession
from mrtr.stores import Store

__all__ = ["SessionLimits", "Sessions", "session_digest", "tenant_of"]

_BINDING_TARGET = "mcp-session"
_NO_ARGUMENTS = digest_arguments({})
_MARGIN = 300.0  # seconds a termination record outlives its id: clocks of replicas differ
_ENDED_RETRY = 3600.0  # Retry-After of a DELETE past `ended_per_client`
_LOG_EVERY = 60.0  # seconds between two log lines about refused sessions


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """The caps of one process's session table, and of the terminations the store keeps.

    `per_client`: sessions one client holds in this process (a principal; an anonymous caller
    by its address, IPv6 by its /64). `total`: sessions in this process. `idle`: seconds after
    its last request when a session with nothing in flight and no GET stream may make room for
    a new one (its id stays valid). `ended_per_client`: terminated ids of one client the store
    keeps at once (each until it would have expired); past it, DELETE is refused with 429.
    """

    per_client: int = 100
    total: int = 10_000
    idle: float = 600.0
    ended_per_client: int = 10_000

    def __post_init__(self) -> None:
        for name in ("per_client", "total", "ended_per_client"):
            if getattr(self, name) < 1:
                raise ValueError(f"SessionLimits.{name} must be at least 1")
        if not (math.isfinite(self.idle) and self.idle >= 0):
            raise ValueError(f"SessionLimits.idle must be a finite number of seconds >= 0, "
                             f"not {self.idle!r}")


class Sessions:
    """Issues and validates session ids; keeps each live session's state within `limits`.

    `ttl` (seconds) is the life of an id (the sealer's); `store` (None: this process only)
    records terminations for every process; `clock` returns epoch seconds.
    """

    def __init__(
        self,
        sealer: Sealer,
        *,
        ttl: float = 24 * 3600.0,
        limits: SessionLimits | None = None,
        store: Store | None = None,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
    ) -> None:
        self._sealer = sealer
        self._ttl = ttl
        self.limits = limits or SessionLimits()
        self._store = store
        self._clock = clock
        self._log = logger or logging.getLogger("mrtr.server.session")
        self._live: OrderedDict[str, Session] = OrderedDict()  # least recently used first
        self._clients: dict[str, OrderedDict[str, Session]] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._refusals, self._refusals_logged = 0, -math.inf
        self._encode: Callable[[SessionInfo], bytes] = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder(SessionInfo).decode

    def open(self, info: SessionInfo, principal: str | None, *,
             address: str | None = None) -> Session:
        """Start a session: a fresh sealed id bound to `principal`, counted against it (or,
        anonymous, against `address`). Raises TooManySessions at a cap."""
        tenant = tenant_of(principal, address)
        self._make_room(tenant)
        info = msgspec.structs.replace(info, tenant=tenant, secret=secrets.token_bytes(16))
        token = self._sealer.seal(self._encode(info), _binding(principal))
        session = Session(token, info, clock=self._clock)
        self._remember(session)
        return session

    async def get(self, session_id: str, principal: str | None, *,
                  address: str | None = None) -> Session:
        """The live session behind `session_id`. Raises UnknownSession (reason logged),
        TooManySessions (an id new to this process, at a cap) or StoreUnavailable."""
        if session_id in self._ended:
            raise UnknownSession("terminated")
        session = self._live.get(session_id)
        info = self._check(session_id, principal)  # within its life, same principal
        if await self._recorded(session_id):
            self._log.info("session id refused: terminated (recorded in the store)")
            if session is not None:
                self._forget(session)
            self._note_ended(session_id)
            raise UnknownSession("terminated")
        session = self._live.get(session_id)  # another request may have added it meanwhile
        if session is not None:
            self.touch(session)
            return session
        if session_id in self._ended:
            raise UnknownSession("terminated")
        tenant = info.tenant or tenant_of(principal, address)
        self._make_room(tenant)
        session = Session(session_id, info, tenant=tenant, clock=self._clock)
        session.initialized = True  # sealed elsewhere: a restart or another worker
        self._remember(session)
        return session

    async def end(self, session: Session) -> None:
        """DELETE: from now on every process sharing the store answers 404 for the id.

        Raises TooManySessions when the client's recorded terminations are at their cap, and
        StoreUnavailable; the session goes on in both cases.
        """
        store = self._store
        if store is not None:
            digest = session_digest(session.id)
            expires = self._clock() + self._ttl + _MARGIN  # the id expires before that
            cap = self.limits.ended_per_client
            if not await store.admit(f"sessions-ended:{session.tenant}", digest, limit=cap,
                                     expires=expires):
                self._refused(self._clock(), "a DELETE: its client has %d terminated ids "
                              "recorded (SessionLimits.ended_per_client)", cap)
                raise too_many_sessions("ended", cap, _ENDED_RETRY)
            await store.put_if_absent(_ended_key(digest), b"", expires=expires)
        self._forget(session)
        self._note_ended(session.id)

    async def refresh(self, session: Session) -> None:
        """End `session` here too when another process terminated it (its GET streams close):
        what a long-lived stream asks now and then. A store that cannot answer changes nothing.
        """
        try:
            ended = await self._recorded(session.id)
        except StoreUnavailable as exc:
            self._log.info("could not check whether a session was terminated: %s", exc.reason)
            return
        if ended:
            self._forget(session)
            self._note_ended(session.id)

    def touch(self, session: Session) -> None:
        """`session` was just used: it goes last in the eviction order."""
        session.last_used = self._clock()
        if self._live.get(session.id) is session:
            self._live.move_to_end(session.id)
            self._clients[session.tenant].move_to_end(session.id)

    def live(self) -> list[Session]:
        return list(self._live.values())

    def held(self, tenant: str) -> int:
        """How many sessions of the client `tenant` this process holds."""
        return len(self._clients.get(tenant, ()))

    # -- inside --------------------------------------------------------------------------------
    def _check(self, session_id: str, principal: str | None) -> SessionInfo:
        try:
            return self._decode(self._sealer.unseal(session_id, _binding(principal)).body)
        except (InvalidRequestState, msgspec.DecodeError) as exc:
            self._log.info("session id refused: %s", exc)
            raise UnknownSession(str(exc)) from None

    async def _recorded(self, session_id: str) -> bool:
        """Whether a process sharing the store terminated `session_id`."""
        store = self._store
        return store is not None and await store.get(
            _ended_key(session_digest(session_id))) is not None

    def _make_room(self, tenant: str) -> None:
        """Room for one more session of `tenant`, or TooManySessions naming the cap."""
        limits, now = self.limits, self._clock()
        own = self._clients.get(tenant)
        if own is not None and len(own) >= limits.per_client:
            wait = self._evict(own, now)
            if wait is not None:
                self._refused(now, "a session: its client holds %d here (SessionLimits.per_client)",
                              limits.per_client)
                raise too_many_sessions("client", limits.per_client, wait)
        if len(self._live) >= limits.total:
            wait = self._evict(self._live, now)
            if wait is not None:
                self._refused(now, "a session: this process holds %d (SessionLimits.total)",
                              limits.total)
                raise too_many_sessions("server", limits.total, wait)

    def _refused(self, now: float, why: str, limit: int) -> None:
        """Log a refusal: one line a minute at most, however hard a client floods."""
        self._refusals += 1
        if now - self._refusals_logged < _LOG_EVERY:
            return
        self._log.warning("refused " + why + "; %d refusals since the last such line",
                          limit, self._refusals)
        self._refusals, self._refusals_logged = 0, now

    def _evict(self, table: MutableMapping[str, Session], now: float) -> float | None:
        """Drop the least recently used idle session of `table`: None when one went, else the
        seconds until one may."""
        idle = self.limits.idle
        for session in table.values():
            if session.busy:
                continue  # never a session with a call in flight or a stream open
            waited = now - session.last_used
            if waited < idle:
                return idle - waited  # the rest were used later still
            self._forget(session, quiet=True)
            self._log.info("session table: dropped a session idle for %.0f s", waited)
            return None
        return idle

    def _remember(self, session: Session) -> None:
        self._live[session.id] = session
        self._clients.setdefault(session.tenant, OrderedDict())[session.id] = session

    def _forget(self, session: Session, *, quiet: bool = False) -> None:
        """Take `session` out of the table; unless `quiet` (idle, nothing to stop), it ends:
        its GET streams close and its requests in flight are cancelled."""
        if self._live.get(session.id) is session:
            del self._live[session.id]
            own = self._clients[session.tenant]
            del own[session.id]
            if not own:
                del self._clients[session.tenant]
        if not quiet:
            session.closed.set()
            for task in list(session.inflight.values()):
                task.cancel()

    def _note_ended(self, session_id: str) -> None:
        self._ended[session_id] = None
        while len(self._ended) > self.limits.total:
            self._ended.popitem(last=False)


def tenant_of(principal: str | None, address: str | None) -> str:
    """The client a session counts against: its principal, else its address (IPv6: the /64),
    as a short digest (sealed into the session id)."""
    if principal is not None:
        label = "principal " + principal
    elif address:
        label = "address " + _network(address)
    else:
        label = "anonymous"
    return base64.urlsafe_b64encode(hashlib.sha256(label.encode()).digest()[:12]).decode()


def session_digest(session_id: str) -> str:
    """A session id (a long sealed token) as a store key part."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


def _ended_key(digest: str) -> str:
    return f"session-ended:{digest}"


def _network(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address  # a Unix socket path, or what the server put there
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        if mapped is not None:
            return str(mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def _binding(principal: str | None) -> Binding:
    return Binding(method="initialize", target=_BINDING_TARGET, arguments_digest=_NO_ARGUMENTS,
                   principal=principal)
