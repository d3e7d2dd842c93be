"""Benchmark mrtr beside the official Python SDK and the raw floor with the shared harness.

`python -m benchmarks.run [--quick] [--only NAMES] [--strict]` from the repository root, or
`make bench BENCH_ARGS=...`. Writes benchmarks/results/<UTC stamp>/ (results.json, summary.md,
micro.json, report.md) and prints the report. Exit status 0 unless --strict and a target is missed.
"""

# Design:
# - The shared bench folder is read-only and shared, but run_suite.py writes each run's numbers
#   to <bench>/results/.last_run.json and runs targets with cwd=<bench>. So the suite runs through
#   a short `python -c` shim (SHIM) that points its BENCH at a temporary folder of links to the
#   harness, servers and wrk scripts (outside the checkout, so mypy and grep never walk into it);
#   the shared folder is never written (PYTHONDONTWRITEBYTECODE keeps __pycache__ out of it too).
# - The suite runs in its own session: on timeout or Ctrl-C its whole process group (the suite,
#   the load generator and every server it started) is stopped, so no server outlives us.
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.peers import setup_peers
from benchmarks.postgres import POSTGRES, Postgres, postgres_bin
from benchmarks.report import BASE, FLOORS, MRTR, PEERS, met, render
from benchmarks.report import WORKLOADS as REPORTED_WORKLOADS

REPO = Path(__file__).resolve().parents[1]
COPIED = (*PEERS, *FLOORS)  # the shared targets.json entries the suite runs beside mrtr
STORES = {"mrtr-nostore": "none", "mrtr-memory": "memory:"}  # mrtr's other stores
# Opt-in OpenTelemetry targets (docs/operations.md): the default `mrtr` has the API installed
# and no SDK; these hide the package entirely, or configure the SDK with batch exporters.
OTEL = ("mrtr-nootel", "mrtr-otel-sdk")
REDIS = "mrtr-redis"  # the bench starts a redis-server for it (start_redis)
ONLY = ",".join((MRTR, *STORES, REDIS, POSTGRES, *COPIED))  # every store, peer and floor
WORKLOADS = ",".join(REPORTED_WORKLOADS)
DEFAULTS = {"repeats": 3, "duration": 5.0, "warmup": 1.0, "quiet_wait": 60.0,
            "retry_disturbed": 2}
QUICK = {"repeats": 1, "duration": 3.0, "quiet_wait": 5.0, "retry_disturbed": 0}
QUIET_BUDGET = 1800.0  # run_suite.py's default --quiet-budget (s of quiet-waiting per suite)
STAMP_FILE = ".requirements.sha256"
SHIM = (
    "import sys; from pathlib import Path; shared, work, *rest = sys.argv[1:]; "
    "sys.path.insert(0, shared); import run_suite; "
    "hasattr(run_suite, 'BENCH') or sys.exit('run_suite.py lost BENCH: see benchmarks/run.py'); "
    "run_suite.BENCH = Path(work); "
    "sys.argv = [str(Path(shared) / 'run_suite.py'), *rest]; sys.exit(run_suite.main())"
)


