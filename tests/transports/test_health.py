"""GET /healthz and /readyz: beside the MCP path, before Host checks; 503 when the store is down."""

from __future__ import annotations

import httpx
import pytest

from mrtr.http import McpApp
from mrtr.server import Dispatcher
from mrtr.stores import MemoryStore, RedisStore
from tests.transports import apps
from tests.transports.conftest import asgi_client, free_port, run


async def get(app: McpApp, path: str, method: str = "GET", **headers: str) -> httpx.Response:
    async with asgi_client(app) as client:
        return await client.request(method, path, headers=headers)


def test_healthz_answers_ok_even_for_a_foreign_host() -> None:
    response = run(get(McpApp(Dispatcher(apps.app)), "/healthz", host="10.1.2.3:8000"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response.headers["cache-control"] == "no-store"


def test_readyz_checks_keys_and_store() -> None:
    app = McpApp(Dispatcher(apps.app, store=MemoryStore()))
    response = run(get(app, "/readyz", host="10.1.2.3:8000"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"keys": "ok", "store": "ok"}}


def test_readyz_without_a_store_is_ready() -> None:
    response = run(get(McpApp(Dispatcher(apps.app, store=None)), "/readyz"))
    assert response.status_code == 200
    assert response.json()["checks"] == {"keys": "ok", "store": "none"}


def test_readyz_is_503_when_the_store_is_unreachable(caplog: pytest.LogCaptureFixture) -> None:
    # A real Redis client aimed at a closed port on 127.0.0.1: connection refused.
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5)
    app = McpApp(Dispatcher(apps.app, store=store))
    response = run(get(app, "/readyz"))
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable",
                               "checks": {"keys": "ok", "store": "unreachable"}}
    assert "127.0.0.1" not in response.text  # the reason is logged, not sent
    assert any("store unreachable" in r.getMessage() for r in caplog.records)


def test_probes_take_get_and_head_only() -> None:
    app = McpApp(Dispatcher(apps.app))
    assert run(get(app, "/healthz", "HEAD")).status_code == 200
    refused = run(get(app, "/readyz", "POST"))
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"


def test_probes_can_be_turned_off() -> None:
    app = McpApp(Dispatcher(apps.app), health=False)
    assert run(get(app, "/healthz")).status_code == 404
