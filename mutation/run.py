"""`make mutate`: mutation testing of the security core with mutmut, one module at a time.

Reads the scope from mutation/scope.toml, runs mutmut in build/mutation/<slug>/ with only the
mapped tests, prints killed / survived / timeout counts and the survivors' diffs, and can record
them in (or check them against) mutation/baseline.toml. Usage: docs/testing.md.
"""

# Design:
# - One mutmut run per module, each in its own stage directory holding a copy of src/, tests/,
#   examples/ and a pyproject.toml whose [tool.mutmut] table is generated here. mutmut reads its
#   config from the working directory only, so this is how each module gets its own test
#   selection; the stage also keeps mutmut's result cache, so a run stopped by the time bound
#   resumes where it stopped. The stage has no ../shared beside it: tests needing it skip.
# - Only mutmut's command line is used (run, show) plus its `.meta` result files, which are JSON.
#   Sampling needs the mutant names first: `mutmut run <a name that matches nothing>` generates
#   the mutants and the test stats, then stops; the names are read from the `.meta` file.
# - Every run is bounded: mutmut's own per-mutant CPU limit (from each test's measured time,
#   timeout_multiplier / timeout_constant in pyproject.toml) and `timeout -s INT` around the run,
#   which mutmut treats as Ctrl-C (it stops its workers and keeps the verdicts so far).
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCOPE = ROOT / "mutation" / "scope.toml"
BASELINE = ROOT / "mutation" / "baseline.toml"
STAGES = ROOT / "build" / "mutation"
PLUGIN_DIR = ROOT / "mutation" / "plugin"
COPIED = ("src", "tests", "examples")  # what the tests need; mutmut copies them on into mutants/
NO_MATCH = "mrtr-generate-only"  # a mutant-name filter that matches nothing (see Design)
TODO = "TODO: explain (equivalent mutant, or the test that now kills it)"

# mutmut's exit codes (mutmut.stats.status_by_exit_code), folded into the counts we report.
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout",
          37: "killed", None: "not checked"}
COUNTED = ("killed", "survived", "timeout", "suspicious", "no tests", "not checked")


@dataclass(frozen=True)
class Module:
    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()

    @property
    def slug(self) -> str:
        return self.path.removeprefix("src/").removesuffix(".py").replace("/", ".")


@dataclass
class Outcome:
    module: Module
    statuses: dict[str, str] = field(default_factory=dict)  # mutant name -> status
    diffs: dict[str, str] = field(default_factory=dict)  # survivor -> unified diff

    def counts(self) -> dict[str, int]:
        found = Counter(self.statuses.values())
        return {status: found.get(status, 0) for status in COUNTED}

    def survivors(self) -> list[str]:
        return sorted(name for name, status in self.statuses.items() if status == "survived")


def load_scope(path: Path = SCOPE) -> list[Module]:
    """Return the modules listed in scope.toml, in file order."""
    data = tomllib.loads(path.read_text("utf-8"))
    return [
        Module(entry["path"], tuple(entry["tests"]), tuple(entry.get("functions", ())))
        for entry in data["module"]
    ]


def function_of(mutant: str) -> str:
    """Return "Class.method" or "function" for a mutmut mutant name.

    mutmut names mutants `<module>.x_<function>__mutmut_<n>` and
    `<module>.xǁ<Class>ǁ<method>__mutmut_<n>`.
    """
    local = re.sub(r"__mutmut_\d+$", "", mutant)
    if "ǁ" in local:
        _, cls, method = local.split("ǁ", 2)
        return f"{cls}.{method}"
    return local.rpartition(".x_")[2]


def select(
    names: list[str], functions: tuple[str, ...], sample: int | None, seed: int
) -> list[str]:
    """Keep the mutants of `functions` (globs; all when empty), then `sample` of them by `seed`."""
    chosen = sorted(
        n for n in names
        if not functions or any(fnmatch.fnmatchcase(function_of(n), g) for g in functions)
    )
    if sample is not None and sample < len(chosen):
        chosen = sorted(random.Random(seed).sample(chosen, sample))
    return chosen


