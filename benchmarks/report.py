"""Turn run_suite.py's results.json (and micro.json) into report.md: tables, ratios, targets.

Pure functions over plain dicts, so tests feed them hand-written results.
"""

# Design: a cell's number is its best usable run by ops/s, with that run's latencies, the rule
# run_suite.py's summary.md uses (failed runs never count; disturbed runs only when every run of
# the cell was disturbed). Anything not measured is None and renders as "—"; a target check on
# missing data is "N/A", never PASS.
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AT",
    "BASE",
    "FLOOR",
    "MRTR",
    "FLOORS",
    "PEERS",
    "SDKS",
    "Cell",
    "Check",
    "best_peer",
    "best_run",
    "best_sdk",
    "check_targets",
    "met",
    "ratio",
    "render",
    "rss_mib",
    "table",
]

MRTR = "mrtr"
BASE = "mrtr-base"  # an older checkout served beside mrtr (`--baseline REF`)
FLOOR = "floor-uvicorn"
FLOOR_SQLITE = "floor-uvicorn-sqlite"  # the floor plus one SQLite INSERT per redeemed round
FLOORS = (FLOOR, FLOOR_SQLITE)
SDKS = ("sdk", "sdk-json", "sdk-manual")
TS_SDK = "ts-sdk"
PEERS = (*SDKS, TS_SDK, "fastmcp")  # every other MCP server the suite runs
NOSTORE = "mrtr-nostore"
STORES = (("mrtr-memory", "memory"), (MRTR, "SQLite"), ("mrtr-redis", "Redis"),
          ("mrtr-postgres", "PostgreSQL"))  # + no store
STORE_SHARE = 0.6  # the default SQLite store keeps this share of the storeless mrtr2 ops/s
WORKLOADS = ("call1", "mrtr2", "mrtr3", "list")
AT = 32  # the concurrency the targets are stated at
# The targets of issue 31, at c=32: a share of the no-store floor per workload, at least the
# exactly-once floor, a factor over the TypeScript SDK on the MRTR workloads, p99 and RSS.
FLOOR_SHARES = {"call1": 0.8, "mrtr2": 0.6, "mrtr3": 0.6, "list": 0.8}
TS_FACTOR = 4.0
P99_FACTOR = 1.5
RSS_LIMIT_MIB = 42.0
SEAL_LIMIT_US = 10.0
SEAL = "seal+unseal"

Results = Mapping[str, Any]
Key = tuple[str, str, int]  # (target, workload, concurrency)


@dataclass(frozen=True)
class Cell:
    """The best usable run of one target × workload × concurrency."""

    ops: float
    p50: float | None
    p99: float | None
    disturbed: bool = False  # every run of the cell had other load on the machine


@dataclass(frozen=True)
class Check:
    """One target line: status is PASS, MISS or N/A (not measured)."""

    status: str
    text: str


