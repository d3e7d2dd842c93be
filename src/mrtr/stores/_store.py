"""The Store protocol: atomic claims with a lease, stored outcomes, deadlines, counters, slots."""

# Design: one small async contract, shaped by what the round engine needs for exactly-once.
# `claim` is the only atomic step: a key is absent (the caller now holds it for `lease`
# seconds: NEW), held under a live lease (RUNNING), or finished (DONE, with its outcome bytes).
# A lapsed lease counts as absent, so a process that died holding a claim frees it by itself.
# A claim names its `holder` (unique per attempt): when the answer to a claim is lost (the
# store timed out, the request was cancelled) the claim may still have landed, held by nobody;
# `release(key, holder=)` then drops that claim and no other, so the attempt that never ran
# frees it without ever touching a claim another attempt holds (and whose work may run).
# `put_if_absent` is claim and complete in one step: the first outcome stored under a key wins
# (a compare-and-set from absent). Slots are bounded sets: `admit` totals the weights of a key's
# live members and adds one only if it fits under the limit, in one atomic step; each member
# lapses at its own deadline (weight 1: a count of live tasks; bytes: a principal's byte quota).
# Deadlines are absolute epoch seconds (the flow deadline); past it an entry is gone. Every
# call is bounded by the store's timeout and raises StoreUnavailable instead of hanging: the
# server fails closed (-32603, HTTP 503 with Retry-After, reason logged) rather than run
# anything twice.
# Tracked leases (#28): a claim made with `index=` joins that index, scored by its lease's end;
# `renew` moves it, `release` drops it, and `lapsed` lists the keys whose holder stopped
# renewing (a dead process's), earliest first, from the index alone (a sorted set, an indexed
# table: never a scan of the store). The task sweep adopts what it lists. `purge` deletes
# expired entries now (stores whose entries expire by themselves delete none). Notifications
# are best effort and carry nothing: `notify` wakes the `wait` calls on a channel in every
# process the store reaches (Redis: PUBLISH; Memory and SQLite: this process only), so a waiter
# re-reads the state it waits for when woken and, slowly, at its timeouts.
from __future__ import annotations

import enum
from typing import Protocol

from mrtr.errors import StoreUnavailable

__all__ = ["Claim", "ClaimStatus", "Store", "StoreUnavailable", "found_claim"]


class ClaimStatus(enum.Enum):
    NEW = "new"  # the caller holds the claim: run, then complete or release
    RUNNING = "running"  # another caller holds a live lease
    DONE = "done"  # finished: `outcome` holds what complete() stored


class Claim:
    """What `Store.claim` found: a status and, when DONE, the stored outcome."""

    __slots__ = ("outcome", "status")

    def __init__(self, status: ClaimStatus, outcome: bytes | None = None) -> None:
        self.status = status
        self.outcome = outcome

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Claim) and self.status is other.status
                and self.outcome == other.outcome)

    def __hash__(self) -> int:
        return hash((self.status, self.outcome))

    def __repr__(self) -> str:
        return f"Claim({self.status.value}, {self.outcome!r})"


NEW = Claim(ClaimStatus.NEW)
RUNNING = Claim(ClaimStatus.RUNNING)


def found_claim(value: bytes) -> Claim:
    """What an entry a networked store keeps as b"d" + outcome (done) or b"r" + its holder
    (running) says (Redis, PostgreSQL)."""
    if value[:1] == b"d":
        return Claim(ClaimStatus.DONE, bytes(value[1:]))
    return RUNNING


