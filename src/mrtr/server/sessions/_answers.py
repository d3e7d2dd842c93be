"""AnswerChannel: a 2025 client's answer that reached another worker or replica."""

# Design: a 2025 session's server→client request travels on the SSE stream of one POST, held by
# one process; the client POSTs its answer separately, and a load balancer may hand that POST to
# any process. The one holding the stream resolves it in memory (Session.resolve); any other
# delivers it to the shared Store under a key naming the session and the request id, where
# the waiting process collects it (a future in memory, SQLite polling, a Redis BLPOP). Request
# ids start at a random point per process (Session), so two processes never wait on one key.
# Bounded (StoreLimits): an answer over max_answer, or one its principal's quota cannot hold
# until it is collected, is never stored; a small stand-in response carrying the error that
# names the limit takes its place, so the request it answers ends at once with that error.
# A stored answer counts in the quota (weighted slots, server/_limits.py) until collected.
from __future__ import annotations

import hashlib
import logging
import time

import msgspec

from mrtr.errors import LimitExceeded, from_wire
from mrtr.protocol import JSONObject, RequestId, encode
from mrtr.server._failures import over_limit, over_quota, stand_in_answer
from mrtr.server._limits import StoreLimits, quota_key
from mrtr.server.sessions._session import Elsewhere
from mrtr.stores import Store, StoreUnavailable

__all__ = ["AnswerChannel"]


class AnswerChannel:
    """Carries answers between the processes sharing `store` (None: this process only).

    `ttl` (seconds) is how long an answer nobody collected stays in the store; `limits` bound
    the bytes of one answer and what one principal's answers may hold there.
    """

    def __init__(self, store: Store | None, *, ttl: float, logger: logging.Logger,
                 limits: StoreLimits = StoreLimits()) -> None:  # noqa: B008 - frozen value
        self.store = store
        self._ttl = ttl
        self._log = logger
        self.limits = limits

    async def pass_on(self, session_id: str, message: JSONObject,
                      principal: str | None = None) -> None:
        """A response no request of this process awaits: leave it for the one that does.

        `principal` is the session's: the answer counts in its quota until it is collected.
        """
        request_id = _id(message.get("id"))
        store = self.store
        if store is None or request_id is None:
            self._log.info("ignored a response to unknown server request id %r",
                           message.get("id"))
            return
        self._log.info("a response to unknown server request id %r goes to the store: "
                       "another process may await it", request_id)
        key, expires = answer_key(session_id, request_id), time.time() + self._ttl
        try:
            body = await self._bounded(key, request_id, encode(message), principal, expires)
            await store.deliver(key, body, expires=expires)
        except StoreUnavailable as exc:
            self._log.error("store unavailable, the answer to server request %r is lost: %s",
                            request_id, exc.reason)

    async def _bounded(self, key: str, request_id: RequestId, body: bytes,
                       principal: str | None, expires: float) -> bytes:
        """`body`, counted in the principal's quota; a stand-in error when it cannot be kept."""
        assert self.store is not None
        limits = self.limits
        if len(body) > limits.max_answer:
            self._log.warning("the answer to server request %r is %d bytes, over "
                              "StoreLimits.max_answer=%d: not kept, the request ends with an "
                              "error", request_id, len(body), limits.max_answer)
            return stand_in_answer(request_id, over_limit(
                f"The answer to server request {request_id!r}", len(body), limits.max_answer,
                "StoreLimits.max_answer"))
        quota, setting = limits.quota(principal)
        if not await self.store.admit(quota_key(principal), key, limit=quota, expires=expires,
                                      weight=len(body)):
            self._log.warning("the answer to server request %r (%d bytes) would pass %s=%d: "
                              "not kept, the request ends with an error", request_id,
                              len(body), setting, quota)
            return stand_in_answer(request_id, over_quota(len(body), quota, setting))
        return body

    def check(self, method: str, response: JSONObject) -> None:
        """Raise LimitExceeded for an answer over StoreLimits.max_answer, wherever it arrived:
        in this process (measured now), or in another (which sent that error in its place)."""
        error = response.get("error")
        data = error.get("data") if isinstance(error, dict) else None
        if isinstance(data, dict) and data.get("type") == LimitExceeded.DATA_TYPE:
            raise from_wire(error)
        size = len(encode(response))
        if size > self.limits.max_answer:
            raise over_limit(f"The answer to the {method} request", size, self.limits.max_answer,
                             "StoreLimits.max_answer")

    def elsewhere(self, session_id: str, principal: str | None = None) -> Elsewhere | None:
        """What waits for answers that reach another process; None without a store.

        `principal` is the session's: a collected answer no longer counts in its quota.
        """
        store = self.store
        if store is None:
            return None

        async def collect(request_id: RequestId, timeout: float) -> JSONObject | None:
            key = answer_key(session_id, request_id)
            try:
                body = await store.collect(key, timeout=timeout)
                if body is not None:
                    await store.dismiss(quota_key(principal), key)
            except StoreUnavailable as exc:
                self._log.warning("store unavailable, answers are awaited here only: %s",
                                  exc.reason)
                return None
            found = msgspec.json.decode(body) if body is not None else None
            return found if isinstance(found, dict) else None

        return collect


def answer_key(session_id: str, request_id: RequestId) -> str:
    """The store key of one answer: the session id (a long sealed token) hashed, and the id
    with its JSON type."""
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:32]
    return f"answer:{digest}:{type(request_id).__name__}:{request_id}"


def _id(value: object) -> RequestId | None:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None
