"""Every example in examples/*.py runs to completion through TestClient with scripted answers.

A new example needs a scenario here, or this test fails (conformance fixtures are excluded).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mrtr import Server
from mrtr.auth import Principal
from mrtr.stores import MemoryStore
from mrtr.testing import ANSWER_DECLINE, TestClient, then

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GOOD = {"reason": "broken", "email": "ann@example.com", "boxes": 2, "pickup_date": "2026-08-03"}


def bookings(client: TestClient, ns: dict[str, Any]) -> None:
    flow = client.call_tool("book_return", {"order_id": "A-1001"}, answers={
        "details": then({**GOOD, "email": "not-an-email"}, {**GOOD, "boxes": 9}, GOOD),
        "confirm": True,
    })
    assert flow.rounds == 5
    first = flow.asked(1)["details"]["params"]["message"]
    assert first == "Return details for order A-1001"
    for round_no, field in ((2, "mail"), (3, "5")):
        message = flow.asked(round_no)["details"]["params"]["message"]
        assert message != first and message.endswith(first) and field in message.lower()
    assert set(flow.asked(4)) == {"confirm"}
    assert flow.text == ("Return RMA-0001 booked: pickup on 2026-08-03, label sent to "
                         "ann@example.com.")
    assert ns["carrier"].bookings == [("A-1001", 2)]  # once: booked exactly once
    no = client.call_tool("book_return", {"order_id": "A-2"},
                          answers={"details": GOOD, "confirm": False})
    assert no.text == "Return not booked." and len(ns["carrier"].bookings) == 1
    policy = client.read_resource("brightgrid://policy")
    assert "30 days" in policy.result["contents"][0]["text"]


def provision(client: TestClient, ns: dict[str, Any]) -> None:
    flow = client.call_tool("provision", {"name": "web-1"},
                            answers={"placement": then({"region": "mars", "size": 2},
                                                       {"region": "eu-west", "size": 4})})
    assert flow.rounds == 3 and flow.text == "web-1 provisioned in eu-west with 4 vCPUs."
    assert flow.asked(2)["placement"]["params"]["message"] != "Where should web-1 run?"
    declined = client.call_tool("provision", {"name": "web-2"},
                                answers={"placement": ANSWER_DECLINE})
    assert declined.text == "Provisioning of web-2 stopped (decline); nothing was created."
    assert not declined.result.get("isError")


def research(client: TestClient, ns: dict[str, Any]) -> None:
    answers = {"summary": "MRTR is stateless.", "roots": ["file:///work"]}
    flow = client.call_tool("research", {"topic": "MRTR"}, answers=answers)
    assert flow.rounds == 2 and set(flow.asked(1)) == {"summary", "roots"}
    assert flow.text == "MRTR is stateless.\nWorkspace: file:///work"
    client.capabilities = {"sampling": {}}
    bare = client.call_tool("research", {"topic": "MRTR"}, answers=answers)
    assert set(bare.asked(1)) == {"summary"} and bare.text.endswith("Workspace: no roots")


def asgi_app(client: TestClient, ns: dict[str, Any]) -> None:
    # The deployment itself (uvicorn, keys, tokens) runs in tests/test_docs.py.
    client.principal = "user:ann"
    assert client.call_tool("whoami").text == "You are user:ann."
    assert client.call_tool("close_account", answers={"sure": True}).text == (
        "Account of user:ann closed.")


def payments(client: TestClient, ns: dict[str, Any]) -> None:
    # With a store a replayed final round returns its first result and charges nothing more.
    with TestClient(ns["app"], clock=client.clock,
                    store=MemoryStore(clock=client.clock)) as shop:
        flow = shop.call_tool("pay", {"invoice": "INV-7", "amount": 40},
                              answers={"confirm": True})
        assert flow.rounds == 2
        assert flow.text == "Paid 40 EUR for invoice INV-7: receipt R-INV-7-1."
        for _ in range(3):
            again = shop.send("tools/call", {"name": "pay", **flow.requests[-1]})
            assert again["result"] == flow.result
        assert shop.call_tool("charges", {"invoice": "INV-7"}).text == "1"
    no = client.call_tool("pay", {"invoice": "INV-8", "amount": 5}, answers={"confirm": False})
    assert no.text == "Invoice INV-8 not paid."


def _task(client: TestClient, task_id: str, status: str) -> dict[str, Any]:
    """Poll tasks/get (each poll also lets the task run) until the task reaches `status`."""
    for _ in range(500):
        task = client.request("tasks/get", {"taskId": task_id})
        if task["status"] == status:
            return task
        client.send("tools/list")
    raise AssertionError(f"task {task_id} never reached {status}: {task}")


def report(client: TestClient, ns: dict[str, Any]) -> None:
    # A client with the tasks extension gets a task, answers the mid-way question by tasks/update.
    plain = dict(client.capabilities)
    client.capabilities = {**plain, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    created = client.request("tools/call", {"name": "build_report", "arguments": {"quarter": "Q3"}})
    assert created["resultType"] == "task" and created["pollIntervalMs"] == 200
    parked = _task(client, created["taskId"], "input_required")
    assert list(parked["inputRequests"]) == ["outlook"]
    assert parked["statusMessage"] == "Writing the headcount section"
    client.request("tasks/update", {"taskId": created["taskId"], "inputResponses": {
        "outlook": {"action": "accept", "content": {"confirm": True}}}})
    done = _task(client, created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == (
        "Report RPT-Q3-1: revenue: 120; costs: 80; headcount: 42; outlook: steady")
    assert ns["warehouse"].queries == 1  # replayed after the answer, but queried once
    # A client without it gets the same report through MRTR rounds.
    client.capabilities = plain
    flow = client.call_tool("build_report", {"quarter": "Q4"}, answers={"outlook": False})
    assert flow.rounds == 2 and flow.text.startswith("Report RPT-Q4-2: revenue: 120")
    assert ns["warehouse"].archived == ["Q3", "Q4"]
def auth_server(client: TestClient, ns: dict[str, Any]) -> None:
    # Tokens, 401/403 and the issuer run in tests/auth/test_example.py.
    client.principal = Principal("https://login.example.com", "ann", "cli")
    assert client.call_tool("add_note", {"title": "groceries", "text": "milk"}).text == (
        "Added 'groceries'.")
    assert client.call_tool("list_notes").text == "groceries"
    assert ns["NOTES"] == {"ann@https://login.example.com": {"groceries": "milk"}}
    flow = client.call_tool("delete_note", {"title": "groceries"}, answers={"sure": True})
    assert flow.text == "Deleted 'groceries'." and client.call_tool("list_notes").text == (
        "No notes.")


def pydantic_server(client: TestClient, ns: dict[str, Any]) -> None:
    # The FastMCP user's view, and the official client over HTTP: tests/test_pydantic_user.py.
    assert client.call_tool("rate", {"product": "kettle", "stars": 9}).result["isError"]
    flow = client.call_tool("schedule_pickup", {"order_id": "A-1"}, answers={"elicit-1": then(
        {"email": "ann@example.com", "boxes": 9, "day": "2026-12-01"},
        {"email": "ann@example.com", "boxes": 2, "day": "2026-12-01"})})
    assert flow.rounds == 3 and flow.text == "2 box(es) on 2026-12-01, label to ann@example.com"


def connect(client: TestClient, ns: dict[str, Any]) -> None:
    # Over real HTTP, with the provider's redirect and two replicas: tests/transports/
    # test_url_completion.py.
    from urllib.parse import parse_qs, urlsplit

    provider = ns["provider"]

    def browser(request: dict[str, Any]) -> dict[str, str]:  # the user signs in, then returns
        redirect = parse_qs(urlsplit(request["params"]["url"]).query)["redirect_uri"][0]
        client.complete_url(f"{redirect}?code={provider.sign_in('ann')}")
        return {"action": "accept"}

    flow = client.call_tool("connect_calendar", answers={"sign-in": browser})
    assert flow.rounds == 2 and flow.text == "Calendar of ann connected."
    assert "ann" in provider.tokens
    asked = client.call_tool("disconnect_calendar", {"account": "ann"}, answers={"confirm-1": True})
    assert asked.rounds == 2 and asked.text == "Calendar of ann disconnected."
    with TestClient(ns["app"], capabilities={}) as model:  # no elicitation: consent by token
        first = model.call_tool("disconnect_calendar", {"account": "bob"})
        assert first.rounds == 1 and first.consent_token is not None
        again = model.call_tool("disconnect_calendar",
                                {"account": "bob", "_confirm": first.consent_token})
        assert again.text == "Calendar of bob disconnected."


SCENARIOS: dict[str, Callable[[TestClient, dict[str, Any]], None]] = {
    "asgi_app.py": asgi_app,
    "auth_server.py": auth_server,
    "bookings.py": bookings,
    "connect.py": connect,
    "payments.py": payments,
    "provision.py": provision,
    "pydantic_server.py": pydantic_server,
    "report.py": report,
    "research.py": research,
}
FILES = sorted(p.name for p in EXAMPLES.glob("*.py") if p.name != "__init__.py")


def test_every_example_has_a_scenario() -> None:
    assert FILES, "no examples found"
    assert set(FILES) == set(SCENARIOS), "add a scenario for each example (and drop stale ones)"


def load(name: str) -> dict[str, Any]:
    """A fresh copy of the example module (its own app and fakes), registered while it is used."""
    module_name = f"_example_under_test_{name[:-3]}"
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # msgspec resolves Form annotations through sys.modules
    spec.loader.exec_module(module)
    return vars(module)


@pytest.mark.parametrize("name", FILES)
def test_example_runs(name: str) -> None:
    ns = load(name)
    app = ns.get("app", ns.get("mcp"))  # a server moved from FastMCP may keep its `mcp` name
    assert isinstance(app, Server)
    with TestClient(app) as client:
        SCENARIOS[name](client, ns)
        for tool in client.request("tools/list")["tools"]:
            assert tool["description"], f"{name}: {tool['name']} has no description"
    del sys.modules[ns["__name__"]]


# -- examples/mounting: the MCP app inside FastAPI and Starlette, over real HTTP (#18) ---------
@pytest.mark.slow
@pytest.mark.parametrize("framework", ["fastapi", "starlette"])
def test_18_mounted_in_a_web_framework_books_a_return(framework: str, tmp_path: Path) -> None:
    import asyncio
    import os
    import subprocess

    import httpx

    from tests.transports.conftest import cli_env, free_port, stop, wait_ready
    from tests.transports.test_connect import book

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**cli_env(), "MRTR_STORE": f"sqlite://{tmp_path / 'store.db'}"}
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", f"examples.mounting.{framework}_app:api",
             "--host", "127.0.0.1", "--port", str(port), "--log-level", "info"],
            cwd=EXAMPLES.parent, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        wait_ready(f"{base}/returns/mcp", process)
        assert httpx.get(f"{base}/health", timeout=10).json() == {"status": "ok"}
        assert asyncio.run(book(f"{base}/returns/mcp")).startswith("Return RMA-0001 booked")
        # DNS rebinding: a page on another site cannot drive the endpoint through the browser.
        evil = httpx.post(f"{base}/returns/mcp", headers={"origin": "https://evil.example"},
                          timeout=10)
        assert evil.status_code == 403
    finally:
        stop(process)
    # The parent ran the MCP app's lifespan, which closed the store: SQLite removes its
    # write-ahead log when the last connection closes, and only then.
    assert os.path.exists(tmp_path / "store.db"), log.read_text()
    assert not os.path.exists(tmp_path / "store.db-wal"), log.read_text()


@pytest.mark.parametrize("args", [[], [f"{sys.executable} examples/bookings.py"]],
                         ids=["in-process", "stdio"])
def test_18_the_connect_example_books_in_process_and_over_stdio(args: list[str],
                                                                tmp_path: Path) -> None:
    import subprocess

    from tests.transports.conftest import cli_env

    env = {**cli_env(), "XDG_STATE_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "examples/client/connect.py", *args],
                          cwd=EXAMPLES.parent, env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == ("result: Return RMA-0001 booked: pickup on "
                                            "2026-08-03, label sent to ann@example.com.")


def test_18_the_migration_guide_sample_runs() -> None:
    docs = EXAMPLES.parent / "docs" / "migrating.md"
    code = docs.read_text().split("```python\n", 1)[1].split("```", 1)[0]
    module = type(sys)("_migrating_sample")
    sys.modules[module.__name__] = module  # msgspec resolves the Form's annotations here
    try:
        exec(compile(code, str(docs), "exec", dont_inherit=True), vars(module))
        with TestClient(vars(module)["app"]) as client:
            flow = client.call_tool("book", {"order_id": "A-1"},
                                    answers={"pickup": {"boxes": 2}, "confirm": True})
            assert flow.rounds == 3 and flow.text == "Booked RMA-A-1."
    finally:
        del sys.modules[module.__name__]
