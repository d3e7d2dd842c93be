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


SCENARIOS: dict[str, Callable[[TestClient, dict[str, Any]], None]] = {
    "asgi_app.py": asgi_app,
    "auth_server.py": auth_server,
    "bookings.py": bookings,
    "payments.py": payments,
    "provision.py": provision,
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
    app = ns["app"]
    assert isinstance(app, Server)
    with TestClient(app) as client:
        SCENARIOS[name](client, ns)
        for tool in client.request("tools/list")["tools"]:
            assert tool["description"], f"{name}: {tool['name']} has no description"
    del sys.modules[ns["__name__"]]