def toml_value(value: object) -> str:
    """Render a str, int, float or list of them as TOML (JSON strings are valid TOML strings)."""
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def stage_pyproject(module: Module, base: dict[str, object]) -> str:
    """Return the repository's pyproject.toml with a [tool.mutmut] table for `module`."""
    text = (ROOT / "pyproject.toml").read_text("utf-8")
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", "", text)
    config = dict(base)
    plugin = ["-p", "mrtr_mutation_profile"]  # from PLUGIN_DIR, put on PYTHONPATH by mutmut()
    config.update(
        pytest_add_cli_args=[*plugin, *base.get("pytest_add_cli_args", [])],  # type: ignore[misc]
        source_paths=["src"],
        also_copy=["examples"],
        only_mutate=[module.path],
        pytest_add_cli_args_test_selection=list(module.tests),
    )
    lines = ["", "[tool.mutmut]"] + [f"{k} = {toml_value(v)}" for k, v in config.items()]
    return text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def prepare(module: Module, fresh: bool) -> Path:
    """Create or refresh the stage directory of `module`; return it."""
    stage = STAGES / module.slug
    if fresh and stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        shutil.rmtree(stage / name, ignore_errors=True)
        shutil.copytree(ROOT / name, stage / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    base = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    mutmut_base = base.get("tool", {}).get("mutmut", {})
    (stage / "pyproject.toml").write_text(stage_pyproject(module, mutmut_base), "utf-8")
    return stage


def mutmut(stage: Path, args: list[str], minutes: float | None, log: Path) -> int:
    """Run the mutmut CLI in `stage`, output to `log`; bounded by `minutes` when given."""
    command = [str(Path(sys.executable).parent / "mutmut"), *args]
    if minutes is not None:
        command = ["timeout", "-s", "INT", "-k", "60", f"{int(minutes * 60)}s", *command]
    env = dict(os.environ, PYTHONPATH=str(PLUGIN_DIR), PYTHONDONTWRITEBYTECODE="1")
    with log.open("a", encoding="utf-8") as out:
        return subprocess.run(command, cwd=stage, env=env, stdout=out, stderr=out,
                              stdin=subprocess.DEVNULL, check=False).returncode


def read_meta(stage: Path, module: Module) -> dict[str, int | None]:
    """Return mutmut's {mutant name: exit code} for `module` (None: not run yet)."""
    meta = stage / "mutants" / (module.path + ".meta")
    if not meta.is_file():
        return {}
    data: dict[str, dict[str, int | None]] = json.loads(meta.read_text("utf-8"))
    return data["exit_code_by_key"]


def run_module(module: Module, args: argparse.Namespace) -> Outcome:
    """Mutate one module within the time bound and return its verdicts."""
    stage = prepare(module, args.fresh)
    log = stage / "mutmut.log"
    log.write_text("", "utf-8")
    names: list[str] = []
    if args.sample is not None or module.functions:
        mutmut(stage, ["run", "--max-children", "1", NO_MATCH], args.minutes, log)
        names = select(list(read_meta(stage, module)), module.functions, args.sample, args.seed)
        if not names:
            raise SystemExit(f"{module.path}: no mutants selected (see {log})")
    started = datetime.now(UTC)
    code = mutmut(stage, ["run", "--max-children", str(args.workers), *names], args.minutes, log)
    elapsed = (datetime.now(UTC) - started).total_seconds()
    codes = read_meta(stage, module)
    wanted = names or list(codes)
    outcome = Outcome(module, {n: STATUS.get(codes.get(n), "suspicious") for n in wanted})
    for name in outcome.survivors():
        shown = subprocess.run([str(Path(sys.executable).parent / "mutmut"), "show", name],
                               cwd=stage, capture_output=True, text=True, check=False)
        outcome.diffs[name] = shown.stdout
    print(f"{module.path}: {len(wanted)} mutants in {elapsed:.0f} s, mutmut exit {code}")
    return outcome


def report(outcome: Outcome, baseline: dict[str, dict[str, object]]) -> list[str]:
    """Print counts and survivors; return the survivors the baseline does not explain."""
    counts = outcome.counts()
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items() if v or k != "suspicious"))
    known = baseline.get(outcome.module.path, {}).get("survivors", {})
    assert isinstance(known, dict)
    new = []
    for name in outcome.survivors():
        why = known.get(name)
        shown = "recorded, not yet explained" if why == TODO else why or "NOT IN BASELINE"
        print(f"  survived {name}: {shown}")
        if why is None:
            new.append(name)
            print("    " + outcome.diffs.get(name, "").strip().replace("\n", "\n    "))
    return new