class Abort(Exception):
    """A setup problem: the message is printed on one line, with exit status `status`."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", type=Path, help="the shared bench folder "
                   "(default $MRTR_BENCH_SHARED, else <repo>/../shared/bench)")
    p.add_argument("--bench-venv", type=Path, default=REPO / ".venv-bench",
                   help="virtualenv for the harness and the SDK (created when missing); it "
                        "also holds the TypeScript SDK's node_modules and Node 22")
    p.add_argument("--fastmcp-venv", type=Path, default=REPO / ".venv-bench-fastmcp",
                   help="FastMCP's own virtualenv (created when missing)")
    p.add_argument("--out", type=Path, help="output folder (default benchmarks/results/<stamp>)")
    p.add_argument("--only", help=f"targets to run (default {ONLY}, plus {BASE} with --baseline)")
    p.add_argument("--baseline", metavar="REF",
                   help=f"also serve git REF of this checkout as target {BASE}, in the same run")
    p.add_argument("--workloads", default=WORKLOADS, help=f"default {WORKLOADS}")
    p.add_argument("--concurrency", default="1,32", help="default 1,32")
    p.add_argument("--repeats", type=int, help="runs per cell (default 3)")
    p.add_argument("--duration", type=float, help="measured seconds per run (default 5)")
    p.add_argument("--warmup", type=float, help="warmup seconds per run (default 1)")
    p.add_argument("--quiet-wait", type=float, help="max s to wait for a quiet machine (60)")
    p.add_argument("--retry-disturbed", type=int, help="extra runs to replace disturbed ones (2)")
    p.add_argument("--server-core", default="1", help="taskset CPU list for servers, or 'none'")
    p.add_argument("--client-core", default="0",
                   help="taskset CPU list for the load generator and micro-benchmarks, or 'none'")
    p.add_argument("--paired-runs", type=int, default=3,
                   help="paired runs of mrtr beside each floor after the suite (0: none)")
    p.add_argument("--quick", action="store_true",
                   help="1 repeat × 3 s, quiet-wait 5 s, no retries (explicit options win)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 unless every target is met (not measured counts as missed)")
    a = p.parse_args(argv)
    if a.only is None:
        a.only = ONLY + (f",{BASE}" if a.baseline else "")
    for name, default in DEFAULTS.items():
        if getattr(a, name) is None:
            setattr(a, name, QUICK.get(name, default) if a.quick else default)
    return a


def find_shared(given: Path | None) -> Path:
    """The shared bench folder; Abort (status 2) when it is not there."""
    env = os.environ.get("MRTR_BENCH_SHARED")
    shared = given or (Path(env) if env else REPO.parent / "shared" / "bench")
    needed = ("run_suite.py", "harness.py", "targets.json", "requirements.txt")
    if not all((shared / name).is_file() for name in needed):
        raise Abort(f"benchmarks: no shared bench harness at {shared} "
                    "(pass --shared DIR or set MRTR_BENCH_SHARED)")
    return shared.resolve()


def ensure_venv(venv: Path, requirements: Path) -> Path:
    """The bench venv's python, creating the venv and (re)installing when requirements change."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"== creating {venv}", flush=True)
        _check([sys.executable, "-m", "venv", str(venv)], "creating the bench venv", 300)
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    stamp = venv / STAMP_FILE
    if not stamp.is_file() or stamp.read_text().strip() != digest:
        print(f"== installing {requirements} into {venv}", flush=True)
        _check([str(python), "-m", "pip", "install", "-q", "-r", str(requirements)],
               "installing the bench requirements", 1800)
        stamp.write_text(digest + "\n")
    return python


def _check(argv: list[str], what: str, timeout: float) -> None:
    try:
        subprocess.run(argv, check=True, timeout=timeout)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        raise Abort(f"benchmarks: {what} failed: {exc}", status=1) from exc


