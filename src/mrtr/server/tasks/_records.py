"""Task records in the Store: the record, its end, its answers, its cancel flag, its run lease,
and the live-task slots of each principal."""

# Design: only the holder of a task's run lease (`task:<id>:run`) writes its working record
# (`task:<id>`): creation claims the lease before the record is visible, and a runner writes its
# last record before releasing. The terminal record goes to a key of its own, `task:<id>:end`,
# through `put_if_absent`: the first end stored wins (compare-and-set from absent), so a cancel
# racing completion, two replicas settling at once or a runner that lost its lease can never
# rewrite an ended task; `load` reads the end first. Other writers get keys of their own: each
# answer (`task:<id>:in:<key>`, first answer wins through `claim`) and the cancel flag. A lapsed
# lease means the runner died: whoever claims it next resumes the task from the record's journal.
# Run leases are tracked in the store's index LEASES (#28), so the sweep (_sweep.py) finds the
# lapsed ones without a request and without a scan; `ring` and `bell` are the task's
# notification channel (answers and cancels wake its runner; best effort, see Store.notify).
# Live tasks are Store slots (`admit`), one per task under its principal's key, each lapsing with
# its task's TTL: a task frees its slot when it ends, and at its deadline whatever happened (a
# parked task nobody answers, a crash before the end was written); a refusal changes nothing.
# A record keeps the principal as the plain string requestState binds to (never the object), and
# an OAuth principal's issuer, subject, client id and scopes, so the handler sees the same
# `ctx.identity` on every replica.
# Bytes (StoreLimits, server/_limits.py): every record and answer is counted, by its key and
# size, in its principal's quota (weighted slots lapsing with the task) before it is written;
# over it, LimitExceeded and nothing written. An answer over max_answer is refused first. The
# end record is slim (no arguments, journal or request `_meta`: nothing resumes an ended task),
# and once it is written a working record larger by _CUT is cut down to the same, so an ended
# task keeps little more than its result until its TTL.
from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from mrtr.errors import ProtocolError
from mrtr.protocol import JSON, JSONObject
from mrtr.server._failures import over_limit, over_quota
from mrtr.server._journal import FlowState
from mrtr.server._limits import StoreLimits, quota_key
from mrtr.server._peer import Peer, Principal
from mrtr.stores import ClaimStatus, Store

__all__ = ["TaskBook", "TaskPolicy", "TaskRecord", "ended", "identity_of", "iso_time",
           "new_task_id", "plain_principal", "task_peer"]

TERMINAL = frozenset({"completed", "failed", "cancelled"})
LEASES = "tasks:leases"  # the store index of run leases (Store.lapsed)


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """How tasks live: `ttl_ms` from creation, `poll_interval_ms` suggested to clients,
    `max_live` unfinished tasks per authenticated principal, `max_live_anonymous` for all
    unauthenticated callers together (they have no identity to tell them apart; 0 keeps tasks
    for authenticated callers), `lease` seconds a dead runner holds a task (a live one renews
    it every lease/3 seconds: one store operation), `hold` seconds a task waits for answers in
    place, its coroutine suspended, before it parks (0: park at once, and replay on answers),
    `sweep_every` seconds between two sweeps of a replica (None: lease/2)."""

    ttl_ms: int = 3_600_000
    poll_interval_ms: int = 500
    max_live: int = 100
    lease: float = 30.0
    max_live_anonymous: int = 1000
    hold: float = 3600.0
    sweep_every: float | None = None

    def cap(self, principal: str | None) -> int:
        """The live-task cap that applies to `principal` (None: anonymous)."""
        return self.max_live_anonymous if principal is None else self.max_live


class TaskRecord(msgspec.Struct, kw_only=True):
    """Everything a replica needs to report or resume one task."""

    task_id: str
    principal: str | None  # the plain string requestState binds to; None when anonymous
    identity: list[str | None] | None = None  # an OAuth principal: [issuer, subject, client id]
    scopes: list[str] | None = None  # the creating request's granted scopes (Peer.scopes)
    tool: str
    arguments: dict[str, JSON]
    meta: JSONObject  # the creating request's `_meta` (capabilities the asks are checked against)
    status: str = "working"
    status_message: str | None = None
    progress: float | None = None  # the last progress shown: a lower one is not (a replay's)
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
_CUT = 1024  # bytes a working record must outweigh its end by to be rewritten when it ends
_CHECK_EARLY = 16 * 1024  # arguments this large are checked against the quota before anything


