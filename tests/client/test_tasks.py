"""The client side of the tasks extension against a scripted tasks server (#14)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from mrtr.client import (
    ClientError,
    ClientLimits,
    Handlers,
    TaskCancelled,
    TaskFailed,
    TooManyRounds,
    UnexpectedResult,
)
from mrtr.errors import InternalError, InvalidParams
from mrtr.protocol import (
    ElicitRequestParams,
    ElicitResult,
    GetTaskResult,
    Task,
    TextContent,
)

from .mocks import MockServer, client_for
from .tasks_mock import (
    TASK_ID,
    TASKS,
    TaskServer,
    asking,
    completed,
    failed,
    working,
)

T = TypeVar("T")
GUARD = 20.0  # seconds; a test that needs it has found a hang


def run(work: Awaitable[T]) -> T:
    async def guarded() -> T:
        return await asyncio.wait_for(work, GUARD)

    return asyncio.run(guarded())


class Asker:
    """An elicitation handler that accepts, recording each question."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        return ElicitResult(action="accept", content={"ok": True})


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


# -- transparent call_tool -----------------------------------------------------------------------

def test_call_tool_follows_a_task_to_its_result() -> None:
    server = TaskServer([working("1/3"), working("2/3"), completed("report ready")])
    app = MockServer(server)
    seen: list[Task] = []

    async def go() -> str:
        async with client_for(app) as client:
            return text(await client.call_tool("report", {}, on_task=seen.append))

    assert run(go()) == "report ready"
    assert server.gets == 3 and not server.cancels
    assert [t.status for t in seen] == ["working", "working", "working", "completed"]
    assert [t.status_message for t in seen[1:3]] == ["1/3", "2/3"]
    for headers in app.headers_of("tasks/get"):
        assert headers["mcp-name"] == TASK_ID and headers["mcp-method"] == "tasks/get"
    caps = app.bodies("tools/call")[0]["params"]["_meta"][
        "io.modelcontextprotocol/clientCapabilities"]
    assert caps["extensions"] == {TASKS: {}}


def test_completed_with_is_error_is_a_result_not_an_exception() -> None:
    app = MockServer(TaskServer([completed("bad input", is_error=True)]))

    async def go() -> Any:
        async with client_for(app) as client:
            return await client.call_tool("failing_job", {})

    result = run(go())
    assert result.is_error is True and text(result) == "bad input"


def test_input_required_is_answered_through_tasks_update_once_per_key() -> None:
    # The server still lists `a` after it was answered (tasks/update is eventually consistent):
    # the client must not answer it twice, only the new key `b`.
    server = TaskServer([asking("a"), asking("a", "b"), asking("a", "b"), completed()])
    asker = Asker()
    app = MockServer(server)

    async def go() -> str:
        async with client_for(app, Handlers(elicitation=asker)) as client:
            return text(await client.call_tool("confirm_delete", {}))

    assert run(go()) == "done"
    assert asker.asked == ["question a?", "question b?"]
    assert server.updates == [{"a": {"action": "accept", "content": {"ok": True}}},
                              {"b": {"action": "accept", "content": {"ok": True}}}]
    for headers in app.headers_of("tasks/update"):
        assert headers["mcp-name"] == TASK_ID


def test_task_input_without_a_handler_is_refused_and_the_task_cancelled() -> None:
    server = TaskServer([asking("a")])

    async def go() -> None:
        async with client_for(MockServer(server)) as client:
            await client.call_tool("confirm_delete", {})

    with pytest.raises(ClientError, match="elicitation was not declared"):
        run(go())
    assert server.cancels == [TASK_ID] and not server.updates


def test_task_input_rounds_count_against_max_rounds() -> None:
    asking_forever = [asking(f"k{i}") for i in range(20)]
    server = TaskServer(asking_forever)  # type: ignore[arg-type]

    async def go() -> None:
        async with client_for(MockServer(server), Handlers(elicitation=Asker()),
                              max_rounds=3) as client:
            await client.call_tool("greedy", {})

    with pytest.raises(TooManyRounds):
        run(go())
    assert len(server.updates) == 3 and server.cancels == [TASK_ID]


def test_failed_task_raises_task_failed_carrying_the_error() -> None:
    app = MockServer(TaskServer([working(), failed(-32603, "the backend fell over")]))

    async def go() -> None:
        async with client_for(app) as client:
            await client.call_tool("protocol_error_job", {})

    with pytest.raises(TaskFailed) as info:
        run(go())
    assert info.value.task_id == TASK_ID
    assert isinstance(info.value.error, InternalError)
    assert info.value.error.message == "the backend fell over"
    assert "-32603" in str(info.value)


def test_cancelled_task_raises_task_cancelled() -> None:
    server = TaskServer([working(), {"status": "cancelled"}])

    async def go() -> None:
        async with client_for(MockServer(server)) as client:
            await client.call_tool("slow_compute", {})

    with pytest.raises(TaskCancelled, match=f"task {TASK_ID} was cancelled"):
        run(go())
    assert not server.cancels  # it is over: nothing to cancel


