"""`mrtr install CLIENT TARGET`: put a stdio server into a desktop client's MCP configuration."""

# Design: the entry runs `python -m mrtr serve --stdio TARGET` with this interpreter and an
# absolute target, because desktop clients start servers from an unknown working directory with
# their own PATH. A module target also gets PYTHONPATH (the working directory it was found
# from). The file is edited, never rewritten from scratch: other servers and settings stay, a
# timestamped copy of the old file is kept beside it, and the new file replaces the old one
# atomically. A file that is not plain JSON (VS Code allows comments) is refused, not mangled.
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["CLIENTS", "config_file", "entry", "install", "register"]

# client: (section holding the servers, extra fields of a stdio entry)
CLIENTS: dict[str, tuple[str, dict[str, str]]] = {
    "claude-desktop": ("mcpServers", {}),
    "cursor": ("mcpServers", {}),
    "vscode": ("servers", {"type": "stdio"}),
}
_RESTART = {"claude-desktop": "quit and restart Claude Desktop",
            "cursor": "Cursor picks it up (see Settings > MCP)",
            "vscode": "VS Code lists it under MCP: List Servers"}

_EXAMPLES = """\
examples:
  mrtr install claude-desktop examples/bookings.py          edit Claude Desktop's config
  mrtr install cursor examples.bookings:app --print         print the entry, change nothing
  mrtr install vscode app.py --name returns --env MRTR_STORE=sqlite:///tmp/returns.db

Files: claude-desktop: ~/Library/Application Support/Claude/claude_desktop_config.json (macOS),
%APPDATA%\\Claude\\claude_desktop_config.json (Windows), ~/.config/Claude/... (Linux);
cursor: ~/.cursor/mcp.json; vscode: .vscode/mcp.json in the working directory (the workspace).
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `install` subcommand."""
    cmd = subparsers.add_parser(
        "install", help="add a stdio server to Claude Desktop, Cursor or VS Code",
        description="Add TARGET, served over stdio, to a client's MCP configuration file "
        "(keeping a backup of the file), or print the entry with --print.",
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.add_argument("client", choices=sorted(CLIENTS), help="the client to configure")
    cmd.add_argument("target", metavar="TARGET",
                     help="module:attribute, path/to/file.py:attribute or path/to/file.py")
    cmd.add_argument("--name", default=None, help="the server's name in the client "
                     "(default: the Server's name)")
    cmd.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                     help="an environment variable for the server (repeatable)")
    cmd.add_argument("--config", type=Path, default=None, metavar="FILE",
                     help="edit this file instead of the client's usual one")
    cmd.add_argument("--print", action="store_true", dest="print_only",
                     help="print the configuration entry as JSON and change nothing")
    cmd.set_defaults(run=_run_install)


def _run_install(args: argparse.Namespace) -> int:
    try:
        name, server = entry(args.target, args.env, os.getcwd(), name=args.name)
        section, _ = CLIENTS[args.client]
        if args.print_only:
            print(json.dumps({section: {name: _shaped(args.client, server)}}, indent=2))
            return 0
        path = args.config or config_file(args.client, os.environ, sys.platform, os.getcwd())
        backup = install(args.client, path, name, server)
    except (ValueError, ImportError, OSError) as exc:
        print(f"mrtr install: {exc}", file=sys.stderr)
        return 2
    kept = f" (the old file is kept as {backup})" if backup else ""
    print(f"added {name!r} to {path}{kept}; {_RESTART[args.client]}")
    return 0


def entry(target: str, env_pairs: list[str], cwd: str, *,
          name: str | None = None) -> tuple[str, dict[str, object]]:
    """The server's name and its stdio entry (command, args, env) for `target`.

    Imports the target (it must be servable). Raises ValueError for a bad target or KEY=VALUE.
    """
    from mrtr.http import McpApp
    from mrtr.server import Dispatcher, Server
    from mrtr.serving._target import absolute_target, load_target

    sys.path.insert(0, cwd)
    resolved = absolute_target(target)
    obj = load_target(resolved)
    if isinstance(obj, McpApp):
        obj = obj.dispatcher
    if not isinstance(obj, Server | Dispatcher):
        raise ValueError(f"{target} is an ASGI app: a desktop client needs a Server over stdio")
    env: dict[str, str] = {}
    if not resolved.rpartition(":")[0].endswith(".py"):
        env["PYTHONPATH"] = cwd  # a module target is found from this folder
    for pair in env_pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--env takes KEY=VALUE, got {pair!r}")
        env[key] = value
    server: dict[str, object] = {"command": sys.executable,
                                 "args": ["-m", "mrtr", "serve", "--stdio", resolved]}
    if env:
        server["env"] = env
    default = obj.server.name if isinstance(obj, Dispatcher) else obj.name
    return name or default, server


def config_file(client: str, env: Mapping[str, str], platform: str, cwd: str) -> Path:
    """Where `client` reads its MCP servers (the user-wide file; VS Code: the workspace's)."""
    home = Path(env.get("HOME") or Path.home())
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "vscode":
        return Path(cwd) / ".vscode" / "mcp.json"
    if platform == "darwin":
        folder = home / "Library" / "Application Support"
    elif platform == "win32":
        folder = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        folder = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    return folder / "Claude" / "claude_desktop_config.json"


def install(client: str, path: Path, name: str, server: Mapping[str, object], *,
            clock: Callable[[], float] = time.time) -> Path | None:
    """Add or replace `name` in `path`; returns the backup of the old file (None: new file).

    Raises ValueError when the file is not a JSON object with an object for the servers,
    OSError when it cannot be read or written.
    """
    section, _ = CLIENTS[client]
    config: dict[str, object] = {}
    backup: Path | None = None
    if path.exists():
        text = path.read_text(encoding="utf-8")
        config = _parsed(text, path)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))
        backup = path.with_name(f"{path.name}.{stamp}.bak")
        shutil.copy2(path, backup)
    servers = config.setdefault(section, {})
    if not isinstance(servers, dict):
        raise ValueError(f"{path}: {section!r} is not a JSON object; fix it, or use --print")
    servers[name] = _shaped(client, server)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(config, out, indent=2)
            out.write("\n")
        if backup is not None:
            shutil.copymode(backup, temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return backup


def _parsed(text: str, path: Path) -> dict[str, object]:
    if not text.strip():
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not plain JSON ({exc.msg}, line {exc.lineno}): left "
                         "unchanged; add the entry printed by --print by hand") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} does not hold a JSON object: left unchanged")
    return config


def _shaped(client: str, server: Mapping[str, object]) -> dict[str, object]:
    return {**CLIENTS[client][1], **server}
