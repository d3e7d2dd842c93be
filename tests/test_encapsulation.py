"""No module reaches into another module's private members (`obj._name`), checked with ast.

A leading underscore means "private to its module": a class may use its own `self._x` and
`cls._x`, and a module may touch `other._x` of another instance of a class it defines (the
same module owns both sides). Anything else is reaching in — `client._send()` from
`client/_tasks.py` was the example (#24) — and needs a public name or a shared object.
`getattr(obj, "_x")` and friends count too. Known limit: a subclass in another module using
its base's `self._x` is not seen (it looks like the class's own member).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "mrtr"

# (path under src/mrtr — or a package prefix ending in "/" — , expression): why it must stay.
ALLOWED = {
    ("cli/", "argparse._SubParsersAction"):
        "argparse has no public name for the action type that add_subparsers() returns",
    ("cli/__init__.py", "parser._actions"):
        "argparse offers no public way to walk to the subcommand parser that was chosen",
    ("server/_telemetry.py", "getattr(metrics_state, '_ProxyMeterProvider', NoOpMeterProvider)"):
        "OpenTelemetry has no public name for its proxy provider; read with a fallback to tell "
        "an inert provider from a real one (the cost of telemetry when no SDK is installed)",
}

_ACCESSORS = {"getattr", "setattr", "hasattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _owned(tree: ast.AST) -> set[str]:
    """Private names this module's own classes define or use on `self` / `cls`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                names |= _defined(item)
        elif isinstance(node, ast.Attribute) and _is_own(node.value):
            names.add(node.attr)
    return names


def _defined(item: ast.stmt) -> set[str]:
    """The names one statement of a class body defines (`__slots__` entries included)."""
    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {item.name}
    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
        return {item.target.id}
    names: set[str] = set()
    if isinstance(item, ast.Assign):
        for target in item.targets:
            if isinstance(target, ast.Name):
                names.add(target.id)
                if target.id == "__slots__":
                    names |= _strings(item.value)
    return names


def _strings(node: ast.expr) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def _is_own(node: ast.expr) -> bool:
    """`self`, `cls` or `super()`: the object whose class this code belongs to."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super")


def reaches(source: str) -> list[tuple[int, str]]:
    """(line, expression) of every access to another module's private member in `source`."""
    tree = ast.parse(source)
    owned = _owned(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            target, name = node.value, node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _ACCESSORS and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            target, name = node.args[0], node.args[1].value
        else:
            continue
        if _private(name) and not _is_own(target) and name not in owned:
            found.append((node.lineno, ast.unparse(node)))
    return found


def _violations() -> tuple[list[str], set[tuple[str, str]]]:
    """Every reach in src/mrtr not in ALLOWED, and the ALLOWED entries that matched."""
    found: list[str] = []
    used: set[tuple[str, str]] = set()
    for file in sorted(SRC.rglob("*.py")):
        path = file.relative_to(SRC).as_posix()
        for line, expression in reaches(file.read_text()):
            entries = {(where, e) for where, e in ALLOWED if e == expression and (
                where == path or (where.endswith("/") and path.startswith(where)))}
            if entries:
                used |= entries
            else:
                found.append(f"{path}:{line}: {expression}")
    return found, used


@pytest.mark.parametrize("package", ["client", "server"])
def test_client_and_server_never_reach_into_private_members(package: str) -> None:
    found, _ = _violations()
    mine = [f for f in found if f.startswith(package + "/")]
    assert not mine, "private members used from outside their module:\n" + "\n".join(mine)


def test_no_module_reaches_into_private_members() -> None:
    found, _ = _violations()
    assert not found, "private members used from outside their module:\n" + "\n".join(found)


def test_every_allowed_reach_is_still_needed() -> None:
    _, used = _violations()
    assert set(ALLOWED) <= used, f"stale ALLOWED entries: {sorted(set(ALLOWED) - used)}"


# -- the checker itself: what it must catch and what it must let through ---------------------

CAUGHT = {
    "another object's method": "async def get(c):\n    return await c._send(1)\n",
    "a chained attribute": "class C:\n    def f(self):\n        return self.tasks._cancel\n",
    "another module's function": "import mod\nmod._helper()\n",
    "a getattr string": "def f(c):\n    return getattr(c, '_meta')\n",
    "a setattr string": "def f(c):\n    setattr(c, '_ids', 1)\n",
    "an assignment": "def f(runner):\n    runner._settle = None\n",
}

LET_THROUGH = {
    "self and cls": "class C:\n    _k = 1\n    def f(self):\n        return self._x, cls._y\n",
    "super()": "class C(B):\n    def f(self):\n        return super()._g()\n",
    "dunders": "def f(c):\n    return c.__class__, c.__dict__\n",
    "a sibling instance of this module's class": textwrap.dedent("""
        class Sealer:
            def __init__(self):
                self._ttl = 1
            def copy(self):
                other = Sealer()
                other._ttl = self._ttl
                return other
        """),
    "a class member of this module, used by a module function": textwrap.dedent("""
        class Meta(type):
            _spec: int
        def render(form):
            return form._spec
        """),
    "a slot of this module's class": textwrap.dedent("""
        class Keeper:
            __slots__ = ("_key",)
        def key(k):
            return k._key
        """),
    "public names": "def f(c):\n    return c.send, getattr(c, 'meta')\n",
}


@pytest.mark.parametrize("case", sorted(CAUGHT))
def test_the_checker_catches(case: str) -> None:
    assert reaches(CAUGHT[case]), case


@pytest.mark.parametrize("case", sorted(LET_THROUGH))
def test_the_checker_lets_through(case: str) -> None:
    assert reaches(LET_THROUGH[case]) == [], case


def test_the_checker_catches_the_old_tasks_module() -> None:
    """The 16 reaches of client/_tasks.py into Client before #24, as they were written."""
    old = textwrap.dedent("""
        class Tasks:
            def __init__(self, client):
                self._client = client
            async def get(self, task_id):
                c = await self._ready()
                return await c._bounded(c._send(get_request(c._next_id(), task_id, c._meta())))
        """)
    assert sorted(e for _, e in reaches(old)) == ["c._bounded", "c._meta", "c._next_id", "c._send"]