def git_commit(module: Module) -> str:
    """The commit measured: short hash, "+dirty" when the module or its tests differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", module.path, *module.tests],
                           cwd=ROOT, check=False).returncode
    return head + ("+dirty" if dirty else "")


def record(outcome: Outcome, baseline: dict[str, dict[str, object]], sample: str) -> None:
    """Store `outcome` as the module's baseline, keeping the explanations of known survivors."""
    previous = baseline.get(outcome.module.path, {})
    old = previous.get("survivors", {})
    assert isinstance(old, dict)
    version = subprocess.run([sys.executable, "-c", "import importlib.metadata as m;"
                              "print(m.version('mutmut'))"],
                             capture_output=True, text=True, check=False).stdout.strip()
    entry: dict[str, object] = {
        # "done" once every survivor is explained (tests/mutation enforces it), else "pending"
        "review": previous.get("review", "pending"),
        **({"note": previous["note"]} if "note" in previous else {}),
        "commit": git_commit(outcome.module),
        "measured": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mutmut": version,
        "selection": sample,
        "tests": list(outcome.module.tests),
        **{k.replace(" ", "_"): v for k, v in outcome.counts().items()},
        "survivors": {name: old.get(name, TODO) for name in outcome.survivors()},
    }
    baseline[outcome.module.path] = entry


def load_baseline(path: Path = BASELINE) -> dict[str, dict[str, object]]:
    """Return baseline.toml as {module path: entry}, empty when there is none yet."""
    return tomllib.loads(path.read_text("utf-8")) if path.is_file() else {}


def write_baseline(baseline: dict[str, dict[str, object]], path: Path = BASELINE) -> None:
    """Write baseline.toml: one table per module, survivors as name = explanation."""
    out = ["# Surviving mutants of the security core, each explained. Written by",
           "# `make mutate MUTATE_ARGS=--record`, explanations by hand (docs/testing.md)."]
    for module, entry in baseline.items():
        out += ["", f"[{toml_value(module)}]"]
        out += [f"{k} = {toml_value(v)}" for k, v in entry.items() if k != "survivors"]
        out += ["", f"[{toml_value(module)}.survivors]"]
        survivors = entry.get("survivors", {})
        assert isinstance(survivors, dict)
        out += [f"{toml_value(k)} = {toml_value(v)}" for k, v in survivors.items()]
    path.write_text("\n".join(out) + "\n", "utf-8")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make mutate", description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", default=[],
                        help="mutate the scope entries whose path contains this (repeatable)")
    parser.add_argument("--sample", type=int, help="mutate only N mutants per module, by --seed")
    parser.add_argument("--seed", type=int, default=20, help="the sampling seed (default 20)")
    parser.add_argument("--minutes", type=float, default=25.0,
                        help="time bound of each module's run (default 25)")
    parser.add_argument("--workers", type=int, default=1, help="mutmut children (default 1)")
    parser.add_argument("--fresh", action="store_true", help="forget cached verdicts first")
    parser.add_argument("--record", action="store_true", help="write the verdicts to baseline.toml")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a mutant survives that baseline.toml does not explain")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    modules = [m for m in load_scope() if not args.module or any(s in m.path for s in args.module)]
    if not modules:
        raise SystemExit(f"no scope entry matches {args.module}; see {SCOPE}")
    unexplained = []
    for module in modules:
        outcome = run_module(module, args)
        baseline = load_baseline()  # again: explanations may have been edited meanwhile
        unexplained += report(outcome, baseline)
        if args.record:
            label = "all" if args.sample is None else f"sample {args.sample} seed {args.seed}"
            record(outcome, baseline, label)
            write_baseline(baseline)
            print(f"  recorded in {BASELINE.relative_to(ROOT)}")
    if args.check and unexplained:
        print(f"{len(unexplained)} surviving mutant(s) not explained in {BASELINE.name}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
