"""Lister: cursor pagination and caching hints on the four list methods."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr import Server
from mrtr.server import CachePolicy
from mrtr.server._listing import decode_cursor, encode_cursor
from tests.server.wire import WireClient

app = Server("lists", page_size=2, cache=CachePolicy(ttl_ms=0, scope="public"))
ORDER = (3, 0, 4, 1, 2)  # registration order, deliberately neither sorted nor reversed
for i in ORDER:
    app.tool(f"tool_{i}")(lambda: "x")
    app.prompt(f"prompt_{i}")(lambda: "x")
    app.resource(f"mem://r/{i}")(lambda: "x")
    app.resource(f"mem://t{i}/{{id}}")(lambda id: id)

LISTS = [("tools/list", "tools", "name"), ("prompts/list", "prompts", "name"),
         ("resources/list", "resources", "uri"),
         ("resources/templates/list", "resourceTemplates", "uriTemplate")]
EXPECTED = {"tools/list": [f"tool_{i}" for i in ORDER],
            "prompts/list": [f"prompt_{i}" for i in ORDER],
            "resources/list": [f"mem://r/{i}" for i in ORDER],
            "resources/templates/list": [f"mem://t{i}/{{id}}" for i in ORDER]}


@pytest.fixture()
def client() -> Iterator[WireClient]:
    with WireClient(app) as c:
        yield c


@pytest.mark.parametrize(("method", "field", "ident"), LISTS)
def test_pages_cover_everything_in_order(client: WireClient, method: str, field: str,
                                         ident: str) -> None:
    seen: list[str] = []
    params: dict[str, Any] = {}
    pages = 0
    while True:
        result = client.request(method, params)
        assert (result["ttlMs"], result["cacheScope"]) == (0, "public")
        assert result["resultType"] == "complete"
        assert len(result[field]) <= 2
        seen += [item[ident] for item in result[field]]
        pages += 1
        if "nextCursor" not in result:
            break
        params = {"cursor": result["nextCursor"]}
    assert pages == 3
    assert seen == EXPECTED[method]  # registration order, across pages


@pytest.mark.parametrize("cursor", ["!!", "zzzz", encode_cursor(6), "x" * 40, "b2E"])
def test_invalid_cursor(client: WireClient, cursor: str) -> None:
    reply = client.send("tools/list", {"cursor": cursor})
    assert reply["error"]["code"] == -32602


def test_empty_cursor_is_the_start(client: WireClient) -> None:
    assert client.request("tools/list", {"cursor": ""})["tools"][0]["name"] == "tool_3"


def test_cursor_at_the_end_gives_an_empty_page(client: WireClient) -> None:
    result = client.request("tools/list", {"cursor": encode_cursor(5)})
    assert result["tools"] == [] and "nextCursor" not in result


@given(st.integers(min_value=0, max_value=10**20))
def test_cursor_roundtrip(offset: int) -> None:
    assert decode_cursor(encode_cursor(offset)) == offset
