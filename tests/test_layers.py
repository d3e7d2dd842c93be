"""Layering (docs/architecture.md) and the public API are enforced here, not hoped for.

The graph (tests/layering.py) holds every import of src/mrtr: module level, inside functions,
under `if TYPE_CHECKING:`, relative ones resolved, `importlib.import_module("mrtr.…")` and the
module names of lazy tables. The table below says, for every package, which packages it may
import (an allow-list); an upward import is allowed only from one function of one file, with a
reason (UPWARD); and no import cycle may cross packages (a subpackage such as mrtr.server.tasks
counts as its own package). The meta-tests at the end inject each kind of violation into a
scratch tree and check that the same checker catches it.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import layering
from tests.layering import Policy, Row

SRC = Path(__file__).resolve().parents[1] / "src" / "mrtr"

ERRORS, PROTOCOL, STORES = "mrtr.errors", "mrtr.protocol", "mrtr.stores"
BASE = (ERRORS, PROTOCOL)
SERVER = ("mrtr.server", "mrtr.server.tasks", "mrtr.server.sessions")
CLIENT = ("mrtr.client", "mrtr.client.transports", "mrtr.client.auth")
ADAPTERS = ("mrtr.auth", "mrtr.http", "mrtr.stdio", "mrtr.serving")


def row(*imports: str, lazy: bool = False) -> Row:
    return Row(frozenset(imports), lazy)


# Bottom to top (the diagram in docs/architecture.md):
#   errors ◄── protocol ◄── stores ◄── server (core, tasks, sessions) | client (transports, core,
#   auth) ◄── auth ◄── http, stdio ◄── serving ◄── the top package (the mrtr.Server facade),
#   testing, check ◄── cli.
# A package may import itself and what its row names; a package's __init__ may also re-export
# its own subpackages; a `__main__` module (a program, imported by nothing) may import anything.
ROWS = {
    ERRORS: row(),  # every exception: the very bottom, imports no mrtr module
    PROTOCOL: row(ERRORS),  # pure wire types and codec, no I/O
    STORES: row(*BASE),  # storage knows neither server nor client
    # The core and its subpackages. Tasks are woven into the core (the dispatcher routes tasks/*,
    # the runner replays rounds), so the two may import each other; the cycle rule keeps them
    # from closing a loop. 2025 sessions sit on top of the core and only mrtr.server's
    # __init__ re-exports them.
    "mrtr.server": row(*BASE, STORES, "mrtr.server.tasks"),
    "mrtr.server.tasks": row(*BASE, STORES, "mrtr.server"),
    "mrtr.server.sessions": row(*BASE, STORES, "mrtr.server", "mrtr.server.tasks"),
    # The client sits beside the server and never imports it: an in-process target offers its
    # own transport. Transports below the Client, the OAuth client above it.
    "mrtr.client.transports": row(*BASE),
    "mrtr.client": row(*BASE, "mrtr.client.transports"),
    "mrtr.client.auth": row(*BASE, "mrtr.client", "mrtr.client.transports"),
    # the OAuth resource server: the server core, and the store for DPoP's jti replay cache
    "mrtr.auth": row(*BASE, STORES, "mrtr.server"),
    # thin server-side adapters; stores: the ASGI lifespan checks and closes the store it owns
    "mrtr.http": row(*BASE, STORES, *SERVER, "mrtr.auth"),
    "mrtr.http.playground": row(),  # the playground page's static files: no code
    "mrtr.stdio": row(*BASE, *SERVER),
    "mrtr.serving": row(*BASE, STORES, *SERVER, "mrtr.auth", "mrtr.http", "mrtr.stdio"),
    # The top package (mrtr/__init__.py lazy names, the mrtr.Server facade in _app.py, the old
    # paths in _moved.py): module level only the core it extends; anything lazily.
    "mrtr": row(*BASE, "mrtr.server", lazy=True),
    "mrtr.testing": row(*BASE, STORES, *SERVER, *CLIENT),  # drives a server as a client would
    # `mrtr check` audits any server as a client would: it never sees mrtr's server internals.
    "mrtr.check": row(*BASE, *CLIENT),
    "mrtr.cli": row(*BASE, STORES, *SERVER, *CLIENT, *ADAPTERS, "mrtr", "mrtr.testing",
                    "mrtr.check"),
    "mrtr.transports": row(lazy=True),  # the deprecated shim: every name lazily, nothing else
}
TOP_MODULES = frozenset({"mrtr", "mrtr._app", "mrtr._moved", "mrtr.__main__"})

# The only upward imports: (file, function) -> {module: why}. Each runs only when its function is
# called, so the layer below still loads without the layer above. None is needed today; an entry
# that no longer matches an import fails test_upward_exemptions_are_live.
UPWARD: dict[tuple[str, str], dict[str, str]] = {}

_NO_IO = ("httpx", "uvicorn", "anyio", "asyncio", "cryptography")
BANNED = {
    ERRORS: _NO_IO,
    PROTOCOL: _NO_IO,
    STORES: ("httpx", "uvicorn", "cryptography"),
    **dict.fromkeys(SERVER, ("httpx", "uvicorn")),  # a server process never loads httpx
    **dict.fromkeys(CLIENT, ("uvicorn", "cryptography")),
    "mrtr.auth": ("uvicorn", "cryptography"),
    "mrtr.http": ("httpx", "uvicorn"),
    "mrtr.stdio": ("httpx", "uvicorn"),
    "mrtr.check": ("uvicorn", "cryptography"),
}

POLICY = Policy(top="mrtr", top_modules=TOP_MODULES, rows=ROWS, upward=UPWARD, banned=BANNED)


@functools.cache
def graph() -> layering.Graph:
    return layering.build(SRC)


def test_every_module_has_a_row() -> None:
    assert layering.unclassified(graph(), POLICY) == []


def test_imports_follow_the_layer_table() -> None:
    bad = layering.forbidden(graph(), POLICY)
    assert not bad, "imports the layer table does not allow:\n" + "\n".join(bad)


def test_upward_exemptions_are_live() -> None:
    assert layering.stale_exemptions(graph(), POLICY) == []


def test_no_import_cycle_crosses_packages() -> None:
    bad = layering.crossing_cycles(graph(), POLICY)
    assert not bad, "\n".join(bad)


def test_third_party_bans() -> None:
    bad = layering.third_party(graph(), POLICY)
    assert not bad, "\n".join(bad)


def test_only_sealing_imports_cryptography() -> None:
    users = sorted({e.file for e in graph().external if e.target == "cryptography"})
    assert users == ["mrtr/server/_sealing.py"]


def test_the_graph_sees_every_kind_of_import() -> None:
    # Anchors in the real tree: if the reader lost a kind of import, the rules above would pass
    # vacuously. Each of these edges is known to exist.
    edges = {(e.file, e.scope, e.target, e.how) for e in graph().edges}
    assert ("mrtr/_app.py", "Server.run", "mrtr.serving._launch", "import") in edges
    assert ("mrtr/_app.py", "<module>", "mrtr.http", "type-checking") in edges
    assert ("mrtr/__init__.py", "<module>", "mrtr.client._connect", "lazy") in edges
    assert ("mrtr/transports/__init__.py", "<module>", "mrtr.http", "lazy") in edges
    assert ("mrtr/_moved.py", "<module>", "mrtr.http._app", "lazy") in edges
    assert ("mrtr/cli/__init__.py", "<module>", "mrtr.cli._serve_cli", "lazy") in edges


def test_modules_stay_small() -> None:
    big = {p.relative_to(SRC).as_posix(): n for p in SRC.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 400}
    assert not big, f"modules over 400 lines: {big}"


def test_the_folder_list_shows_the_roles() -> None:
    # errors and protocol at the bottom, stores, the server core, auth (resource server), the
    # client, server-side HTTP and stdio, serving (the process runner), cli, check, testing, the
    # deprecated transports shim and the top modules: nothing else, and every folder a package.
    top = {p.name for p in SRC.iterdir() if p.name != "__pycache__"}
    assert top == {"__init__.py", "__main__.py", "_app.py", "_moved.py", "py.typed", "errors.py",
                   "protocol", "stores", "server", "auth", "client", "http", "stdio", "serving",
                   "cli", "check", "testing.py", "transports"}
    folders = {p for p in SRC.rglob("*") if p.is_dir() and p.name != "__pycache__"}
    assert all((p / "__init__.py").is_file() for p in folders)
    packages = {name for name, file in graph().modules.items() if file.endswith("__init__.py")}
    assert packages == set(ROWS) - {ERRORS, "mrtr.testing"}


@pytest.mark.parametrize(
    "module", ["mrtr", "mrtr.auth", "mrtr.errors", "mrtr.protocol", "mrtr.server", "mrtr.client",
               "mrtr.stores", "mrtr.testing", "mrtr.client.auth", "mrtr.client.transports",
               "mrtr.http", "mrtr.stdio", "mrtr.serving"]
)  # mrtr.transports is left out: each of its names warns (it is the deprecated shim)
def test_public_api_sorted_and_owned(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert names == sorted(names, key=str.casefold), f"{module}.__all__ is not sorted"
    for name in names:
        obj = getattr(mod, name)
        if isinstance(obj, type) and obj.__module__ not in ("typing", "msgspec"):
            assert obj.__module__.startswith("mrtr"), f"{module}.{name} comes from {obj.__module__}"


_CLIENT_PROCESS = """
import json, sys
def loaded():
    return sorted(m for m in sys.modules
                  if m.split(".")[0] in ("cryptography", "sqlite3", "_sqlite3", "uvicorn")
                  or m == "mrtr.server" or m.startswith(("mrtr.server.", "mrtr.transports")))
