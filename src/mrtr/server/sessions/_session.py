"""A session opened by `initialize`: what its sealed id carries and what it holds in-process."""

# Design: the session id is a Sealer token (its own audience, so it never unseals as a
# requestState and vice versa) carrying the negotiated version, the client's capabilities and its
# info, the client it counts against (`tenant`) and a random secret: any worker or replica
# validates an id without a session table. What changes during a session (log level,
# subscriptions, GET streams, server requests awaiting answers, requests in flight) lives in
# this process only, so those want sticky routing across workers. Server request ids are
# `number.expiry.tag`, the tag an HMAC under the session's secret: any process holding the id
# tells an id this session issued (and whose ask is not over) from one it never issued, without
# asking anyone, so only answers to real asks travel through the store to the process that may
# await them (the answer channel).
from __future__ import annotations

import asyncio
import base64
import hmac
import math
import secrets
import time
from collections.abc import Callable
from typing import Any, Literal, Protocol

import msgspec

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

__all__ = ["Elsewhere", "Origin", "Outbound", "Session", "SessionInfo", "UnknownSession",
           "session_capabilities"]

_TAG_BYTES = 12  # of HMAC-SHA256 in a server request id: 16 characters
_MAX_ID = 64  # characters; a longer response id is none of ours
_SKEW = 30.0  # seconds an ask's expiry may differ between two processes' clocks
Origin = Literal["here", "elsewhere"]


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
    """What `initialize` fixed for the session (sealed into its id).

    `tenant` names the client the session counts against (a digest of its principal, or of its
    address when anonymous); `secret` keys the tags of the server request ids (16 random bytes;
    empty in ids sealed before it existed, whose answers then never leave their process).
    """

    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None = None
    tenant: str = ""
    secret: bytes = b""


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
    """One session's mutable state in this process.

    `tenant` is the client it counts against; `clock` returns epoch seconds.
    """

    def __init__(
        self,
        session_id: str,
        info: SessionInfo,
        *,
        tenant: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.id = session_id
        self.info = info
        self.tenant = info.tenant if tenant is None else tenant
        self._clock = clock
        self.last_used = clock()  # the table's LRU order: see Sessions.touch
        self.strays = 0  # responses to ids never issued, dropped (the first one is logged)
        self.log_level: str | None = None
        self.initialized = False
        self.subscriptions: set[str] = set()
        self.streams: list[Outbound] = []  # open GET streams, oldest first
        self.inflight: dict[RequestId, asyncio.Task[Any]] = {}
        self.closed = asyncio.Event()  # set when the session ends (DELETE): GET streams close
        self._pending: dict[RequestId, asyncio.Future[JSONObject]] = {}
        # Server request ids start at a random point: each worker or replica serving this
        # session counts on its own, and an answer may reach another one (the answer channel).
        self._first = self._next = secrets.randbits(40) + 1
        self._meta = self._build_meta()

    @property
    def version(self) -> str:
        return self.info.version

    @property
    def busy(self) -> bool:
        """A request in flight, a server request awaiting its answer or a GET stream open:
        the table never evicts a busy session."""
        return bool(self.inflight or self._pending or self.streams)

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
        request_id = self._new_id(timeout)
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
        request_id = message.get("id")
        future = self._pending.get(request_id) if isinstance(request_id, str | int) else None
        if future is None or future.done():
            return False
        future.set_result(message)
        return True

    def origin(self, request_id: object) -> Origin | None:
        """Who sent this session's server request `request_id`: "here" (this process, which no
        longer awaits it: a late answer or a copy), "elsewhere" (another process, which may),
        None when this session never issued it or its ask is over (drop the response)."""
        if not self.info.secret or not isinstance(request_id, str) or len(request_id) > _MAX_ID:
            return None
        body, _, tag = request_id.rpartition(".")
        number, _, expiry = body.partition(".")
        if not (_digits(number) and _digits(expiry)) or int(expiry) + _SKEW < self._clock():
            return None
        if not hmac.compare_digest(tag, self._tag(body)):
            return None
        return "here" if self._first <= int(number) < self._next else "elsewhere"

    def _new_id(self, timeout: float) -> str:
        """The id of a new server request whose answer is awaited `timeout` seconds."""
        number, self._next = self._next, self._next + 1
        body = f"{number}.{math.ceil(self._clock() + timeout)}"
        return f"{body}.{self._tag(body)}"

    def _tag(self, body: str) -> str:
        mac = hmac.digest(self.info.secret, body.encode(), "sha256")[:_TAG_BYTES]
        return base64.urlsafe_b64encode(mac).decode()

    def cancel(self, request_id: object) -> None:
        """`notifications/cancelled`: stop a request of this session still in flight."""
        task = self.inflight.get(request_id) if isinstance(request_id, str | int) else None
        if task is not None:
            task.cancel()


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 20
