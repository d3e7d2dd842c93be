"""The docs as a reader meets them: example files shown verbatim, snippets that run, the deploy
example under a real uvicorn, every `mrtr serve` option documented, `make run PORT=`."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr.cli import build_parser
from mrtr.cli._serve_cli import register
from mrtr.server import Binding, Sealer, generate_key, parse_keys
from tests.transports.conftest import call, free_port, post_args, stop

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
SERVER_MD = ROOT / "docs" / "server.md"
# A fence whose info string names a file claims to show that file: ```python title="examples/x.py"
TITLED = re.compile(r'^```python title="([^"]+)"\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def python_block(markdown: Path, heading: str) -> str:
    """The first ```python block after `heading`."""
    section = markdown.read_text().split(f"\n{heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_19_docs_include_no_snippet_markers() -> None:
    # `--8<--` is a MkDocs include: GitHub shows the marker, not the file.
    found = [f"{doc.name}:{n}" for doc in DOCS
             for n, line in enumerate(doc.read_text().splitlines(), 1) if "--8<--" in line]
    assert found == []


def test_19_blocks_titled_with_a_file_show_that_file_verbatim() -> None:
    shown = {(doc.name, title): body
             for doc in DOCS for title, body in TITLED.findall(doc.read_text())}
    expected = {("server.md", "examples/bookings.py"), ("server.md", "examples/asgi_app.py"),
                ("client.md", "examples/client/legacy.py"),
                ("migrating.md", "examples/pydantic_server.py")}
    assert expected <= set(shown)
    stale = [f"{doc}: {title}" for (doc, title), body in shown.items()
             if body != (ROOT / title).read_text()]
    assert stale == [], "copy the file into the doc again"


def test_19_the_sealer_snippet_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    key = generate_key()
    monkeypatch.setenv("MRTR_STATE_KEYS", key)
    code = python_block(SERVER_MD, "## requestState and keys")
    ns: dict[str, Any] = {"__name__": "billing"}
    exec(compile(code, str(SERVER_MD), "exec", dont_inherit=True), ns)  # as a user file would run
    sealer = ns["dispatcher"].sealer
    probe = Binding(method="tools/call", target="t", arguments_digest=b"", principal=None)
    token = sealer.seal(b"x", probe)
    assert Sealer(keys=parse_keys(key), audience="billing").unseal(token, probe).body == b"x"


def test_19_every_serve_option_is_in_the_docs_table() -> None:
    parser = build_parser([register])
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = commands.choices["serve"]
    options = {o for action in serve._actions for o in action.option_strings
               if o.startswith("--") and o != "--help"}
    text = SERVER_MD.read_text()
    assert [o for o in sorted(options) if f"| `{o}" not in text] == []
    assert "| `mrtr keys generate` |" in text


def test_19_make_run_takes_a_port() -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}  # under `make test`
    for args, port in (([], "8000"), (["PORT=8123"], "8123")):
        done = subprocess.run([make, "--no-print-directory", "-n", "run", *args], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=30)
        serve = [line for line in done.stdout.splitlines() if " serve " in line]
        command = f".venv/bin/mrtr serve examples.bookings:app --host 127.0.0.1 --port {port}"
        assert serve == [command]


def post(url: str, body: dict[str, Any], token: str | None = None) -> httpx.Response:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    return httpx.post(url, timeout=10, **post_args(body, **headers))


