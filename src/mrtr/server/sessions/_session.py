"""Sessions opened by `initialize`: the sealed session id and what one session holds in-process."""

# Design: the session id is a Sealer token (its own audience, so it never unseals as a
# requestState and vice versa) carrying the negotiated version, the client's capabilities and its
# info: any worker or replica validates an id without a session table. What changes during a
# session (log level, subscriptions, GET streams, server requests awaiting answers, requests in
# flight) lives in this process only, so 2025 sessions need sticky routing across workers. A
# terminated id is remembered here until the table's bound evicts it (404 meanwhile).
from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from mrtr.errors import InvalidRequestState
from mrtr.protocol import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    PROTOCOL_VERSION,
    PROTOCOL_VERSION_KEY,
    JSONObject,
    JSONRPCRequest,
    RequestId,
    encode,
)
from mrtr.server._sealing import Binding, Sealer, digest_arguments

__all__ = [
    "Elsewhere", "Outbound", "Session", "SessionInfo", "Sessions", "UnknownSession",
    "session_capabilities",
]

_BINDING_TARGET = "mcp-session"
_NO_ARGUMENTS = digest_arguments({})


class Outbound(Protocol):
    """Writes one JSON-RPC message to the client (the POST's SSE stream, or stdout)."""

    async def __call__(self, message: bytes, /) -> None: ...


class Elsewhere(Protocol):
    """Waits up to `timeout` seconds for the response to `request_id` that reached another
    process; None when none came."""

    async def __call__(self, request_id: RequestId, timeout: float, /) -> JSONObject | None: ...


def _forward(done: asyncio.Future[JSONObject | None], future: asyncio.Future[JSONObject]) -> None:
    if done.cancelled() or done.exception() is not None:
        return  # the local answer may still come; the timeout bounds the wait
    found = done.result()
    if found is not None and not future.done():
        future.set_result(found)


class UnknownSession(Exception):  # noqa: N818 - reads as the condition (HTTP 404)
    """The session id is forged, expired, bound to another principal, or was terminated."""


class SessionInfo(msgspec.Struct, array_like=True, frozen=True):
    """What `initialize` fixed for the session (sealed into its id)."""

    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None = None


def session_capabilities(version: str, capabilities: JSONObject) -> JSONObject:
    """The client capabilities the negotiated `version` lets us use.

    2025-11-25 added URL elicitation and sampling tools/context; 2025-03-26 has no elicitation.
    """
    caps = {k: v for k, v in capabilities.items() if isinstance(v, dict)}
    caps.pop("extensions", None)  # the tasks extension is 2026-07-28 only: never in a session
    if version == "2025-11-25":
        return caps
    elicitation = caps.pop("elicitation", None)
    if version != "2025-03-26" and elicitation is not None:
        caps["elicitation"] = {"form": {}}
    sampling = caps.get("sampling")
    if sampling is not None:
        caps["sampling"] = {}
    return caps


