"""`mrtr serve` and `mrtr keys` from the command line: stdio purity, targets, usage errors."""

from __future__ import annotations

import json
import logging
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from mrtr.cli import main
from tests.transports.conftest import (
    ROOT,
    call,
    cli_env,
    free_port,
    post_args,
    spawn_cli,
    stop,
    wait_ready,
)

NOISY = '''
import sys
from mrtr.server import Server

app = Server("noisy", version="1")

@app.tool()
async def chatter() -> str:
    """Print like a careless tool does, then answer."""
    print("noise from print", flush=True)
    print("more noise, buffered")
    return "done"
'''


def test_serve_stdio_keeps_print_output_off_stdout_issue_20(tmp_path: Path) -> None:
    server = tmp_path / "noisy_server.py"
    server.write_text(NOISY)
    lines = b"".join(msgspec.json.encode(call("chatter", id=n)) + b"\n" for n in (1, 2))
    done = subprocess.run(
        [sys.executable, "-m", "mrtr.cli", "serve", f"{server}:app", "--stdio"],
        input=lines, capture_output=True, cwd=ROOT, env=cli_env(), timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(raw) for raw in done.stdout.splitlines()]  # every line is JSON-RPC
    assert sorted(r["id"] for r in replies) == [1, 2]
    assert {r["result"]["content"][0]["text"] for r in replies} == {"done"}
    assert b"noise" not in done.stdout
    assert done.stderr.count(b"noise from print") == 2
    assert done.stderr.count(b"more noise, buffered") == 2


def test_in_process_stdio_serve_restores_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    stdout = sys.stdout
    assert main(["serve", "tests.transports.apps:nothing", "--stdio"]) == 2
    assert sys.stdout is stdout


