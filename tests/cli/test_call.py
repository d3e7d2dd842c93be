"""`mrtr call` and friends: argument parsing, terminal forms, and the real program under pexpect."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pexpect  # type: ignore[import-untyped]
import pytest

from mrtr.cli._call import parse_arguments
from mrtr.cli._forms_tui import TerminalForms, parse_field
from mrtr.protocol import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = "import sys; from mrtr.cli import main; sys.exit(main())"
SERVER = f"{sys.executable} -m mrtr.cli serve tests.cli.app:app --stdio"


def mrtr(*args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCH, *args]


def spawn(*args: str) -> pexpect.spawn:
    cmd = mrtr(*args)
    return pexpect.spawn(cmd[0], cmd[1:], cwd=str(ROOT), encoding="utf-8", timeout=20)


# -- pure parts --------------------------------------------------------------------------------

def test_parse_arguments_json_or_string() -> None:
    assert parse_arguments(["a=1", "b=true", "c=hello", "d=[1,2]", 'e="7"', "f="]) == {
        "a": 1, "b": True, "c": "hello", "d": [1, 2], "e": "7", "f": ""}
    assert parse_arguments(["a=1"], as_json=False) == {"a": "1"}
    with pytest.raises(ValueError):
        parse_arguments(["oops"])


@pytest.mark.parametrize(("prop", "text", "value"), [
    ({"type": "string", "enum": ["x", "y"]}, "2", "y"),
    ({"type": "string", "oneOf": [{"const": "a", "title": "Alpha"}]}, "Alpha", "a"),
    ({"type": "array", "items": {"enum": ["r", "g", "b"]}}, "1, b", ["r", "b"]),
    ({"type": "boolean"}, "Yes", True),
    ({"type": "integer", "minimum": 1}, "3", 3),
    ({"type": "number"}, "2.5", 2.5),
    ({"type": "string", "format": "email"}, "a@b.co", "a@b.co"),
    ({"type": "string", "format": "date"}, "2026-07-28", "2026-07-28"),
])
def test_parse_field_accepts(prop: dict[str, object], text: str, value: object) -> None:
    assert parse_field(prop, text) == value


@pytest.mark.parametrize(("prop", "text"), [
    ({"type": "string", "enum": ["x"]}, "z"),
    ({"type": "integer", "maximum": 5}, "9"),
    ({"type": "integer"}, "1.5"),
    ({"type": "boolean"}, "maybe"),
    ({"type": "string", "minLength": 3}, "ab"),
    ({"type": "string", "format": "email"}, "nope"),
    ({"type": "string", "format": "uri"}, "no-scheme"),
    ({"type": "array", "items": {"enum": ["r"]}, "minItems": 1}, ""),
])
def test_parse_field_rejects(prop: dict[str, object], text: str) -> None:
    with pytest.raises(ValueError):
        parse_field(prop, text)


class Script:
    """A Console answering from a list of lines (EOF when they run out)."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)
        self.out: list[str] = []

    def read(self, prompt: str) -> str:
        self.out.append(prompt)
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)

    def write(self, text: str) -> None:
        self.out.append(text)


FORM = ElicitRequestFormParams(message="Details", requested_schema={
    "type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "maximum": 3}, "tag": {"type": "string"}}})


def ask(console: Script, params: object) -> ElicitResult:
    return asyncio.run(TerminalForms(console)(params))  # type: ignore[arg-type]


def test_form_reprompts_then_edits_on_review() -> None:
    console = Script("", "7", "2", "", "n", "3", "x", "y")
    assert ask(console, FORM) == ElicitResult(action="accept", content={"n": 3, "tag": "x"})
    text = "\n".join(console.out)
    assert "a value is required" in text and "must be at most 3" in text


def test_form_decline_cancel_and_eof() -> None:
    assert ask(Script(":decline"), FORM).action == "decline"
    assert ask(Script("1", ":cancel"), FORM).action == "cancel"
    assert ask(Script(), FORM).action == "cancel"


def test_url_mode_shows_the_url_and_needs_consent() -> None:
    params = ElicitRequestURLParams(message="Sign in", url="https://auth.example/x?y=1")
    console = Script("y")
    assert ask(console, params) == ElicitResult(action="accept")
    assert any("https://auth.example/x?y=1" in line for line in console.out)
    assert ask(Script(""), params).action == "decline"


# -- the program -------------------------------------------------------------------------------

def test_tools_json_over_stdio() -> None:
    out = subprocess.run(mrtr("tools", "--stdio", SERVER, "--json"), cwd=ROOT,
                         capture_output=True, text=True, timeout=30, check=True)
    assert {t["name"] for t in json.loads(out.stdout)} >= {"book_return", "add"}
    out = subprocess.run(mrtr("call", "--stdio", SERVER, "add", "a=2", "b=40"), cwd=ROOT,
                         capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "42"


def fill_return_form(child: pexpect.spawn) -> None:
    child.expect("Return details for order A1")
    child.expect(r"reason \(choice\): ")
    child.sendline("7")                       # not a choice: re-prompted
    child.expect("choose one of")
    child.expect(r"reason \(choice\): ")
    child.sendline("1")
    child.expect(r"boxes \(integer\): ")
    child.sendline("9")                       # above the maximum: re-prompted
    child.expect("must be at most 5")
    child.sendline("2")
    child.expect(r"note \(string")
    child.sendline("")
    child.expect(r"Send\? \[Y/n\] ")
    child.sendline("y")
    child.expect(r"Book a pickup for 2 box\(es\) \(broken\)\?")
    child.expect(r"confirm \(y/n\): ")


def test_call_multi_round_form_with_confirmation() -> None:
    child = spawn("call", "--stdio", SERVER, "book_return", "order_id=A1")
    fill_return_form(child)
    child.sendline("y")
    child.expect("Return booked: A1, 2 box")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_call_declined_confirmation() -> None:
    child = spawn("call", "--stdio", SERVER, "book_return", "order_id=A1")
    fill_return_form(child)
    child.sendline(":decline")
    child.expect("Return not booked.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
