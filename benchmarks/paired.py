"""Paired A/B: an older checkout and this one served at the same moment (issue 31).

`python -m benchmarks.paired --baseline REF [--workloads call1,mrtr2] [--runs 3]` from the
repository root, or `make bench-ab BENCH_ARGS=...`; `--against NAME` serves the shared bench's
target NAME (e.g. `floor-uvicorn`, from its targets.json) in the baseline's place, which is how
`make bench` measures mrtr against the floors side by side. Both `mrtr serve` processes run on the
server core together, and each run loads both at once, each with its own harness at c=32 from
the client core: they share one core and meet the same machine at the same moment, so the
ratio of their throughputs is the ratio of their CPU cost per operation, whatever the machine's
speed does meanwhile. On this shared machine that speed drifted by ±15 % between runs a few
seconds apart (docs/performance.md, round 11), which a one-after-the-other A/B (`make bench
--baseline`) cannot tell from a 5 % change. Absolute ops/s here are about half of a lone
server's: read the ratios. Writes benchmarks/results/<UTC stamp>/paired.json and paired.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.run import (
    REPO,
    Abort,
    ensure_venv,
    export_baseline,
    find_shared,
    free_port,
    stop_group,
)

__all__ = ["main", "render", "summarise"]

SIDES = ("baseline", "this tree")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.paired", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", metavar="REF", default="main",
                   help="git ref served beside this checkout (default main)")
    p.add_argument("--workloads", default="call1,mrtr2,mrtr3,list")
    p.add_argument("--concurrency", type=int, default=32, help="per server (default 32)")
    p.add_argument("--runs", type=int, default=3, help="paired runs per workload (default 3)")
    p.add_argument("--duration", type=float, default=8.0, help="measured seconds (default 8)")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--store", help="`mrtr serve --store` for both (default: its own default)")
    p.add_argument("--against", metavar="NAME",
                   help="serve the shared target NAME (targets.json) instead of the baseline")
    p.add_argument("--targets", type=Path,
                   help="the targets file NAME is read from (default <shared>/targets.json)")
    p.add_argument("--shared", type=Path, help="the shared bench folder (for harness.py)")
    p.add_argument("--bench-venv", type=Path, default=REPO / ".venv-bench",
                   help="virtualenv that runs the harness (created when missing)")
    p.add_argument("--harness-python", type=Path,
                   help="run the harness with this python instead of the bench venv's")
    p.add_argument("--out", type=Path, help="output folder (default benchmarks/results/<stamp>)")
    p.add_argument("--server-core", default="1", help="taskset CPU list, or 'none'")
    p.add_argument("--client-core", default="0", help="taskset CPU list, or 'none'")
    return p.parse_args(argv)


def _pinned(core: str, argv: list[str]) -> list[str]:
    return argv if core == "none" or shutil.which("taskset") is None else [
        "taskset", "-c", core, *argv]


def _serve(src: Path, port: int, state: Path, a: argparse.Namespace,
           log: Path) -> subprocess.Popen[bytes]:
    """`mrtr serve benchmarks.server:app` of the checkout at `src`, pinned, in its own group."""
    argv = [str(REPO / ".venv" / "bin" / "python"), "-m", "mrtr", "serve",
            "benchmarks.server:app", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "warning", *(["--store", a.store] if a.store else [])]
    env = {**os.environ, "PYTHONPATH": f"{src / 'src'}{os.pathsep}{src}",
           "XDG_STATE_HOME": str(state)}
    with log.open("wb") as out:
        proc = subprocess.Popen(_pinned(a.server_core, argv), env=env, cwd=src, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return _listening(proc, port, log, f"the server of {src}")


def _listening(proc: subprocess.Popen[bytes], port: int, log: Path,
               what: str) -> subprocess.Popen[bytes]:
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        if proc.poll() is not None:
            raise Abort(f"benchmarks: {what} exited; see {log}", 1)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    stop_group(proc)
    raise Abort(f"benchmarks: {what} did not listen within 30 s; see {log}", 1)


def target_argv(spec: dict[str, Any], bin_dir: Path, bench: Path, port: int) -> list[str]:
    """A shared target's command line (targets.json: {bin}, {bench} and {port} filled in)."""
    return shlex.split(spec["cmd"].format(bin=bin_dir, bench=bench, port=port))