@pytest.mark.parametrize("argv", [
    ["tests.transports.apps:nothing", "--stdio", "--log-level", "debug"],  # serve() refuses
    ["tests.transports.apps:app", "--port", "99999", "--log-format", "json"],  # settings
    ["tests.transports.apps:app", "--force"],  # _run_serve's own usage error
])
def test_in_process_serve_puts_logging_back(
    argv: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    # `mrtr serve` logs in its own format while it runs; called in-process (tests, embedding)
    # it left the root logger at its level with its handler, so every later request of the
    # process wrote a request line (the rest of the test suite ran so).
    loggers = [logging.getLogger(), logging.getLogger("uvicorn"),
               logging.getLogger("uvicorn.access")]
    before = [(lg.level, lg.handlers[:], lg.propagate) for lg in loggers]
    assert main(["serve", *argv]) == 2
    assert [(lg.level, lg.handlers[:], lg.propagate) for lg in loggers] == before
    assert capsys.readouterr().err.startswith("mrtr serve: ")


@pytest.mark.parametrize(("target", "message"), [
    ("no/such/file.py:app", "mrtr serve: no such file: no/such/file.py\n"),
    ("tests.transports.apps:nothing",
     "mrtr serve: tests.transports.apps has no attribute 'nothing'\n"),
    ("no_such_module_here:app", "mrtr serve: No module named 'no_such_module_here'\n"),
])
def test_unusable_targets_exit_2_with_one_line(
    target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", target, "--log-level", "error"]) == 2
    assert capsys.readouterr().err == message


SIGNUP = '''
from mrtr import Context, Form, Server

app = Server("signup")


class Profile(Form):
    name: str


@app.resource("signup://rules")
def rules() -> str:
    raise SystemExit("a resource function must not run when it is named as a target")


@app.tool
async def sign_up(ctx: Context) -> str:
    """Ask for a profile."""
    return (await ctx.elicit("Who?", Profile)).name


def needs(region: str) -> Server:
    return app


def number() -> int:
    return 42
'''
NOT_SERVABLE = "not a Server, a Dispatcher, an ASGI app or a function returning one"


def mrtr(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m mrtr.cli ARGS` to completion."""
    return subprocess.run([sys.executable, "-m", "mrtr.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env={**cli_env(), **env}, timeout=60)


@pytest.mark.parametrize(("attribute", "message"), [
    ("Profile", f"signup:Profile is a Form class, {NOT_SERVABLE}"),
    ("rules", "signup:rules is the resource 'signup://rules' of Server 'signup', not a factory; "
              "serve the Server: signup:app"),
    ("sign_up", "signup:sign_up is the tool 'sign_up' of Server 'signup', not a factory; "
                "serve the Server: signup:app"),
    ("needs", "signup:needs takes arguments (region); a factory takes none"),
    ("number", f"signup:number returned an int, {NOT_SERVABLE}"),
])
def test_19_targets_that_are_not_servers_are_one_line_exit_2(
    tmp_path: Path, attribute: str, message: str
) -> None:
    (tmp_path / "signup.py").write_text(SIGNUP)
    done = mrtr("serve", f"signup:{attribute}", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"mrtr serve: {message}\n")


@pytest.mark.parametrize(("option", "message"), [
    (["--port", "99999"], "--port must be 0..65535 (0 picks a free port), got 99999"),
    (["--port", "-1"], "--port must be 0..65535 (0 picks a free port), got -1"),
    (["--path", "mcp"], "--path must start with '/', got 'mcp'"),
    (["--workers", "0"], "--workers must be at least 1, got 0"),
    (["--workers", "-3"], "--workers must be at least 1, got -3"),
    (["--ask-timeout", "0"], "--ask-timeout must be a positive number of seconds, got 0.0"),
])
def test_19_invalid_settings_are_one_line_exit_2(option: list[str], message: str) -> None:
    done = mrtr("serve", "tests.transports.apps:app", *option)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"mrtr serve: {message}\n")


def test_19_unknown_option_prints_the_subcommands_usage() -> None:
    done = mrtr("serve", "tests.transports.apps:app", "--bogus")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: mrtr serve [-h]")
    assert done.stderr.endswith("mrtr serve: error: unrecognized arguments: --bogus\n")
    done = mrtr("keys", "generate", "--bogus")
    assert (done.returncode, done.stderr) == (2, "usage: mrtr keys generate [-h]\n"
                                              "mrtr keys generate: error: unrecognized "
                                              "arguments: --bogus\n")


def test_19_subcommand_help_has_examples_and_only_its_options() -> None:
    serve = mrtr("serve", "--help").stdout
    assert "examples:" in serve and "mrtr serve examples/bookings.py:app --port 9000" in serve
    assert "HTTP options:" in serve and "--ephemeral-key" in serve
    assert "--json" not in serve and "--timeout" not in serve  # client options stay out
    keys = mrtr("keys", "--help").stdout
    assert "export MRTR_STATE_KEYS=$(mrtr keys generate)" in keys and "--port" not in keys


def start(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`mrtr serve ARGS` in the background, its stderr in a file."""
    log_path = tmp_path / f"serve-{time.monotonic_ns()}.log"
    with log_path.open("wb") as log:
        process = spawn_cli("serve", *args, "--log-level", "info", stdout=subprocess.DEVNULL,
                            stderr=log, env={**cli_env(), **env})
    return process, log_path


def logged(log_path: Path, pattern: str, process: subprocess.Popen[bytes]) -> re.Match[str]:
    """Wait (bounded) for a line matching `pattern` in the server's log."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(pattern, log_path.read_text())
        if found:
            return found
        assert process.poll() is None, log_path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} never logged: {log_path.read_text()}")


def test_19_port_0_logs_the_port_it_listens_on(tmp_path: Path) -> None:
    process, log_path = start(tmp_path, "tests.transports.apps:app", "--port", "0")
    try:
        port = logged(log_path, r"serving on http://127\.0\.0\.1:(\d+)/mcp\n", process)[1]
        assert port != "0"
        wait_ready(f"http://127.0.0.1:{port}/mcp", process)
    finally:
        stop(process)


def greet(url: str, **params: object) -> dict[str, Any]:
    """One round of the test app's two-question `greet` tool."""
    body = call("greet", **params)
    reply: dict[str, Any] = httpx.post(url, timeout=10, **post_args(body)).json()
    return reply


def restart_mid_form(tmp_path: Path, *flags: str) -> tuple[dict[str, Any], str]:
    """Ask round 1, restart the server, answer: the reply and both runs' logs."""
    port, state = free_port(), tmp_path / "state"
    url, logs = f"http://127.0.0.1:{port}/mcp", []
    answers = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    first = None
    for run in range(2):
        process, log_path = start(tmp_path, "tests.transports.apps:app", "--port", str(port),
                                  *flags, XDG_STATE_HOME=str(state))
        try:
            wait_ready(url, process)
            if run == 0:
                first = greet(url)["result"]
                assert first["resultType"] == "input_required"
            else:
                assert first is not None
                reply = greet(url, inputResponses=answers, requestState=first["requestState"])
        finally:
            stop(process)
        logs.append(log_path.read_text())
    return reply, "".join(logs)


def test_19_a_local_server_keeps_its_key_so_a_restart_keeps_the_form(tmp_path: Path) -> None:
    reply, log = restart_mid_form(tmp_path)
    assert reply["result"]["resultType"] == "input_required"  # round 2: the colour question
    assert set(reply["result"]["inputRequests"]) == {"color"}
    key_file = tmp_path / "state" / "mrtr" / "requeststate.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert log.count(f"INFO mrtr.serve: requestState key kept in {key_file}: flows survive a "
                     "restart of this local server (--ephemeral-key: a fresh key per run)") == 2
    assert key_file.read_text().strip() not in log  # the path is logged, never the key


def test_19_an_ephemeral_key_is_lost_on_restart_and_the_log_says_why(tmp_path: Path) -> None:
    reply, log = restart_mid_form(tmp_path, "--ephemeral-key")
    assert reply["error"] == {"code": -32602, "message": "Invalid or expired requestState"}
    assert ("WARNING mrtr.sealing: requestState rejected (audience 'transport-tests'): sealed by "
            "a key this server does not have: restarted with a new key or keys rotated?") in log
    assert not (tmp_path / "state").exists()


def test_19_host_0_0_0_0_gets_a_403_naming_allow_host(tmp_path: Path) -> None:
    port = free_port()
    process, log_path = start(tmp_path, "tests.transports.apps:app", "--host", "0.0.0.0",
                              "--port", str(port))
    try:
        shown = logged(log_path, r"serving on (\S+) \(bound to 0\.0\.0\.0", process)[1]
        assert shown == f"http://127.0.0.1:{port}/mcp"  # a URL the server accepts
        wait_ready(shown, process)
        refused = httpx.post(shown, timeout=10, **post_args(call("add", {"a": 1, "b": 2}),
                                                            host=f"0.0.0.0:{port}"))
    finally:
        stop(process)
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == (
        f"Forbidden: Host '0.0.0.0:{port}' not allowed; 0.0.0.0 is the wildcard bind address, "
        f"not a host name: connect to 127.0.0.1:{port} or localhost:{port}, or to a name given "
        "to mrtr serve with --allow-host NAME (McpApp: allowed_hosts)")


def test_19_a_stdio_server_is_local_and_uses_the_key_file_too(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mrtr.cli", "serve", "tests.transports.apps:app", "--stdio"],
        input=b"", capture_output=True, cwd=ROOT, timeout=60,
        env={**cli_env(), "XDG_STATE_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr.decode()
    key_file = tmp_path / "mrtr" / "requeststate.key"
    assert f"requestState key kept in {key_file}".encode() in done.stderr
    assert done.stdout == b""
