"""Layering (DESIGN §3) and the public API (STYLE S9) are enforced here, not hoped for."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "mrtr"

RULES = {
    "protocol": ("mrtr.server", "mrtr.client", "mrtr.transports", "mrtr.cli", "mrtr.testing",
                 "httpx", "uvicorn", "anyio", "asyncio", "cryptography"),
    "server": ("mrtr.client", "mrtr.transports", "mrtr.cli", "httpx", "uvicorn"),
    "client": ("mrtr.server", "mrtr.transports", "mrtr.cli", "uvicorn", "cryptography"),
    # Stores sit beside the server: the server may use them, they know only protocol and errors.
    "stores": ("mrtr.server", "mrtr.client", "mrtr.transports", "mrtr.cli", "mrtr.testing",
               "httpx", "uvicorn", "cryptography"),
    "transports": ("mrtr.cli", "mrtr.check"),
    # The OAuth resource server sits at the transports layer; the OAuth client is mrtr.client's.
    "auth": ("mrtr.client", "mrtr.cli", "mrtr.check", "mrtr.testing", "uvicorn", "cryptography"),
    # `mrtr check` audits any server as a client would: it never sees mrtr's server internals.
    "check": ("mrtr.server", "mrtr.stores", "mrtr.transports", "mrtr.cli", "uvicorn",
              "cryptography"),
}

# The only upward imports allowed, each inside a function body (never at module level), each
# naming one small entry-point module of the layer above. Why: `Server.run()`,
# `Server.http_app()` and `Client("http://…")` are what users of other SDKs expect (#18), yet the
# server and the client must load without the transports; the import runs only when called.
# `if TYPE_CHECKING:` imports of the same modules are allowed too (no run-time import).
ENTRY_POINTS = {
    "server/_registry.py": {"mrtr.serving._launch"},
    "client/transports/_base.py": {"mrtr.client.transports._targets"},
}


def imported_names(package: Path) -> set[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        allowed = ENTRY_POINTS.get(path.relative_to(SRC).as_posix(), set())
        for node, deferred in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found = {alias.name for alias in node.names}
            elif node.module and node.level == 0:
                found = {node.module}
            else:
                continue
            names.update(found - allowed if deferred else found)
    return names


def _imports(tree: ast.AST, deferred: bool = False) -> list[tuple[ast.Import | ast.ImportFrom,
                                                                   bool]]:
    """Every import with whether it is deferred: in a function or under `if TYPE_CHECKING:`."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, deferred))
            continue
        inner = deferred or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or (
            isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
        found.extend(_imports(node, inner))
    return found


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports_point_one_way(layer: str) -> None:
    names = imported_names(SRC / layer)
    banned = {n for n in names for b in RULES[layer] if n == b or n.startswith(b + ".")}
    assert not banned, f"mrtr.{layer} imports {sorted(banned)}"


def test_only_sealing_imports_cryptography() -> None:
    users = [
        p.relative_to(SRC).as_posix()
        for p in SRC.rglob("*.py")
        if any(n.startswith("cryptography") for n in imported_names_of(p))
    ]
    assert users == ["server/_sealing.py"]


def imported_names_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_modules_stay_small() -> None:
    big = {p.name: n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert not big, f"modules over 400 lines: {big}"


@pytest.mark.parametrize(
    "module", ["mrtr", "mrtr.auth", "mrtr.errors", "mrtr.protocol", "mrtr.server", "mrtr.client",
               "mrtr.stores", "mrtr.testing", "mrtr.transports", "mrtr.client.auth"]
)
def test_public_api_sorted_and_owned(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert names == sorted(names, key=str.casefold), f"{module}.__all__ is not sorted"
    for name in names:
        obj = getattr(mod, name)
        if isinstance(obj, type) and obj.__module__ not in ("typing", "msgspec"):
            assert obj.__module__.startswith("mrtr"), f"{module}.{name} comes from {obj.__module__}"


def test_18_entry_point_imports_are_deferred_and_nothing_else_goes_up() -> None:
    # A module-level `from mrtr.serving._launch import run` in the server would be caught.
    tree = ast.parse("from mrtr.serving._launch import run\n"
                     "def f():\n    from mrtr.serving._launch import run\n")
    assert [deferred for _, deferred in _imports(tree)] == [False, True]
    code = ("import sys, mrtr, mrtr.server, mrtr.client; "
            "print(','.join(m for m in sys.modules if m.startswith('mrtr.transports')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_server_process_never_loads_the_client_stack() -> None:
    # `mrtr serve` and every worker import the server side only: httpx and the client stack
    # cost about 4 MiB of RSS per process (docs/performance.md).
    code = ("import sys; from mrtr.transports import McpApp, serve_stdio; "
            "import mrtr.serving._serve, mrtr.cli._serve_cli; "
            "loaded = [m for m in ('httpx', 'pygments', 'mrtr.client') if m in sys.modules]; "
            "print(','.join(loaded))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_18_docs_and_examples_import_only_public_names() -> None:
    root = SRC.parents[1]
    pattern = re.compile(r"^\s*from (mrtr[\w.]*) import \(?([\w, ]+)", re.MULTILINE)
    files = [*root.glob("docs/*.md"), root / "README.md", *root.glob("examples/**/*.py")]
    private = []
    for path in files:
        for module, names in pattern.findall(path.read_text()):
            public = importlib.import_module(module).__all__ if "._" not in module else ()
            private += [f"{path.name}: from {module} import {name}"
                        for name in (n.split(" as ")[0].strip() for n in names.split(","))
                        if name
                        and name not in public]
    assert private == []