def test_19_the_deploy_example_runs_under_uvicorn_with_principals(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**os.environ, "MRTR_STATE_KEYS": generate_key(),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    with (tmp_path / "uvicorn.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "examples.asgi_app:create_app", "--factory",
             "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_listening(url, process)
        refused = post(url, call("whoami"))
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        who = post(url, call("whoami"), "ann-token").json()["result"]
        assert who["content"][0]["text"] == "You are user:ann."
        asked = post(url, call("close_account"), "ann-token").json()["result"]
        assert asked["resultType"] == "input_required"
        retry = call("close_account", requestState=asked["requestState"],
                     inputResponses={"sure": {"action": "accept", "content": {"confirm": True}}})
        stolen = post(url, retry, "bob-token").json()
        assert stolen["error"] == {"code": -32602, "message": "Invalid or expired requestState"}
        done = post(url, retry, "ann-token").json()["result"]
        assert done["content"][0]["text"] == "Account of user:ann closed."
    finally:
        stop(process)


def wait_listening(url: str, process: subprocess.Popen[bytes]) -> None:
    """Wait until the server answers at all (any status: it wants a token)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "uvicorn exited early"
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("uvicorn did not start listening")


def test_19_serving_the_factory_without_keys_is_one_clear_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MRTR_STATE_KEYS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    done = subprocess.run([sys.executable, "-m", "mrtr.cli", "serve",
                           "examples/asgi_app.py:create_app"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        1, "MRTR_STATE_KEYS is not set: export MRTR_STATE_KEYS=$(mrtr keys generate)\n")



# -- the documentation site (#18) -----------------------------------------------------------

PAGES = sorted((ROOT / "docs").rglob("*.md"))
# `from mrtr.x._y import Z`, `import mrtr.x._y`, or prose telling the reader to take a name
# "from `mrtr.x._y`": every name a reader needs has a public path.
PRIVATE = re.compile(r"(?:^|[\s(])(?:from|import)\s+`?(mrtr(?:\.\w+)*\._\w+)", re.MULTILINE)
# Private paths still in the docs because the public one does not exist yet: (page, path,
# the public module that should export it, the name). Drop an entry once that name is there.
PENDING: list[tuple[str, str, str, str]] = []


def private_imports(text: str) -> list[str]:
    return PRIVATE.findall(text)


def test_18_the_private_import_check_finds_them() -> None:
    old = "from mrtr.client.transports._http import HTTPTransport\nimport mrtr.server._x\n"
    assert private_imports(old) == ["mrtr.client.transports._http", "mrtr.server._x"]
    assert private_imports("`TAIL` (from `mrtr.client.transports._stdio`)") == [
        "mrtr.client.transports._stdio"]
    assert private_imports("from mrtr.transports import HTTPTransport") == []
    assert private_imports("survived mrtr.server._sealing.x__b64decode__mutmut_5") == []


def test_18_no_doc_imports_a_private_module() -> None:
    sources = [*PAGES, ROOT / "README.md", *sorted((ROOT / "examples").rglob("*.py"))]
    found = {(path.name, name) for path in sources for name in private_imports(path.read_text())}
    waiting = set()
    for page, name, public, attribute in PENDING:
        module = importlib.import_module(public)
        assert not hasattr(module, attribute), f"{public}.{attribute} exists: use it in {page}"
        waiting.add((page, name))
    assert found - waiting == set()


def test_18_titled_code_blocks_show_example_files() -> None:
    titles = [title for doc in PAGES for title, _ in TITLED.findall(doc.read_text())]
    assert titles and all(t.startswith("examples/") and (ROOT / t).is_file() for t in titles)


def nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_pages(value)]
    if isinstance(nav, list):
        return [p for item in nav for p in nav_pages(item)]
    return []


def test_18_every_page_is_in_the_site_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    listed = re.findall(r"^\s+- (?:[^:\n]+: )?([\w/.-]+\.md)$", config, re.MULTILINE)
    pages = sorted(str(p.relative_to(ROOT / "docs")) for p in PAGES)
    assert sorted(listed) == pages, "add the page to `nav:` in mkdocs.yml"


@pytest.mark.slow
def test_18_the_site_builds_strict_with_every_public_name(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(ROOT / "mkdocs.yml"), "-d", str(site)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    pages = {"server": "server", "client": "client", "client.transports": "client-transports",
             "protocol": "protocol", "stores": "stores", "testing": "testing", "http": "http",
             "stdio": "stdio", "serving": "serving"}
    for name, page in pages.items():
        module = importlib.import_module(f"mrtr.{name}")
        html = (site / "reference" / page / "index.html").read_text()
        ids = set(re.findall(r'id="(mrtr\.[\w.]+)"', html))
        shown = [n for n in module.__all__ if f"mrtr.{name}.{n}" in ids
                 or type(getattr(module, n)).__module__ == "msgspec"  # UNSET: msgspec's own
                 or getattr(getattr(module, n), "__module__", "") == "msgspec"]
        assert shown == list(module.__all__), f"mrtr.{name}: not in the API reference"


def _run_block(markdown: Path, heading: str) -> dict[str, Any]:
    """Run the first python block after `heading` as its own module (msgspec resolves the
    annotations of what it defines there)."""
    module = type(sys)(f"_docs_{abs(hash(heading))}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(python_block(markdown, heading), str(markdown), "exec", dont_inherit=True),
             vars(module))
    finally:
        del sys.modules[module.__name__]
    return vars(module)


def test_27_the_ask_if_missing_snippet_runs_on_a_tool_a_prompt_and_a_resource() -> None:
    ns = _run_block(SERVER_MD, "### Asking for a missing argument: `AskIfMissing`")
    assert set(ns["app"].tables.prompts) == {"briefing"}


def test_27_the_registration_snippet_runs_and_its_list_covers_each_refusal() -> None:
    heading = "### What registration refuses"
    ns = _run_block(SERVER_MD, heading)
    assert ns["refused"].startswith("a tool named 'book'")
    section = SERVER_MD.read_text().split(f"\n{heading}\n", 1)[1].split("\n### ", 1)[0]
    for refusal in ("replace=True", "A class", "scheme", "{+path}", "**variables",
                    "no JSON Schema", "breaks its own field"):
        assert refusal in section, refusal


TESTING_MD = ROOT / "docs" / "testing-your-server.md"


def test_27_the_replay_snippet_runs_and_no_doc_sends_params_without_a_method() -> None:
    # Before: "Re-send `flow.requests[-1]` with `client.send(...)`", which answers -32600.
    ns = _run_block(TESTING_MD, "## Replaying a round")
    assert ns["charges"] == ["INV-7"] and ns["again"]["result"] == ns["flow"].result
    sources = [*PAGES, ROOT / "README.md"]
    wrong = [p.name for p in sources if re.search(r"client\.send\(\s*flow\.", p.read_text())]
    assert wrong == []


def test_27_cli_md_says_a_decline_exits_3_only_when_the_tool_stops() -> None:
    # Before: "A declined or cancelled question ends `mrtr call` with exit status 3." The
    # behaviour (tests/cli/test_call.py): 3 when the tool stopped, 0 when it carried on.
    text = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    assert "A declined or cancelled question ends `mrtr call` with exit status 3." not in text
    assert ("that stops the tool ends `mrtr call` with exit status 3; a tool that carries on "
            "after a \"no\" (`Return not booked.`) exits 0") in text


def test_27_the_quick_start_is_two_commands_and_says_how_long_make_test_takes() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == ["make run", "make test"]
    assert re.search(r"make test .*: about \d+ minutes on \d+ cores", block)