def ended(record: TaskRecord, status: str, now: float, *, result: JSONObject | None = None,
          error: JSONObject | None = None) -> TaskRecord:
    """The terminal record of `record`: what `tasks/get` shows, without what only a resumed
    task needs (arguments, journal, the request's `_meta`)."""
    return msgspec.structs.replace(
        record, status=status, updated_at=now, open=[], asked={}, keys={}, arguments={},
        meta={}, flow=FlowState(), result=result, error=error)


def plain_principal(principal: str | None) -> str | None:
    """`principal` as the exact str it compares as (a Principal is a str subclass)."""
    return None if principal is None else str.__str__(principal)


def identity_of(principal: str | None) -> list[str | None] | None:
    """An OAuth principal's stable parts, [issuer, subject, client id]; None for others."""
    if isinstance(principal, Principal):
        return [principal.issuer, principal.subject, principal.client_id]
    return None


def task_peer(record: TaskRecord) -> Peer:
    """The Peer a task's handler runs as: the creator, rebuilt from the record."""
    principal: str | None = record.principal
    if record.identity is not None:
        issuer, subject, client_id = record.identity
        principal = Principal(issuer or "", subject or "", client_id, scopes=record.scopes or ())
    scopes = frozenset(record.scopes) if record.scopes is not None else None
    return Peer(principal=principal, transport="task", scopes=scopes)


def new_task_id() -> str:
    """An unguessable task id (192 random bits)."""
    return secrets.token_urlsafe(24)


