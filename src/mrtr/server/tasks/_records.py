"""Task records in the Store: the record, its answers, its cancel flag, its run lease, caps."""

# Design: only the holder of a task's run lease (`task:<id>:run`) writes its record, so the
# record needs no compare-and-set: creation claims the lease before the record is visible, and a
# runner writes its last record before releasing. Other writers get keys of their own: each
# answer (`task:<id>:in:<key>`, first answer wins through `claim`) and the cancel flag. A lapsed
# lease means the runner died: whoever claims it next resumes the task from the record's journal.
from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from mrtr.protocol import JSON, JSONObject
from mrtr.server._journal import FlowState
from mrtr.stores import ClaimStatus, Store

__all__ = ["TaskBook", "TaskPolicy", "TaskRecord", "iso_time", "new_task_id"]

TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """How tasks live: `ttl_ms` from creation, `poll_interval_ms` suggested to clients,
    `max_live` tasks per principal, `lease` seconds a dead runner holds a task."""

    ttl_ms: int = 3_600_000
    poll_interval_ms: int = 500
    max_live: int = 100
    lease: float = 10.0


class TaskRecord(msgspec.Struct, kw_only=True):
    """Everything a replica needs to report or resume one task."""

    task_id: str
    principal: str | None
    tool: str
    arguments: dict[str, JSON]
    meta: JSONObject  # the creating request's `_meta` (capabilities the asks are checked against)
    status: str = "working"
    status_message: str | None = None
    created_at: float
    updated_at: float
    expires: float  # epoch seconds: the record and everything keyed on it are gone after
    ttl_ms: int
    poll_interval_ms: int
    flow: FlowState = msgspec.field(default_factory=FlowState)
    keys: dict[str, list[str]] = msgspec.field(default_factory=dict)  # wire key -> [key, shape]
    open: list[str] = msgspec.field(default_factory=list)  # wire keys asked and unanswered
    asked: dict[str, JSONObject] = msgspec.field(default_factory=dict)  # open key -> request
    result: JSONObject | None = None
    error: JSONObject | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(TaskRecord)


def new_task_id() -> str:
    """An unguessable task id (192 random bits)."""
    return secrets.token_urlsafe(24)


def iso_time(epoch: float) -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2026-07-28T10:00:00.000Z."""
    stamp = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class TaskBook:
    """Reads and writes task records and their side keys in one Store."""

    def __init__(self, store: Store, policy: TaskPolicy) -> None:
        self.store = store
        self.policy = policy

    # -- the record ----------------------------------------------------------------------------
    async def load(self, task_id: str) -> TaskRecord | None:
        found = await self.store.get("task:" + task_id)
        if found is None or found.status is not ClaimStatus.DONE or found.outcome is None:
            return None
        return _DECODER.decode(found.outcome)

    async def save(self, record: TaskRecord) -> None:
        await self.store.complete("task:" + record.task_id, _ENCODER.encode(record),
                                  expires=record.expires)

    # -- the run lease -------------------------------------------------------------------------
    async def acquire(self, record: TaskRecord) -> bool:
        """Take the run lease; False when a live runner holds it."""
        claim = await self.store.claim(f"task:{record.task_id}:run", lease=self.policy.lease,
                                       expires=record.expires)
        return claim.status is ClaimStatus.NEW

    async def renew(self, task_id: str) -> bool:
        return await self.store.renew(f"task:{task_id}:run", lease=self.policy.lease)

    async def release(self, task_id: str) -> None:
        await self.store.release(f"task:{task_id}:run")

    async def running(self, task_id: str) -> bool:
        return await self.store.get(f"task:{task_id}:run") is not None

    # -- answers and cancellation --------------------------------------------------------------
    async def answer(self, record: TaskRecord, key: str, response: JSONObject) -> None:
        """Store the first answer to the open `key`; later ones are ignored."""
        name = f"task:{record.task_id}:in:{key}"
        claim = await self.store.claim(name, lease=self.policy.lease, expires=record.expires)
        if claim.status is ClaimStatus.NEW:
            await self.store.complete(name, _ENCODER.encode(response), expires=record.expires)

    async def answers(self, record: TaskRecord) -> dict[str, JSONObject]:
        """The stored answers to the record's open keys."""
        found: dict[str, JSONObject] = {}
        for key in record.open:
            entry = await self.store.get(f"task:{record.task_id}:in:{key}")
            if entry is not None and entry.outcome is not None:
                found[key] = msgspec.json.decode(entry.outcome)
        return found

    async def cancel(self, record: TaskRecord) -> None:
        await self.store.complete(f"task:{record.task_id}:cancel", b"1", expires=record.expires)

    async def cancelled(self, task_id: str) -> bool:
        return await self.store.get(f"task:{task_id}:cancel") is not None

    # -- the per-principal cap -----------------------------------------------------------------
    async def count(self, principal: str | None, amount: int, expires: float) -> int:
        """Add `amount` to the principal's live tasks; returns the new count."""
        return await self.store.add(f"tasks:live:{principal or ''}", amount, expires=expires)
