"""`mrtr call` and friends when the server fails: a stdio server that exits early, nothing
listening, a Host refusal, silence until the deadline, lists a server does not serve; always
one clear message (the end of a dead server's stderr included) and exit 1."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import time
from collections.abc import Iterator

import pytest

from tests.cli.test_call import SERVER, cli
from tests.client.rogue import free_port

PY = shlex.quote(sys.executable)


def dying(code: str) -> str:
    """A --stdio command: Python running `code` (which writes to stderr and exits)."""
    return f"{PY} -c {shlex.quote(code)}"


def test_a_stdio_server_that_exits_shows_the_end_of_its_stderr_issue19() -> None:
    code = "import sys; sys.stderr.write('starting\\nNo module named x\\n'); sys.exit(3)"
    out = cli("tools", "--stdio", dying(code))
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == ("mrtr: the server exited with code 3; the end of its stderr:\n"
                          "  starting\n  No module named x\n")


def test_the_stderr_tail_is_bounded_and_escaped_issue19() -> None:
    code = ("import sys\nfor i in range(100): print('line', i, file=sys.stderr)\n"
            "print('\\x1b[2J' + 'y' * 5000, file=sys.stderr)\nsys.exit(1)")
    out = cli("tools", "--stdio", dying(code))
    lines = out.stderr.splitlines()
    assert out.returncode == 1 and len(lines) == 21
    assert lines[1] == "  line 81" and lines[-2] == "  line 99"
    assert lines[-1] == "  \\x1b[2J" + "y" * 508  # 512 bytes of the line, escaped


def test_a_target_that_does_not_import_says_why_issue19() -> None:
    cmd = f"{PY} -m mrtr serve tests.cli.no_such_module:app --stdio"
    out = cli("tools", "--stdio", cmd)
    assert out.returncode == 1
    assert out.stderr.startswith("mrtr: the server exited with code ")
    assert "tests.cli.no_such_module" in out.stderr


def test_with_server_log_stderr_goes_to_the_terminal_as_before_issue19() -> None:
    code = "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"
    out = cli("tools", "--stdio", dying(code), "--server-log")
    assert (out.returncode, out.stderr) == (1, "boom\nmrtr: the server exited with code 3\n")


def test_connection_refused_says_so_issue19() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    out = cli("tools", url)
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == f"mrtr: cannot connect to {url}: connection refused (is the server " \
                         "running?)\n"


def test_a_host_refusal_shows_the_servers_advice_issue19(http_url: str) -> None:  # noqa: F811
    out = cli("tools", http_url, "--header", "Host: mcp.example.com")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == ("mrtr: server error -32600: Forbidden: Host 'mcp.example.com' not "
                          "allowed; start mrtr serve with --allow-host mcp.example.com "
                          "(McpApp: allowed_hosts)\n")


def test_server_errors_are_json_on_stdout_with_json_issue19(http_url: str) -> None:  # noqa: F811
    out = cli("call", http_url, "list_roots", "--json")
    assert out.returncode == 1
    assert out.stderr == ("mrtr: server error -32021: Missing required client capability "
                          "(needs roots)\n")
    assert json.loads(out.stdout) == {"error": {
        "code": -32021, "message": "Missing required client capability",
        "data": {"requiredCapabilities": {"roots": {}}}}}


@pytest.mark.parametrize("command", ["prompts", "resources"])
def test_lists_a_server_does_not_serve_are_empty_issue19(command: str) -> None:
    out = cli(command, "--stdio", SERVER)
    assert (out.returncode, out.stdout, out.stderr) == (0, "(none)\n", "")
    out = cli(command, "--stdio", SERVER, "--json")
    assert (out.returncode, out.stdout) == (0, "[]\n")


# -- the deadline covers the list commands too (item 3) -------------------------------------

@pytest.fixture()
def silent_url() -> Iterator[str]:
    """A 127.0.0.1 port that accepts connections (kernel backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


@pytest.mark.parametrize("command", ["tools", "prompts", "resources"])
def test_timeout_bounds_the_list_commands_over_stdio_issue19(command: str) -> None:
    started = time.monotonic()
    out = cli(command, "--stdio", "cat", "--timeout", "2")  # cat never answers a request
    assert time.monotonic() - started < 10
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == "mrtr: timed out: no result within the 2 s deadline (Client timeout)\n"


@pytest.mark.parametrize("command", ["tools", "prompts", "resources"])
def test_timeout_bounds_the_list_commands_over_http_issue19(command: str, silent_url: str) -> None:
    started = time.monotonic()
    out = cli(command, silent_url, "--timeout", "2")
    assert time.monotonic() - started < 10
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == "mrtr: timed out: no result within the 2 s deadline (Client timeout)\n"


# What a 2025-only stdio server (FastMCP) answers any request before `initialize`.
ONLY_2025 = dying(
    "import json, sys\n"
    "for line in sys.stdin:\n"
    "    rid = json.loads(line).get('id')\n"
    "    if rid is not None:\n"
    "        print(json.dumps({'jsonrpc': '2.0', 'id': rid, 'error': {\n"
    "            'code': -32602, 'message': 'Invalid request parameters'}}), flush=True)\n")


@pytest.mark.parametrize("command", [["call", "book"], ["tools"]])
def test_27_mode_modern_against_a_2025_only_server_hints_at_mode_auto(command: list[str]) -> None:
    out = cli(command[0], "--mode", "modern", "--stdio", ONLY_2025, *command[1:])
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        "mrtr: server error -32602: Invalid request parameters",
        "mrtr: the server does not answer server/discover, so it may speak only MCP 2025 "
        "(initialize): try --mode auto"]


def test_27_mode_modern_against_a_2026_server_gives_no_such_hint() -> None:
    out = cli("call", "--mode", "modern", "--stdio", SERVER, "no_such_tool")
    assert (out.returncode, out.stderr) == (1, "mrtr: server error -32602: Unknown tool: "
                                               "no_such_tool\n")
