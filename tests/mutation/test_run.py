"""mutation.run without mutmut: the scope list, mutant selection and the baseline file."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from mutation.run import (
    BASELINE,
    ROOT,
    TODO,
    Module,
    Outcome,
    function_of,
    load_scope,
    report,
    select,
    stage_pyproject,
    write_baseline,
)

SEAL = "mrtr.server._sealing"
NAMES = [f"{SEAL}.x__stale__mutmut_{n}" for n in range(1, 13)] + [
    f"{SEAL}.xǁSealerǁunseal__mutmut_{n}" for n in range(1, 6)
] + [f"{SEAL}.xǁSealerǁ__init____mutmut_1"]


def test_every_scope_entry_names_files_that_exist() -> None:
    modules = load_scope()
    assert {m.path for m in modules} >= {
        "src/mrtr/server/_sealing.py",
        "src/mrtr/protocol/_headers.py",
    }
    for module in modules:
        assert (ROOT / module.path).is_file(), f"{module.path}: update mutation/scope.toml"
        for test in module.tests:
            assert (ROOT / test).is_file(), f"{test}: update mutation/scope.toml"


def test_function_of_reads_mutmut_names() -> None:
    assert function_of(f"{SEAL}.x__stale__mutmut_2") == "_stale"
    assert function_of(f"{SEAL}.x_digest_arguments__mutmut_12") == "digest_arguments"
    assert function_of(f"{SEAL}.xǁSealerǁ__init____mutmut_1") == "Sealer.__init__"
    assert function_of(f"{SEAL}.xǁSealerǁ_open__mutmut_20") == "Sealer._open"


def test_select_filters_by_function_then_samples_by_seed() -> None:
    assert select(NAMES, (), None, 1) == sorted(NAMES)
    methods = select(NAMES, ("Sealer.*",), None, 1)
    assert len(methods) == 6 and all("ǁSealerǁ" in n for n in methods)
    assert select(NAMES, ("Sealer.unseal", "_stale"), None, 1) == sorted(NAMES[:17])
    first = select(NAMES, (), 5, 20)
    assert len(first) == 5 and first == select(list(reversed(NAMES)), (), 5, 20)
    assert select(NAMES, (), 5, 21) != first
    assert select(NAMES, (), 500, 20) == sorted(NAMES)


def test_baseline_file_round_trips(tmp_path: Path) -> None:
    baseline: dict[str, dict[str, object]] = {
        "src/mrtr/server/_sealing.py": {
            "commit": "abc1234",
            "killed": 3,
            "tests": ["tests/server/test_sealing.py"],
            "survivors": {f"{SEAL}.xǁSealerǁseal__mutmut_65": 'equivalent: "ASCII" is "ascii"'},
        }
    }
    path = tmp_path / "baseline.toml"
    write_baseline(baseline, path)
    assert tomllib.loads(path.read_text("utf-8")) == baseline


def test_stage_config_replaces_the_mutmut_table() -> None:
    module = Module("src/mrtr/server/_sealing.py", ("tests/server/test_sealing.py",))
    config = tomllib.loads(stage_pyproject(module, {"timeout_constant": 2.0}))
    mutmut = config["tool"]["mutmut"]
    assert mutmut["only_mutate"] == ["src/mrtr/server/_sealing.py"]
    assert mutmut["pytest_add_cli_args_test_selection"] == ["tests/server/test_sealing.py"]
    assert mutmut["pytest_add_cli_args"][:2] == ["-p", "mrtr_mutation_profile"]
    assert mutmut["timeout_constant"] == 2.0
    assert config["project"]["name"] == "mrtr"


@pytest.mark.skipif(not BASELINE.is_file(), reason="no baseline recorded yet")
def test_every_survivor_of_a_reviewed_module_is_explained() -> None:
    for module, entry in tomllib.loads(BASELINE.read_text("utf-8")).items():
        survivors = entry["survivors"]
        assert entry["survived"] == len(survivors), module
        assert entry["review"] in ("done", "pending"), module
        if entry["review"] == "pending":
            continue
        unexplained = [name for name, why in survivors.items() if why == TODO or not why]
        assert not unexplained, f"{module}: explain these in mutation/baseline.toml"


def test_check_reports_only_survivors_missing_from_the_baseline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    module = Module("src/mrtr/server/_sealing.py", ("tests/server/test_sealing.py",))
    known, pending, new, killed = NAMES[:4]
    outcome = Outcome(module, {known: "survived", pending: "survived", new: "survived",
                               killed: "killed"}, {new: "--- diff of the new survivor"})
    baseline: dict[str, dict[str, object]] = {
        module.path: {"survivors": {known: "equivalent: why", pending: TODO}}
    }
    assert report(outcome, baseline) == [new]
    out = capsys.readouterr().out
    assert "killed 1, survived 3, timeout 0" in out
    assert "equivalent: why" in out and "recorded, not yet explained" in out
    assert f"{new}: NOT IN BASELINE" in out and "diff of the new survivor" in out
