"""The import graph of a source tree, as tests/test_layers.py checks it.

Every import counts: module level, inside functions, under `if TYPE_CHECKING:`, relative ones
(resolved to absolute names), `importlib.import_module("mrtr.…")` calls and the module names in
lazy tables (`_LAZY = {"Client": "mrtr.client"}`, `NEW_HOMES`, `MOVED`, `MODULES = (…)`). The
checker takes the tree's root folder as an argument, so the meta-test runs it on generated bad
trees exactly as the real test runs it on src/mrtr.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edge:
    """One import of `target` by `source`, made in `scope` of `file`."""

    source: str  # the importing module, "mrtr.server._registry"
    file: str  # its file, relative to the tree's parent: "mrtr/server/_registry.py"
    scope: str  # "<module>", or the qualified name of the function: "Server.run"
    target: str  # the imported mrtr module, or a third-party top-level name: "httpx"
    line: int
    how: str  # "import", "type-checking" (under `if TYPE_CHECKING:`) or "lazy" (a string)
    in_function: bool  # made in a function body (a class body runs on import, a function later)

    @property
    def deferred(self) -> bool:
        """Not run when the importing module is: inside a function, typing-only, or a string."""
        return self.in_function or self.how != "import"

    def __str__(self) -> str:
        where = "" if self.scope == "<module>" else f" in {self.scope}"
        return f"{self.file}:{self.line}{where}: {self.target} ({self.how})"


@dataclass(frozen=True)
class Graph:
    top: str  # the top package's name, "mrtr"
    modules: Mapping[str, str]  # module name -> its file, relative to the tree's parent
    edges: tuple[Edge, ...]  # edges between the tree's own modules
    external: tuple[Edge, ...]  # imports of anything outside the tree (top-level names)


def module_names(root: Path) -> dict[str, str]:
    """Every module of the package at `root`: {"mrtr.server._registry": "mrtr/server/…py"}."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = rel.as_posix()
    return found


def build(root: Path) -> Graph:
    """The import graph of the package whose folder is `root`."""
    modules = module_names(root)
    names = frozenset(modules)
    edges: list[Edge] = []
    external: list[Edge] = []
    for name, file in modules.items():
        inner, outer = _file_edges((root.parent / file).read_text(), name, file, root.name, names)
        edges += inner
        external += outer
    return Graph(root.name, modules, tuple(edges), tuple(external))


@functools.lru_cache(maxsize=1024)
def _file_edges(text: str, module: str, file: str, top: str,
                modules: frozenset[str]) -> tuple[tuple[Edge, ...], tuple[Edge, ...]]:
    """The imports of one file (cached: a mutated copy of a tree re-reads only what changed)."""
    package = module if file.endswith("__init__.py") else module.rpartition(".")[0]
    visitor = _Visitor(top, module, package, file, modules)
    visitor.visit(ast.parse(text, file))
    return tuple(dict.fromkeys(visitor.edges)), tuple(dict.fromkeys(visitor.external))


def resolve(name: str, modules: Mapping[str, str] | frozenset[str]) -> str:
    """The longest existing module `name` starts with (`a.b.C` -> `a.b`)."""
    parts = name.split(".")
    while len(parts) > 1 and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts)