def test_cancelling_the_caller_sends_tasks_cancel() -> None:
    server = TaskServer([working()])
    app = MockServer(server)

    async def go() -> None:
        async with client_for(app) as client:
            call = asyncio.create_task(client.call_tool("slow_compute", {"seconds": 60}))
            while server.gets < 2:
                await asyncio.sleep(0.01)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call

    run(go())
    assert server.cancels == [TASK_ID]
    assert app.headers_of("tasks/cancel")[0]["mcp-name"] == TASK_ID


def test_a_task_that_never_ends_meets_the_client_deadline_without_busy_polling() -> None:
    server = TaskServer([working()], poll_ms=0)  # "poll me as fast as you can"

    async def go() -> None:
        async with client_for(MockServer(server), timeout=0.8) as client:
            await client.call_tool("slow_compute", {"seconds": 3600})

    started = time.monotonic()
    with pytest.raises(TimeoutError, match=f"deadline.*task {TASK_ID} was cancelled"):
        run(go())
    assert time.monotonic() - started < 5
    assert 2 <= server.gets <= 10  # min_poll_interval 0.1 s, not a busy loop
    assert server.cancels == [TASK_ID]


def test_poll_interval_is_honoured() -> None:
    server = TaskServer([working(), working(), completed()], poll_ms=250)

    async def go() -> None:
        async with client_for(MockServer(server)) as client:
            await client.call_tool("slow_compute", {})

    started = time.monotonic()
    run(go())
    assert time.monotonic() - started >= 0.7  # three waits of 0.25 s before each get


def test_mrtr_rounds_then_a_task_compose() -> None:
    ask = asking("name")["inputRequests"]
    server = TaskServer([completed("Hello, Alice")],
                        mrtr=[{"inputRequests": ask, "requestState": "s1"}])
    asker = Asker()

    async def go() -> str:
        async with client_for(MockServer(server), Handlers(elicitation=asker)) as client:
            return text(await client.call_tool("test_tool_with_task", {}))

    assert run(go()) == "Hello, Alice"
    first, second = server.calls
    assert "inputResponses" not in first and second["requestState"] == "s1"
    assert asker.asked == ["question name?"] and not server.updates


# -- malformed replies -----------------------------------------------------------------------------

def _drop(key: str) -> Any:
    return lambda result: {k: v for k, v in result.items() if k != key}


@pytest.mark.parametrize("raw_get", [
    _drop("createdAt"),
    _drop("taskId"),
    lambda r: {**r, "status": "completed"},  # completed without `result`
    lambda r: {**r, "status": "failed"},  # failed without `error`
    lambda r: {**r, "status": "input_required"},  # without `inputRequests`
    lambda r: {**r, "status": "sleeping"},
    lambda r: {**r, "taskId": "someone-else"},
    lambda r: {**r, "resultType": "task"},
    lambda r: {**r, "status": "completed", "result": {"content": "not a list"}},
], ids=["no-createdAt", "no-taskId", "completed-no-result", "failed-no-error",
        "input-no-requests", "bad-status", "other-task", "task-resultType", "bad-result"])
def test_malformed_detailed_task_is_a_clear_error(raw_get: Any) -> None:
    server = TaskServer([working()], raw_get=raw_get)

    async def go() -> None:
        async with client_for(MockServer(server), timeout=5) as client:
            await client.call_tool("slow_compute", {})

    with pytest.raises(UnexpectedResult):
        run(go())
    # The client gave up on a task that may still run; a completed one needs no cancel.
    settled = raw_get({"status": "working"}).get("status") == "completed" and "result" in (
        raw_get({"status": "working"}))
    assert server.cancels == ([] if settled else [TASK_ID])


@pytest.mark.parametrize("raw_create", [
    _drop("taskId"), _drop("ttlMs"), lambda r: {**r, "status": 7},
    lambda r: {**r, "resultType": "tasks"},
], ids=["no-taskId", "no-ttlMs", "bad-status", "unknown-resultType"])
def test_malformed_create_task_result_is_a_clear_error(raw_create: Any) -> None:
    server = TaskServer([completed()], raw_create=raw_create)

    async def go() -> None:
        async with client_for(MockServer(server), timeout=5) as client:
            await client.call_tool("slow_compute", {})

    with pytest.raises(UnexpectedResult):
        run(go())
    assert server.gets == 0


def test_a_task_without_the_extension_declared_is_unexpected() -> None:
    server = TaskServer([completed()])
    app = MockServer(server)

    async def go() -> str:
        async with client_for(app, declare_tasks=False) as client:
            result = text(await client.call_tool("slow_compute", {}))
            with pytest.raises(ClientError, match="tasks extension is off"):
                await client.tasks.get(TASK_ID)
            return result

    assert run(go()) == "sync"  # this server falls back to a synchronous result
    caps = app.bodies("tools/call")[0]["params"]["_meta"][
        "io.modelcontextprotocol/clientCapabilities"]
    assert "extensions" not in caps and not app.bodies("tasks/get")


