"""`mrtr install` (#18): entries in each client's documented shape, file edits with a backup.

The documented shapes: Claude Desktop and Cursor read `{"mcpServers": {NAME: {"command",
"args", "env"}}}` (claude_desktop_config.json, ~/.cursor/mcp.json); VS Code reads
`{"servers": {NAME: {"type": "stdio", "command", "args", "env"}}}` (.vscode/mcp.json).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mrtr.cli._install import config_file, install
from tests.transports.conftest import ROOT, cli_env

BOOKINGS = ROOT / "examples" / "bookings.py"
ALLOWED = {"claude-desktop": {"command", "args", "env"}, "cursor": {"command", "args", "env"},
           "vscode": {"type", "command", "args", "env"}}


def mrtr(*args: str, home: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    return subprocess.run([sys.executable, "-m", "mrtr.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def check_shape(client: str, config: dict[str, Any], name: str) -> dict[str, Any]:
    section = "servers" if client == "vscode" else "mcpServers"
    server: dict[str, Any] = config[section][name]
    assert set(server) <= ALLOWED[client] and {"command", "args"} <= set(server)
    assert isinstance(server["command"], str) and os.path.isabs(server["command"])
    assert all(isinstance(arg, str) for arg in server["args"])
    assert all(isinstance(v, str) for v in server.get("env", {}).values())
    if client == "vscode":
        assert server["type"] == "stdio"
    return server


@pytest.mark.parametrize("client", sorted(ALLOWED))
def test_18_print_gives_the_documented_shape(client: str, tmp_path: Path) -> None:
    done = mrtr("install", client, "examples.bookings:app", "--print", "--env", "A=b=c",
                home=tmp_path)
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert len(config) == 1
    server = check_shape(client, config, "brightgrid")
    assert server["args"] == ["-m", "mrtr", "serve", "--stdio", "examples.bookings:app"]
    assert server["env"] == {"PYTHONPATH": str(ROOT), "A": "b=c"}
    assert list(tmp_path.iterdir()) == []  # --print writes nothing


def test_18_the_printed_entry_starts_a_server_that_answers(tmp_path: Path) -> None:
    done = mrtr("install", "cursor", str(BOOKINGS), "--print", home=tmp_path)
    server = json.loads(done.stdout)["mcpServers"]["brightgrid"]
    assert "env" not in server and server["args"][-1] == f"{BOOKINGS}:app"
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}}}})
    env = {**cli_env(), **server.get("env", {}), "MRTR_EPHEMERAL_KEY": "1"}
    served = subprocess.run([server["command"], *server["args"]], input=line + "\n", cwd="/",
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    assert '"name":"brightgrid"' in served.stdout, served.stderr[-2000:]


def test_18_install_edits_the_file_and_keeps_a_backup(tmp_path: Path) -> None:
    path = tmp_path / ".config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    before = {"mcpServers": {"other": {"command": "npx", "args": ["x"]}}, "theme": "dark"}
    path.write_text(json.dumps(before))
    path.chmod(0o600)
    done = mrtr("install", "claude-desktop", str(BOOKINGS), "--name", "returns",
                home=tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"added 'returns' to {path} (the old file is kept as ")
    after = json.loads(path.read_text())
    assert after["theme"] == "dark"
    assert after["mcpServers"]["other"] == before["mcpServers"]["other"]
    check_shape("claude-desktop", after, "returns")
    backups = list(path.parent.glob("claude_desktop_config.json.*.bak"))
    assert len(backups) == 1 and json.loads(backups[0].read_text()) == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_18_a_new_file_is_created_without_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "mcp.json"
    assert install("vscode", path, "x", {"command": "/py", "args": []}) is None
    assert json.loads(path.read_text()) == {
        "servers": {"x": {"type": "stdio", "command": "/py", "args": []}}}
    again = install("vscode", path, "x", {"command": "/py2", "args": []}, clock=lambda: 0.0)
    assert again is not None and again.name.startswith("mcp.json.19")
    assert json.loads(path.read_text())["servers"]["x"]["command"] == "/py2"  # replaced


@pytest.mark.parametrize("text", ['{"servers": {} // a comment\n}', "[]", '{"servers": 1}'])
def test_18_a_file_it_cannot_read_as_json_is_left_alone(tmp_path: Path, text: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text)
    done = mrtr("install", "vscode", str(BOOKINGS), "--config", str(path), home=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("mrtr install: ")
    assert path.read_text() == text


def test_18_each_client_s_documented_file() -> None:
    env = {"HOME": "/h", "APPDATA": "C:/Users/a/AppData/Roaming"}
    claude = "Claude/claude_desktop_config.json"
    assert config_file("claude-desktop", env, "darwin", "/w") == Path(
        f"/h/Library/Application Support/{claude}")
    assert config_file("claude-desktop", env, "win32", "/w") == Path(
        f"C:/Users/a/AppData/Roaming/{claude}")
    assert config_file("claude-desktop", env, "linux", "/w") == Path(f"/h/.config/{claude}")
    assert config_file("cursor", env, "linux", "/w") == Path("/h/.cursor/mcp.json")
    assert config_file("vscode", env, "linux", "/w") == Path("/w/.vscode/mcp.json")


def test_18_an_asgi_app_or_a_bad_env_is_refused(tmp_path: Path) -> None:
    done = mrtr("install", "cursor", "examples.mounting.starlette_app:api", "--print",
                home=tmp_path)
    assert done.returncode == 2
    assert done.stderr.endswith("mrtr install: examples.mounting.starlette_app:api is an ASGI "
                                "app: a desktop client needs a Server over stdio\n")
    bad = mrtr("install", "cursor", str(BOOKINGS), "--print", "--env", "NOEQUALS", home=tmp_path)
    assert (bad.returncode, bad.stderr) == (2, "mrtr install: --env takes KEY=VALUE, got "
                                               "'NOEQUALS'\n")