class Session:
    """One session's mutable state in this process."""

    def __init__(self, session_id: str, info: SessionInfo) -> None:
        self.id = session_id
        self.info = info
        self.log_level: str | None = None
        self.initialized = False
        self.subscriptions: set[str] = set()
        self.streams: list[Outbound] = []  # open GET streams, oldest first
        self.inflight: dict[RequestId, asyncio.Task[Any]] = {}
        self.closed = asyncio.Event()  # set when the session ends (DELETE): GET streams close
        self._pending: dict[RequestId, asyncio.Future[JSONObject]] = {}
        # Server request ids start at a random point: each worker or replica serving this
        # session counts on its own, and an answer may reach another one (the answer channel).
        self._ids = itertools.count(secrets.randbits(40) + 1)
        self._meta = self._build_meta()

    @property
    def version(self) -> str:
        return self.info.version

    @property
    def meta(self) -> JSONObject:
        """The 2026-07-28 `_meta` a request of this session is served under."""
        return self._meta

    def set_level(self, level: str) -> None:
        self.log_level = level
        self._meta = self._build_meta()

    def _build_meta(self) -> JSONObject:
        meta: JSONObject = {
            PROTOCOL_VERSION_KEY: PROTOCOL_VERSION,
            CLIENT_CAPABILITIES_KEY: session_capabilities(self.info.version,
                                                          self.info.capabilities),
        }
        if self.info.client_info is not None:
            meta[CLIENT_INFO_KEY] = self.info.client_info
        if self.log_level is not None:
            meta[LOG_LEVEL_KEY] = self.log_level
        return meta

    async def request(
        self,
        method: str,
        params: JSONObject,
        outbound: Outbound,
        timeout: float,
        *,
        elsewhere: Elsewhere | None = None,
    ) -> JSONObject:
        """Send a server→client request on `outbound` and return the client's response message.

        `elsewhere(request_id, timeout)` also waits for the response, when it reaches another
        process. Raises TimeoutError after `timeout` seconds; the pending entry is dropped
        either way.
        """
        request_id = next(self._ids)
        future: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        waiter: asyncio.Future[JSONObject | None] | None = None
        try:
            await outbound(encode(JSONRPCRequest(id=request_id, method=method, params=params)))
            async with asyncio.timeout(timeout):
                if elsewhere is not None:
                    waiter = asyncio.ensure_future(elsewhere(request_id, timeout))
                    waiter.add_done_callback(lambda done: _forward(done, future))
                return await future
        finally:
            self._pending.pop(request_id, None)
            if waiter is not None:
                waiter.cancel()

    def resolve(self, message: JSONObject) -> bool:
        """Deliver a client response; False when its id matches no request we are waiting on."""
        future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            return False
        future.set_result(message)
        return True

    def cancel(self, request_id: object) -> None:
        """`notifications/cancelled`: stop a request of this session still in flight."""
        task = self.inflight.get(request_id) if isinstance(request_id, str | int) else None
        if task is not None:
            task.cancel()


class Sessions:
    """Issues and validates session ids; keeps each live session's state (at most `limit`).

    `ttl` (seconds) bounds a session id's life.
    """

    def __init__(
        self,
        sealer: Sealer,
        *,
        ttl: float = 24 * 3600.0,
        limit: int = 10_000,
        logger: logging.Logger | None = None,
    ) -> None:
        self._sealer = sealer
        self._ttl = ttl
        self._limit = limit
        self._log = logger or logging.getLogger("mrtr.server.session")
        self._live: OrderedDict[str, Session] = OrderedDict()
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._encode: Callable[[SessionInfo], bytes] = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder(SessionInfo).decode

    def open(self, info: SessionInfo, principal: str | None) -> Session:
        """Start a session: a fresh sealed id bound to `principal`."""
        token = self._sealer.seal(self._encode(info), _binding(principal))
        session = Session(token, info)
        self._remember(session)
        return session

    def get(self, session_id: str, principal: str | None) -> Session:
        """The session behind `session_id`. Raises UnknownSession (reason logged)."""
        session = self._live.get(session_id)
        if session is not None:
            self._live.move_to_end(session_id)
            self._check(session_id, principal)  # still within its lifetime, same principal
            return session
        if session_id in self._ended:
            raise UnknownSession("terminated")
        info = self._check(session_id, principal)
        session = Session(session_id, info)  # sealed elsewhere: a restart or another worker
        session.initialized = True
        self._remember(session)
        return session

    def end(self, session: Session) -> None:
        """DELETE: forget the session; its id answers 404 from now on."""
        self._live.pop(session.id, None)
        self._ended[session.id] = None
        while len(self._ended) > self._limit:
            self._ended.popitem(last=False)
        session.closed.set()
        for task in list(session.inflight.values()):
            task.cancel()

    def live(self) -> list[Session]:
        return list(self._live.values())

    def _check(self, session_id: str, principal: str | None) -> SessionInfo:
        try:
            body = self._sealer.unseal(session_id, _binding(principal)).body
            return self._decode(body)
        except (InvalidRequestState, msgspec.DecodeError) as exc:
            self._log.info("session id refused: %s", exc)
            raise UnknownSession(str(exc)) from None

    def _remember(self, session: Session) -> None:
        self._live[session.id] = session
        while len(self._live) > self._limit:
            _, old = self._live.popitem(last=False)
            self._log.warning("session table full (%d): dropped the oldest session", self._limit)
            old.closed.set()
            for task in list(old.inflight.values()):
                task.cancel()


def _binding(principal: str | None) -> Binding:
    return Binding(method="initialize", target=_BINDING_TARGET, arguments_digest=_NO_ARGUMENTS,
                   principal=principal)

