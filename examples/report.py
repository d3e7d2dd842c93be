"""A long quarterly report that runs as a task and asks for a confirmation mid-way.

Serve it with `mrtr serve examples.report:app --workers 2`, then call it with
`mrtr call http://127.0.0.1:8000/mcp build_report quarter=Q3`. A client that declares the tasks
extension gets a task it polls (any worker answers); other clients get the same report through
ordinary MRTR rounds. Either way the handler below is the same straight-line code.
"""

from __future__ import annotations

import asyncio

from mrtr import Context, Server
from mrtr.server import TaskPolicy

app = Server("reports", version="1.0.0", tasks=TaskPolicy(poll_interval_ms=200))


class Warehouse:
    """Stands in for a slow data warehouse and a report archive."""

    def __init__(self) -> None:
        self.queries = 0
        self.archived: list[str] = []

    def figures(self, quarter: str) -> dict[str, int]:
        self.queries += 1
        return {"revenue": 120, "costs": 80, "headcount": 42}

    def archive(self, quarter: str, sections: list[str]) -> str:
        self.archived.append(quarter)
        return f"RPT-{quarter}-{len(self.archived)}"


warehouse = Warehouse()


@app.tool(task="optional")
async def build_report(ctx: Context, quarter: str, pause: float = 0.0) -> str:
    """Build the quarterly report (long: it runs as a task for clients that support tasks)."""
    figures = await ctx.once("figures", lambda: warehouse.figures(quarter))  # runs once per task
    sections = []
    for done, (name, value) in enumerate(figures.items()):
        await ctx.report_progress(done, len(figures) + 1, f"Writing the {name} section")
        await asyncio.sleep(pause)  # the slow part
        sections.append(f"{name}: {value}")
    if await ctx.confirm(f"{quarter}: {len(sections)} sections written. Add the outlook?",
                         key="outlook"):
        await ctx.report_progress(len(figures), len(figures) + 1, "Writing the outlook")
        sections.append("outlook: steady")
    report_id = await ctx.once("archive", lambda: warehouse.archive(quarter, sections))
    return f"Report {report_id}: " + "; ".join(sections)
