"""The peers `make bench` runs beside mrtr that need more than the bench venv (issue 31).

- `ts-sdk`: the official TypeScript SDK anchor of the shared harness. Its server, package.json
  and lock file stay in `../shared/bench/servers/ts-sdk` (read-only): a folder in the bench venv
  holds links to them and the `node_modules` that `npm ci` installs from that lock file, and
  node runs the linked server with `--preserve-symlinks`, so it resolves its packages from that
  folder. Node 22 comes from the npm registry (the `node-linux-<arch>@22` package, which holds
  the binary); the node on PATH is the fallback when it cannot be installed.
- `fastmcp`: its own virtualenv (`.venv-bench-fastmcp`) from the harness's
  `requirements-fastmcp.txt`, handed to the suite as the target's `bin`.
- `floor-uvicorn-sqlite` (and every floor) runs from the shared folder as it is.

Each setup returns what the targets file needs, or raises Skip with the reason; the suite then
runs without that target and the report says why.
"""

from __future__ import annotations

import hashlib
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["Skip", "fastmcp_bin", "setup_peers", "ts_sdk_command"]

TS_FILES = ("server.mjs", "package.json", "package-lock.json", ".npmrc")
NODE_MAJOR = "22"
_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


class Skip(Exception):
    """This peer cannot run here; the message says why (printed, and kept in the report)."""


def _stamped(folder: Path, digest: str, install: list[str], what: str, timeout: float) -> None:
    """Run `install` in `folder` unless its stamp already names `digest`."""
    stamp = folder / ".mrtr-bench.sha256"
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return
    print(f"== installing {what} into {folder}", flush=True)
    try:
        subprocess.run(install, cwd=folder, check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        raise Skip(f"installing {what} failed: {exc}") from exc
    stamp.write_text(digest + "\n")


def _node(venv: Path, npm: str) -> str:
    """A Node 22 binary from the npm registry, else the node on PATH (None: Skip)."""
    arch = _ARCH.get(platform.machine().lower())
    if arch is not None and platform.system() == "Linux":
        folder = venv / f"node{NODE_MAJOR}"
        folder.mkdir(parents=True, exist_ok=True)
        package = f"node-linux-{arch}@{NODE_MAJOR}"
        try:
            _stamped(folder, package, [npm, "install", "--prefix", str(folder), "--no-audit",
                                       "--no-fund", "--no-save", package], package, 600)
        except Skip as exc:
            print(f"   {exc}; using the node on PATH", flush=True)
        else:
            binary = folder / "node_modules" / f"node-linux-{arch}" / "bin" / "node"
            if binary.is_file():
                return str(binary)
    found = shutil.which("node")
    if found is None:
        raise Skip("no node on PATH and none installable from the npm registry")
    return found


def ts_sdk_command(shared: Path, venv: Path) -> str:
    """The ts-sdk target's command (`{port}` left for the suite); Skip when it cannot run."""
    source = shared / "servers" / "ts-sdk"
    missing = [name for name in TS_FILES[:3] if not (source / name).is_file()]
    if missing:
        raise Skip(f"{source} has no {', '.join(missing)}")
    npm = shutil.which("npm")
    if npm is None:
        raise Skip("npm is not installed (it installs the TypeScript SDK from its lock file)")
    folder = venv / "ts-sdk"
    folder.mkdir(parents=True, exist_ok=True)
    for name in TS_FILES:
        link = folder / name
        if (source / name).is_file() and not link.is_symlink():
            link.unlink(missing_ok=True)
            link.symlink_to(source / name)
    lock = hashlib.sha256((source / "package-lock.json").read_bytes()).hexdigest()
    _stamped(folder, lock, [npm, "ci", "--no-audit", "--no-fund"], "the TypeScript SDK", 600)
    node = _node(venv, npm)
    return (f"{node} --preserve-symlinks --preserve-symlinks-main {folder / 'server.mjs'} "
            "--host 127.0.0.1 --port {port}")


def described_node(desc: str, command: str) -> str:
    """`desc` naming the Node that `command` (a node binary first) runs: the shared targets
    file says which Node it was written for, not which one runs here. Unchanged when that
    node does not answer `--version`."""
    try:
        version = subprocess.run([command.split()[0], "--version"], capture_output=True,
                                 text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return desc
    major = version.lstrip("v").split(".")[0]
    if not major.isdigit():
        return desc
    named, count = re.subn(r"\bNode \d+", f"Node {major}", desc)
    return named if count else f"{desc}, Node {major}"


def fastmcp_bin(shared: Path, venv: Path, python: str) -> Path:
    """The bin folder of FastMCP's own virtualenv, made from the harness's requirements."""
    requirements = shared / "requirements-fastmcp.txt"
    if not (shared / "servers" / "fastmcp_server.py").is_file() or not requirements.is_file():
        raise Skip(f"{shared} has no FastMCP server or requirements-fastmcp.txt")
    if not (venv / "bin" / "python").exists():
        print(f"== creating {venv}", flush=True)
        try:
            subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            raise Skip(f"creating {venv} failed: {exc}") from exc
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    _stamped(venv, digest, [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-r",
                            str(requirements)], "FastMCP", 1800)
    return venv / "bin"


def setup_peers(
    names: Sequence[str], copied: Sequence[str], shared_targets: dict[str, Any], shared: Path,
    bench_venv: Path, fastmcp_venv: Path,
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Install the peers among `names` that need it: (their targets-file changes, skipped
    target → why). A copied target the shared targets.json lacks is skipped too."""
    peers: dict[str, dict[str, Any]] = {}
    skipped = {n: f"not in {shared / 'targets.json'}" for n in names
               if n in copied and n not in shared_targets}
    try:
        if "ts-sdk" in names and "ts-sdk" in shared_targets:
            command = ts_sdk_command(shared, bench_venv)
            peers["ts-sdk"] = {"cmd": command, "desc": described_node(
                shared_targets["ts-sdk"].get("desc", "TypeScript SDK"), command)}
    except Skip as exc:
        skipped["ts-sdk"] = str(exc)
    try:
        if "fastmcp" in names and "fastmcp" in shared_targets:
            peers["fastmcp"] = {"bin": str(fastmcp_bin(shared, fastmcp_venv, sys.executable))}
    except Skip as exc:
        skipped["fastmcp"] = str(exc)
    for name, why in skipped.items():
        print(f"== skipping {name}: {why}", flush=True)
    return peers, skipped
