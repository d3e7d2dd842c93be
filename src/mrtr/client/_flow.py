"""The MRTR retry loop as a sans-I/O generator, and the small async driver that runs it."""

# Design: like httpx's auth_flow, `call_flow` yields what to do (Send, Fulfil, Sleep) and is sent
# the outcome, so each MRTR retry rule (new id, original params, fresh `_meta`, answers to the
# latest round only, byte-exact requestState, absent resultType = complete) is tested without
# I/O. Each retry is rebuilt from the *original* request, so answers and state can never leak
# into a later round or another request.
from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

import msgspec

from mrtr.protocol import (
    RETRY_AFTER_KEY,
    UNSET,
    CreateTaskResult,
    InputRequiredResult,
    RequestId,
    RequestMeta,
)

from ._errors import InputRefused, TooManyInputs, TooManyRounds, UnexpectedResult
from ._limits import ClientLimits
from ._steps import FlowRequest, Fulfil, Send, Sleep, Step, TaskRequest
from ._tasks_flow import TaskState, as_result, task_flow
from ._telemetry import ClientTelemetry

__all__ = [
    "FlowRequest",
    "Fulfil",
    "Send",
    "Sleep",
    "Step",
    "Suspended",
    "TaskRequest",
    "call_flow",
    "drive",
]

ResultT = TypeVar("ResultT")
DEFAULT_BACKOFF = 0.1
MAX_WAITS = 1000  # "not yet" rounds a flow waits out (a URL elicitation) before they count


@dataclass(frozen=True, slots=True)
class Suspended:
    """Where a flow stopped for input: the `input_required` reply of round `round`.

    In a task (`task_id` set) `reply` holds the task's unanswered input requests (or none while
    it works) and `answered` the keys already sent with `tasks/update`.
    """

    reply: InputRequiredResult
    round: int
    task_id: str | None = None
    answered: frozenset[str] = frozenset()


def call_flow(
    request: FlowRequest,
    expect: type[ResultT],
    *,
    new_id: Callable[[], RequestId],
    new_meta: Callable[[], RequestMeta],
    max_rounds: int = 10,
    backoff: float = DEFAULT_BACKOFF,
    resume: Suspended | None = None,
    limits: ClientLimits | None = None,
    tasks: TaskState | None = None,
) -> Generator[Step, object, ResultT]:
    """Drive one MRTR request to its final result of type `expect`.

    `resume` restarts a flow suspended in another process (see `Suspended`; its input count
    starts again at 0). Raises TooManyRounds after `max_rounds` input_required replies,
    TooManyInputs past the `limits` on input requests (before Fulfil), InputRefused when
    answers are missing, UnexpectedResult for a result that is neither `expect` nor
    input_required. `tasks` (the tasks extension was declared) lets a `CreateTaskResult` be
    followed to its end by `task_flow`; without it a task is an UnexpectedResult.
    """
    limits = limits or ClientLimits()
    phase = functools.partial(task_flow, new_id=new_id, new_meta=new_meta,
                              max_rounds=max_rounds, limits=limits)
    if resume is not None and resume.task_id is not None:
        state = _resumed(tasks or TaskState(), resume)
        pending = resume.reply.input_requests or None
        return as_result((yield from phase(state, pending=pending)), expect)
    rounds = 0 if resume is None else resume.round - 1
    asked = 0
    reply = resume.reply if resume is not None else (yield Send(request))
    waits = 0
    while isinstance(reply, InputRequiredResult):
        wait = _not_yet(reply)
        if wait is not None and waits < MAX_WAITS:  # "not yet": wait as told, not a round
            waits += 1
            yield Sleep(wait)
            reply = yield Send(_retry(request, None, reply, new_id(), new_meta()))
            continue
        rounds += 1
        if rounds > max_rounds:
            raise TooManyRounds(max_rounds)
        asked = _count_inputs(reply, asked, limits)
        answers = yield from _answers(reply, rounds, backoff)
        reply = yield Send(_retry(request, answers, reply, new_id(), new_meta()))
    if isinstance(reply, CreateTaskResult) and tasks is not None:
        tasks.round = rounds
        tasks.seen(reply)
        return as_result((yield from phase(tasks, asked=asked)), expect)
    if not isinstance(reply, expect):
        raise UnexpectedResult(f"expected {expect.__name__}, got {type(reply).__name__}")
    return reply


