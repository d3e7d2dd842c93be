"""`mrtr tasks get|cancel` and the task status line of `mrtr call`, as real processes (#14)."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mrtr.cli._task_status import TaskStatusLine
from mrtr.cli._tasks_cli import describe
from mrtr.protocol import GetTaskResult, decode
from tests.client.mocks import JSONDict, MockServer, Reply
from tests.client.rogue import serve
from tests.client.tasks_mock import (
    TASK_ID,
    TaskServer,
    asking,
    completed,
    failed,
    task_fields,
    working,
)

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = "import sys; from mrtr.cli import main; sys.exit(main())"


@dataclass
class Switch:
    """Serves whichever TaskServer the current test put in `server`."""

    server: TaskServer = field(default_factory=lambda: TaskServer([working()]))

    def __call__(self, request: JSONDict, headers: dict[str, str]) -> Reply:
        return self.server(request, headers)


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, Switch]]:
    switch = Switch()
    for url in serve(MockServer(switch)):
        yield f"{url}/mcp", switch


def mrtr(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LAUNCH, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


# -- mrtr tasks get | cancel --

def test_tasks_get_shows_the_state(live: tuple[str, Switch]) -> None:
    url, switch = live
    switch.server = TaskServer([working("rendering page 3/10")])
    done = mrtr("tasks", "get", url, TASK_ID)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"task {TASK_ID}: working - rendering page 3/10\n"


def test_tasks_get_json_is_the_wire_result(live: tuple[str, Switch]) -> None:
    url, switch = live
    switch.server = TaskServer([completed("42")])
    done = mrtr("tasks", "get", url, TASK_ID, "--json")
    assert done.returncode == 0, done.stderr
    wire = json.loads(done.stdout)
    assert wire["taskId"] == TASK_ID and wire["status"] == "completed"
    assert wire["result"]["content"][0]["text"] == "42"


def test_tasks_get_unknown_id_fails_with_the_server_error(live: tuple[str, Switch]) -> None:
    url, switch = live
    switch.server = TaskServer([working()])
    done = mrtr("tasks", "get", url, "no-such-task")
    assert done.returncode == 1 and done.stdout == ""
    assert "server error -32602" in done.stderr


def test_tasks_cancel_sends_tasks_cancel(live: tuple[str, Switch]) -> None:
    url, switch = live
    switch.server = server = TaskServer([working()])
    done = mrtr("tasks", "cancel", url, TASK_ID)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"cancel requested for task {TASK_ID}\n"
    assert server.cancels == [TASK_ID]


@pytest.mark.parametrize("args", [
    ("tasks",), ("tasks", "get"), ("tasks", "get", "URL"), ("tasks", "peek", "URL", "x"),
    ("tasks", "get", "http://127.0.0.1:9/mcp", "a", "b"),
    ("tasks", "cancel", "http://127.0.0.1:9/mcp"),
])
def test_tasks_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    done = mrtr(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr


# -- mrtr call with a task --

def test_call_shows_plain_status_lines_when_stderr_is_not_a_terminal(
    live: tuple[str, Switch]
) -> None:
    url, switch = live
    switch.server = TaskServer([working("1/2"), working("1/2"), working("2/2"),
                                completed("report ready")])
    done = mrtr("call", url, "report")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "report ready\n"
    assert done.stderr.splitlines() == [
        f"mrtr: task {TASK_ID}: working",
        f"mrtr: task {TASK_ID}: working - 1/2",
        f"mrtr: task {TASK_ID}: working - 2/2",
        f"mrtr: task {TASK_ID}: completed",
    ]


def test_call_json_output_is_unchanged_by_a_task(live: tuple[str, Switch]) -> None:
    url, switch = live
    switch.server = TaskServer([working("busy"), completed("42")])
    done = mrtr("call", url, "report", "--json")
    assert done.returncode == 0, done.stderr
    # The same JSON as a synchronous result: the task's state went to stderr only.
    assert json.loads(done.stdout) == {"resultType": "complete",
                                       "content": [{"type": "text", "text": "42"}]}
    assert f"mrtr: task {TASK_ID}: working - busy" in done.stderr.splitlines()


def test_call_of_a_failed_task_exits_1_with_the_error(live: tuple[str, Switch]) -> None:
    url, switch = live
    switch.server = TaskServer([failed(-32603, "disk full")])
    done = mrtr("call", url, "report")
    assert done.returncode == 1
    assert f"task {TASK_ID} failed: error -32603: disk full" in done.stderr


def test_ctrl_c_during_a_task_sends_tasks_cancel(live: tuple[str, Switch]) -> None:
    url, switch = live
    switch.server = server = TaskServer([working("forever")], poll_ms=50)
    process = subprocess.Popen([sys.executable, "-c", LAUNCH, "call", url, "slow_compute"],
                               cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while server.gets < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 130, stderr
    assert server.cancels == [TASK_ID]
    assert "Traceback" not in stderr


# -- the status line itself --

def _task(status: str = "working", message: str | None = None) -> GetTaskResult:
    fields = {**task_fields(status), "resultType": "complete"}
    if message is not None:
        fields["statusMessage"] = message
    if status == "input_required":
        fields.update(asking("a"))
    if status == "completed":
        fields.update(completed())
    return decode(json.dumps(fields), GetTaskResult)


class Terminal(io.StringIO):
    encoding = "utf-8"


def test_status_line_on_a_terminal_redraws_in_place_and_wipes() -> None:
    out = Terminal()
    line = TaskStatusLine(out, tty=True)
    line(_task(message="1/3"))
    line(_task(message="2/3 \x1b[31mred"))
    assert "\n" not in out.getvalue()
    assert out.getvalue().count("\r\x1b[K") == 2
    assert "2/3 \\x1b[31mred" in out.getvalue()  # server text escaped, never obeyed
    line(_task("input_required"))  # questions follow: the line is wiped first
    assert out.getvalue().endswith("\r\x1b[K")
    line.close()


def test_status_line_off_a_terminal_writes_each_change_once() -> None:
    out = io.StringIO()
    line = TaskStatusLine(out, tty=False)
    for task in (_task(), _task(), _task(message="a"), _task(message="a"), _task("completed")):
        line(task)
    line.close()
    assert out.getvalue().splitlines() == [
        f"mrtr: task {TASK_ID}: working", f"mrtr: task {TASK_ID}: working - a",
        f"mrtr: task {TASK_ID}: completed"]


def test_describe_lists_what_a_task_waits_for() -> None:
    assert describe(_task("input_required")).splitlines() == [
        f"task {TASK_ID}: input required",
        "  waiting for a (elicitation/create) question a?"]



def test_call_on_a_terminal_draws_a_spinner_line_and_wipes_it(live: tuple[str, Switch]) -> None:
    import pexpect  # type: ignore[import-untyped]

    url, switch = live
    switch.server = TaskServer([working("1/2"), working("2/2"), completed("report ready")],
                               poll_ms=300)
    cmd = [sys.executable, "-c", LAUNCH, "call", url, "report"]
    child = pexpect.spawn(cmd[0], cmd[1:], cwd=str(ROOT), encoding="utf-8", timeout=20)
    child.logfile_read = screen = io.StringIO()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, screen.getvalue()
    out = screen.getvalue()
    assert re.search(rf"\r\x1b\[K\S task {TASK_ID}: working - 2/2", out), out
    assert "mrtr: task" not in out  # no plain lines on a terminal
    tail = out[out.rindex("\r\x1b[K") + len("\r\x1b[K"):]  # after the last wipe of the line
    assert "report ready" in tail and TASK_ID not in tail, out  # wiped before the result