def test_a_task_sent_to_a_client_that_did_not_declare_it_is_refused() -> None:
    rude = TaskServer([completed()], rude=True)

    async def go() -> None:
        async with client_for(MockServer(rude), declare_tasks=False) as client:
            await client.call_tool("slow_compute", {})

    with pytest.raises(UnexpectedResult, match="not declared"):
        run(go())


# -- the manual API --------------------------------------------------------------------------------

def test_manual_get_update_cancel() -> None:
    server = TaskServer([asking("a")])
    app = MockServer(server)

    async def go() -> GetTaskResult:
        async with client_for(app) as client:
            task = await client.tasks.get(TASK_ID)
            await client.tasks.update(TASK_ID, {"a": ElicitResult(action="decline")})
            await client.tasks.cancel(TASK_ID)
            with pytest.raises(InvalidParams):
                await client.tasks.get("nope")
            return task

    task = run(go())
    assert task.status == "input_required" and task.input_requests
    assert server.updates == [{"a": {"action": "decline"}}] and server.cancels == [TASK_ID]
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        assert app.headers_of(method)[0]["mcp-name"] == TASK_ID
        assert app.headers_of(method)[0]["mcp-method"] == method


def test_wait_follows_a_known_task() -> None:
    server = TaskServer([working(), asking("a"), completed("resumed")])

    async def go() -> str:
        async with client_for(MockServer(server), Handlers(elicitation=Asker())) as client:
            return text(await client.tasks.wait(TASK_ID))

    assert run(go()) == "resumed"
    assert list(server.updates[0]) == ["a"]


def test_legacy_mode_refuses_tasks_locally() -> None:
    app = MockServer(TaskServer([completed()]))

    async def go() -> None:
        async with client_for(app, mode="legacy") as client:
            await client.tasks.get(TASK_ID)

    with pytest.raises(ClientError, match="2026-07-28"):
        run(go())
    assert not app.seen


# -- checkpoints -----------------------------------------------------------------------------------

def test_checkpoint_of_a_task_waiting_for_input_resumes_in_a_new_client() -> None:
    server = TaskServer([asking("a")])
    app = MockServer(server)

    async def first() -> str:
        async with client_for(app) as client:
            flow = client.start_tool_call("confirm_delete", {"filename": "x"})
            pending = await flow.step()
            assert list(pending) == ["a"] and flow.task_id == TASK_ID
            return flow.checkpoint()

    checkpoint = run(first())
    assert TASK_ID in checkpoint
    server.script = [completed("deleted")]
    server.gets = 0

    async def second() -> str:
        async with client_for(app) as client:  # a new process, in effect
            flow = client.resume(checkpoint)
            pending = await flow.step()
            assert list(pending) == ["a"]
            assert await flow.answer({"a": ElicitResult(action="accept",
                                                        content={"ok": True})}) == {}
            return text(flow.result)

    assert run(second()) == "deleted"
    assert server.updates == [{"a": {"action": "accept", "content": {"ok": True}}}]
    assert len(server.calls) == 1  # the tool was not called again


def test_checkpoint_of_a_working_task_resumes_polling() -> None:
    server = TaskServer([working()])
    app = MockServer(server)

    async def first() -> str:
        async with client_for(app) as client:
            flow = client.start_tool_call("slow_compute", {})
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(flow.step(), 0.3)
            return flow.checkpoint()

    checkpoint = run(first())
    assert not server.cancels  # stepping by hand: the caller decides
    server.script = [completed("late")]
    server.gets = 0

    async def second() -> str:
        async with client_for(app) as client:
            flow = client.resume(checkpoint)
            assert await flow.step() == {}
            return text(flow.result)

    assert run(second()) == "late"


# -- poll interval bounds (sans-I/O) ---------------------------------------------------------------

@pytest.mark.parametrize(("poll_ms", "seconds"), [
    (250, 0.25), (0, 0.1), (-5, 0.1), (10**9, 30.0), (None, 1.0),
])
def test_poll_interval_is_clamped(poll_ms: int | None, seconds: float) -> None:
    from mrtr.client._tasks_flow import TaskState

    state = TaskState(task_id=TASK_ID, poll_interval_ms=poll_ms)
    assert state.poll_seconds(ClientLimits()) == seconds
    custom = ClientLimits(poll_interval=2.0, min_poll_interval=0.5, max_poll_interval=5.0)
    assert 0.5 <= state.poll_seconds(custom) <= 5.0


def test_task_requests_carry_no_progress_token() -> None:
    app = MockServer(TaskServer([working(), completed()]))

    async def go() -> None:
        async with client_for(app) as client:
            await client.call_tool("slow_compute", {}, progress=lambda p, t, m: None)

    run(go())
    assert "progressToken" in app.bodies("tools/call")[0]["params"]["_meta"]
    assert all("progressToken" not in b["params"]["_meta"] for b in app.bodies("tasks/get"))
