"""Layering (DESIGN §3) and the public API (STYLE S9) are enforced here, not hoped for."""

from __future__ import annotations

import ast
import importlib
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
    "transports": ("mrtr.cli",),
    # The OAuth resource server sits at the transports layer; the OAuth client is mrtr.client's.
    "auth": ("mrtr.client", "mrtr.cli", "mrtr.testing", "uvicorn", "cryptography"),
}


def imported_names(package: Path) -> set[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
    return names


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
               "mrtr.stores", "mrtr.testing", "mrtr.transports"]
)
def test_public_api_sorted_and_owned(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert names == sorted(names, key=str.casefold), f"{module}.__all__ is not sorted"
    for name in names:
        obj = getattr(mod, name)
        if isinstance(obj, type) and obj.__module__ not in ("typing", "msgspec"):
            assert obj.__module__.startswith("mrtr"), f"{module}.{name} comes from {obj.__module__}"


def test_a_server_process_never_loads_the_client_stack() -> None:
    # `mrtr serve` and every worker import the server side only: httpx and the client stack
    # cost about 4 MiB of RSS per process (docs/performance.md).
    code = ("import sys; from mrtr.transports import McpApp, serve_stdio; "
            "import mrtr.transports._serve, mrtr.cli._serve_cli; "
            "loaded = [m for m in ('httpx', 'pygments', 'mrtr.client') if m in sys.modules]; "
            "print(','.join(loaded))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
