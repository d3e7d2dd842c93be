"""`mrtr call` at a terminal: prompt_toolkit forms driven in a real pseudo-terminal (#18).

Each screen a test ends on is also shown in docs/cli.md (`check_capture`), so the page stays true.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time

import pytest
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput, Output
from prompt_toolkit.output.vt100 import Vt100_Output

from mrtr.cli._forms_prompt import PromptForms, _FieldCheck, schema_problem
from mrtr.protocol import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult
from tests.cli.test_forms_tui import Script
from tests.cli.tty import SERVER, Tty, check_capture


@pytest.mark.slow
def test_choice_lists_for_enums_and_booleans_issue18() -> None:
    term = Tty("call", "--stdio", SERVER, "book_return", "order_id=A1")
    term.wait_for("1. broken")
    term.press("down", "enter")                  # the second reason: "wrong item"
    term.wait_for("boxes (integer, 1 to 5)")
    term.press("2", "enter")
    term.wait_for("note (string")
    term.press("enter")                          # its default, "" (nothing to send)
    term.wait_for("Send them?")
    term.press("enter")
    term.wait_for(">  2. no")                    # a boolean as yes/no, "no" until chosen
    term.press("up", "enter")
    assert term.finish() == 0
    assert "Return booked: A1, 2 box(es), wrong item." in term.screen
    check_capture("choice-list", term.screen)


@pytest.mark.slow
def test_an_invalid_value_is_explained_under_the_input_issue18() -> None:
    term = Tty("call", "--stdio", SERVER, "print_label", "order_id=A1")
    term.wait_for("email (string, email)")
    term.press("ann@example..com", "enter")     # #26: the old pattern took it
    term.wait_for("! enter an email address: An email address cannot have two periods in a row.")
    assert "Copies" not in term.screen           # not accepted: still on the email field
    check_capture("validation", term.screen)
    term.press("ctrl-u", "ann@example.com", "enter")
    term.wait_for("copies (integer, 1 to 5, default 1)")
    term.press("ctrl-u", "9", "enter")           # the schema's maximum, checked as typed
    term.wait_for("! must be at most 5")
    term.press("ctrl-c")
    assert term.finish() == 3


@pytest.mark.slow
def test_defaults_are_pre_filled_and_pre_selected_issue18() -> None:
    term = Tty("call", "--stdio", SERVER, "print_label", "order_id=A1")
    term.wait_for("email (string, email)")
    term.press("ann@example.com", "enter")
    term.wait_for("copies (integer, 1 to 5, default 1): 1")
    term.press("enter")
    term.wait_for(">  2. express")
    term.press("enter")
    term.wait_for("Send them?")
    term.press("enter")
    assert term.finish() == 0
    assert "1 express label(s) for A1 sent to ann@example.com." in term.screen
    check_capture("defaults", term.screen)


@pytest.mark.slow
def test_ctrl_x_declines_and_the_tool_stops_issue18() -> None:
    term = Tty("call", "--stdio", SERVER, "book_return", "order_id=A1")
    term.wait_for("1. broken")
    term.press("ctrl-x")
    assert term.finish() == 3
    assert "(declined)" in term.screen
    assert "mrtr: you declined a question, so the tool stopped" in term.screen
    check_capture("decline", term.screen)


@pytest.mark.slow
def test_ctrl_c_cancels_issue18() -> None:
    term = Tty("call", "--stdio", SERVER, "print_label", "order_id=A1")
    term.wait_for("email (string, email)")
    term.press("ctrl-c")
    assert term.finish() == 3
    assert "mrtr: you cancelled a question, so the tool stopped" in term.screen


@pytest.mark.slow
def test_the_review_can_go_back_and_edit_with_the_answers_pre_filled_issue18() -> None:
    term = Tty("call", "--stdio", SERVER, "print_label", "order_id=A1")
    term.wait_for("email (string, email)")
    term.press("ann@example.com", "enter")
    term.wait_for("default 1): 1")
    term.press("ctrl-u", "3", "enter")
    term.wait_for(">  2. express")
    term.press("enter")
    term.wait_for("3. Decline")
    term.press("down", "enter")                  # Edit the answers
    term.wait_for("email (string, email): ann@example.com")
    term.press("ctrl-u", "up")                   # the history of this field
    term.wait_for("email (string, email): ann@example.com")
    term.press("enter")
    term.wait_for("default 1): 3")               # the answer given, not the default
    term.press("enter", "up", "enter")           # standard
    term.wait_for("speed=standard")
    term.press("enter")
    assert term.finish() == 0
    assert "3 standard label(s) for A1 sent to ann@example.com." in term.screen


# -- the checks behind the inline message, without a terminal ---------------------------------

@pytest.mark.parametrize(("prop", "text", "problem"), [
    ({"type": "integer", "maximum": 5}, "9", "must be at most 5"),
    ({"type": "string", "pattern": "^[A-Z]-\\d+$"}, "a1", "does not match"),
    ({"type": "string", "format": "email"}, "nope", "enter an email address"),
    # #26: the terminal refuses what the server refuses
    ({"type": "string", "format": "email"}, "ann@example..com", "two periods in a row"),
    ({"type": "string", "format": "email"}, ".ann@example.com", "cannot start with a period"),
    ({"type": "string", "format": "email"}, "ann@-example.com", "hyphen immediately after"),
    ({"type": "string", "format": "email"}, "ann@example.com", None),
    ({"type": "string"}, "", "a value is required"),
    ({"type": "string"}, ":decline", None),
    ({"type": "integer", "minimum": 1}, "3", None),
])
def test_a_field_is_checked_by_its_json_schema_issue18(
        prop: dict[str, object], text: str, problem: str | None) -> None:
    found = _FieldCheck("f", prop, required=True).problem(text)
    assert found == problem or (problem is not None and found is not None and problem in found)


def test_a_malformed_schema_from_the_server_is_no_crash_issue18() -> None:
    assert schema_problem("f", {"type": "string", "pattern": "("}, "x") is None


# -- the prompts on a pipe, without a terminal -----------------------------------------------

def fill(keys: str, params: object, output: Output | None = None) -> tuple[ElicitResult, Script]:
    console = Script()
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        forms = PromptForms(console, input=pipe, output=output or DummyOutput())
        return asyncio.run(forms(params)), console  # type: ignore[arg-type]


URL = ElicitRequestURLParams(message="Sign in", url="https://auth.example/x")
DOWN, CTRL_U, CTRL_X, CTRL_C = "\x1b[B", "\x15", "\x18", "\x03"


def test_a_url_is_opened_only_when_chosen_issue18() -> None:
    assert fill("\r", URL)[0] == ElicitResult(action="decline")  # "No" is pre-selected
    result, console = fill(DOWN + "\r", URL)
    assert result == ElicitResult(action="accept")
    assert console.out[-1] == "  Open it in your browser: https://auth.example/x"


def test_a_form_is_checked_and_sent_issue18() -> None:
    form = ElicitRequestFormParams(message="m", requested_schema={
        "type": "object", "required": ["n", "ok"], "properties": {
            "n": {"type": "integer", "maximum": 3}, "ok": {"type": "boolean"}}})
    # 9 is refused inline (nothing is sent), 3 fits; "no" is pre-selected, Up picks "yes".
    result, console = fill("9\r" + CTRL_U + "3\r\x1b[A\r\r", form)
    assert result == ElicitResult(action="accept", content={"n": 3, "ok": True})
    assert console.out[-1] == "  Answers: n=3, ok=yes"
    assert fill(CTRL_X, form)[0] == ElicitResult(action="decline")
    assert fill("1\r" + CTRL_C, form)[0] == ElicitResult(action="cancel")
    assert fill(":cancel\r", form)[0] == ElicitResult(action="cancel")


def test_choice_labels_from_the_server_are_escaped_issue18() -> None:
    form = ElicitRequestFormParams(message="Pick\x1b[2J", requested_schema={
        "type": "object", "required": ["size"], "properties": {"size": {
            "type": "string", "title": "Size\x1b[31m", "enum": ["s", "l"],
            "enumNames": ["Small\x1b]0;owned\x07", "Large"]}}})
    screen = io.StringIO()
    output = Vt100_Output(screen, lambda: Size(rows=24, columns=80), term="xterm")
    result, console = fill("\r", form, output)
    assert result == ElicitResult(action="accept", content={"size": "s"})
    drawn = screen.getvalue()
    assert "Size\\x1b[31m" in drawn and "Small\\x1b]0;owned\\x07" in drawn
    assert "\x1b]0;owned" not in drawn and console.out[0] == "\nThe server asks: Pick\\x1b[2J"


def test_tab_completes_the_choice_after_the_last_comma_issue18() -> None:
    form = ElicitRequestFormParams(message="m", requested_schema={
        "type": "object", "required": ["tags"], "properties": {
            "tags": {"type": "array", "items": {"enum": ["red", "wrong item", "blue"]}}}})
    console = Script()
    with create_pipe_input() as pipe:
        def type_slowly() -> None:  # completions are computed in the background: wait for each
            for keys in ("re", "\t", ", wr", "\t", "\r"):
                time.sleep(0.3)
                pipe.send_text(keys)

        threading.Thread(target=type_slowly, daemon=True).start()
        result = asyncio.run(PromptForms(console, input=pipe, output=DummyOutput())(form))
    assert result == ElicitResult(action="accept", content={"tags": ["red", "wrong item"]})


def test_an_optional_choice_starts_on_no_answer_issue18() -> None:
    form = ElicitRequestFormParams(message="m", requested_schema={
        "type": "object", "properties": {
            "team": {"type": "string", "enum": ["red", "blue"]}, "vip": {"type": "boolean"}}})
    assert fill("\r\r\r", form)[0] == ElicitResult(action="accept", content={})
    chosen = fill("\x1b[A\r\x1b[A\r\r", form)[0]  # one up: the last real option
    assert chosen == ElicitResult(action="accept", content={"team": "blue", "vip": False})