def _serve_target(name: str, port: int, a: argparse.Namespace, shared: Path, python: Path,
                  log: Path) -> subprocess.Popen[bytes]:
    """The shared bench's target `name`, pinned, in its own group, listening on `port`."""
    targets = json.loads((a.targets or shared / "targets.json").read_text())
    spec = targets.get(name)
    if not isinstance(spec, dict) or "cmd" not in spec:
        raise Abort(f"benchmarks: no target {name!r} in the targets file", 2)
    argv = target_argv(spec, python.parent, shared, port)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **spec.get("env", {})}
    with log.open("wb") as out:
        proc = subprocess.Popen(_pinned(a.server_core, argv), env=env, cwd=shared, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return _listening(proc, port, log, name)


def _load(python: Path, harness: Path, ports: Sequence[int], workload: str, out: Path,
          a: argparse.Namespace) -> list[dict[str, Any]]:
    """Both harnesses at once; each one's result object."""
    files = [out / f"{workload}-{port}.json" for port in ports]
    runs = [subprocess.Popen(_pinned(a.client_core, [
        str(python), str(harness), "--url", f"http://127.0.0.1:{port}/mcp", "-w", workload,
        "-c", str(a.concurrency), "-d", str(a.duration), "--warmup", str(a.warmup),
        "--json", str(file)]), stdout=subprocess.DEVNULL)
        for port, file in zip(ports, files, strict=True)]
    try:
        for run in runs:
            if run.wait(timeout=a.warmup + a.duration + 120) != 0:
                raise Abort(f"benchmarks: the harness failed on {workload}", 1)
    except subprocess.TimeoutExpired:
        raise Abort(f"benchmarks: the harness did not finish {workload}", 1) from None
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
    return [json.loads(file.read_text()) for file in files]


def summarise(results: dict[str, list[list[dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """Per workload: each run's ops/s and p99 on both sides, their ratios and the median."""
    summary: dict[str, dict[str, Any]] = {}
    for workload, runs in results.items():
        pairs = [(base["ops_per_s"], new["ops_per_s"], base["op_latency_ms"]["p99"],
                  new["op_latency_ms"]["p99"], base["errors"] + new["errors"])
                 for base, new in runs]
        ratios = [new / base if base else float("nan") for base, new, *_ in pairs]
        summary[workload] = {"runs": pairs, "ratios": ratios,
                             "median": statistics.median(ratios) if ratios else float("nan"),
                             "errors": sum(p[4] for p in pairs)}
    return summary


def render(summary: dict[str, dict[str, Any]], baseline: str, concurrency: int,
           against: str | None = None) -> str:
    other = against or "baseline"
    lines = [f"Paired A/B, c={concurrency} each, both servers on one core at once "
             + (f"(`{against}` from the shared bench)" if against else f"(baseline `{baseline}`)")
             + f": ops/s {other} → this tree (p99 ms), per run.", "",
             f"| workload | runs | this tree ÷ {other}, each run | median | errors |",
             "|---|---|---|---:|---:|"]
    for workload, row in summary.items():
        runs = "; ".join(f"{b:,.0f} ({bp:.1f}) → {n:,.0f} ({np:.1f})"
                         for b, n, bp, np, _ in row["runs"])
        each = ", ".join(f"{r:.3f}" for r in row["ratios"])
        lines.append(f"| {workload} | {runs} | {each} | {row['median']:.3f} | {row['errors']} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        shared = find_shared(a.shared)
        python = a.harness_python or ensure_venv(a.bench_venv.resolve(),
                                                 shared / "requirements.txt")
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        out = (a.out or REPO / "benchmarks" / "results" / stamp).resolve()
        out.mkdir(parents=True, exist_ok=True)
        base = None if a.against else export_baseline(a.baseline, out)
        ports = (free_port(), free_port())
        servers = []
        try:
            if a.against:
                servers.append(_serve_target(a.against, ports[0], a, shared, python,
                                             out / f"{a.against}.server.log"))
            for side, src, port in zip(SIDES, (base, REPO), ports, strict=True):
                if src is not None:
                    servers.append(_serve(src, port, out / "state" / side.replace(" ", "-"),
                                          a, out / f"{side.replace(' ', '-')}.server.log"))
            results = {w: [_load(python, shared / "harness.py", ports, w, out, a)
                           for _ in range(a.runs)] for w in a.workloads.split(",") if w}
        finally:
            for server in servers:
                stop_group(server)
    except Abort as exc:
        print(exc, file=sys.stderr)
        return exc.status
    summary = summarise(results)
    text = render(summary, a.baseline, a.concurrency, a.against)
    (out / "paired.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "paired.md").write_text(text)
    print(text + f"\nwritten to {out}")
    return 0 if all(row["errors"] == 0 for row in summary.values()) else 1


def beside_floors(floors: Sequence[str], workloads: str, runs: int, duration: float,
                  out: Path, shared: Path, python: Path, cores: tuple[str, str]) -> str:
    """`make bench`'s side-by-side section: this tree paired with each floor in turn (its
    report's ratios to the floors come from targets measured minutes apart, which this
    machine's drift can decide); the markdown of each table, or why one failed."""
    parts = ["## Side by side with the floors", "",
             "Each floor and `mrtr` (this tree, default store) served on the server core at the "
             "same moment and loaded at once, so the ratio is one of CPU cost per operation "
             "whatever the machine's speed did meanwhile (`benchmarks/paired.py --against`).", ""]
    for floor in floors:
        folder = out / f"paired-{floor}"
        status = main(["--against", floor, "--workloads", workloads, "--runs", str(runs),
                       "--duration", str(duration), "--out", str(folder), "--shared",
                       str(shared), "--harness-python", str(python), "--server-core", cores[0],
                       "--client-core", cores[1]])
        table = folder / "paired.md"
        parts.append(table.read_text() if table.is_file()
                     else f"`{floor}`: the paired run failed (exit {status}); see {folder}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
