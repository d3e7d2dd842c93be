"""TaskRunner: tool calls run as durable tasks (`io.modelcontextprotocol/tasks`)."""

# Design: a task is the same straight-line handler replayed by the round engine, with the task
# record in the Store in place of the sealed requestState. An unanswered ask parks the task
# (`input_required`, record saved, run lease released, no coroutine kept); `tasks/update` stores
# the answers and whoever takes the lease next replays the handler from the record's journal,
# in any process. A runner renews its lease while it runs, so a lapsed lease means a dead process:
# the next `tasks/get`, `update` or `cancel` on any replica resumes the task (`ctx.once` replays
# from the Store, so side effects do not repeat). Wire keys are unique over the task's lifetime.
# While the runner lives, an ask waits for its answer in place instead (_live.py): replaying is
# the recovery path, after a crash or a long wait (TaskPolicy.hold). The heartbeat renews the
# lease every lease/3 seconds (one store operation, which also moves the lease in the store's
# index) and otherwise sleeps on the task's channel: a cancel rings it (and breaks the lease, so
# a store whose notifications do not reach here shows it at the next renewal).
# A task ends once: the handler's outcome (or the cancel that stopped it) is written, shielded
# from cancellation, through TaskBook.end, where the first end stored wins; a cancel arriving
# after the handler returned changes nothing. Creation takes a slot first (refused: nothing
# taken, nothing extended) and gives it back if the record cannot be written.
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import msgspec

from mrtr.errors import LimitExceeded, ProtocolError
from mrtr.protocol import (
    UNSET,
    CallToolResult,
    CreateTaskResult,
    InputRequiredResult,
    JSONObject,
    RequestMeta,
)
from mrtr.server._context import Context, StartTask
from mrtr.server._entries import Tables, ToolEntry
from mrtr.server._failures import outcome_too_large, task_error, too_many_tasks, tool_failure
from mrtr.server._journal import FlowState
from mrtr.server._peer import Peer
from mrtr.server._results import checked_tool_result
from mrtr.server._rounds import Round, RoundEngine
from mrtr.server.tasks._live import InTask, LiveWait, TaskRound, fresh_key
from mrtr.server.tasks._records import (
    TaskBook,
    TaskRecord,
    ended,
    identity_of,
    iso_time,
    new_task_id,
    plain_principal,
    task_peer,
)
from mrtr.server.tasks._sweep import TaskSweep

__all__ = ["Invoke", "PreTask", "TaskRunner"]


class _Registry(Protocol):
    """What the runner needs of a Server: its tool table (a resumed task finds its tool)."""

    tables: Tables

_STARTED = "Started."  # a new task's statusMessage, until progress replaces it
Invoke = Callable[[ToolEntry, Context, dict[str, Any]], Awaitable[Any]]  # _runs.invoke_tool


class PreTask:
    """The hooks of a task tool's MRTR phase: `ctx.begin_task()` starts the task."""

    async def begin(self) -> None:
        raise StartTask()

    async def status(self, message: str, progress: float | None = None) -> None:
        return None


