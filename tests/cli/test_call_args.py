"""`mrtr call` and friends: usage errors (exit 2, one line, nothing started) and the rules for
`key=value` values, run as the real program in a subprocess with exact output checks."""

from __future__ import annotations

import json

import pytest

from mrtr.cli._call_args import parse_arguments
from tests.cli.test_call import SERVER, cli, target  # noqa: F401 - fixture

SIGN_UP = {"type": "object", "properties": {
    "team": {"enum": ["red", "blue"]}, "code": {"type": "string"},
    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "n": {"type": "integer"},
    "x": {"type": "number"}, "tags": {"type": "array"}}}


def test_values_follow_the_input_schema_issue19() -> None:
    parsed = parse_arguments(["team=null", "code=0123", "note=null", "n=3", "x=2", "tags=[1]",
                              "free=null"], schema=SIGN_UP)
    assert parsed == {"team": "null", "code": "0123", "note": None, "n": 3, "x": 2,
                      "tags": [1], "free": None}
    assert parse_arguments(["code=123", 'team="red"', "code2=true"], schema=SIGN_UP) == {
        "code": "123", "team": "red", "code2": True}
    assert parse_arguments(["n=abc"], schema=SIGN_UP) == {"n": "abc"}  # the server explains


def test_a_key_given_twice_is_an_error_issue19() -> None:
    with pytest.raises(ValueError, match="'x' is given twice"):
        parse_arguments(["x=1", "x=2"])


@pytest.mark.parametrize(("args", "stderr"), [
    (["call", "sign_up", "team=red"],
     "mrtr: the first argument must be the server URL (http://HOST:PORT/PATH), or use "
     "--stdio 'CMD'; got 'sign_up'\n"),
    (["tools", "http://127.0.0.1:8894mcp"],
     "mrtr: invalid URL 'http://127.0.0.1:8894mcp': Invalid port: '8894mcp'\n"),
    (["tools", "http://127.0.0.1:9/mcp", "--stdio", SERVER],
     "mrtr: give the server URL or --stdio 'CMD', not both\n"),
    (["call", "--stdio", SERVER, "add", "a=1", "a=2"], "mrtr: 'a' is given twice\n"),
    (["tools", "--stdio", SERVER, "extra"],
     "mrtr: unexpected argument 'extra' (usage: mrtr tools TARGET)\n"),
    (["prompts", "--stdio", SERVER, "extra"],
     "mrtr: unexpected argument 'extra' (usage: mrtr prompts TARGET)\n"),
    (["resources", "--stdio", SERVER, "extra"],
     "mrtr: unexpected argument 'extra' (usage: mrtr resources TARGET)\n"),
    (["read", "--stdio", SERVER, "a://b", "extra"],
     "mrtr: unexpected argument 'extra' (usage: mrtr read TARGET URI)\n"),
    (["call", "--stdio", SERVER, "ask_model", "question=hi", "--sampler", "nosuchllm"],
     "mrtr: --sampler: command not found: 'nosuchllm'\n"),
])
def test_usage_errors_are_one_line_and_exit_2_issue19(args: list[str], stderr: str) -> None:
    out = cli(*args)
    assert (out.returncode, out.stdout, out.stderr) == (2, "", stderr)


def test_a_usage_error_with_json_is_json_on_stdout_too_issue19() -> None:
    out = cli("call", "sign_up", "team=red", "--json")
    assert out.returncode == 2 and out.stderr.startswith("mrtr: the first argument")
    assert json.loads(out.stdout) == {"error": {"message": out.stderr[6:-1]}}


def test_text_parameters_keep_the_text_typed_issue19(target: list[str]) -> None:  # noqa: F811
    out = cli("call", *target, "fail", "reason=null")
    assert (out.returncode, out.stdout) == (1, "Tool error: failed: null\n")
    out = cli("call", *target, "fail", "reason=007")
    assert (out.returncode, out.stdout) == (1, "Tool error: failed: 007\n")
    out = cli("call", *target, "add", "a=2", "b=40")  # integers stay integers
    assert (out.returncode, out.stdout) == (0, "42\n")


def test_each_command_has_its_own_help_with_examples_issue19() -> None:
    tools = cli("tools", "--help")
    assert tools.returncode == 0
    assert tools.stdout.startswith("usage: mrtr tools URL [options]\n"
                                   "       mrtr tools --stdio CMD [options]\n")
    assert "  mrtr tools http://127.0.0.1:8000/mcp --json\n" in tools.stdout
    for option in ("--sampler", "--root", "--max-rounds"):  # no questions in a listing
        assert option not in tools.stdout
    call = cli("call", "--help")
    assert call.stdout.startswith("usage: mrtr call URL TOOL [key=value ...] [options]\n")
    assert "--sampler CMD" in call.stdout and "team=null" in call.stdout
    assert "3 you declined a question" in call.stdout