def targets_spec(
    shared_targets: dict[str, Any], mrtr: Path, base: Path | None = None,
    redis_url: str = "redis://127.0.0.1:6379/0", state: Path | None = None,
    postgres_url: str = "postgresql://postgres@127.0.0.1:5432/postgres",
    peers: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The targets file: the SDK and floor entries as they are, plus mrtr served by `mrtr`.

    With `base` (an exported older checkout), also `mrtr-base`: the same command serving that
    checkout's code, so before and after are measured side by side in one run. `mrtr-redis`
    serves with the store at `redis_url`, `mrtr-postgres` with the one at `postgres_url`. With
    `state`, each mrtr target keeps its key file (and the default store beside it) in
    `state/<target>`: fresh for every run and target, never the user's own.
    """
    spec: dict[str, Any] = {"_doc": "written by benchmarks/run.py from the shared targets.json"}
    # `peers`: what this machine's setup changes in a copied entry (benchmarks/peers.py).
    spec.update({name: {**shared_targets[name], **(peers or {}).get(name, {})}
                 for name in COPIED if name in shared_targets})
    spec["mrtr"] = {
        "desc": "mrtr serve benchmarks.server:app (embedded uvicorn, 1 worker)",
        "cmd": f"{shlex.quote(str(mrtr))} serve benchmarks.server:app --host 127.0.0.1 "
               "--port {port} --log-level warning",
        # run_suite starts targets with cwd=<bench>, so the checkout comes in through PYTHONPATH.
        "env": {"PYTHONPATH": str(REPO)},
        "path": "/mcp",
    }
    # The default `mrtr` records rounds in a private SQLite store (exactly-once); these opt-in
    # targets (--only) measure the same server without a store and with the in-memory one.
    for name, store in {**STORES, REDIS: redis_url, POSTGRES: postgres_url}.items():
        spec[name] = {**spec["mrtr"], "desc": f"{spec['mrtr']['desc']}, --store {store}",
                      "cmd": f"{spec['mrtr']['cmd']} --store {store}"}
    spec[OTEL[0]] = {**spec["mrtr"], "desc": f"{spec['mrtr']['desc']}, opentelemetry hidden",
                     "env": {"PYTHONPATH": f"{REPO / 'benchmarks' / 'no_otel'}{os.pathsep}{REPO}"}}
    spec[OTEL[1]] = {**spec["mrtr"], "desc": "mrtr serve benchmarks.server_otel:app (SDK, "
                     "batch span processor, OTLP-encoding exporters)",
                     "cmd": spec["mrtr"]["cmd"].replace("benchmarks.server:app",
                                                        "benchmarks.server_otel:app")}
    # Opt-in (--only mrtr-auth): the same server with a bearer JWT verified on every request.
    spec["mrtr-auth"] = {**spec["mrtr"], "desc": f"{spec['mrtr']['desc']}, OAuth JWT per request",
                         "cmd": spec["mrtr"]["cmd"].replace("benchmarks.server:app",
                                                            "benchmarks.auth:create_app")}
    spec["mrtr-auth-dpop"] = {
        **spec["mrtr"], "desc": f"{spec['mrtr']['desc']}, OAuth JWT + DPoP proof per request",
        "cmd": spec["mrtr"]["cmd"].replace("benchmarks.server:app",
                                           "benchmarks.auth:create_dpop_app")}
    if base is not None:
        spec[BASE] = {**spec["mrtr"], "desc": f"{spec['mrtr']['desc']}, baseline checkout",
                      "env": {"PYTHONPATH": f"{base / 'src'}{os.pathsep}{base}"}}
    if state is not None:
        for name in [n for n in spec if n.startswith("mrtr")]:
            spec[name] = {**spec[name], "env": {**spec[name].get("env", {}),
                                                "XDG_STATE_HOME": str(state / name)}}
    return spec


def export_baseline(ref: str, into: Path) -> Path:
    """`git archive` of `ref` unpacked into `into`/baseline; Abort when the ref is unknown."""
    base = into / "baseline"
    base.mkdir(parents=True, exist_ok=True)
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True,
                                 capture_output=True, timeout=120).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True, timeout=120)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        raise Abort(f"benchmarks: cannot export baseline {ref!r}: {exc}") from exc
    return base


def make_workdir(shared: Path, parent: Path) -> Path:
    """A writable stand-in for the bench folder: links to its files plus an own results/."""
    work = parent / "bench"
    work.mkdir(parents=True, exist_ok=True)
    for entry in shared.iterdir():
        link = work / entry.name
        if entry.name != "results" and not link.is_symlink():
            link.symlink_to(entry)
    (work / "results").mkdir(exist_ok=True)
    return work


def suite_timeout(a: argparse.Namespace, targets: int) -> float:
    """A bound on the whole suite (each run is bounded by run_suite itself, this is the belt)."""
    cells = len(a.workloads.split(",")) * len(a.concurrency.split(","))
    runs = cells * (a.repeats + a.retry_disturbed)
    per_run = a.warmup + a.duration + 45  # harness cap warmup+duration+grace+10, suite +40
    per_target = 120 + runs * per_run  # listen 30 s, smoke 60 s, stop 13 s
    return float(targets * per_target + min(QUIET_BUDGET, targets * runs * a.quiet_wait) + 60)


def run_micro(out: Path, core: str) -> dict[str, float] | None:
    """Run benchmarks.micro pinned to `core`; its µs per op, or None if it failed."""
    path = out / "micro.json"
    argv = [sys.executable, "-m", "benchmarks.micro", "--json", str(path)]
    if core != "none" and shutil.which("taskset"):
        argv = ["taskset", "-c", core, *argv]
    print(f"== micro-benchmarks: {shlex.join(argv)}", flush=True)
    try:
        subprocess.run(argv, check=True, timeout=300, cwd=REPO)
        micro: dict[str, float] = json.loads(path.read_text())["us_per_op"]
    except (subprocess.SubprocessError, OSError, ValueError, KeyError) as exc:
        print(f"   micro-benchmarks failed: {exc}", flush=True)
        return None
    return micro


def run_suite(argv: list[str], cwd: Path, timeout: float) -> int:
    """Run the suite in its own process group; stop the whole group on timeout or Ctrl-C."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen(argv, env=env, cwd=cwd, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"benchmarks: the suite ran past {timeout:.0f} s; stopping it", flush=True)
        return 1
    except KeyboardInterrupt:
        print("benchmarks: interrupted; stopping the suite", flush=True)
        return 130
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group `proc` leads, then SIGKILL what is left after 10 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(proc):
            return
        os.killpg(proc.pid, sig)
        deadline = time.monotonic() + 10.0  # servers get uvicorn's graceful shutdown
        while _group_alive(proc) and time.monotonic() < deadline:
            time.sleep(0.2)


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    proc.poll()  # reap the suite itself, or its zombie keeps the group alive
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_redis(port: int, out: Path, core: str) -> subprocess.Popen[bytes]:
    """A redis-server for `mrtr-redis` on 127.0.0.1:`port`, pinned beside the servers, with an
    append-only file (fsync every second: RedisStore refuses a Redis that does not persist every
    write); Abort when it is not installed or does not answer PING within 10 s."""
    server = redis_server()
    if server is None:
        raise Abort(f"benchmarks: {REDIS} needs redis-server (apt-get install redis-server)")
    argv = [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly",
            "yes", "--dir", str(out)]
    if core != "none" and shutil.which("taskset"):
        argv = ["taskset", "-c", core, *argv]
    with (out / "redis.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return proc
        except OSError:
            time.sleep(0.05)
    stop_redis(proc)
    raise Abort(f"benchmarks: redis-server did not start (see {out / 'redis.log'})", status=1)


def redis_server() -> str | None:
    return shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).is_file()),
        None)