class TaskRunner:
    """Creates, runs, parks and resumes the tasks of one Server (one per Dispatcher)."""

    expose_errors = False  # set by the Dispatcher (`mrtr dev`): a tool's bug shown to the client

    def __init__(self, server: _Registry, engine: RoundEngine, book: TaskBook,
                 meta: dict[str, Any], log: logging.Logger, invoke: Invoke,
                 clock: Callable[[], float] = time.time) -> None:
        self.server = server
        self.invoke = invoke
        self.engine = engine
        self.book = book
        self.meta = meta
        self.log = log
        self.clock = clock
        self.live: dict[str, asyncio.Task[None]] = {}  # tasks this process is running
        self._stopping: dict[str, str] = {}  # task id -> why its coroutine is cancelled

    # -- creation ------------------------------------------------------------------------------
    async def create(self, entry: ToolEntry, meta: RequestMeta, arguments: dict[str, Any],
                     peer: Peer, flow: FlowState) -> CreateTaskResult | CallToolResult:
        """Record a task for `entry` and start it here; the record is durable on return.

        A principal over its cap of live tasks gets an `isError` result instead.
        """
        policy, now = self.book.policy, self.clock()
        expires = now + policy.ttl_ms / 1000
        principal, task_id = plain_principal(peer.principal), new_task_id()
        if not await self.book.admit(principal, task_id, expires):
            return self._refusal(principal)
        try:
            flow.pending, flow.round_id = {}, ""
            if not flow.flow_id:
                flow.flow_id = self.engine.new_flow_id()
            record = TaskRecord(
                task_id=task_id, principal=principal, identity=identity_of(peer.principal),
                scopes=sorted(peer.scopes) if peer.scopes is not None else None,
                tool=entry.tool.name, arguments=arguments, meta=msgspec.to_builtins(meta),
                created_at=now, updated_at=now, expires=expires, ttl_ms=policy.ttl_ms,
                poll_interval_ms=policy.poll_interval_ms, flow=flow, status_message=_STARTED)
            await self.book.acquire(record)  # a fresh id: ours; taken before it is visible
            await self.book.save(record)  # LimitExceeded: the principal's quota is full
        except BaseException:  # no task: give the slot back (a store that is down keeps it
            with contextlib.suppress(Exception):  # until the task's deadline, no longer)
                await asyncio.shield(self._unmake(principal, task_id))
            raise
        self._start(record)
        return CreateTaskResult(
            task_id=record.task_id, status="working", status_message=_STARTED,
            created_at=iso_time(now), last_updated_at=iso_time(now), ttl_ms=record.ttl_ms,
            poll_interval_ms=record.poll_interval_ms, meta=self.meta)

    async def _unmake(self, principal: str | None, task_id: str) -> None:
        """Give back what a creation that failed took: its slot and its bytes in the quota."""
        await self.book.free(principal, task_id)
        await self.book.uncharge(principal, "task:" + task_id)

    def _refusal(self, principal: str | None) -> CallToolResult:
        cap = self.book.policy.cap(principal)
        who = "anonymous callers are" if principal is None else f"principal {principal!r} is"
        self.log.warning("%s at the cap of %d live tasks", who, cap)
        return too_many_tasks(cap, self.meta)

    # -- running -------------------------------------------------------------------------------
    def _start(self, record: TaskRecord) -> None:
        task = asyncio.get_running_loop().create_task(self._drive(record))
        self.live[record.task_id] = task
        task.add_done_callback(lambda _: self._forget(record.task_id, task))

    def _forget(self, task_id: str, task: asyncio.Task[None]) -> None:
        if self.live.get(task_id) is task:
            del self.live[task_id]
        self._stopping.pop(task_id, None)

    async def resume(self, record: TaskRecord) -> None:
        """Run a task here if nobody does and it can move: its runner died, or answers wait."""
        if record.terminal or record.task_id in self.live:
            return
        if record.status == "input_required" and not await self.book.answers(record):
            return
        if record.status == "working" and await self.book.running(record.task_id):
            return
        if await self.book.acquire(record):
            fresh = await self.book.load(record.task_id)  # the record as its last runner left it
            if fresh is None or fresh.terminal:
                await self.book.release(record.task_id)
                return
            if record.status == "working":  # its runner stopped renewing the lease: it died
                self.log.warning("task %s: taking over from a runner that died", record.task_id)
            self._start(fresh)

    async def adopt(self, task_id: str) -> bool:
        """Take over a task whose lease lapsed (the sweep); True when it now runs here.

        The lease is taken first, so the decision is made holding it: an ended task's slot is
        freed, a parked one stays parked, one that was running runs here from its journal.
        """
        record = await self.book.load(task_id)
        if record is None:  # expired: nothing to adopt, only the index entry to drop
            await self.book.release(task_id)
            return False
        if task_id in self.live or not await self.book.acquire(record):
            return False
        fresh = await self.book.load(task_id)
        if fresh is None or fresh.terminal or (
                fresh.status == "input_required" and not await self.book.answers(fresh)):
            if fresh is not None and fresh.terminal:  # died between its end and its slot
                await self.book.free(fresh.principal, task_id)
            await self.book.release(task_id)
            return False
        self.log.warning("task %s: adopted by the sweep (its runner died)", task_id)
        self._start(fresh)
        return True

    def sweeping(self) -> TaskSweep | None:
        """The background sweep for this server (None when it has no task tools)."""
        if not any(e.task is not None for e in self.server.tables.tools.values()):
            return None
        return TaskSweep(self)

    def stop(self, task_id: str, why: str) -> bool:
        """Cancel the coroutine running `task_id` here, if any; `why` is "cancel" or "lost"."""
        task = self.live.get(task_id)
        if task is None or task.done():  # done: parked or ended, its lease already released
            return False
        self._stopping[task_id] = why
        task.cancel()
        return True

    async def _drive(self, record: TaskRecord) -> None:
        beat = asyncio.get_running_loop().create_task(self._heartbeat(record.task_id))
        end: _End | None = None
        try:
            step = await self._step(record)
            while step is True:  # answers came while it ran: replay at once
                step = await self._step(record)
            end = step if isinstance(step, _End) else None  # None: parked
        except asyncio.CancelledError:
            why = self._stopping.get(record.task_id)
            if why == "cancel":
                end = _End("cancelled")
            elif why is None:  # shutting down: leave the task to another process
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.book.release(record.task_id))
        except Exception:  # the store failed: the lease lapses and another process resumes
            self.log.exception("task %s: runner failed", record.task_id)
        finally:
            beat.cancel()
        if end is not None:  # written whatever cancels this coroutine meanwhile
            try:
                await asyncio.shield(self.settle(record, end.status, result=end.result,
                                                  error=end.error))
            except Exception:  # not ended: the lease lapses and another process resumes
                self.log.exception("task %s: could not record its end", record.task_id)

    async def _heartbeat(self, task_id: str) -> None:
        """Renew the run lease every lease/3 seconds; between renewals, sleep on the task's
        channel, where a cancel rings (a cancel elsewhere also breaks the lease)."""
        every = self.book.policy.lease / 3
        due = time.monotonic() + every
        while True:
            rung = await self.book.bell(task_id, max(0.0, due - time.monotonic()))
            try:
                if rung:  # an answer (LiveWait takes it) or a cancel
                    if await self.book.cancelled(task_id):
                        self.stop(task_id, "cancel")
                        return
                    continue
                due = time.monotonic() + every
                if not await self.book.renew(task_id):
                    if await self.book.cancelled(task_id):
                        self.stop(task_id, "cancel")
                    else:
                        self.log.warning("task %s: lost its lease, stopping here", task_id)
                        self.stop(task_id, "lost")
                    return
            except ProtocolError as exc:  # StoreUnavailable: try again next beat
                self.log.warning("task %s: heartbeat failed: %r", task_id, exc)

    async def _step(self, record: TaskRecord) -> _End | bool:
        """Replay the handler once: the task's end, or False when it parked, or True when
        answers came meanwhile and it should run again."""
        if await self.book.cancelled(record.task_id):
            return _End("cancelled")
        entry = self.server.tables.tools.get(record.tool)
        if entry is None:  # the tool was removed by a redeploy
            return _End("failed", error=task_error(
                LookupError(record.tool), f"task {record.task_id}", self.log))
        answers = await self.book.answers(record)
        flow = record.flow
        flow.pending = {record.keys[w][0]: record.keys[w][1] for w in record.open}
        responses = {record.keys[w][0]: answer for w, answer in answers.items()}
        if answers:  # consumed by this run (journaled): no longer open
            record.open = [w for w in record.open if w not in answers]
            record.asked = {w: r for w, r in record.asked.items() if w not in answers}
            record.status = "working"
        waiter = LiveWait(self, record) if self.book.policy.hold > 0 else None
        round_ = TaskRound(self.engine, flow, record.expires, waiter)
        ctx = round_.context(request_id=f"task:{record.task_id}", meta=_meta(record),
                             peer=task_peer(record), input_responses=responses)
        ctx.task_hooks, ctx.task_id = InTask(self, record), record.task_id
        try:
            out = await self._run(entry, round_, ctx, record.arguments)
        except (ProtocolError, StartTask) as exc:
            return _End("failed", error=task_error(exc, record.tool, self.log))
        if round_.parked is None:
            return _End("completed", result=out)
        try:
            return await self._park(record, answers, round_.parked, out)
        except LimitExceeded as exc:  # its record outgrew the principal's quota: it ends here
            return _End("failed", error=task_error(exc, record.tool, self.log))

    async def _run(self, entry: ToolEntry, round_: Round, ctx: Context,
                   arguments: dict[str, Any]) -> Any:
        try:
            out = await round_.run(lambda c: self.invoke(entry, c, arguments), ctx)
        except Exception as exc:
            out = tool_failure(exc, entry.tool.name, self.log,  # a ProtocolError is re-raised
                               expose=self.expose_errors)
        if isinstance(out, InputRequiredResult):
            return out
        return checked_tool_result(entry.tool.name, out, entry.check_output, self.log,
                                   entry.dump)

    async def _park(self, record: TaskRecord, consumed: Mapping[str, object],
                    parked: Mapping[str, str], out: InputRequiredResult) -> bool:
        requests = out.input_requests if out.input_requests is not UNSET else {}
        still = {w: record.keys[w] for w in record.open if w not in consumed}  # waited live
        opened: list[str] = []
        asked: dict[str, JSONObject] = {}
        for key, shape in parked.items():
            wire = next((w for w, ks in still.items() if ks == [key, shape]), None)
            if wire is None:
                wire = fresh_key(record.keys, key)
                record.keys[wire] = [key, shape]
            opened.append(wire)
            asked[wire] = msgspec.to_builtins(requests[key])
        record.open, record.asked = opened, asked
        record.status, record.updated_at = "input_required", self.clock()
        await self.book.save(record)
        await self.book.release(record.task_id)
        # An answer stored while we ran found the lease taken: look again, now that it is free.
        return bool(await self.book.answers(record)) and await self.book.acquire(record)

    async def settle(self, record: TaskRecord, status: str, *, result: Any = None,
                      error: JSONObject | None = None) -> bool:
        """End the task (unless it already ended), free its lease and its principal's slot.

        True when this call wrote the end; a task that already ended keeps its first end. A
        result over StoreLimits.max_outcome, or one its principal's quota cannot hold, fails
        the task with the error that says so.
        """
        found: JSONObject | None = None
        if result is not None:
            found = msgspec.to_builtins(_with_meta(result, self.meta))
            size, limit = len(msgspec.json.encode(found)), self.book.limits.max_outcome
            if size > limit:
                status, found, error = "failed", None, task_error(outcome_too_large(
                    f"The result of task {record.task_id}", size, limit, kept=True),
                    record.tool, self.log)
        final = ended(record, status, self.clock(), result=found, error=error)
        working = len(msgspec.json.encode(record))
        try:
            won = await self.book.end(final, working=working)
        except LimitExceeded as exc:  # no room: end small, with the failure or this reason
            reason = error if error is not None else task_error(exc, record.tool, self.log)
            failed = msgspec.structs.replace(ended(record, "failed", self.clock(), error=reason),
                                             status_message=None)
            won = await self.book.end(failed, counted=False, working=working)
        if not won:
            self.log.info("task %s: already ended, %s not recorded", record.task_id, status)
        # The slot first: a crash before the lease is released leaves it tracked, and the sweep,
        # finding the task ended, frees the slot then.
        await self.book.free(record.principal, record.task_id)
        await self.book.release(record.task_id)
        return won


class _End:
    """How a task ends: its terminal status, with the result or the error to record."""

    __slots__ = ("error", "result", "status")

    def __init__(self, status: str, *, result: Any = None,
                 error: JSONObject | None = None) -> None:
        self.status, self.result, self.error = status, result, error


def _meta(record: TaskRecord) -> RequestMeta:
    return msgspec.convert(record.meta, RequestMeta)


def _with_meta(result: Any, meta: dict[str, Any]) -> Any:
    if getattr(result, "meta", None) is UNSET:
        return msgspec.structs.replace(result, meta=meta)
    return result

