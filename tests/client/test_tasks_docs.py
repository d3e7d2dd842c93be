"""The "Tasks" example of docs/client.md runs as written against a tasks server over HTTP (#14)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from .mocks import MockServer
from .rogue import serve
from .tasks_mock import TaskServer, completed, failed, working

ROOT = Path(__file__).resolve().parents[2]
CLIENT_MD = ROOT / "docs" / "client.md"
QUESTION = {"status": "input_required", "inputRequests": {"confirm": {
    "method": "elicitation/create", "params": {
        "mode": "form", "message": "Include the draft figures?",
        "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}},
    }}}}


def docs_example() -> dict[str, Any]:
    """Run the first python block under "## Tasks" as a module; return its namespace."""
    section = CLIENT_MD.read_text(encoding="utf-8").split("\n## Tasks\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {"__name__": "tasks_example"}
    exec(compile(code, str(CLIENT_MD), "exec", dont_inherit=True), namespace)
    return namespace


@pytest.mark.parametrize(("script", "printed"), [
    ([working("collecting data"), QUESTION, completed("Report 2026: 12 pages")], [
        "task: working ", "task: working collecting data", "task: input_required ",
        "asked: Include the draft figures?", "task: completed ",
        "result: Report 2026: 12 pages"]),
    ([failed(-32603, "no data for 2026")], [
        "task: working ", "task: failed ", "failed: -32603 no data for 2026"]),
], ids=["completed", "failed"])
def test_the_tasks_example_runs(
    script: list[Any], printed: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    server = TaskServer(script)
    main = docs_example()["main"]
    for url in serve(MockServer(server)):
        asyncio.run(asyncio.wait_for(main(f"{url}/mcp"), 20))
    assert capsys.readouterr().out.splitlines() == printed
    if server.updates:
        assert server.updates == [{"confirm": {"action": "accept",
                                               "content": {"confirm": True}}}]
