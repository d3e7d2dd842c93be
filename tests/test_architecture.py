"""docs/architecture.md cannot rot: every path it names exists, every package is in its diagram."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from mrtr import _moved

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "mrtr"
PAGE = ROOT / "docs" / "architecture.md"
# A path is words joined by "/" that ends in ".py" or "/": `server/_rounds.py`, `server/tasks/`.
# Method names (`tools/call`, `tasks/*`) and URLs (`/healthz`, `https://…`) do not match.
PATH = re.compile(r"(?<![\w./:-])((?:[\w.-]+/)*(?:[\w.-]+\.py|[\w-]+/))(?![\w*/])")
DOTTED = re.compile(r"(?<![\w.])(mrtr(?:\.\w+)+)")
REPO_DIRS = ("src/", "tests/", "docs/", "examples/")


def section(text: str, heading: str) -> str:
    """The text of `## heading` up to the next `## `."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def diagram(text: str) -> str:
    """The layer diagram: the first ```text block of "The layers"."""
    return section(text, "The layers").split("```text\n", 1)[1].split("```", 1)[0]


def concept_rows(text: str) -> list[tuple[str, list[str]]]:
    """(concept, paths) for each row of the table of "Where each concept lives"."""
    rows = [line for line in section(text, "Where each concept lives").splitlines()
            if line.startswith("|")][2:]  # below the header and its rule
    found = []
    for row in rows:
        concept, modules = (cell.strip() for cell in row.strip("|").split("|"))
        found.append((concept, PATH.findall(modules)))
    return found


def resolve(path: str) -> Path:
    return ROOT / path if path.startswith(REPO_DIRS) else SRC / path


def missing_paths(text: str) -> list[str]:
    """The paths `text` names that do not exist (a directory must be one, with `/`)."""
    missing = []
    for path in PATH.findall(text):
        target = resolve(path)
        exists = target.is_dir() if path.endswith("/") else target.is_file()
        if not exists:
            missing.append(path)
    return missing


def unresolved_names(text: str) -> list[str]:
    """The dotted `mrtr.…` names in `text` that are neither a module nor an attribute.

    Old paths under `mrtr.transports` are looked up in `mrtr._moved.MOVED` rather than
    imported: importing them would warn, and would alias them for the rest of the run.
    """
    bad = []
    for name in sorted(set(DOTTED.findall(text))):
        if name.startswith("mrtr.transports."):
            if name not in _moved.MOVED:
                bad.append(name)
            continue
        if not _resolves(name):
            bad.append(name)
    return bad


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def packages() -> set[str]:
    """Every package under src/mrtr (`server/tasks/`) and every top-level module (`errors.py`)."""
    found = {f"{p.parent.relative_to(SRC).as_posix()}/" for p in SRC.rglob("__init__.py")
             if p.parent != SRC}
    return found | {p.name for p in SRC.glob("*.py")}


def test_the_checks_find_what_is_wrong() -> None:
    text = ("`server/_rounds.py`, `server/_nope.py`, `server/tasks/`, `server/nowhere/`, "
            "`tests/test_layers.py`, `tests/nope.py`, tools/call, tasks/*, /healthz, "
            "https://x.example/mcp, `mrtr.http.McpApp`, `mrtr.http.Nope`, `mrtr.nope`, "
            "`mrtr.transports._asgi`, `mrtr.transports._nope`")
    assert missing_paths(text) == ["server/_nope.py", "server/nowhere/", "tests/nope.py"]
    assert unresolved_names(text) == ["mrtr.http.Nope", "mrtr.nope", "mrtr.transports._nope"]
    table = ("## Where each concept lives\n\n| concept | module |\n|---|---|\n"
             "| sealing | `server/_sealing.py` |\n| nothing | none |\n")
    assert concept_rows("\n" + table) == [("sealing", ["server/_sealing.py"]), ("nothing", [])]


def test_every_path_the_page_names_exists() -> None:
    text = PAGE.read_text()
    assert len(PATH.findall(text)) > 100  # the parser still reads the page
    assert missing_paths(text) == []


def test_every_dotted_name_the_page_names_resolves() -> None:
    text = PAGE.read_text()
    assert DOTTED.findall(text)
    assert unresolved_names(text) == []


def test_the_diagram_names_every_package_and_only_packages() -> None:
    named = set(PATH.findall(diagram(PAGE.read_text())))
    assert packages() - named == set(), "add the package to the diagram in docs/architecture.md"
    assert named - packages() == set(), "the diagram names only packages and top-level modules"


def test_every_concept_has_a_module() -> None:
    rows = concept_rows(PAGE.read_text())
    assert len(rows) > 30
    assert [concept for concept, paths in rows if not paths] == []
    concepts = " ".join(concept for concept, _ in rows)
    for word in ("ledger", "journal", "forms", "schema", "telemetry", "stores", "tasks",
                 "2025 sessions", "answer channel", "auth", "key file", "store a process uses",
                 "logging", "health", "Host", "error policy"):
        assert word in concepts, word


def test_the_page_is_in_the_site_and_the_readme() -> None:
    assert "architecture.md" in (ROOT / "mkdocs.yml").read_text()
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text()