class Store(Protocol):
    """Shared state for exactly-once rounds and `ctx.once`; any call may raise StoreUnavailable."""

    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "",
                    index: str | None = None) -> Claim:
        """Atomically claim `key` for `lease` seconds unless it is held or done.

        `expires` (epoch seconds) bounds the entry's life, whatever happens next. `holder`
        names the claim: a claim by the same (non-empty) holder while it holds is NEW again,
        with a new lease (a retried command whose first answer was lost). With `index`, a claim
        that succeeds (NEW) also puts `key` in that index of tracked leases, scored by its
        lease's end, until `expires` (see `lapsed`).
        """
        ...

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        """Store `outcome` for `key` (DONE) until `expires`."""
        ...

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        """Atomically store `outcome` for `key` (DONE until `expires`) unless it is held or done.

        NEW when this call stored it; otherwise what is there (RUNNING, or DONE with the outcome
        stored first), unchanged: the first outcome wins, whoever writes later.
        """
        ...

    async def renew(self, key: str, *, lease: float, index: str | None = None) -> bool:
        """Extend a RUNNING claim to `lease` seconds from now; False when it is not running.

        With `index`, the key's score there moves to the new end of its lease (one step).
        """
        ...

    async def release(self, key: str, *, holder: str | None = None,
                      index: str | None = None) -> None:
        """Drop a RUNNING claim (the work failed and may run again); a DONE entry stays.

        With `holder`, only a claim taken by that holder (an attempt whose answer was lost, so
        its work never ran): a claim held by any other holder stays. With `index`, `key` also
        leaves that index (whatever its entry holds).
        """
        ...

    async def lapsed(self, index: str, *, limit: int) -> list[str]:
        """Up to `limit` keys of `index` whose lease lapsed, earliest first.

        A lapsed key is neither held (its holder stopped renewing), nor done, nor expired:
        keys found done or past their `expires` leave the index instead of being listed. A
        listed key stays in the index until it is claimed again (with `index`) or released
        (with `index`). Read from the index alone, in time that grows with `limit`, not with
        the number of keys stored.
        """
        ...

    async def purge(self, *, most: int) -> int:
        """Delete up to `most` entries past their deadline now; how many went.

        Expired entries already read as absent; this frees their room. A store whose entries
        expire by themselves (Redis) returns 0.
        """
        ...

    async def notify(self, channel: str) -> None:
        """Wake every `wait(channel)` the store reaches (best effort: nothing is stored, and a
        notification sent before a wait began is missed).

        Redis reaches every process sharing it; Memory and SQLite reach this process only.
        """
        ...

    async def wait(self, channel: str, *, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a `notify(channel)`; True when one came.

        Never raises StoreUnavailable: a store that cannot listen returns False at the timeout
        (the caller re-reads the state it waits for, as it does after any wake-up).
        """
        ...

    async def get(self, key: str) -> Claim | None:
        """The entry for `key` (RUNNING or DONE), None when absent, lapsed or expired."""
        ...

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        """Atomically add `amount` to the counter `key` (absent: 0); returns the new value."""
        ...

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        """Add `amount` to the counter `key` unless `token` was already applied to it.

        One atomic step, like a payment API's idempotency key: the first call with a `token`
        adds, later ones (any process, until `expires`) only return the counter's value.
        """
        ...

    async def admit(self, key: str, member: str, *, limit: int, expires: float,
                    weight: int = 1) -> bool:
        """Add `member`, weighing `weight`, to the slots `key` unless the live members' total
        weight would pass `limit`.

        One atomic step, across processes: total the live members' weights, add one only if
        its weight fits; True when `member` holds a slot (added now, or already there: not
        counted twice, and given the new weight if it is no heavier or still fits). A member
        lives until its own `expires` or `dismiss`; a refusal changes nothing. Weight 1 counts
        members (live tasks); bytes as weights make a byte quota.
        """
        ...

    async def dismiss(self, key: str, member: str) -> None:
        """Free `member`'s slot in `key` (nothing when it holds none)."""
        ...

    async def admitted(self, key: str) -> int:
        """The total weight of the live members of `key`'s slots (their number, at weight 1)."""
        ...

    async def deliver(self, key: str, message: bytes, *, expires: float) -> None:
        """Leave `message` under `key` for one `collect(key)`, in any process, until `expires`.

        The answer channel: a client's answer that reached another process than the one
        waiting for it. A second delivery under the same key replaces the first.
        """
        ...

    async def collect(self, key: str, *, timeout: float) -> bytes | None:
        """Take the message delivered under `key`, waiting up to `timeout` seconds for it;
        None when none came. A message is taken once."""
        ...

    async def aclose(self) -> None:
        """Release connections and threads."""
        ...
