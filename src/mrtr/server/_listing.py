"""The four list methods: cursor pagination and caching hints over the registry."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, TypeVar

from mrtr.errors import InvalidParams
from mrtr.protocol import (
    UNSET,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
)
from mrtr.server._registry import Server

__all__ = ["Lister", "decode_cursor", "encode_cursor"]

T = TypeVar("T")


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o{offset}".encode()).decode().rstrip("=")


def decode_cursor(cursor: object) -> int:
    """The offset in an opaque cursor; "" and absent mean the start. Raises InvalidParams."""
    if cursor is UNSET or cursor is None or cursor == "":
        return 0
    if not isinstance(cursor, str) or len(cursor) > 32:
        raise InvalidParams("Invalid cursor")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise InvalidParams("Invalid cursor") from exc
    if not text.startswith("o") or not text[1:].isdigit():
        raise InvalidParams("Invalid cursor")
    return int(text[1:])


class Lister:
    """Serves tools/list, prompts/list, resources/list and resources/templates/list."""

    def __init__(self, server: Server, meta: dict[str, Any]) -> None:
        self._server = server
        self._meta = meta

    def _page(self, items: Sequence[T], request: Any) -> tuple[list[T], str | Any]:
        start = decode_cursor(request.params.cursor)
        if start > len(items):
            raise InvalidParams("Invalid cursor")
        end = start + self._server.page_size
        more = encode_cursor(end) if end < len(items) else UNSET
        return list(items[start:end]), more

    def _hints(self) -> dict[str, Any]:
        cache = self._server.cache
        return {"ttl_ms": cache.ttl_ms, "cache_scope": cache.scope, "meta": self._meta}

    async def tools(self, request: Any, peer: object, sink: object) -> ListToolsResult:
        entries = [e.tool for e in self._server.tables.tools.values()]
        page, more = self._page(entries, request)
        return ListToolsResult(tools=page, next_cursor=more, **self._hints())

    async def prompts(self, request: Any, peer: object, sink: object) -> ListPromptsResult:
        entries = [e.prompt for e in self._server.tables.prompts.values()]
        page, more = self._page(entries, request)
        return ListPromptsResult(prompts=page, next_cursor=more, **self._hints())

    async def resources(self, request: Any, peer: object, sink: object) -> ListResourcesResult:
        entries = [e.resource for e in self._server.tables.resources.values()]
        page, more = self._page(entries, request)
        return ListResourcesResult(resources=page, next_cursor=more, **self._hints())  # type: ignore[arg-type]

    async def templates(
        self, request: Any, peer: object, sink: object
    ) -> ListResourceTemplatesResult:
        entries = [e.resource for e in self._server.tables.templates.values()]
        page, more = self._page(entries, request)
        return ListResourceTemplatesResult(
            resource_templates=page, next_cursor=more, **self._hints()  # type: ignore[arg-type]
        )
