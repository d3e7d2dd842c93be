"""The tasks-extension tools of the conformance fixture (the tasks-* scenarios)."""

from __future__ import annotations

import asyncio

from mrtr import Context, Form, InvalidParams, Server, ToolError

_ANSWER = {  # what the suite answers each elicitation of multi_input with
    "type": "object",
    "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
}


class UserName(Form):
    name: str


def add_task_tools(app: Server) -> None:
    """Register greet, slow_compute, failing_job, protocol_error_job, confirm_delete,
    multi_input and test_tool_with_task on `app`."""

    @app.tool()
    def greet(name: str) -> str:
        """Greets someone (never a task)."""
        return f"Hello, {name}!"

    @app.tool(task="optional")
    async def slow_compute(ctx: Context, seconds: float = 1.0, label: str = "") -> str:
        """Sleeps `seconds`, then answers; a task for clients that declare the extension."""
        await ctx.report_progress(0, 1, f"computing {label}".strip())
        await asyncio.sleep(seconds)
        return f"Computed {label or 'result'} after {seconds:g}s"

    @app.tool(task="required")
    async def failing_job() -> str:
        """Fails as a tool (isError) after about a second; only runs as a task."""
        await asyncio.sleep(1.0)
        raise ToolError("failing_job failed, as it always does")

    @app.tool(task="optional")
    async def protocol_error_job() -> str:
        """Fails with a JSON-RPC error, so its task ends `failed`."""
        raise InvalidParams("protocol_error_job always fails with a protocol error")

    @app.tool(task="optional")
    async def confirm_delete(ctx: Context, filename: str) -> str:
        """Asks for confirmation inside the task, then deletes (pretends to)."""
        if not await ctx.confirm(f"Delete {filename}?"):
            return f"Kept {filename}."
        return f"Deleted {filename}."

    @app.tool(task="optional")
    async def multi_input(ctx: Context) -> str:
        """Asks two questions at once inside the task."""
        first, second = await ctx.gather(
            ctx.elicit_schema("First input", _ANSWER, key="first"),
            ctx.elicit_schema("Second input", _ANSWER, key="second"),
        )
        return f"Got {first.get('name')} and {second.get('name')}"

    @app.tool(task="required")
    async def test_tool_with_task(ctx: Context) -> str:
        """Asks a name in an MRTR round, then greets it from a task."""
        who = await ctx.elicit("What is your name?", UserName)
        await ctx.begin_task()
        await asyncio.sleep(0.2)
        return f"Hello, {who.name}, from a task!"