class _Visitor(ast.NodeVisitor):
    def __init__(self, top: str, module: str, package: str, file: str,
                 modules: frozenset[str]) -> None:
        self.top, self.module, self.package, self.file = top, module, package, file
        self.modules = modules
        self.scopes: list[str] = []
        self.functions = 0  # how many of `scopes` are functions
        self.typing_only = False
        self.edges: list[Edge] = []
        self.external: list[Edge] = []

    def _add(self, target: str, node: ast.AST, how: str | None = None) -> None:
        how = how or ("type-checking" if self.typing_only else "import")
        scope = ".".join(self.scopes) or "<module>"
        line = getattr(node, "lineno", 0)
        in_function = self.functions > 0
        if self._ours(target):
            self.edges.append(Edge(self.module, self.file, scope, resolve(target, self.modules),
                                   line, how, in_function))
        else:
            self.external.append(Edge(self.module, self.file, scope, target.split(".")[0],
                                      line, how, in_function))

    def _ours(self, name: str) -> bool:
        return name == self.top or name.startswith(self.top + ".")

    # scopes: classes and functions name the scope of an import made inside them
    def _scoped(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:  # decorators run where the definition does
            self.visit(decorator)
        function = not isinstance(node, ast.ClassDef)
        self.scopes.append(node.name)
        self.functions += function
        for child in node.body:
            self.visit(child)
        self.functions -= function
        self.scopes.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _scoped

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        if test not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            self.generic_visit(node)
            return
        before, self.typing_only = self.typing_only, True
        for child in node.body:
            self.visit(child)
        self.typing_only = before
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def _absolute(self, name: str, level: int) -> str:
        """`name` imported with `level` leading dots, as an absolute module name."""
        if not level:
            return name
        parts = self.package.split(".")
        parts = parts[:len(parts) - (level - 1)]
        return ".".join([*parts, *([name] if name else [])])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._absolute(node.module or "", node.level)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            self._add(submodule if submodule in self.modules else base, node)

    def visit_Call(self, node: ast.Call) -> None:
        func = ast.unparse(node.func)
        if func in ("importlib.import_module", "import_module", "__import__") and node.args:
            prefix = _leading_text(node.args[0])
            if prefix is not None and prefix.startswith("."):  # relative to `package=`
                dots = len(prefix) - len(prefix.lstrip("."))
                prefix = self._absolute(prefix[dots:], dots)
            if prefix is not None and self._ours(prefix.rstrip(".")):
                self._add(prefix.rstrip("."), node, "lazy")
        elif func == "dict.fromkeys" and len(node.args) == 2:
            self._table_entry(node.args[1])
        self.generic_visit(node)

    # lazy tables: a module name as a dict value or an element of a list, tuple or set (a dotted
    # one: a bare "mrtr" is a logger or program name far more often than a module)
    def _table_entry(self, node: ast.AST) -> None:
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and "." in node.value and node.value in self.modules):
            self._add(node.value, node, "lazy")

    def visit_Dict(self, node: ast.Dict) -> None:
        for value in node.values:
            self._table_entry(value)
        self.generic_visit(node)

    def _elements(self, node: ast.List | ast.Tuple | ast.Set) -> None:
        for element in node.elts:
            self._table_entry(element)
        self.generic_visit(node)

    visit_List = visit_Tuple = visit_Set = _elements


