"""A PostgreSQL of its own for the `mrtr-postgres` bench target, pinned beside the servers."""

# Design: as start_redis in run.py: the bench never uses a server it did not start. initdb in a
# temp dir (owned by the `postgres` system user when we run as root: PostgreSQL refuses root),
# on a free port, its unix socket in that dir, fsync and synchronous_commit as shipped (the
# store requires fsync on), stopped by the PID in postmaster.pid and its folder deleted.
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["POSTGRES", "Postgres", "postgres_bin"]

POSTGRES = "mrtr-postgres"


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian's layout), None when absent."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    return found[-1].parent if found else None


class Postgres:
    """Start a PostgreSQL on 127.0.0.1:`port` (taskset to `core` unless "none"); `url` is the
    database the store uses. Raises RuntimeError when it is missing or does not start."""

    def __init__(self, port: int, log: Path, core: str = "none") -> None:
        binary = postgres_bin()
        if binary is None:
            raise RuntimeError(f"benchmarks: {POSTGRES} needs PostgreSQL "
                               "(apt-get install postgresql)")
        self.folder = Path(tempfile.mkdtemp(prefix="mrtr-bench-pg-"))
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if run_as:
            shutil.chown(self.folder, "postgres")
        data = self.folder / "data"
        subprocess.run([*run_as, str(binary / "initdb"), "-D", str(data), "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                       capture_output=True)
        argv = [*run_as, str(binary / "postgres"), "-D", str(data), "-p", str(port), "-k",
                str(self.folder), "-c", "listen_addresses=127.0.0.1"]
        if core != "none" and shutil.which("taskset"):
            argv = ["taskset", "-c", core, *argv]
        with log.open("wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.process.poll() is None:
            if subprocess.run([str(binary / "pg_isready"), "-q", "-h", "127.0.0.1", "-p",
                               str(port)]).returncode == 0:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"benchmarks: PostgreSQL did not start (see {log})")

    def stop(self) -> None:
        """Fast shutdown by the postmaster's PID, then delete its folder."""
        try:
            pid = int((self.folder / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGINT)
        except (OSError, ValueError, IndexError):
            self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
