"""`mrtr tasks get|cancel`: look at a task, or cancel it, by its id (tasks extension)."""

# Design: the same server options, client, error reports and exit statuses as `mrtr call`
# (`_call`), so a task id printed by one command works in the other. `get` prints the task's
# state (and its result or error once it has one); `--json` prints the wire result instead.
from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

import msgspec

from mrtr.client import ClientError, TransportError
from mrtr.errors import ProtocolError, from_wire
from mrtr.protocol import UNSET, CallToolResult, GetTaskResult, decode

from ._call import _client, _json, _options, _report
from ._escape import escape
from ._forms_tui import StdConsole
from ._render import render
from ._screen import Screen
from ._task_status import run_interruptible

__all__ = ["describe", "register"]

_EPILOG = """examples:
  mrtr tasks {name} http://127.0.0.1:8000/mcp 5b0e2c1d
  mrtr tasks {name} --stdio 'python -m mrtr serve app:app --stdio' 5b0e2c1d

exit status: 0 done, 1 a failure (unknown task, server error, timeout), 2 a usage error
"""
_SUMMARIES = {
    "get": "show a task's status, and its result or error once it has one",
    "cancel": "ask the server to cancel a task (cooperative: see `mrtr tasks get`)",
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mrtr tasks get|cancel` to the `mrtr` parser (each sets `run`)."""
    tasks = subparsers.add_parser(
        "tasks", help="get or cancel a task by its id",
        description="Get or cancel a task (MCP tasks extension) by its id.",
    )
    actions = tasks.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, summary in _SUMMARIES.items():
        sub = actions.add_parser(
            name, help=summary, description=summary,
            usage=f"mrtr tasks {name} URL TASK_ID [options]\n"
                  f"       mrtr tasks {name} --stdio CMD TASK_ID [options]",
            epilog=_EPILOG.format(name=name),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _options(sub, rounds=False)
        sub.set_defaults(run=_runner(name))


def _runner(action: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        loop = asyncio.new_event_loop()
        try:
            return run_interruptible(loop, _main(action, args))
        finally:  # as asyncio.run: a stream read to its reply is closed here, not at exit
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            if isinstance(getattr(args, "screen", None), Screen):
                args.screen.close()

    return run


async def _main(action: str, args: argparse.Namespace) -> int:
    items: list[str] = list(args.items)
    console = StdConsole()
    args.screen = Screen.detect(console)  # the forms and handlers `_client` builds come from it
    try:
        client = _client(args, items, console)
        task_id = _task_id(action, items)
        async with client:
            if action == "cancel":
                await client.tasks.cancel(task_id)
                print(_json({"resultType": "complete"}) if args.json else
                      f"cancel requested for task {escape(task_id, newlines=False)}")
                return 0
            task = await client.tasks.get(task_id)
    except (ValueError, ProtocolError, ClientError, TransportError, TimeoutError) as exc:
        return _report(exc, console, as_json=args.json)
    print(_json(task) if args.json else describe(task))
    return 0


def _task_id(action: str, items: list[str]) -> str:
    """The one TASK_ID argument; raises ValueError (a usage error) otherwise."""
    if len(items) != 1 or not items[0]:
        raise ValueError(f"usage: mrtr tasks {action} URL TASK_ID (give exactly one task id)")
    return items[0]


def describe(task: GetTaskResult) -> str:
    """The human-readable state of a task (server text escaped)."""
    message = task.status_message if task.status_message is not UNSET else ""
    lines = [escape(f"task {task.task_id}: {task.status.replace('_', ' ')}"
                    + (f" - {message}" if message else ""), newlines=False)]
    if task.input_requests is not UNSET:
        for key, request in task.input_requests.items():
            asked = getattr(request.params, "message", "")
            lines.append(escape(f"  waiting for {key} ({request.method}) {asked}".rstrip(),
                                newlines=False))
    if task.result is not UNSET:
        lines.append(_result(task.result))
    if task.error is not UNSET:
        error = from_wire(task.error)
        lines.append(escape(f"error {error.code}: {error.message}", newlines=False))
    return "\n".join(lines)


def _result(result: object) -> str:
    try:
        return render(decode(msgspec.json.encode(result), CallToolResult))
    except msgspec.DecodeError:  # not a tool result: show it as JSON
        return _json(result)