def _not_yet(reply: InputRequiredResult) -> float | None:
    """The seconds a state-only "not yet" round asks to wait (`RETRY_AFTER_KEY`), else None."""
    if reply.input_requests is not UNSET or reply.request_state is UNSET:
        return None
    hint = reply.meta.get(RETRY_AFTER_KEY) if isinstance(reply.meta, dict) else None
    if isinstance(hint, bool) or not isinstance(hint, int | float):
        return None
    return min(max(hint / 1000.0, 0.05), 30.0)


def _resumed(state: TaskState, resume: Suspended) -> TaskState:
    state.task_id, state.round = resume.task_id, resume.round - 1
    state.answered.update(resume.answered)
    return state


def _count_inputs(reply: InputRequiredResult, asked: int, limits: ClientLimits) -> int:
    """The flow's input requests so far, `reply`'s included; raises TooManyInputs."""
    count = len(reply.input_requests) if reply.input_requests is not UNSET else 0
    if count > limits.max_round_inputs:
        raise TooManyInputs(
            f"the server asked {count} input requests in one round "
            f"(max_round_inputs={limits.max_round_inputs})"
        )
    if asked + count > limits.max_flow_inputs:
        raise TooManyInputs(
            f"the server asked {asked + count} input requests in this call "
            f"(max_flow_inputs={limits.max_flow_inputs})"
        )
    return asked + count


def _answers(
    reply: InputRequiredResult, round_no: int, backoff: float
) -> Generator[Step, object, dict[str, object] | None]:
    requests = reply.input_requests if reply.input_requests is not UNSET else {}
    if not requests:
        if reply.request_state is UNSET:
            raise UnexpectedResult("input_required result without inputRequests or requestState")
        yield Sleep(backoff)  # state-only: load shedding or a hand-over, retry shortly
        return None
    answers = yield Fulfil(dict(requests), round_no)
    if not isinstance(answers, Mapping):
        raise InputRefused("input requests were not answered")
    missing = sorted(set(requests) - set(answers))
    if missing:
        raise InputRefused(f"no answer for input request(s) {', '.join(missing)}")
    return {key: msgspec.to_builtins(answers[key]) for key in requests}


def _retry(
    original: FlowRequest,
    answers: dict[str, object] | None,
    reply: InputRequiredResult,
    request_id: RequestId,
    meta: RequestMeta,
) -> FlowRequest:
    params = msgspec.structs.replace(
        original.params,
        input_responses=UNSET if answers is None else answers,
        request_state=reply.request_state,
        meta=meta,
    )
    return msgspec.structs.replace(original, id=request_id, params=params)


class Sender(Protocol):
    """Send one request and return its decoded result (raising on JSON-RPC errors)."""

    def __call__(self, request: FlowRequest | TaskRequest, /) -> Awaitable[object]: ...


class Fulfiller(Protocol):
    """Answer a Fulfil step: {key: InputResponse} for every key asked."""

    def __call__(self, step: Fulfil, /) -> Awaitable[Mapping[str, object]]: ...


async def drive(
    flow: Generator[Step, object, ResultT],
    *,
    send: Sender,
    fulfil: Fulfiller,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    telemetry: ClientTelemetry | None = None,
) -> ResultT:
    """Run `flow` to completion with async `send`, `fulfil` and `sleep`.

    With `telemetry` and a configured OpenTelemetry SDK, the flow gets a span and each round a
    CLIENT child span whose context goes in the request's `_meta.traceparent`.
    """
    trace = telemetry.flow() if telemetry is not None else None
    failure: BaseException | None = None
    try:
        step = next(flow)
        while True:
            outcome: object
            if isinstance(step, Send):
                outcome = await (send(step.request) if trace is None
                                 else trace.send(send, step.request))
            elif isinstance(step, Fulfil):
                outcome = await fulfil(step)
            else:
                await sleep(step.seconds)
                outcome = None
            step = flow.send(outcome)
    except StopIteration as stop:
        result: ResultT = stop.value
        return result
    except BaseException as exc:
        failure = exc
        raise
    finally:
        flow.close()
        if trace is not None:
            trace.finish(failure)
