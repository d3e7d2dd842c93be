"""The shared bench harness's TypeScript SDK server (/work/shared/bench/servers/ts-sdk, read
only), runnable from the test suite: a cache folder of our own holds links to its server,
package.json and lock file plus the `node_modules` that `npm ci` installs from that lock file
(once; a stamp names the lock file's digest), and node runs the linked server with
`--preserve-symlinks` so it resolves its packages from that folder. Skips (with the reason)
when the shared folder, node or npm is missing, or the install fails."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

__all__ = ["SHARED_TS_SDK", "ts_sdk_argv"]

SHARED_BENCH = Path(os.environ.get("MRTR_SHARED_BENCH", "/work/shared/bench"))
SHARED_TS_SDK = SHARED_BENCH / "servers" / "ts-sdk"
FILES = ("server.mjs", "package.json", "package-lock.json", ".npmrc")


def ts_sdk_argv(port: int) -> list[str]:
    """The command that serves the shared ts-sdk server on 127.0.0.1:`port` (endpoint /mcp)."""
    missing = [n for n in FILES[:3] if not (SHARED_TS_SDK / n).is_file()]
    if missing:
        pytest.skip(f"{SHARED_TS_SDK} has no {', '.join(missing)} (the shared bench harness)")
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to run the TypeScript SDK server")
    folder = Path(tempfile.gettempdir()) / "mrtr-tests-ts-sdk"
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        link = folder / name
        if (SHARED_TS_SDK / name).is_file() and not link.is_symlink():
            link.unlink(missing_ok=True)
            link.symlink_to(SHARED_TS_SDK / name)
    digest = hashlib.sha256((SHARED_TS_SDK / "package-lock.json").read_bytes()).hexdigest()
    stamp = folder / ".mrtr-tests.sha256"
    if not (stamp.is_file() and stamp.read_text().strip() == digest):
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=folder,
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            pytest.skip(f"npm ci of the TypeScript SDK failed: {done.stderr[-300:]}")
        stamp.write_text(digest + "\n")
    return [node, "--preserve-symlinks", "--preserve-symlinks-main", str(folder / "server.mjs"),
            "--host", "127.0.0.1", "--port", str(port)]