def iso_time(epoch: float) -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2026-07-28T10:00:00.000Z."""
    stamp = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class TaskBook:
    """Reads and writes task records and their side keys in one Store, within `limits`."""

    def __init__(self, store: Store, policy: TaskPolicy,
                 limits: StoreLimits = StoreLimits()) -> None:  # noqa: B008 - frozen value
        self.store = store
        self.policy = policy
        self.limits = limits

    # -- the record ----------------------------------------------------------------------------
    async def load(self, task_id: str) -> TaskRecord | None:
        """The task's end if it has one, else its working record; None when unknown."""
        for key in (f"task:{task_id}:end", "task:" + task_id):
            found = await self.store.get(key)
            if found is not None and found.status is ClaimStatus.DONE and found.outcome:
                return _DECODER.decode(found.outcome)
        return None

    async def save(self, record: TaskRecord) -> None:
        """Write the working record (the lease holder only); an ended task ignores it.

        Raises LimitExceeded when it would take its principal past the quota.
        """
        blob = _ENCODER.encode(record)
        await self.charge(record, "task:" + record.task_id, len(blob))
        await self.store.complete("task:" + record.task_id, blob, expires=record.expires)

    async def end(self, record: TaskRecord, *, counted: bool = True,
                  working: int = 0) -> bool:
        """Store the terminal `record` (slim: see `ended`) unless the task already ended; True
        when this one won. `working` is the size of the working record: when it is large (the
        arguments, the journal), it is then cut down to the end's small part.

        Raises LimitExceeded, nothing stored, when it would take its principal past the quota
        (`counted=False`: stored anyway, for the small failure that must end the task).
        """
        name = f"task:{record.task_id}:end"
        blob = _ENCODER.encode(record)
        counter = f"{name}:{secrets.token_hex(4)}"  # this attempt's: a losing one gives it back
        if counted:
            await self.charge(record, counter, len(blob))
        found = await self.store.put_if_absent(name, blob, expires=record.expires)
        if found.status is not ClaimStatus.NEW:
            if counted:
                await self.uncharge(record.principal, counter)
            return False
        # Nothing reads the working record of an ended task (`load` reads the end first): keep
        # only the end's small part there, so the arguments and journal leave the store now.
        stub = _ENCODER.encode(msgspec.structs.replace(record, result=None, error=None))
        if working > len(stub) + _CUT:
            with contextlib.suppress(ProtocolError):  # the end stands; the rest lapses at TTL
                await self.charge(record, "task:" + record.task_id, len(stub))  # lighter: fits
                await self.store.complete("task:" + record.task_id, stub,
                                          expires=record.expires)
        return True

    async def charge(self, record: TaskRecord, key: str, size: int) -> None:
        """Count `size` bytes under `key` in the quota of the record's principal (until the
        task expires; a key counted again is counted at its new size).

        Raises LimitExceeded, nothing counted, when that would pass the quota.
        """
        quota, setting = self.limits.quota(record.principal)
        if not await self.store.admit(quota_key(record.principal), key, limit=quota,
                                      expires=record.expires, weight=size):
            raise over_quota(size, quota, setting)

    async def uncharge(self, principal: str | None, key: str) -> None:
        """Stop counting `key` for `principal` (what it counted was not stored after all)."""
        await self.store.dismiss(quota_key(principal), key)

    async def check_arguments(self, principal: str | None, arguments: dict[str, JSON]) -> None:
        """Raise LimitExceeded for arguments over StoreLimits.max_arguments, or (large ones)
        more than the principal's quota has room for now: before anything runs or is built, so
        a refused call costs no record. `save` counts them for good."""
        size = len(_ENCODER.encode(arguments))
        if size > self.limits.max_arguments:
            raise over_limit("The task's arguments", size, self.limits.max_arguments,
                             "StoreLimits.max_arguments",
                             ": a task keeps them until it ends; pass large inputs by "
                             "reference (a resource URI or URL) instead")
        if size < _CHECK_EARLY:
            return  # small: `save` counts it, at the cost of building one small record
        principal = plain_principal(principal)
        quota, setting = self.limits.quota(principal)
        if await self.store.admitted(quota_key(principal)) + size > quota:
            raise over_quota(size, quota, setting)

    def encoded_answer(self, key: str, response: object) -> bytes:
        """`response` as stored; raises LimitExceeded when over StoreLimits.max_answer."""
        blob = _ENCODER.encode(response)
        if len(blob) > self.limits.max_answer:
            raise over_limit(f"The answer to {key!r}", len(blob), self.limits.max_answer,
                             "StoreLimits.max_answer")
        return blob

    # -- the run lease -------------------------------------------------------------------------
    async def acquire(self, record: TaskRecord) -> bool:
        """Take the run lease (tracked in LEASES); False when a live runner holds it."""
        claim = await self.store.claim(f"task:{record.task_id}:run", lease=self.policy.lease,
                                       expires=record.expires, index=LEASES)
        return claim.status is ClaimStatus.NEW

    async def renew(self, task_id: str) -> bool:
        return await self.store.renew(f"task:{task_id}:run", lease=self.policy.lease,
                                      index=LEASES)

    async def release(self, task_id: str) -> None:
        await self.store.release(f"task:{task_id}:run", index=LEASES)

    async def break_lease(self, task_id: str) -> None:
        """Drop another runner's lease (a cancel): its next renewal fails, and it looks at the
        cancel flag; the lease stays tracked, so the sweep settles the task if that runner
        is dead."""
        await self.store.release(f"task:{task_id}:run")

    async def lapsed(self, limit: int) -> list[str]:
        """Up to `limit` ids of tasks whose runner stopped renewing its lease."""
        keys = await self.store.lapsed(LEASES, limit=limit)
        return [key[len("task:"):-len(":run")] for key in keys
                if key.startswith("task:") and key.endswith(":run")]

    async def ring(self, task_id: str) -> None:
        """Wake the task's runner (an answer or a cancel came), wherever the store reaches."""
        await self.store.notify("task:" + task_id)

    async def bell(self, task_id: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for `ring(task_id)`; True when rung."""
        return await self.store.wait("task:" + task_id, timeout=timeout)

    async def running(self, task_id: str) -> bool:
        return await self.store.get(f"task:{task_id}:run") is not None

    # -- answers and cancellation --------------------------------------------------------------
    async def answer(self, record: TaskRecord, key: str, blob: bytes) -> None:
        """Store the first answer (`encoded_answer`) to the open `key`; later ones are ignored.

        Raises LimitExceeded, nothing stored, when it would pass the principal's quota.
        """
        name = f"task:{record.task_id}:in:{key}"
        claim = await self.store.claim(name, lease=self.policy.lease, expires=record.expires)
        if claim.status is ClaimStatus.NEW:
            try:
                await self.charge(record, name, len(blob))
            except BaseException:
                await self.store.release(name)  # not answered: a smaller answer may come
                raise
            await self.store.complete(name, blob, expires=record.expires)

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

    # -- live-task slots, per principal --------------------------------------------------------
    async def admit(self, principal: str | None, task_id: str, expires: float) -> bool:
        """Take a slot for a new task unless its principal is at its cap; a refusal is free."""
        return await self.store.admit(_slots(principal), task_id,
                                      limit=self.policy.cap(principal), expires=expires)

    async def free(self, principal: str | None, task_id: str) -> None:
        await self.store.dismiss(_slots(principal), task_id)

    async def live(self, principal: str | None) -> int:
        """The principal's tasks holding a slot (unfinished and not expired)."""
        return await self.store.admitted(_slots(principal))


def _slots(principal: str | None) -> str:
    return "tasks:anonymous" if principal is None else "tasks:live:" + principal
