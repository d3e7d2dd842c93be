"""`mrtr call` at a terminal: prompt_toolkit forms driven in a real pseudo-terminal (#18).

Each screen a test ends on is also shown in docs/cli.md (`check_capture`), so the page stays true.
"""

from __future__ import annotations

import pytest

from mrtr.cli._forms_prompt import _FieldCheck, schema_problem
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
    term.press("ann-at-example.com", "enter")
    term.wait_for("! enter an email address")
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
