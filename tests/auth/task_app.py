"""A task server for the auth tests: `mrtr serve tests/auth/task_app.py:app --auth-issuer ...`."""

from __future__ import annotations

from mrtr import Context, Form, Server
from mrtr.server import TaskPolicy


class Confirm(Form):
    ok: bool


def task_app() -> Server:
    app = Server("secure-tasks", version="1.0.0",
                 tasks=TaskPolicy(max_live=3, poll_interval_ms=10, lease=0.6))

    @app.tool(task="required")
    async def file_note(ctx: Context, title: str) -> str:
        """Ask, then file a note as the caller (runs as a task)."""
        answer = await ctx.elicit(f"File {title!r}?", Confirm, key="file")
        who = ctx.identity  # the creator, inside the task, on whichever replica runs it
        assert who is not None and ctx.principal == str(who) and type(ctx.principal) is str
        scopes = " ".join(sorted(who.scopes))
        return f"{who.subject} ({who.client_id}; {scopes}) filed {title}: {answer.ok}"

    @app.tool(task="required")
    async def quick(ctx: Context) -> str:
        """End at once."""
        return f"done for {ctx.identity.subject if ctx.identity else None}"

    return app


app = task_app()
