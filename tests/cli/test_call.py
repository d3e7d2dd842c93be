"""`mrtr call` and friends: argument parsing, terminal forms, and the real program under pexpect."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect  # type: ignore[import-untyped]
import pytest

from mrtr.cli._call import parse_arguments
from mrtr.cli._forms_tui import TerminalForms, parse_field
from mrtr.protocol import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult
from tests.client.rogue import Rogue, free_port, serve

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = "import sys; from mrtr.cli import main; sys.exit(main())"
SERVER = f"{sys.executable} -m mrtr.cli serve tests.cli.app:app --stdio"


def mrtr(*args: str) -> list[str]:
    return [sys.executable, "-c", LAUNCH, *args]


def spawn(*args: str) -> pexpect.spawn:
    cmd = mrtr(*args)
    # TERM=dumb: the plain line forms at a terminal (tests/cli/test_forms_prompt.py: the others)
    return pexpect.spawn(cmd[0], cmd[1:], cwd=str(ROOT), encoding="utf-8", timeout=20,
                         env={**os.environ, "TERM": "dumb"})


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
    return asyncio.run(TerminalForms(console)(params))


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
    child.expect(r"boxes \(integer, 1 to 5\): ")  # its range, before the first answer
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


def test_declining_a_form_the_tool_needs_is_not_a_tool_error_issue19() -> None:
    child = spawn("call", "--stdio", SERVER, "book_return", "order_id=A1")
    child.expect(r"reason \(choice\): ")
    child.sendline(":decline")
    child.expect(pexpect.EOF)
    child.close()
    tail = child.before.replace("\r\n", "\n").split("(declined)\n", 1)[1]
    assert tail == ("The user declined the request: Return details for order A1\n"
                    "mrtr: you declined a question, so the tool stopped\n")
    assert child.exitstatus == 3


def test_cancelling_by_eof_exits_3_with_the_servers_text_issue19() -> None:
    out = subprocess.run(mrtr("call", "--stdio", SERVER, "book_return", "order_id=A1"),
                         cwd=ROOT, capture_output=True, text=True, timeout=30,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 3
    assert out.stdout == "The user cancelled the request: Return details for order A1\n"
    assert out.stderr.endswith("  (cancelled)\nmrtr: you cancelled a question, so the tool "
                               "stopped\n")


# -- exit statuses, --json, HTTP targets, --header, --sampler, --root (#20 M10, M10b) ------------

@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest) -> list[str]:
    """The server arguments of a client command: `--stdio CMD` or the URL of `mrtr serve`."""
    if request.param == "stdio":
        return ["--stdio", SERVER]
    return [request.getfixturevalue("http_url")]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mrtr(*args), cwd=ROOT, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_success_exits_0(target: list[str]) -> None:
    out = cli("call", *target, "add", "a=2", "b=40")
    assert (out.returncode, out.stdout, out.stderr) == (0, "42\n", "")


def test_a_tool_error_exits_1(target: list[str]) -> None:
    out = cli("call", *target, "fail", "reason=disk full")
    assert (out.returncode, out.stdout) == (1, "Tool error: failed: disk full\n")


def test_a_json_rpc_error_exits_1(target: list[str]) -> None:
    out = cli("call", *target, "no_such_tool")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == "mrtr: server error -32602: Unknown tool: no_such_tool\n"


def test_json_output_and_its_exit_status(target: list[str]) -> None:
    out = cli("call", *target, "add", "a=1", "b=2", "--json")
    assert out.returncode == 0
    reply = json.loads(out.stdout)
    assert reply["resultType"] == "complete" and "isError" not in reply
    assert reply["content"] == [{"type": "text", "text": "3"}]
    out = cli("call", *target, "fail", "reason=x", "--json")
    assert out.returncode == 1
    reply = json.loads(out.stdout)
    assert reply["isError"] is True and reply["content"] == [
        {"type": "text", "text": "failed: x"}]


@pytest.mark.parametrize(("args", "message"), [
    (["call"], "mrtr: give the server URL (http://HOST:PORT/PATH) or --stdio 'CMD'\n"),
    (["call", "http://127.0.0.1:9/mcp"], "mrtr: usage: mrtr call TARGET TOOL [key=value ...]\n"),
    (["call", "http://127.0.0.1:9/mcp", "add", "oops"], "mrtr: expected key=value, got 'oops'\n"),
    (["tools", "http://127.0.0.1:9/mcp", "--header", "no-colon"],
     "mrtr: expected 'NAME: VALUE', got 'no-colon'\n"),
    (["read", "http://127.0.0.1:9/mcp"], "mrtr: usage: mrtr read TARGET URI\n"),
])
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    out = cli(*args)
    assert (out.returncode, out.stdout, out.stderr) == (2, "", message)


def test_argparse_errors_exit_2() -> None:
    out = cli("call", "--max-rounds", "many")
    assert out.returncode == 2 and "invalid int value: 'many'" in out.stderr


def test_an_unreachable_server_exits_1() -> None:
    out = cli("tools", f"http://127.0.0.1:{free_port()}/mcp")
    assert out.returncode == 1 and out.stderr.startswith("mrtr: cannot connect to http://127.0.0.1")


def test_sampler_answers_sampling(target: list[str]) -> None:
    # `cat` plays the model: it answers with the prompt it was given.
    out = cli("call", *target, "ask_model", "question=What is 6*7?", "--sampler", "cat")
    assert out.returncode == 0
    assert out.stdout == "model cat says: [system] Answer briefly.\n[user] What is 6*7?\n"


def test_roots_are_exposed(target: list[str], tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    out = cli("call", *target, "list_roots", "--root", str(one), "--root", str(two))
    assert (out.returncode, out.stdout) == (0, f"{one.as_uri()}\n{two.as_uri()}\n")


def test_without_roots_the_tool_cannot_ask(target: list[str]) -> None:
    out = cli("call", *target, "list_roots")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == (
        "mrtr: server error -32021: Missing required client capability (needs roots)\n")


class Stub:
    """An ASGI MCP stub: `answer(request, headers)` is the JSON-RPC reply to each POST."""

    def __init__(self, answer: Callable[[dict[str, Any], dict[str, str]], dict[str, Any]]) -> None:
        self.answer = answer

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        request = json.loads(body)
        reply = self.answer(request, headers) if request["method"] != "server/discover" else {
            "jsonrpc": "2.0", "id": request["id"],
            "result": {"supportedVersions": ["2026-07-28"], "capabilities": {}}}
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(reply).encode()})


def tools_reply(request: dict[str, Any], *tools: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request["id"], "result": {"tools": list(tools)}}


def test_header_option_is_sent() -> None:
    def echo(request: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        name = f"key-{headers.get('x-api-key', 'none')}"
        return tools_reply(request, {"name": name, "inputSchema": {"type": "object"}})

    for url in serve(Stub(echo)):
        out = cli("tools", url + "/mcp", "--header", "X-Api-Key:  s3cret ", "--json")
        assert out.returncode == 0, out.stderr
        assert [t["name"] for t in json.loads(out.stdout)] == ["key-s3cret"]
        out = cli("tools", url + "/mcp")
        assert out.stdout == "key-none()\n"


def test_server_text_is_escaped_in_errors_and_json() -> None:
    def hostile(request: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        if request["method"] == "tools/list":
            return tools_reply(request, {"name": "t\u202e", "description": "\x9b2J\x1b[1m",
                                         "inputSchema": {"type": "object"}})
        return {"jsonrpc": "2.0", "id": request["id"],
                "error": {"code": -32602, "message": "bad\x1b[2J\rgone"}}

    for url in serve(Stub(hostile)):
        out = cli("call", url + "/mcp", "t")
        assert (out.returncode, out.stdout) == (1, "")
        assert out.stderr == "mrtr: server error -32602: bad\\x1b[2J\\x0dgone\n"
        out = cli("tools", url + "/mcp")
        assert out.stdout == "t\\u202e()\n    \\x9b2J\\x1b[1m\n"
        out = cli("tools", url + "/mcp", "--json")
        assert '"description": "\\u009b2J\\u001b[1m"' in out.stdout
        assert json.loads(out.stdout)[0]["name"] == "t\u202e"


def test_the_default_deadline_and_timeout_option() -> None:
    from mrtr.cli import build_parser

    assert build_parser().parse_args(["call"]).timeout == 300.0
    for url in serve(Rogue()):
        started = time.monotonic()
        out = cli("tools", url + "/keepalive", "--timeout", "0.5")
        assert time.monotonic() - started < 15
        assert (out.returncode, out.stdout) == (1, "")
        assert out.stderr == ("mrtr: timed out: no result within the 0.5 s deadline "
                              "(Client timeout)\n")


def test_a_hanging_sampler_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    sampler = f"sh -c 'echo $$ > {pid_file}; exec sleep 30'"
    out = cli("call", "--stdio", SERVER, "ask_model", "question=hi", "--sampler", sampler,
              "--timeout", "2")
    assert out.returncode == 1
    assert out.stderr.endswith("mrtr: timed out: no result within the 2 s deadline "
                               "(Client timeout)\n")
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- the server's log messages (#27) -------------------------------------------------------------
def test_call_shows_the_servers_log_messages_on_stderr_issue27(target: list[str]) -> None:
    out = subprocess.run(mrtr("call", *target, "pack_logged", "order_id=A-1"), cwd=ROOT,
                         input="y\n", capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (0, "Packed A-1.\n")
    lines = out.stderr.splitlines()
    assert lines[0] == "[info] warehouse: packing order A-1"  # once, though the tool re-ran
    assert lines[-1].endswith("[warning] the carrier is late today")
    assert out.stderr.count("packing order") == 1 and "[debug]" not in out.stderr


@pytest.mark.parametrize(("level", "shown"), [
    ("debug", ["info", "debug", "debug", "warning"]), ("warning", ["warning"]), ("off", [])])
def test_the_log_level_option_issue27(level: str, shown: list[str]) -> None:
    out = subprocess.run(mrtr("call", "--stdio", SERVER, "--log-level", level, "pack_logged",
                              "order_id=A-1"), cwd=ROOT, input="y\n", capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    assert re.findall(r"\[(debug|info|warning)\] ", out.stderr) == shown
