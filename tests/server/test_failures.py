"""_failures: what the client sees for each kind of exception, in a tool and anywhere else.

The table below is the one in docs/server.md ("Errors: what the client sees").
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from mrtr.errors import (
    InternalError,
    InvalidParams,
    InvalidRequestState,
    MissingRequiredClientCapability,
    ProtocolError,
)
from mrtr.protocol import TextContent
from mrtr.server import Declined, ToolError
from mrtr.server._asks import Suspend
from mrtr.server._failures import tool_failure, wire_error
from mrtr.server._rounds import SuspendSwallowed
from mrtr.server._schema import ArgumentsInvalid

LOG = logging.getLogger("tests.failures")
SECRET = "db password is hunter2"
DECLINED = "The user declined the request: Go?"

# exception, the isError text of a tool "t" (None: a wire error), the wire error (code, message)
TABLE: list[tuple[Exception, str | None, tuple[int, str]]] = [
    (ToolError("Not today."), "Not today.", (-32603, "Internal error")),
    (Declined("decline", "Go?"), DECLINED, (-32602, DECLINED)),
    (Declined("cancel", "Go?"), "The user cancelled the request: Go?",
     (-32602, "The user cancelled the request: Go?")),
    (ArgumentsInvalid("Invalid arguments: $.a: bad"), "Invalid arguments: $.a: bad",
     (-32602, "Invalid arguments: $.a: bad")),
    (RuntimeError(SECRET), "Tool t failed.", (-32603, "Internal error")),
    (SuspendSwallowed(SECRET), "Tool t failed.", (-32603, "Internal error")),
    (ExceptionGroup("tasks", [KeyError(SECRET)]), "Tool t failed.", (-32603, "Internal error")),
    (MissingRequiredClientCapability({"sampling": {}}), None,
     (-32021, "Missing required client capability")),
    (InvalidRequestState("expired"), None, (-32602, "Invalid or expired requestState")),
    (InvalidParams("Too many input rounds for one request (limit 16)"), None,
     (-32602, "Too many input rounds for one request (limit 16)")),
]


@pytest.mark.parametrize(("exc", "text", "wire"), TABLE, ids=lambda v: type(v).__name__)
def test_what_the_client_sees(exc: Exception, text: str | None, wire: tuple[int, str]) -> None:
    error = wire_error(exc, "request 1 (prompts/get p)", LOG)
    assert (error.code, error.message) == wire
    if text is None:
        with pytest.raises(ProtocolError) as raised:
            tool_failure(exc, "t", LOG)
        assert raised.value is exc  # a ProtocolError goes out as it is, even from a tool
    else:
        result = tool_failure(exc, "t", LOG)
        assert result.is_error is True and result.content == [TextContent(text=text)]


def test_a_suspension_outside_a_round_is_an_internal_error() -> None:
    assert isinstance(wire_error(Suspend(), "request 1 (completion/complete)", LOG), InternalError)


@pytest.mark.parametrize("exc", [RuntimeError(SECRET), SuspendSwallowed(SECRET)])
def test_unexpected_failures_are_logged_with_their_reason_never_sent(
    exc: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, LOG.name):
        sent = [tool_failure(exc, "t", LOG).content, wire_error(exc, "request 1 (x)", LOG).message]
    assert SECRET not in str(sent)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all(r.exc_info and r.exc_info[1] is exc for r in errors)


@pytest.mark.parametrize("exc", [Declined("decline", "Go?"), ArgumentsInvalid("bad")])
def test_refusals_are_not_logged_as_server_errors(
    exc: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, LOG.name):
        tool_failure(exc, "t", LOG)
        wire_error(exc, "request 1 (x)", LOG)
    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.INFO]


def test_docs_example_of_errors_runs() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "server.md"
    if not docs.exists():  # `make mutate` stages copy src/, tests/ and examples/ only
        pytest.skip("docs/ is not beside the tests (a mutation stage)")
    section = docs.read_text().split("## Errors: what the client sees", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    ns: dict[str, Any] = {"__name__": "docs_errors"}
    exec(compile(code, str(docs), "exec", dont_inherit=True), ns)  # its asserts are the test
    assert ns["prompt"].rounds == 2


WHAT = "request 7 (prompts/get p)"


@pytest.mark.parametrize(("exc", "tool_line", "wire_line"), [
    (Declined("decline", "Go?"), f"tool t: {DECLINED}", f"{WHAT}: {DECLINED}"),
    (ArgumentsInvalid("Invalid arguments: $.a"), "tool t: Invalid arguments: $.a",
     f"{WHAT}: Invalid arguments: $.a"),
    (RuntimeError(SECRET), "tool t failed", f"{WHAT} failed"),
    (InvalidParams("Unknown prompt: p"), None,
     f"{WHAT}: InvalidParams('Unknown prompt: p', code=-32602, data=None)"),
    (Suspend(), None, f"{WHAT}: the handler asked for input, which this method may not"),
], ids=["Declined", "ArgumentsInvalid", "RuntimeError", "InvalidParams", "Suspend"])
def test_the_log_line_names_the_request_and_the_reason_issue_20(
    exc: BaseException, tool_line: str | None, wire_line: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The operator reads what failed, where, and why; the client reads only the wire text."""
    with caplog.at_level(logging.INFO, LOG.name):
        if tool_line is not None:
            assert isinstance(exc, Exception)
            tool_failure(exc, "t", LOG)
        wire_error(exc, WHAT, LOG)
    expected = [tool_line, wire_line] if tool_line is not None else [wire_line]
    assert caplog.messages == expected
    if isinstance(exc, RuntimeError):  # a bug: the traceback goes to the log
        assert all(r.exc_info and r.exc_info[1] is exc for r in caplog.records)


# -- mrtr dev: exceptions shown to the developer's client (#27) ----------------------------------
@pytest.mark.parametrize(("exc", "shown"), [
    (RuntimeError(SECRET), f"RuntimeError: {SECRET}"),
    (ZeroDivisionError(), "ZeroDivisionError"),
    (ExceptionGroup("tasks", [KeyError("k")]), "ExceptionGroup: tasks (1 sub-exception)"),
])
def test_expose_adds_the_exception_to_a_server_bug_issue27(exc: Exception, shown: str) -> None:
    result = tool_failure(exc, "boom", LOG, expose=True)
    assert result.content == [TextContent(text=f"Tool boom failed: {shown}")]
    error = wire_error(exc, WHAT, LOG, expose=True)
    assert (error.code, error.message) == (-32603, f"Internal error: {shown}")


@pytest.mark.parametrize(("exc", "text", "wire"), TABLE, ids=lambda v: type(v).__name__)
def test_expose_changes_nothing_but_server_bugs_issue27(
    exc: Exception, text: str | None, wire: tuple[int, str]
) -> None:
    if wire[1] != "Internal error":  # a message written for the client stays as it is
        assert wire_error(exc, WHAT, LOG, expose=True).message == wire[1]
    if text is not None and not text.startswith("Tool t failed"):
        assert tool_failure(exc, "t", LOG, expose=True).content == [TextContent(text=text)]


def test_expose_names_an_ask_outside_a_round_issue27() -> None:
    error = wire_error(Suspend(), WHAT, LOG, expose=True)
    assert error.message == ("Internal error: the handler asked for input, which this method "
                             "may not")
