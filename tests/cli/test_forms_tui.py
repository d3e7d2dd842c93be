"""What the terminal forms print for hostile server text: exact output, escapes visible (#11)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mrtr.cli._forms_tui import TerminalForms, TerminalSampler, parse_field
from mrtr.client import InputRefused
from mrtr.protocol import (
    CreateMessageRequestParams,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    SamplingMessage,
    TextContent,
)


class Script:
    """A Console answering from a list of lines; records every prompt and line written."""

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


def test_url_elicitation_shows_the_whole_url_escaped() -> None:
    # The message tries to erase its line and the URL hides a part and reverses the rest;
    # the host is not good.example, and the output must show exactly that.
    params = ElicitRequestURLParams(
        message="Sign in\x1b[2K\rAll good: open https://good.example\nIt wants nothing",
        url="https://good.example\u2044@evil.example/\x1b[8mx\x1b[0m?\u202egnp.exe")
    console = Script("y")
    assert asyncio.run(TerminalForms(console)(params)) == ElicitResult(action="accept")
    url = "https://good.example\\u2044@evil.example/\\x1b[8mx\\x1b[0m?\\u202egnp.exe"
    assert console.out == [
        "\nThe server asks: Sign in\\x1b[2K\\x0dAll good: open https://good.example"
        "\\x0aIt wants nothing",
        f"  It wants you to open this URL (host: evil.example):\n    {url}",
        "  Open it? [y/N] ",
        f"  Open it in your browser: {url}",
    ]


def test_url_elicitation_with_an_unparsable_url() -> None:
    console = Script("n")
    params = ElicitRequestURLParams(message="Go", url="https://[oops/\x1b")
    assert asyncio.run(TerminalForms(console)(params)) == ElicitResult(action="decline")
    assert console.out[1] == ("  It wants you to open this URL (host: invalid URL):\n"
                              "    https://[oops/\\x1b")


def test_form_text_from_the_server_is_escaped() -> None:
    form = ElicitRequestFormParams(
        message="Pick\x1b]8;;http://x\x07one\nsecond line\u202e",
        requested_schema={"type": "object", "required": ["size\x07"], "properties": {
            "size\x07": {"type": "string", "title": "Size\x1b[31m", "description": "d1\nd2",
                         "enum": ["s", "l"], "enumNames": ["Small\r", "Large\x9b"]},
            "tag": {"type": "string", "default": "x\x9by", "format": "f\x1b"}}})
    console = Script("9", "1", "", "y")
    result = asyncio.run(TerminalForms(console)(form))
    assert result == ElicitResult(action="accept", content={"size\x07": "s", "tag": "x\x9by"})
    assert console.out == [
        "\nThe server asks: Pick\\x1b]8;;http://x\\x07one\nsecond line\\u202e",
        "  (:decline to decline, :cancel to cancel)",
        "  Size\\x1b[31m - d1\\x0ad2\n    1) Small\\x0d  2) Large\\x9b",
        "  size\\x07 (choice): ",
        "    ! choose one of: s, l",
        "  size\\x07 (choice): ",
        "  tag",
        '  tag (string, f\\x1b, default "x\\x9by"): ',
        "  Answers: size\\x07=s, tag=x\\x9by",
        "  Send? [Y/n] ",
    ]


def test_sampling_prompt_is_escaped_on_screen() -> None:
    params = CreateMessageRequestParams(
        messages=[SamplingMessage(role="user", content=TextContent(text="hi\x1b[8m\nsecret"))],
        max_tokens=5, system_prompt="be\u202enice")
    console = Script("ok")
    result = asyncio.run(TerminalSampler(console)(params))
    assert result.content == TextContent(text="ok")
    assert console.out[0] == ("\nThe server asks the model:\n    [system] be\\u202enice\n"
                              "    [user] hi\\x1b[8m\n    secret")


def test_fields_show_their_constraints_before_the_first_answer_issue19() -> None:
    params = ElicitRequestFormParams(message="Limits", requested_schema={
        "type": "object", "required": ["n", "name", "tags", "x"], "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "name": {"type": "string", "minLength": 2, "maxLength": 20},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 1},
            "x": {"type": "number", "exclusiveMinimum": 0},
            "free": {"type": "integer"}}})
    console = Script("3", "ann", "a", "0.5", "", "y")
    assert asyncio.run(TerminalForms(console)(params)).content == {
        "n": 3, "name": "ann", "tags": ["a"], "x": 0.5}
    prompts = [line for line in console.out if line.endswith(": ")]
    assert prompts == [
        "  n (integer, 1 to 5): ",
        "  name (string, 2 to 20 characters): ",
        "  tags (choices, comma-separated, pick at most 1): ",
        "  x (number, > 0): ",
        "  free (integer, optional): ",
    ]


def test_a_single_field_form_has_no_review_step_issue19() -> None:
    # As documented: the review ("Send? [Y/n]") follows forms of two fields or more only.
    params = ElicitRequestFormParams(message="Name?", requested_schema={
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}})
    console = Script("Ann")
    assert asyncio.run(TerminalForms(console)(params)).content == {"name": "Ann"}
    assert not any("Send?" in line for line in console.out)


def test_a_sampler_that_cannot_start_refuses_the_input_issue19(tmp_path: Path) -> None:
    params = CreateMessageRequestParams(max_tokens=5, messages=[
        SamplingMessage(role="user", content=TextContent(text="hi"))])
    missing = str(tmp_path / "nosuchllm")
    with pytest.raises(InputRefused, match="cannot run the sampler"):
        asyncio.run(TerminalSampler(Script(), command=missing)(params))


BAD_EMAILS = {  # #26: the old pattern let each through (one was booked from a terminal)
    "ann@example..com": "cannot have two periods in a row",
    ".ann@example.com": "cannot start with a period",
    "ann@-example.com": "cannot have a hyphen immediately after the @-sign",
}


@pytest.mark.parametrize("bad", sorted(BAD_EMAILS))
def test_26_the_plain_form_refuses_bad_emails_and_says_why(bad: str) -> None:
    params = ElicitRequestFormParams(message="Contact", requested_schema={
        "type": "object", "required": ["email"],
        "properties": {"email": {"type": "string", "format": "email"}}})
    console = Script(bad, "ann@example.com")
    assert asyncio.run(TerminalForms(console)(params)).content == {"email": "ann@example.com"}
    assert any(f"enter an email address: An email address {BAD_EMAILS[bad]}." in line
               for line in console.out), console.out
    with pytest.raises(ValueError, match=BAD_EMAILS[bad]):
        parse_field({"type": "string", "format": "email"}, bad)


@pytest.mark.parametrize("good", ["ann@example.com", "ann.lee+x@mail.example.co.uk",
                                  "ann@bücher.de"])
def test_26_the_plain_form_takes_good_emails(good: str) -> None:
    assert parse_field({"type": "string", "format": "email"}, good) == good
