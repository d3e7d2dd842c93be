"""benchmarks.report on hand-written results.json data: selection, ratios, target lines."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.report import (
    Cell,
    best_peer,
    best_run,
    best_sdk,
    check_targets,
    met,
    ratio,
    render,
    rss_mib,
    table,
)


def run(ops: float, p50: float, p99: float, **extra: Any) -> dict[str, Any]:
    return {"ops_per_s": ops, "op_latency_ms": {"p50": p50, "p99": p99}, "errors": 0, **extra}


def cell(workload: str, c: int, *runs: dict[str, Any]) -> dict[str, Any]:
    return {"workload": workload, "concurrency": c, "runs": list(runs)}


def mem(mib: float) -> dict[str, int]:
    return {"rss_kib": int(mib * 1024), "hwm_kib": int(mib * 1024) + 512, "procs": 1}


RESULTS: dict[str, Any] = {
    "stamp": "20261130-120000",
    "host": "2 CPUs",
    "targets": {
        "mrtr": {
            "mem_idle": mem(30), "mem_after": mem(32),
            "cells": [
                cell("call1", 32, run(20_000, 1.5, 3.0), run(22_000, 1.4, 2.8)),
                cell("mrtr2", 32, run(9_000, 3.0, 5.0)),
                cell("mrtr3", 32, run(4_000, 7.0, 20.0)),
            ],
        },
        "sdk": {
            "mem_after": mem(72),
            "cells": [cell("call1", 32, run(2_700, 10, 56)), cell("mrtr2", 32, run(700, 40, 94)),
                      cell("mrtr3", 32, run(365, 80, 132))],
        },
        "sdk-json": {
            "mem_after": mem(71),
            "cells": [cell("call1", 32, run(4_700, 6, 13)),
                      cell("mrtr2", 32, run(1_050, 30, 71),
                           run(5_000, 5, 9, disturbed=True)),  # disturbed: ignored
                      cell("mrtr3", 32, run(540, 60, 109))],
        },
        "sdk-manual": {"error": "RuntimeError('sdk-manual did not listen within 30.0s')"},
        "floor-uvicorn": {
            "mem_after": mem(31),
            "cells": [cell("call1", 32, run(40_000, 0.7, 1.5)),
                      cell("mrtr2", 32, run(15_000, 2.0, 4.1)),
                      cell("mrtr3", 32, {"workload": "mrtr3", "concurrency": 32, "failed": True,
                                         "stderr": "boom"})],
        },
    },
}


def statuses(checks: list[Any]) -> list[str]:
    return [c.status for c in checks]


def test_best_run_prefers_undisturbed_then_falls_back() -> None:
    mixed = best_run(cell("x", 1, run(5, 1, 2), run(9, 1, 2, disturbed=True)))
    assert mixed is not None and mixed["ops_per_s"] == 5
    noisy = best_run(cell("x", 1, run(5, 1, 2, disturbed=True), run(9, 1, 2, disturbed=True)))
    assert noisy is not None and noisy["ops_per_s"] == 9
    assert table({"targets": {"t": {"cells": [cell("x", 1, run(9, 1, 2, disturbed=True))]}}})[
        ("t", "x", 1)].disturbed
    assert best_run(cell("x", 1, {"failed": True, "stderr": ""})) is None
    assert best_run(cell("x", 1)) is None


def test_table_skips_failed_cells_and_targets() -> None:
    cells = table(RESULTS)
    assert cells[("mrtr", "call1", 32)] == Cell(22_000, 1.4, 2.8)
    assert ("floor-uvicorn", "mrtr3", 32) not in cells
    assert not any(key[0] == "sdk-manual" for key in cells)


def test_best_sdk_picks_fastest_configuration_per_cell() -> None:
    cells = table(RESULTS)
    assert best_sdk(cells, "call1", 32) == ("sdk-json", Cell(4_700, 6, 13))
    assert best_sdk(cells, "mrtr2", 32) == ("sdk-json", Cell(1_050, 30, 71))
    assert best_sdk(cells, "list", 32) is None


def test_ratio_handles_missing_and_zero() -> None:
    assert ratio(10, 4) == pytest.approx(2.5)
    assert ratio(None, 4) is None
    assert ratio(10, None) is None
    assert ratio(10, 0) is None


def test_rss_in_mib() -> None:
    assert rss_mib(RESULTS) == {"mrtr": 32, "sdk": 72, "sdk-json": 71, "floor-uvicorn": 31}
    assert rss_mib(RESULTS, "mem_idle") == {"mrtr": 30}


PEERS_AND_FLOORS: dict[str, Any] = {"targets": {
    **RESULTS["targets"],
    "ts-sdk": {"mem_after": mem(190), "cells": [cell("mrtr2", 32, run(2_000, 10, 20)),
                                                cell("mrtr3", 32, run(1_100, 20, 40))]},
    "fastmcp": {"cells": [cell("call1", 32, run(5_000, 5, 9))]},
    "floor-uvicorn-sqlite": {"cells": [cell("call1", 32, run(21_000, 1, 2)),
                                       cell("mrtr2", 32, run(9_500, 3, 6))]},
}}


def test_target_lines() -> None:
    checks = check_targets(table(RESULTS), rss_mib(RESULTS), {"seal+unseal": 4.5},
                           ["call1", "mrtr2", "mrtr3"])
    assert statuses(checks) == [
        "MISS", "PASS", "N/A",  # ops ≥ 80/60/60 % of floor: 55 %, 60 %, the floor's run failed
        "N/A", "N/A",  # ≥ 4× ts-sdk: not run
        "MISS", "PASS", "N/A",  # p99 ≤ 1.5× floor p99: 1.87×, 1.22×
        "PASS", "PASS",  # RSS after load, seal+unseal
    ]
    texts = [c.text for c in checks]
    assert texts[0] == "call1 c=32: mrtr ops/s ≥ 80% of floor — 22,000 vs 40,000 (55%)"
    assert texts[1] == "mrtr2 c=32: mrtr ops/s ≥ 60% of floor — 9,000 vs 15,000 (60%)"
    assert texts[2].endswith("floor-uvicorn not measured")
    assert texts[3] == "mrtr2 c=32: mrtr ≥ 4× ts-sdk — ts-sdk not measured"
    assert texts[5].endswith("2.80 ms vs floor 1.50 ms (1.87×)")
    assert texts[8].endswith("32.0 MiB") and texts[9].endswith("4.5 µs")
    assert not met(checks)


def test_31_peers_and_the_exactly_once_floor_are_checked_and_shown() -> None:
    cells = table(PEERS_AND_FLOORS)
    assert best_peer(cells, "call1", 32) == ("fastmcp", Cell(5_000, 5, 9))
    assert best_peer(cells, "mrtr2", 32) == ("ts-sdk", Cell(2_000, 10, 20))
    assert best_sdk(cells, "mrtr2", 32) == ("sdk-json", Cell(1_050, 30, 71))  # Python only
    checks = check_targets(cells, rss_mib(PEERS_AND_FLOORS), None, ["call1", "mrtr2"])
    texts = [f"{c.status} {c.text}" for c in checks]
    assert "PASS call1 c=32: mrtr ops/s ≥ 100% of floor-uvicorn-sqlite — 22,000 vs 21,000 " \
           "(105%)" in texts
    assert "MISS mrtr2 c=32: mrtr ops/s ≥ 100% of floor-uvicorn-sqlite — 9,000 vs 9,500 " \
           "(95%)" in texts
    assert "PASS mrtr2 c=32: mrtr ≥ 4× ts-sdk — 9,000 vs 2,000 (4.50×)" in texts
    text, _ = render(PEERS_AND_FLOORS, None)
    assert "| mrtr2 | 32 | 9,000 | ts-sdk 2,000 | 4.50× | 15,000 | 0.60× | 1.22× | 9,500 | " \
           "0.95× | 0.83× |" in text
    assert "| mrtr3 | 32 | 4,000 | ts-sdk 1,100 | 3.64× | — | — | — | — | — | — |" in text
    assert "| ts-sdk | — | 190.0 | 190.5 |" in text


def test_missing_sdk_and_micro_are_not_applicable() -> None:
    only = {"targets": {"mrtr": RESULTS["targets"]["mrtr"],
                        "floor-uvicorn": RESULTS["targets"]["floor-uvicorn"]}}
    checks = check_targets(table(only), rss_mib(only), None, ["mrtr2"])
    assert statuses(checks) == ["PASS", "N/A", "PASS", "PASS", "N/A"]
    assert "ts-sdk not measured" in checks[1].text
    assert "seal+unseal" in checks[4].text and "not measured" in checks[4].text


def test_all_pass_is_met() -> None:
    cells = {("mrtr", "call1", 32): Cell(34, 1, 1.5),
             ("floor-uvicorn", "call1", 32): Cell(40, 1, 2, disturbed=True)}
    checks = check_targets(cells, {"mrtr": 20.0}, {"seal+unseal": 5.0}, ["call1"])
    assert met(checks)
    assert checks[0].text.endswith("(85%) †")  # measured on a busy machine: flagged


def test_render_degrades_gracefully() -> None:
    text, checks = render(RESULTS, {"seal+unseal": 4.5, "decode+encode round": 3.0})
    assert "### call1, c=32" in text
    assert "| mrtr | 22,000 | 1.40 | 2.80 |" in text
    assert "| sdk-manual | target failed | — | — |" in text
    assert "| floor-uvicorn | run failed | — | — |" in text  # mrtr3: its only run failed
    assert "| mrtr2 | 32 | 9,000 | sdk-json 1,050 | 8.57× | 15,000 | 0.60× | 1.22× | — |" in text
    assert "| mrtr3 | 32 | 4,000 | sdk-json 540 | 7.41× | — | — | — | — |" in text
    assert "| mrtr | 30.0 | 32.0 | 32.5 |" in text
    assert "- N/A  mrtr3 c=32: mrtr ≥ 4× ts-sdk" in text
    assert "seal+unseal: 4.50 µs" in text
    assert len(checks) == 10

    bare, _ = render({"targets": {"mrtr": {"error": "x"}}}, None)
    assert "| mrtr | target failed |" not in bare  # nothing was attempted: no tables
    assert "- N/A  mrtr RSS after load ≤ 42 MiB — not measured" in bare
    assert bare.endswith("Verdict: 0 missed, 2 not measured.\n")


def test_baseline_section_compares_mrtr_with_the_older_checkout() -> None:
    results = {"targets": {
        "mrtr": {"cells": [cell("call1", 32, run(21_000, 1, 2))]},
        "mrtr-base": {"cells": [cell("call1", 32, run(20_000, 1, 2))]},
    }}
    text, _ = render(results, None)
    assert "## Against the baseline (ops/s, same run)" in text
    assert "| call1 | 32 | 21,000 | 20,000 | +5.0% |" in text
    assert "Against the baseline" not in render(RESULTS, None)[0]


def test_13_stores_section_shows_each_store_beside_no_store_and_checks_sqlite() -> None:
    results = {"targets": {
        "mrtr-nostore": {"cells": [cell("mrtr2", 32, run(4_000, 1, 2))]},
        "mrtr": {"cells": [cell("mrtr2", 32, run(2_600, 1, 2))]},
        "mrtr-memory": {"cells": [cell("mrtr2", 32, run(3_600, 1, 2))]},
        "mrtr-redis": {"cells": [cell("mrtr2", 32, run(2_000, 1, 2))]},
    }}
    text, checks = render(results, None)
    assert "| workload | c | no store | memory | SQLite | Redis |" in text
    assert "| mrtr2 | 32 | 4,000 | 3,600 (90%) | 2,600 (65%) | 2,000 (50%) |" in text
    assert "- PASS mrtr2 c=32: SQLite store ops/s ≥ 60% of mrtr-nostore — 2,600 vs 4,000 (65%)" \
        in text
    slow = {"targets": {**results["targets"],
                        "mrtr": {"cells": [cell("mrtr2", 32, run(2_000, 1, 2))]}}}
    assert "- MISS mrtr2 c=32: SQLite store" in render(slow, None)[0]
    assert "## Stores" not in render(RESULTS, None)[0]  # no store targets ran: no section
    assert not any("SQLite store" in c.text for c in check_targets(table(RESULTS), {}, None,
                                                                    ["mrtr2"]))