def stop_redis(proc: subprocess.Popen[bytes]) -> None:
    """Stop the redis-server we started, by its PID (TERM, then KILL after 10 s)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


class Setup(NamedTuple):
    python: Path  # the bench venv's interpreter
    shared: Path
    out: Path
    names: list[str]  # targets to run
    redis_port: int  # where mrtr-redis finds its store (started only when it runs)
    skipped: dict[str, str]  # targets asked for that cannot run here, and why
    postgres_port: int  # the same for mrtr-postgres

def prepare(a: argparse.Namespace) -> Setup:
    """Check the inputs, set up the bench venv, the output folder and its targets.json."""
    shared = find_shared(a.shared)
    mrtr = REPO / ".venv" / "bin" / "mrtr"
    if not mrtr.exists():
        raise Abort(f"benchmarks: {mrtr} is missing (run `make` to create the project venv)")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = (a.out or REPO / "benchmarks" / "results" / stamp).resolve()
    base = export_baseline(a.baseline, out) if a.baseline else None
    redis_port, postgres_port = free_port(), free_port()
    shared_targets = json.loads((shared / "targets.json").read_text())
    names = [n for n in a.only.split(",") if n]
    peers, skipped = setup_peers(names, COPIED, shared_targets, shared,
                                 a.bench_venv.resolve(), a.fastmcp_venv.resolve())
    spec = targets_spec(shared_targets, mrtr, base, redis_url=f"redis://127.0.0.1:{redis_port}/0",
                        state=out / "state", peers=peers,
                        postgres_url=f"postgresql://postgres@127.0.0.1:{postgres_port}/postgres")
    if REDIS in names and redis_server() is None:
        skipped[REDIS] = "redis-server is not installed (apt-get install redis-server)"
    if POSTGRES in names and postgres_bin() is None:
        skipped[POSTGRES] = "PostgreSQL is not installed (apt-get install postgresql)"
    names = [n for n in names if n not in skipped]
    unknown = [n for n in names if n not in spec or n.startswith("_")]
    if unknown or not names:
        known = ", ".join(k for k in spec if not k.startswith("_"))
        raise Abort(f"benchmarks: unknown target(s) {', '.join(unknown) or '(none)'}; "
                    f"known: {known}")
    python = ensure_venv(a.bench_venv.resolve(), shared / "requirements.txt")
    out.mkdir(parents=True, exist_ok=True)
    (out / "targets.json").write_text(json.dumps(spec, indent=1) + "\n")
    return Setup(python, shared, out, names, redis_port, skipped, postgres_port)


def suite_argv(setup: Setup, work: Path, a: argparse.Namespace) -> list[str]:
    """run_suite.py's command line, through SHIM with `work` standing in for the bench folder."""
    return [str(setup.python), "-c", SHIM, str(setup.shared), str(work),
            "--targets", str(setup.out / "targets.json"), "--only", ",".join(setup.names),
            "--out", str(setup.out), "--workloads", a.workloads, "--concurrency", a.concurrency,
            "--repeats", str(a.repeats), "--duration", str(a.duration),
            "--warmup", str(a.warmup), "--quiet-wait", str(a.quiet_wait),
            "--retry-disturbed", str(a.retry_disturbed),
            "--server-core", a.server_core, "--client-core", a.client_core]


