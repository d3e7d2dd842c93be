"""AnswerChannel: a 2025 client's answer that reached another worker or replica."""

# Design: a 2025 session's server→client request travels on the SSE stream of one POST, held by
# one process; the client POSTs its answer separately, and a load balancer may hand that POST to
# any process. The one holding the stream resolves it in memory (Session.resolve); any other
# delivers it to the shared Store under a key naming the session and the request id, where
# the waiting process collects it (a future in memory, SQLite polling, a Redis BLPOP). Request
# ids start at a random point per process (Session), so two processes never wait on one key.
from __future__ import annotations

import hashlib
import logging
import time

import msgspec

from mrtr.protocol import JSONObject, RequestId, encode
from mrtr.server.sessions._session import Elsewhere
from mrtr.stores import Store, StoreUnavailable

__all__ = ["AnswerChannel"]


class AnswerChannel:
    """Carries answers between the processes sharing `store` (None: this process only).

    `ttl` (seconds) is how long an answer nobody collected stays in the store.
    """

    def __init__(self, store: Store | None, *, ttl: float, logger: logging.Logger) -> None:
        self.store = store
        self._ttl = ttl
        self._log = logger

    async def pass_on(self, session_id: str, message: JSONObject) -> None:
        """A response no request of this process awaits: leave it for the one that does."""
        request_id = _id(message.get("id"))
        store = self.store
        if store is None or request_id is None:
            self._log.info("ignored a response to unknown server request id %r",
                           message.get("id"))
            return
        self._log.info("a response to unknown server request id %r goes to the store: "
                       "another process may await it", request_id)
        try:
            await store.deliver(answer_key(session_id, request_id), encode(message),
                                expires=time.time() + self._ttl)
        except StoreUnavailable as exc:
            self._log.error("store unavailable, the answer to server request %r is lost: %s",
                            request_id, exc.reason)

    def elsewhere(self, session_id: str) -> Elsewhere | None:
        """What waits for answers that reach another process; None without a store."""
        store = self.store
        if store is None:
            return None

        async def collect(request_id: RequestId, timeout: float) -> JSONObject | None:
            try:
                body = await store.collect(answer_key(session_id, request_id), timeout=timeout)
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