import mrtr
stages = {"import mrtr": loaded()}
import mrtr.client
stages["import mrtr.client"] = loaded()
client = mrtr.client.Client("http://127.0.0.1:9/mcp")
transport = mrtr.client.transport_for("http://127.0.0.1:9/mcp")
stages["Client(url)"] = loaded()
print(json.dumps({"stages": stages, "built": [type(client.transport).__name__,
                  type(transport).__name__], "httpx": "httpx" in sys.modules}))
"""


def test_a_client_process_never_loads_the_server() -> None:
    out = subprocess.run([sys.executable, "-c", _CLIENT_PROCESS], capture_output=True,
                         text=True, check=True)
    seen = json.loads(out.stdout)
    assert seen["built"] == ["HTTPTransport", "HTTPTransport"] and seen["httpx"]
    assert seen["stages"] == {"import mrtr": [], "import mrtr.client": [], "Client(url)": []}


def test_a_server_process_never_loads_the_client_stack() -> None:
    # `mrtr serve` and every worker import the server side only: httpx and the client stack
    # cost about 4 MiB of RSS per process (docs/performance.md).
    code = ("import sys; from mrtr.http import McpApp; from mrtr.stdio import serve_stdio; "
            "import mrtr, mrtr.server, mrtr.serving._serve, mrtr.cli._serve_cli; "
            "loaded = [m for m in sys.modules if m in ('httpx', 'pygments', 'mrtr.client') "
            "or m.startswith('mrtr.transports')]; "
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


# -- the meta-test: the checker catches each violation injected into a scratch tree ---------------

# A miniature of the layout, one or two modules per package, each import of a kind the real tree
# uses (absolute, relative, in a function, typing-only, lazy tables, importlib, __main__).
MINI = {
    "__init__.py": """
        import importlib
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from mrtr._app import Server
            from mrtr.client import Client
        _LAZY = {"Server": "mrtr._app", "Client": "mrtr.client", **dict.fromkeys(("Context",),
                 "mrtr.server")}
        def __getattr__(name):
            return getattr(importlib.import_module(_LAZY[name]), name)
        """,
    "__main__.py": "from mrtr.cli import main\n",
    "_app.py": """
        from mrtr.server import Server as Core
        class Server(Core):
            def run(self):
                from mrtr.serving._launch import run
        """,
    "_moved.py": 'MOVED = {"mrtr.transports._asgi": "mrtr.http._app"}\n',
    "errors.py": "class MrtrError(Exception): ...\n",
    "testing.py": "from mrtr.server import Server\nfrom mrtr.client import Client\n",
    "protocol/__init__.py": "from ._codec import decode\n",
    "protocol/_codec.py": "from .. import errors\nimport msgspec\n",
    "stores/__init__.py": "from mrtr.stores._memory import MemoryStore\n",
    "stores/_memory.py": "from ..errors import MrtrError\nfrom ..protocol import decode\n",
    "server/__init__.py": """
        from mrtr.server._registry import Server
        from mrtr.server.sessions import SessionServer
        from mrtr.server.tasks import TaskRunner
        """,
    "server/_registry.py": "from mrtr.protocol import decode\nfrom mrtr.stores import Store\n",
    "server/_rounds.py": "from ._registry import Server\n",
    "server/_dispatch.py": "from .tasks._runner import TaskRunner\nfrom . import _rounds\n",
    "server/_sealing.py": "from cryptography.hazmat.primitives.ciphers.aead import AESGCM\n",
    "server/tasks/__init__.py": "from ._runner import TaskRunner\n",
    "server/tasks/_runner.py": "from mrtr.server._rounds import Round\n",
    "server/sessions/__init__.py": "from ._server import SessionServer\n",
    "server/sessions/_server.py": "from ...server._dispatch import Dispatcher\n",
    "auth/__init__.py": "import httpx\nfrom mrtr.server._registry import Server\n",
    "client/__init__.py": """
        from mrtr.client._client import Client
        _LAZY = {"HTTPTransport": "mrtr.client.transports._http"}
        """,
    "client/_client.py": "from mrtr.client.transports import Transport\nfrom mrtr import errors\n",
    "client/transports/__init__.py": "from ._base import Transport\n",
    "client/transports/_base.py": """
        def transport_for(url):
            from mrtr.client.transports._http import HTTPTransport
        """,
    "client/transports/_http.py": "import httpx\nfrom mrtr.protocol import decode\n",
    "client/auth/__init__.py": "from mrtr.client import Client\nimport jwt\n",
    "http/__init__.py": "from mrtr.http._app import McpApp\n",
    "http/_app.py": "from mrtr.server.sessions import SessionServer\nfrom mrtr.auth import X\n",
    "stdio/__init__.py": "from mrtr.server._dispatch import Dispatcher\n",
    "serving/__init__.py": "from mrtr.serving._launch import run\n",
    "serving/_launch.py": """
        import uvicorn
        from mrtr.http import McpApp
        from mrtr.stdio import serve_stdio
        def store():
            from mrtr.stores import MemoryStore
        """,
    "check/__init__.py": "from mrtr.client import Client\n",
    "cli/__init__.py": """
        import importlib
        COMMANDS = {"serve": "mrtr.cli._serve"}
        def main():
            return importlib.import_module(COMMANDS["serve"]).run()
        """,
    "cli/_serve.py": "from mrtr.serving import run\nfrom mrtr import Server\n",
    "transports/__init__.py": 'NEW_HOMES = {"McpApp": "mrtr.http", "connect": "mrtr.client"}\n',
}

TYPING = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"

# Each bad tree: (file, code appended to it). The six of issue #24 first, then the other rules.
BAD = {
    "relative upward import": ("protocol/_codec.py", "from ..server import _registry\n"),
    "relative upward import in a function": (
        "stores/_memory.py", "def f():\n    from ..server._registry import Server\n"),
    "importlib in the client": (
        "client/_client.py",
        "import importlib\ndef f():\n    return importlib.import_module('mrtr.server._sealing')\n"),
    "importlib f-string in the client": (
        "client/_client.py",
        "import importlib\ndef f(n):\n    return importlib.import_module(f'mrtr.server.{n}')\n"),
    "TYPE_CHECKING import closing a cycle": (
        "server/sessions/_server.py", TYPING + "    from mrtr.server import Server\n"),
    "protocol importing server": ("protocol/__init__.py", "from mrtr.server import Server\n"),
    "server importing client": ("server/_rounds.py", "from mrtr.client import Client\n"),
    "server importing client lazily": ("server/_rounds.py",
                                       "def f():\n    from mrtr.client import Client\n"),
    "cli imported from below": ("serving/_launch.py", "def f():\n    from mrtr.cli import main\n"),
    "cli imported from testing": ("testing.py", "from mrtr import cli\n"),
    "server naming the client in a lazy table": ("server/__init__.py",
                                                 '_LAZY = {"Client": "mrtr.client"}\n'),
    "client importing the top package": ("client/_client.py", "from mrtr import Server\n"),
    "the shim importing at module level": ("transports/__init__.py", "import mrtr.http\n"),
    "the facade importing serving at module level": ("_app.py", "from mrtr.serving import run\n"),
    "the facade importing serving in a class body": (  # a class body runs on import
        "_app.py", "class Late:\n    from mrtr.serving import run\n"),
    "relative importlib in the server": (
        "server/_rounds.py",
        "import importlib\ndef f():\n"
        "    return importlib.import_module('..client', __package__)\n"),
    "a module importing __main__": ("cli/_serve.py", "import mrtr.__main__\n"),
    "a package without a row": ("extras/__init__.py", "from mrtr.server import Server\n"),
    "a subpackage cycle through plain imports": ("client/transports/_base.py",
                                                 "from mrtr.client import _client\n"),
    "uvicorn in the client": ("client/_client.py", "import uvicorn\n"),
    "asyncio in protocol": ("protocol/_codec.py", "import asyncio\n"),
    "httpx in the server": ("server/_dispatch.py", "def f():\n    import httpx\n"),
}


def write_mini(root: Path) -> Path:
    for name, text in MINI.items():
        path = root / "mrtr" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "mrtr"


def inject(tree: Path, file: str, code: str) -> None:
    path = tree / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((path.read_text() if path.exists() else "") + code)


def test_meta_the_clean_mini_tree_passes(tmp_path: Path) -> None:
    graph = layering.build(write_mini(tmp_path))
    assert layering.problems(graph, POLICY) == []
    hows = {e.how for e in graph.edges}
    assert hows == {"import", "type-checking", "lazy"}


@pytest.mark.parametrize("case", sorted(BAD))
def test_meta_a_bad_mini_tree_fails(tmp_path: Path, case: str) -> None:
    tree = write_mini(tmp_path)
    file, code = BAD[case]
    inject(tree, file, code)
    found = layering.problems(layering.build(tree), POLICY)
    assert found, f"{case}: not caught"
    module = "mrtr." + file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    assert any(f"mrtr/{file}" in p or module in p for p in found), found


def test_meta_a_typing_only_cycle_is_caught_by_the_cycle_rule_alone(tmp_path: Path) -> None:
    # Both edges are allowed by the table (sessions may import mrtr.server, whose __init__
    # re-exports sessions): only the cycle rule sees the loop.
    tree = write_mini(tmp_path)
    inject(tree, *BAD["TYPE_CHECKING import closing a cycle"])
    graph = layering.build(tree)
    assert layering.forbidden(graph, POLICY) == []
    [cycle] = layering.crossing_cycles(graph, POLICY)
    assert "mrtr.server, mrtr.server.sessions" in cycle


def test_meta_a_cycle_inside_one_package_may_stay(tmp_path: Path) -> None:
    tree = write_mini(tmp_path)
    inject(tree, "server/_registry.py", "def f():\n    from mrtr.server._rounds import Round\n")
    graph = layering.build(tree)
    assert [c for c in layering.cycles(graph) if "mrtr.server._registry" in c]
    assert layering.problems(graph, POLICY) == []


def test_meta_an_upward_import_passes_only_from_its_function(tmp_path: Path) -> None:
    tree = write_mini(tmp_path)
    inject(tree, "client/_client.py",
           "class Client:\n    def serve(self):\n        from mrtr.serving import run\n"
           "def other():\n    from mrtr.serving import run\n")
    exempt = {("mrtr/client/_client.py", "Client.serve"): {"mrtr.serving": "a reason"}}
    policy = Policy(top="mrtr", top_modules=TOP_MODULES, rows=ROWS, upward=exempt,
                    banned=BANNED)
    found = layering.problems(layering.build(tree), policy)
    assert len(found) == 1 and "in other:" in found[0], found
    stale = {("mrtr/client/_client.py", "Client.stop"): {"mrtr.serving": "gone"},
             ("mrtr/client/_client.py", "<module>"): {"mrtr.serving": "whole file"},
             ("mrtr/client/_client.py", "Client.serve"): {"mrtr.serving": " "}}
    policy = Policy(top="mrtr", top_modules=TOP_MODULES, rows=ROWS, upward=stale, banned=BANNED)
    assert len(layering.stale_exemptions(layering.build(tree), policy)) == 3


@pytest.fixture(scope="module")
def scratch_copy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    copy = tmp_path_factory.mktemp("src") / "mrtr"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy, set(layering.problems(layering.build(copy), POLICY))


# The six violations of issue #24, injected into a copy of the real tree.
REAL_BAD = {
    "relative upward import": ("stores/_memory.py",
                               "def _f():\n    from ..server import _registry\n"),
    "importlib in the client": (
        "client/_client.py",
        "import importlib\ndef _f():\n    return importlib.import_module('mrtr.server._rounds')\n"),
    "TYPE_CHECKING import closing a cycle": (
        "server/sessions/_server.py", TYPING + "    from mrtr.server import Server\n"),
    "protocol importing server": ("protocol/_jsonrpc.py", "from mrtr.server import Server\n"),
    "server importing client": ("server/_peer.py", "from mrtr.client import Client\n"),
    "cli imported from below": ("http/_app.py", "def _f():\n    from mrtr.cli import main\n"),
}


@pytest.mark.parametrize("case", sorted(REAL_BAD))
def test_meta_a_bad_copy_of_the_real_tree_fails(scratch_copy: tuple[Path, set[str]],
                                                case: str) -> None:
    copy, before = scratch_copy
    file, code = REAL_BAD[case]
    original = (copy / file).read_text()
    try:
        inject(copy, file, code)
        found = set(layering.problems(layering.build(copy), POLICY)) - before
    finally:
        (copy / file).write_text(original)
    module = "mrtr." + file.removesuffix(".py").replace("/", ".")
    assert any(f"mrtr/{file}" in p or module in p for p in found), f"{case}: not caught"