def _leading_text(node: ast.AST) -> str | None:
    """The text a string expression starts with: "a.b" for "a.b", f"a.{x}" or "a." + x."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _leading_text(node.values[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _leading_text(node.left)
    return None


def cycles(graph: Graph) -> Iterator[list[str]]:
    """The strongly connected components of more than one module: the import cycles."""
    succ: dict[str, set[str]] = {m: set() for m in graph.modules}
    for edge in graph.edges:
        if edge.target != edge.source and edge.target in succ:
            succ[edge.source].add(edge.target)
    reach = {m: _reachable(m, succ) for m in succ}
    done: set[str] = set()
    for module in sorted(succ):
        if module in done:
            continue
        component = {module} | {other for other in reach[module] if module in reach[other]}
        done |= component
        if len(component) > 1:
            yield sorted(component)


def _reachable(start: str, succ: Mapping[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(succ[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(succ[node] - seen)
    return seen


def loop(graph: Graph, members: list[str], first: tuple[str, str]) -> list[str]:
    """One shortest import loop through the component `members` that starts with edge `first`."""
    inside = set(members)
    succ: dict[str, set[str]] = {m: set() for m in members}
    for edge in graph.edges:
        if edge.source in inside and edge.target in inside and edge.source != edge.target:
            succ[edge.source].add(edge.target)
    start, goal = first
    paths = {goal: [start, goal]}
    frontier = [goal]
    while frontier and start not in paths:
        following: list[str] = []
        for node in frontier:
            for child in sorted(succ[node] - paths.keys()):
                paths[child] = [*paths[node], child]
                following.append(child)
        frontier = following
    return paths.get(start, [start, goal])  # a strongly connected component always has one


@dataclass(frozen=True)
class Row:
    """What one package may import: `imports` always; anything else only deferred if `lazy`."""

    imports: frozenset[str]
    lazy: bool = False  # the top package and the deprecated shim reach anything lazily


@dataclass(frozen=True)
class Policy:
    top: str  # the top package's row, "mrtr"
    top_modules: frozenset[str]  # its modules: mrtr, mrtr._app, … (its subpackages have rows)
    rows: Mapping[str, Row]  # package -> its row
    upward: Mapping[tuple[str, str], Mapping[str, str]]  # (file, function) -> {module: reason}
    banned: Mapping[str, tuple[str, ...]]  # package -> third-party names it may not import

    def package_of(self, module: str) -> str | None:
        """The row `module` belongs to (the longest package it is in), None if it has none."""
        if module in self.top_modules:
            return self.top
        found = [p for p in self.rows
                 if p != self.top and (module == p or module.startswith(p + "."))]
        return max(found, key=len) if found else None


def unclassified(graph: Graph, policy: Policy) -> list[str]:
    return [f"{file}: {name} is in no package of the layer table"
            for name, file in graph.modules.items() if policy.package_of(name) is None]


def _is_main(module: str) -> bool:
    return module.rpartition(".")[2] == "__main__"


def _allowed(edge: Edge, policy: Policy) -> bool:
    source, target = policy.package_of(edge.source), policy.package_of(edge.target)
    if source is None or target is None or source == target:
        return True  # unclassified modules are reported on their own
    if _is_main(edge.source):
        return True  # a `__main__` module is a program, not a layer: nothing imports it
    if edge.source == source and target.startswith(source + "."):
        return True  # a package's __init__ re-exports its own subpackages
    row = policy.rows[source]
    return target in row.imports or (row.lazy and edge.deferred)


def forbidden(graph: Graph, policy: Policy) -> list[str]:
    """Every import the layer table does not allow and no (file, function) exemption covers."""
    problems = []
    for edge in graph.edges:
        if _is_main(edge.target) and edge.source != edge.target:
            problems.append(f"{edge}: nothing may import a __main__ module")
            continue
        if _allowed(edge, policy):
            continue
        reason = policy.upward.get((edge.file, edge.scope), {}).get(edge.target)
        if reason is None or not edge.in_function:
            problems.append(f"{edge}: {policy.package_of(edge.source)} may not import "
                            f"{policy.package_of(edge.target)}")
    return problems


def stale_exemptions(graph: Graph, policy: Policy) -> list[str]:
    """Exemptions that name a module-level scope, or an import that is not there (any more)."""
    made = {(e.file, e.scope, e.target) for e in graph.edges
            if e.in_function and not _allowed(e, policy)}
    problems = []
    for (file, scope), targets in policy.upward.items():
        for target, reason in targets.items():
            if scope == "<module>":
                problems.append(f"{file}: an upward import must sit in a function: {target}")
            elif not reason.strip():
                problems.append(f"{file} {scope}: the exemption for {target} gives no reason")
            elif (file, scope, target) not in made:
                problems.append(f"{file} {scope}: no upward import of {target} ({reason})")
    return problems


def crossing_cycles(graph: Graph, policy: Policy) -> list[str]:
    """Every import cycle whose modules are in more than one package, with one of its loops."""
    problems = []
    for members in cycles(graph):
        packages = sorted({str(policy.package_of(m)) for m in members})
        if len(packages) == 1:
            continue
        inside = set(members)
        crossing = sorted({e for e in graph.edges if e.source in inside and e.target in inside
                           and policy.package_of(e.source) != policy.package_of(e.target)},
                          key=lambda e: (e.file, e.line))
        first = crossing[0]
        problems.append(
            f"import cycle across {', '.join(packages)} ({len(members)} modules), for example "
            + " -> ".join(loop(graph, members, (first.source, first.target)))
            + "; the imports that cross packages inside it:\n  "
            + "\n  ".join(str(e) for e in crossing))
    return problems


def third_party(graph: Graph, policy: Policy) -> list[str]:
    return [f"{edge}: banned in {package}" for edge in graph.external
            if (package := policy.package_of(edge.source)) is not None
            and edge.target in policy.banned.get(package, ())]


def problems(graph: Graph, policy: Policy) -> list[str]:
    """Everything wrong with the tree's layering: the meta-test's single verdict."""
    return [*unclassified(graph, policy), *forbidden(graph, policy),
            *stale_exemptions(graph, policy), *crossing_cycles(graph, policy),
            *third_party(graph, policy)]
