"""URL elicitations that complete: a sealed elicitation id per flow, and its completion record in
the store, which any replica reads."""

# Design: 2026-07-28 URL elicitation has no elicitationId and no completion notification: the
# client's `accept` is consent to open the page, not a sign that the user finished there
# (spec: client/elicitation). Authors kept re-inventing "has the user finished?", often as an
# ask that loops or a retry that blocks. Here `ctx.elicit_url_done` sends the URL with a sealed
# elicitation id in it; the page (or the third party's redirect) ends at McpApp's completion
# route (http/_completion.py), which opens the id and records completion in the shared store.
# Until that record exists, each retry is answered with a state-only round ("not yet", with a
# retry hint in `_meta`) that does not count against max_rounds and never blocks; the flow's
# deadline bounds the wait. The id names a record key derived from the flow id (so a forged id
# does not open, and an id of another flow completes only that flow); it is sealed under its own
# audience, so it is never a requestState nor a consent token.
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from mrtr.errors import InvalidRequestState, MrtrError
from mrtr.protocol import RETRY_AFTER_KEY, UNSET, InputRequiredResult
from mrtr.server._asks import Suspend
from mrtr.server._sealing import Binding, Sealer
from mrtr.stores import MemoryStore

if TYPE_CHECKING:
    from mrtr.stores import Store

__all__ = ["COMPLETION_PREFIX", "RETRY_HINT_KEY", "Completions", "NotYet", "UnknownElicitation",
           "not_yet"]

RETRY_HINT_KEY = RETRY_AFTER_KEY  # `_meta` of a "not yet" round
COMPLETION_PREFIX = "/elicitation/complete/"  # after McpApp's path: /mcp/elicitation/complete/ID
_BINDING = Binding(method="elicitation/url", target="", arguments_digest=b"", principal=None)


class UnknownElicitation(MrtrError):
    """A completion id that does not open: forged, of another server, or expired."""


class NotYet(Suspend):
    """The user has not finished on the page yet: a state-only round that does not count."""

    def __init__(self, retry_after: float) -> None:
        super().__init__()
        self.retry_after = retry_after


class _Record(msgspec.Struct, array_like=True, frozen=True):
    key: str  # the store key of the completion record


class Completions:
    """Mints elicitation ids and records their completion (one per Dispatcher).

    `ttl` is how long an id opens and a record is kept (seconds); `retry_after` the hint sent
    with each "not yet" round. Without a store, completions are seen by this process only.
    """

    def __init__(self, sealer: Sealer, store: Store | None, *, audience: str,
                 ttl: float = 3600.0, retry_after: float = 2.0,
                 wall: Callable[[], float] = time.time) -> None:
        self._sealer = sealer.for_audience(audience, ttl=ttl, flow_ttl=ttl)
        # The Dispatcher's store: every replica sees a completion. None: this process only.
        self.store: Store = store if store is not None else MemoryStore()
        self.ttl = ttl
        self.retry_after = retry_after
        self._wall = wall
        self.log = logging.getLogger("mrtr.server")

    def mint(self, record: str) -> str:
        """A sealed elicitation id for the completion record `record` (URL-safe)."""
        return self._sealer.seal(msgspec.msgpack.encode(_Record(record)), _BINDING)

    def _key(self, record: str) -> str:
        return f"elicitation:{record}"

    async def complete(self, elicitation_id: str, data: object = None) -> None:
        """Record that the user finished; raises UnknownElicitation for an id that does not open.

        `data` (JSON) is what `ctx.elicit_url_done` returns; the first completion wins.
        """
        try:
            unsealed = self._sealer.unseal(elicitation_id, _BINDING)
            record = msgspec.msgpack.decode(unsealed.body, type=_Record)
        except (InvalidRequestState, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise UnknownElicitation("unknown or expired elicitation id") from exc
        expires = max(unsealed.deadline, self._wall() + self.ttl)
        await self.store.put_if_absent(self._key(record.key), msgspec.json.encode(data),
                                       expires=expires)

    async def completed(self, record: str) -> tuple[bool, object]:
        """Whether `record` was completed, and its data."""
        claim = await self.store.get(self._key(record))
        if claim is None or claim.outcome is None:
            return False, None
        return True, msgspec.json.decode(claim.outcome)


def not_yet(result: InputRequiredResult) -> float | None:
    """The seconds to wait before retrying a "not yet" round, else None (any other round)."""
    if result.input_requests is not UNSET:
        return None
    hint = result.meta.get(RETRY_HINT_KEY) if isinstance(result.meta, dict) else None
    return min(max(hint / 1000.0, 0.05), 30.0) if isinstance(hint, int | float) else None
