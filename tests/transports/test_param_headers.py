"""McpApp in-process: `Mcp-Param-*` headers must mirror the tool arguments they annotate.

Runs without ../shared: the conformance suite is not the only test of this rule (#20 M07).
"""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from mrtr import Header, Server
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from tests.transports.conftest import asgi_client, call, post_args, run

server = Server("params")


@server.tool()
async def deploy(region: Annotated[str, Header("Region")],
                 replicas: Annotated[int, Header("Replicas")] = 1) -> str:
    return f"{replicas} in {region}"


def post(arguments: dict[str, Any], **headers: str) -> tuple[int, dict[str, Any]]:
    async def go() -> tuple[int, dict[str, Any]]:
        app = McpApp(Dispatcher(server))
        async with asgi_client(app) as client:
            response = await client.post("/mcp", **post_args(call("deploy", arguments),
                                                              **headers))
            return response.status_code, response.json()

    return run(go())


@pytest.mark.parametrize("headers", [
    {"mcp_param_region": "eu-1", "mcp_param_replicas": "3"},
    {"mcp_param_region": "eu-1", "mcp_param_replicas": "03"},  # integers compare numerically
])
def test_matching_param_headers_are_served(headers: dict[str, str]) -> None:
    status, body = post({"region": "eu-1", "replicas": 3}, **headers)
    assert status == 200
    assert body["result"]["content"] == [{"type": "text", "text": "3 in eu-1"}]


@pytest.mark.parametrize(("headers", "named"), [
    ({"mcp_param_region": "us-1", "mcp_param_replicas": "3"}, "Mcp-Param-Region"),
    ({"mcp_param_region": "eu-1", "mcp_param_replicas": "4"}, "Mcp-Param-Replicas"),
    ({"mcp_param_replicas": "3"}, "Mcp-Param-Region"),  # missing
    ({"mcp_param_region": "EU-1", "mcp_param_replicas": "3"}, "Mcp-Param-Region"),
])
def test_mismatching_param_header_is_400_header_mismatch(headers: dict[str, str],
                                                         named: str) -> None:
    status, body = post({"region": "eu-1", "replicas": 3}, **headers)
    assert status == 400
    assert body["id"] == 1 and "result" not in body
    assert body["error"]["code"] == -32020
    assert named in body["error"]["message"]
