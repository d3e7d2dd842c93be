"""StoreLimits: byte limits on what the server keeps in its store on a caller's behalf."""

# Design: a caller's input outlives its request. A task keeps its arguments, journal and answers
# for its TTL; a 2025 client's answer waits in the store until the process awaiting it collects
# it; each round's outcome and each `ctx.once` value stay until the flow deadline. Each such blob
# has a byte limit, checked before it is stored. What the store keeps for one principal (task
# records and answers) also has a byte quota: weighted Store slots under `quota:<principal>`,
# one member per blob, weighing its bytes and lapsing with it, checked and added in one atomic
# step across processes (Store.admit), so one caller filling its quota gets LimitExceeded and
# nobody else notices. Unauthenticated callers share one quota (nothing tells them apart). Round
# outcomes are not counted per principal (that would be one more store call per round): each is
# bounded by max_outcome, and the store's own budget (MemoryStore max_bytes) refuses new work
# when full, never evicting a record a replay needs.
from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["StoreLimits", "quota_key"]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreLimits:
    """Byte limits on what the store keeps for callers (docs/deploy.md, "Limits on stored input").

    `max_arguments`: a task's arguments (JSON), kept with the task until it ends.
    `max_answer`: one answer a client sends: a `tasks/update` input response, a 2025 client's
    response to a server request.
    `max_outcome`: one outcome the server keeps: a task's result, a round's outcome, a
    `ctx.once` value (a round or `once` over it still answers its first request; only a replay
    of it gets OutcomeTooLarge).
    `principal_bytes`: what one authenticated principal's tasks and answers may hold in the
    store at once; `anonymous_bytes`: the same for all unauthenticated callers together.
    Over a limit, the caller gets LimitExceeded (-32602) naming it.
    """

    max_arguments: int = 256 * KiB
    max_answer: int = 1 * MiB
    max_outcome: int = 1 * MiB
    principal_bytes: int = 16 * MiB
    anonymous_bytes: int = 16 * MiB

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"StoreLimits.{field.name} must be a positive number of "
                                 f"bytes, not {value!r}")

    def quota(self, principal: str | None) -> tuple[int, str]:
        """The byte quota that applies to `principal` (None: anonymous), and its setting."""
        if principal is None:
            return self.anonymous_bytes, "StoreLimits.anonymous_bytes"
        return self.principal_bytes, "StoreLimits.principal_bytes"


def quota_key(principal: str | None) -> str:
    """The Store slots counting what is kept for `principal` (None: every anonymous caller)."""
    return "quota:anonymous" if principal is None else "quota:principal:" + principal
