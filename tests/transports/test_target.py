"""load_target, load_dispatcher: module and file targets, what a target may be, one-line errors."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from mrtr.http import McpApp
from mrtr.server import Binding, Dispatcher, Sealer, Server, generate_key, parse_keys
from mrtr.serving._target import absolute_target, load_dispatcher, load_target
from tests.transports import apps

PROBE = Binding(method="tools/call", target="greet", arguments_digest=b"", principal=None)


def project(tmp_path: Path, stem: str) -> Path:
    """A file target importing a sibling module, as a small project does."""
    (tmp_path / f"{stem}_words.py").write_text('WORDS = "from a sibling"\n')
    path = tmp_path / f"{stem}.py"
    path.write_text(
        f"from {stem}_words import WORDS\n"
        "from mrtr.server import Server\n"
        "app = Server(WORDS, version='1')\n"
    )
    return path


def test_file_target_with_a_sibling_import_issue_11(tmp_path: Path) -> None:
    path = project(tmp_path, "target_file_a")
    try:
        dispatcher = load_dispatcher(f"{path}:app", None)
        assert dispatcher.server.name == "from a sibling"
        again = load_dispatcher(f"{path}:app", None)  # the module is imported once
        assert again.server is dispatcher.server
    finally:
        sys.modules.pop("target_file_a", None)
        sys.modules.pop("target_file_a_words", None)


def test_relative_file_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project(tmp_path, "target_file_b")
    monkeypatch.chdir(tmp_path)
    try:
        assert load_dispatcher("target_file_b.py:app", None).server.name == "from a sibling"
        assert absolute_target("target_file_b.py:app") == f"{tmp_path / 'target_file_b.py'}:app"
        assert absolute_target("pkg.mod:app") == "pkg.mod:app"
    finally:
        sys.modules.pop("target_file_b", None)
        sys.modules.pop("target_file_b_words", None)


@pytest.mark.parametrize(("target", "message"), [
    ("nowhere/missing.py:app", "no such file: nowhere/missing.py"),
    ("tests.transports.apps:nothing", "tests.transports.apps has no attribute 'nothing'"),
    ("mod:", "target must look like module:attribute, path/to/file.py:attribute or "
             "path/to/file.py"),
    (":app", "target must look like module:attribute"),
    ("tests.transports.conftest", "tests.transports.conftest has no app, mcp or server "
                                  "attribute and no Server: name one"),
    ("tests.transports.apps:__name__", "is a str, not a Server, a Dispatcher, an ASGI app"),
])
def test_unusable_targets_are_one_line_errors(target: str, message: str) -> None:
    with pytest.raises(ValueError, match="^[^\n]*$") as caught:
        load_dispatcher(target, None)
    assert message in str(caught.value)


@pytest.mark.parametrize(("body", "found"), [
    ("from mrtr import Server\nmcp = Server('m')\napp = 1\n", "mcp"),  # app is no Server
    ("from mrtr import Server\nserver = Server('s')\n", "server"),
    ("from mrtr import Server\nbilling = Server('b')\n", "billing"),  # the only Server
])
def test_18_a_file_alone_names_its_server(tmp_path: Path, body: str, found: str) -> None:
    path = tmp_path / "target_file_bare.py"
    path.write_text(body)
    try:
        assert absolute_target(str(path)) == f"{path}:{found}"
        assert load_dispatcher(str(path), None).server.name == found[0]
    finally:
        sys.modules.pop("target_file_bare", None)


def test_18_a_file_with_two_servers_and_no_app_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "target_file_two.py"
    path.write_text("from mrtr import Server\na = Server('a')\nb = Server('b')\n")
    try:
        with pytest.raises(ValueError, match="has no app, mcp or server attribute and Servers "
                           "a, b: name one, e.g. .*target_file_two.py:a$"):
            load_target(str(path))
    finally:
        sys.modules.pop("target_file_two", None)


def test_18_a_module_alone_is_a_target() -> None:
    assert load_target("examples.bookings").name == "brightgrid"  # type: ignore[union-attr]


def test_a_file_without_the_attribute_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "target_file_c.py").write_text("other = 1\n")
    try:
        with pytest.raises(ValueError, match=r"target_file_c.py has no attribute 'app'$"):
            load_dispatcher(f"{tmp_path / 'target_file_c.py'}:app", None)
    finally:
        sys.modules.pop("target_file_c", None)


def test_a_file_shadowing_an_imported_module_is_refused(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("app = None\n")
    with pytest.raises(ValueError, match="a module named 'json' is already imported"):
        load_dispatcher(f"{tmp_path / 'json.py'}:app", None)


def test_a_dispatcher_target_seals_with_the_given_keys_issue_11() -> None:
    keys = parse_keys(generate_key())
    dispatcher = load_dispatcher("tests.transports.apps:dispatcher", keys)
    assert dispatcher.server is apps.app
    ring = Sealer(keys=keys, audience=apps.app.name)
    assert ring.unseal(dispatcher.sealer.seal(b"x", PROBE), PROBE).body == b"x"


def test_a_dispatcher_target_keeps_its_settings_issue_11() -> None:
    custom = Dispatcher(apps.app, max_rounds=3, logger=logging.getLogger("custom"))
    apps.custom = custom  # type: ignore[attr-defined]
    try:
        rebuilt = load_dispatcher("tests.transports.apps:custom", parse_keys(generate_key()))
        assert (rebuilt.max_rounds, rebuilt.log.name) == (3, "custom")
        keys = parse_keys(generate_key())
        apps.custom = Dispatcher(  # type: ignore[attr-defined]
            apps.app, sealer=Sealer(keys=keys, audience=apps.app.name, ttl=5.0))
        kept = load_dispatcher("tests.transports.apps:custom", keys)
        assert kept is apps.custom  # type: ignore[attr-defined]
    finally:
        del apps.custom  # type: ignore[attr-defined]


class _AsgiCallable:
    async def __call__(self, scope: object, receive: object, send: object) -> None:
        """An ASGI app as a callable object (Starlette and FastAPI apps look like this)."""


def test_19_asgi_apps_and_factories_are_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    instance = _AsgiCallable()
    mcp_app = McpApp(Dispatcher(apps.app))
    monkeypatch.setattr(apps, "asgi_object", instance, raising=False)
    monkeypatch.setattr(apps, "make_mcp_app", lambda: mcp_app, raising=False)
    monkeypatch.setattr(apps, "make_server", lambda flag=True: apps.app, raising=False)
    assert load_target("tests.transports.apps:asgi_object") is instance
    assert load_target("tests.transports.apps:make_mcp_app") is mcp_app
    assert load_target("tests.transports.apps:make_server") is apps.app
    assert load_dispatcher("tests.transports.apps:make_mcp_app", None) is mcp_app.dispatcher


async def _async_factory() -> Server:
    return apps.app


@pytest.mark.parametrize(("value", "message"), [
    (_async_factory, "is an async function, not a Server, a Dispatcher, an ASGI app or a "
                     "function returning one (a factory is a plain function)"),
    (_AsgiCallable, "is the class _AsgiCallable, not a Server, a Dispatcher, an ASGI app or a "
                    "function returning one"),
    (apps.add, "is the tool 'add' of Server 'transport-tests', not a factory; serve the Server: "
               "tests.transports.apps:app"),
])
def test_19_what_is_not_a_factory_is_never_called(
    monkeypatch: pytest.MonkeyPatch, value: object, message: str
) -> None:
    monkeypatch.setattr(apps, "candidate", value, raising=False)
    with pytest.raises(ValueError) as caught:
        load_target("tests.transports.apps:candidate")
    assert str(caught.value) == f"tests.transports.apps:candidate {message}"