def best_run(cell: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run with the most ops/s among the usable runs of a results.json cell, or None."""
    ok = [r for r in cell.get("runs", []) if not r.get("failed") and "ops_per_s" in r]
    usable = [r for r in ok if not r.get("disturbed")] or ok
    return max(usable, key=lambda r: r["ops_per_s"], default=None)


def table(results: Results) -> dict[Key, Cell]:
    """Every measured cell of results.json; failed cells and failed targets are absent."""
    out: dict[Key, Cell] = {}
    for name, target in results.get("targets", {}).items():
        for cell in target.get("cells", []):
            run = best_run(cell)
            if run is None:
                continue
            latency = run.get("op_latency_ms") or {}
            key = (name, cell["workload"], int(cell["concurrency"]))
            out[key] = Cell(run["ops_per_s"], latency.get("p50"), latency.get("p99"),
                            bool(run.get("disturbed")))
    return out


def rss_mib(results: Results, when: str = "mem_after") -> dict[str, float]:
    """Server RSS per target in MiB (`when`: mem_idle or mem_after), where it was sampled."""
    out: dict[str, float] = {}
    for name, target in results.get("targets", {}).items():
        mem = target.get(when)
        if mem and mem.get("rss_kib"):
            out[name] = mem["rss_kib"] / 1024
    return out


def best_sdk(cells: Mapping[Key, Cell], workload: str, c: int,
             among: Iterable[str] = SDKS) -> tuple[str, Cell] | None:
    """The fastest Python SDK configuration (or of `among`) measured in this cell, or None."""
    found = [(n, cells[(n, workload, c)]) for n in among if (n, workload, c) in cells]
    return max(found, key=lambda item: item[1].ops, default=None)


def best_peer(cells: Mapping[Key, Cell], workload: str, c: int) -> tuple[str, Cell] | None:
    """The fastest other MCP server (any SDK configuration, TypeScript SDK, FastMCP), or None."""
    return best_sdk(cells, workload, c, PEERS)


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, or None when either is missing or den is not positive."""
    if num is None or den is None or den <= 0:
        return None
    return num / den


def check_targets(
    cells: Mapping[Key, Cell],
    rss: Mapping[str, float],
    micro: Mapping[str, float] | None,
    workloads: Iterable[str],
) -> list[Check]:
    """The performance targets at c=32, one line each."""
    workloads = list(workloads)
    checks = [_floor_share(cells, w) for w in workloads]
    if any(key[0] == FLOOR_SQLITE for key in cells):
        checks += [_floor_sqlite(cells, w) for w in workloads]
    checks += [_ts_factor(cells, w) for w in workloads if w in ("mrtr2", "mrtr3")]
    checks += [_p99_factor(cells, w) for w in workloads]
    if any(key[0] == NOSTORE for key in cells):  # only runs that measured the storeless server
        checks.append(_store_share(cells))
    after = rss.get(MRTR)
    checks.append(_limit(f"mrtr RSS after load ≤ {RSS_LIMIT_MIB:g} MiB", after,
                         RSS_LIMIT_MIB, "MiB"))
    seal = micro.get(SEAL) if micro else None
    checks.append(_limit(f"{SEAL} ≤ {SEAL_LIMIT_US:g} µs", seal, SEAL_LIMIT_US, "µs"))
    return checks


def met(checks: Iterable[Check]) -> bool:
    """True when every check passed (N/A counts as not met)."""
    return all(c.status == "PASS" for c in checks)


def _status(ok: bool | None) -> str:
    return "N/A" if ok is None else "PASS" if ok else "MISS"


def _floor_share(cells: Mapping[Key, Cell], w: str, floor_name: str = FLOOR,
                 share_at_least: float | None = None) -> Check:
    least = FLOOR_SHARES.get(w, 0.6) if share_at_least is None else share_at_least
    label = "floor" if floor_name == FLOOR else floor_name
    name = f"{w} c={AT}: mrtr ops/s ≥ {least:.0%} of {label}"
    mine, floor = cells.get((MRTR, w, AT)), cells.get((floor_name, w, AT))
    if mine is None or floor is None:
        return Check("N/A", f"{name} — {_missing(mine, floor, floor_name)}")
    share = ratio(mine.ops, floor.ops)
    ok = None if share is None else share >= least
    return Check(_status(ok), f"{name} — {mine.ops:,.0f} vs {floor.ops:,.0f} "
                              f"({_pct(share)}){_noisy(mine, floor)}")


def _floor_sqlite(cells: Mapping[Key, Cell], w: str) -> Check:
    return _floor_share(cells, w, FLOOR_SQLITE, 1.0)


def _ts_factor(cells: Mapping[Key, Cell], w: str) -> Check:
    name = f"{w} c={AT}: mrtr ≥ {TS_FACTOR:g}× {TS_SDK}"
    mine, ts = cells.get((MRTR, w, AT)), cells.get((TS_SDK, w, AT))
    if mine is None or ts is None:
        return Check("N/A", f"{name} — {_missing(mine, ts, TS_SDK)}")
    factor = ratio(mine.ops, ts.ops)
    ok = None if factor is None else factor >= TS_FACTOR
    return Check(_status(ok), f"{name} — {mine.ops:,.0f} vs {ts.ops:,.0f} "
                              f"({_times(factor)}){_noisy(mine, ts)}")


def _p99_factor(cells: Mapping[Key, Cell], w: str) -> Check:
    name = f"{w} c={AT}: mrtr p99 ≤ {P99_FACTOR:g}× floor p99"
    mine, floor = cells.get((MRTR, w, AT)), cells.get((FLOOR, w, AT))
    if mine is None or floor is None:
        return Check("N/A", f"{name} — {_missing(mine, floor, FLOOR)}")
    factor = ratio(mine.p99, floor.p99)
    ok = None if factor is None or mine.p99 is None else factor <= P99_FACTOR
    return Check(_status(ok), f"{name} — {_ms(mine.p99)} vs floor {_ms(floor.p99)} "
                              f"({_times(factor)}){_noisy(mine, floor)}")


def _store_share(cells: Mapping[Key, Cell]) -> Check:
    name = f"mrtr2 c={AT}: SQLite store ops/s ≥ {STORE_SHARE:.0%} of {NOSTORE}"
    mine, bare = cells.get((MRTR, "mrtr2", AT)), cells.get((NOSTORE, "mrtr2", AT))
    if mine is None or bare is None:
        return Check("N/A", f"{name} — {_missing(mine, bare, NOSTORE)}")
    share = ratio(mine.ops, bare.ops)
    ok = None if share is None else share >= STORE_SHARE
    return Check(_status(ok), f"{name} — {mine.ops:,.0f} vs {bare.ops:,.0f} "
                              f"({_pct(share)}){_noisy(mine, bare)}")


def _limit(name: str, value: float | None, limit: float, unit: str) -> Check:
    if value is None:
        return Check("N/A", f"{name} — not measured")
    return Check(_status(value <= limit), f"{name} — {value:.1f} {unit}")


def _noisy(*cells: Cell) -> str:
    return " †" if any(c.disturbed for c in cells) else ""


def _missing(mine: object, other: object, other_name: str) -> str:
    if mine is None and other is None:
        return f"neither mrtr nor {other_name} measured"
    return "mrtr not measured" if mine is None else f"{other_name} not measured"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def _times(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f} ms"


def _num(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


# -- rendering ---------------------------------------------------------------------------------


def _grid(results: Results) -> tuple[list[str], list[str], list[int]]:
    """Targets, workloads and concurrencies attempted, in a stable order."""
    targets = list(results.get("targets", {}))
    seen_w: list[str] = []
    seen_c: set[int] = set()
    for target in results.get("targets", {}).values():
        for cell in target.get("cells", []):
            if cell["workload"] not in seen_w:
                seen_w.append(cell["workload"])
            seen_c.add(int(cell["concurrency"]))
    order = {w: i for i, w in enumerate(WORKLOADS)}
    workloads = sorted(seen_w, key=lambda w: (order.get(w, len(order)), seen_w.index(w)))
    return targets, workloads, sorted(seen_c)


def _cell_row(results: Results, cells: Mapping[Key, Cell], key: Key) -> str:
    name = key[0]
    target = results["targets"][name]
    cell = cells.get(key)
    if cell is not None:
        mark = " †" if cell.disturbed else ""
        return f"| {name} | {_num(cell.ops)}{mark} | {_num(cell.p50, 2)} | {_num(cell.p99, 2)} |"
    if "error" in target:
        return f"| {name} | target failed | — | — |"
    attempted = any(c["workload"] == key[1] and int(c["concurrency"]) == key[2]
                    for c in target.get("cells", []))
    return f"| {name} | {'run failed' if attempted else 'not run'} | — | — |"


def _throughput(results: Results, cells: Mapping[Key, Cell]) -> list[str]:
    targets, workloads, concs = _grid(results)
    lines: list[str] = []
    for w in workloads:
        for c in concs:
            lines += ["", f"### {w}, c={c}", "", "| target | ops/s | p50 ms | p99 ms |",
                      "|---|---:|---:|---:|"]
            lines += [_cell_row(results, cells, (t, w, c)) for t in targets]
    failed = [(n, t["error"]) for n, t in results.get("targets", {}).items() if "error" in t]
    if failed:
        lines += [""] + [f"- {n} FAILED: {err[:200]}" for n, err in failed]
    return lines


def _memory(results: Results) -> list[str]:
    idle, after = rss_mib(results, "mem_idle"), rss_mib(results, "mem_after")
    peak = {n: t["mem_after"]["hwm_kib"] / 1024 for n, t in results.get("targets", {}).items()
            if (t.get("mem_after") or {}).get("hwm_kib")}
    lines = ["", "## Server RSS (process tree, MiB)", "",
             "| target | idle | after load | peak (HWM) |", "|---|---:|---:|---:|"]
    for name in results.get("targets", {}):
        lines.append(f"| {name} | {_num(idle.get(name), 1)} | {_num(after.get(name), 1)} | "
                     f"{_num(peak.get(name), 1)} |")
    return lines


def _ratios(results: Results, cells: Mapping[Key, Cell]) -> list[str]:
    """mrtr ÷ the best peer and ÷ each floor (ops/s), and mrtr's p99 ÷ each floor's."""
    _, workloads, concs = _grid(results)
    lines = ["", "## Ratios (ops/s; p99: mrtr's ÷ the floor's)", "",
             "| workload | c | mrtr | best peer | mrtr ÷ best peer | " + " | ".join(
                 f"{f} | mrtr ÷ {f} | p99 ÷ {f}" for f in FLOORS) + " |",
             "|---|---:|---:|---|---:|" + "---:|---:|---:|" * len(FLOORS)]
    for w in workloads:
        for c in concs:
            mine = cells.get((MRTR, w, c))
            peer = best_peer(cells, w, c)
            ops = mine.ops if mine else None
            peer_text = f"{peer[0]} {peer[1].ops:,.0f}" if peer else "—"
            row = [w, str(c), _num(ops), peer_text,
                   _times(ratio(ops, peer[1].ops if peer else None))]
            for name in FLOORS:
                floor = cells.get((name, w, c))
                row += [_num(floor.ops if floor else None),
                        _times(ratio(ops, floor.ops if floor else None)),
                        _times(ratio(mine.p99 if mine else None, floor.p99 if floor else None))]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _stores(results: Results, cells: Mapping[Key, Cell]) -> list[str]:
    """ops/s per store side by side, each with its share of the storeless server's."""
    ran = results.get("targets", {})
    if NOSTORE not in ran and not any(name in ran for name, _ in STORES if name != MRTR):
        return []
    _, workloads, concs = _grid(results)
    lines = ["", "## Stores (ops/s, share of no store)", "",
             "| workload | c | no store | " + " | ".join(label for _, label in STORES) + " |",
             "|---|---:|---:|" + "---:|" * len(STORES)]
    for w in workloads:
        for c in concs:
            bare = cells.get((NOSTORE, w, c))
            row = [w, str(c), _num(bare.ops if bare else None)]
            for name, _ in STORES:
                cell = cells.get((name, w, c))
                share = ratio(cell.ops if cell else None, bare.ops if bare else None)
                row.append(_num(cell.ops if cell else None)
                           + ("" if share is None else f" ({_pct(share)})"))
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _baseline(results: Results, cells: Mapping[Key, Cell]) -> list[str]:
    if BASE not in results.get("targets", {}):
        return []
    _, workloads, concs = _grid(results)
    lines = ["", "## Against the baseline (ops/s, same run)", "",
             f"| workload | c | {MRTR} | {BASE} | change |", "|---|---:|---:|---:|---:|"]
    for w in workloads:
        for c in concs:
            mine, base = cells.get((MRTR, w, c)), cells.get((BASE, w, c))
            change = ratio(mine.ops if mine else None, base.ops if base else None)
            text = "—" if change is None else f"{change - 1:+.1%}"
            lines.append(f"| {w} | {c} | {_num(mine.ops if mine else None)} | "
                         f"{_num(base.ops if base else None)} | {text} |")
    return lines


def render(results: Results, micro: Mapping[str, float] | None) -> tuple[str, list[Check]]:
    """report.md for one suite run and its target checks."""
    cells = table(results)
    _, workloads, _ = _grid(results)
    checks = check_targets(cells, rss_mib(results), micro, workloads)
    lines = [f"# mrtr benchmark report — {results.get('stamp', '?')}", "",
             f"host: {results.get('host', '?')}. Per cell the best undisturbed run by ops/s "
             "(p50/p99 of that run, per logical op = all rounds); † = every run of the cell had "
             "other load on the machine (see summary.md).", "", "## Throughput"]
    lines += _throughput(results, cells)
    lines += _memory(results)
    lines += _ratios(results, cells)
    lines += _stores(results, cells)
    lines += _baseline(results, cells)
    lines += ["", "## Micro-benchmarks (µs per op)", ""]
    if micro:
        lines += [f"- {name}: {value:.2f} µs" for name, value in micro.items()]
    else:
        lines.append("- not measured")
    lines += ["", f"## Targets (c={AT})", ""]
    lines += [f"- {c.status:<4} {c.text}" for c in checks]
    verdict = "all targets met" if met(checks) else (
        f"{sum(c.status == 'MISS' for c in checks)} missed, "
        f"{sum(c.status == 'N/A' for c in checks)} not measured")
    lines += ["", f"Verdict: {verdict}."]
    return "\n".join(lines) + "\n", checks