def start_stores(setup: Setup, core: str) -> list[Callable[[], None]]:
    """Start the redis-server and PostgreSQL the store targets run on; how to stop each."""
    stops: list[Callable[[], None]] = []
    try:
        if REDIS in setup.names:
            redis = start_redis(setup.redis_port, setup.out, core)
            stops.append(lambda: stop_redis(redis))
        if POSTGRES in setup.names:
            stops.append(Postgres(setup.postgres_port, setup.out / "postgres.log", core).stop)
    except (Abort, RuntimeError) as exc:
        for stop in stops:
            stop()
        raise Abort(str(exc), getattr(exc, "status", 1)) from None
    return stops


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        setup = prepare(a)
    except Abort as exc:
        print(exc, file=sys.stderr)
        return exc.status
    out = setup.out
    micro = run_micro(out, a.client_core)
    print(f"== suite (output in {out})", flush=True)
    try:
        stops = start_stores(setup, a.server_core)
    except Abort as exc:
        print(exc, file=sys.stderr)
        return exc.status
    try:
        with tempfile.TemporaryDirectory(prefix="mrtr-bench-") as tmp:
            work = make_workdir(setup.shared, Path(tmp))
            status = run_suite(suite_argv(setup, work, a), out,
                               suite_timeout(a, len(setup.names)))
    finally:
        for stop in stops:
            stop()
    results_file = out / "results.json"
    if not results_file.is_file():
        print(f"benchmarks: the suite wrote no {results_file} (exit {status})", file=sys.stderr)
        return 1
    report, checks = render(json.loads(results_file.read_text()), micro)
    floors = [f for f in FLOORS if f in setup.names]
    if a.paired_runs > 0 and floors and MRTR in setup.names:
        from benchmarks.paired import beside_floors  # imports this module: not at its top

        workloads = ",".join(w for w in a.workloads.split(",") if w in REPORTED_WORKLOADS)
        report += "\n" + beside_floors(floors, workloads, a.paired_runs, a.duration * 2, out,
                                       setup.shared, setup.python,
                                       (a.server_core, a.client_core))
    if setup.skipped:
        report += "\n## Skipped targets\n\n" + "".join(
            f"- {name}: {why}\n" for name, why in setup.skipped.items())
    (out / "report.md").write_text(report)
    print(report)
    print(f"report in {out / 'report.md'}")
    if status != 0:
        print(f"benchmarks: the suite exited with {status}; the report is partial",
              file=sys.stderr)
        return 1
    if a.strict and not met(checks):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
