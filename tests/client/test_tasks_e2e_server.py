"""The mrtr client against the mrtr server's tasks (#14): examples/report.py asks mid-task, the
client answers through its handlers and `tasks/update`, and gets the same report a client
without the extension gets through MRTR rounds — in process and over real HTTP workers."""

from __future__ import annotations

import asyncio

import pytest

from mrtr.client import Client, Handlers
from mrtr.protocol import CallToolResult, ElicitRequestParams, ElicitResult, TextContent
from tests.transports.conftest import free_port, spawn_cli, stop, wait_ready


async def _confirm(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


def _text(result: CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, TextContent))


async def _report(target: object, *, tasks: bool) -> tuple[str, list[str]]:
    seen: list[str] = []
    handlers = Handlers(elicitation=_confirm)
    async with Client(target, handlers=handlers, timeout=60,  # type: ignore[arg-type]
                      declare_tasks=tasks) as client:
        result = await client.call_tool("build_report", {"quarter": "Q3"},
                                        on_task=lambda task: seen.append(task.status))
    assert isinstance(result, CallToolResult) and result.is_error is not True
    return _text(result), seen


def test_in_process_a_task_and_mrtr_rounds_give_the_same_report() -> None:
    from examples.report import app

    with_task, states = asyncio.run(_report(app, tasks=True))
    assert "input_required" in states and states[-1] == "completed", states
    without, none = asyncio.run(_report(app, tasks=False))
    assert none == []
    strip = [line.split(": ", 1)[1] for line in (with_task, without)]  # report ids differ
    assert strip[0] == strip[1] and "outlook: steady" in strip[0]


@pytest.mark.slow
def test_over_http_workers_the_task_is_followed_to_its_report() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = spawn_cli("serve", "examples.report:app", "--port", str(port), "--workers", "2")
    try:
        wait_ready(url, server)
        text, states = asyncio.run(_report(url, tasks=True))
    finally:
        stop(server)
    assert "outlook: steady" in text and states[-1] == "completed"
    assert "input_required" in states
