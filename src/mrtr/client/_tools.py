"""The tools last listed, with their `x-mcp-header` maps; invalid annotations drop the tool."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mrtr.protocol import Tool, ToolHeaderError, tool_header_map

from ._errors import ClientError

__all__ = ["ToolIndex"]

log = logging.getLogger("mrtr.client")


class ToolIndex:
    """Header maps by tool name from the last `tools/list`.

    With `check_headers` (HTTP) a tool whose annotations are invalid is dropped, logged, and
    never called (spec: transports/streamable-http, "x-mcp-header").
    """

    def __init__(self, *, check_headers: bool) -> None:
        self._check = check_headers
        self._maps: dict[str, dict[str, str]] | None = None
        self._dropped: dict[str, str] = {}

    @property
    def listed(self) -> bool:
        """True once a tool list has been indexed (and not forgotten since)."""
        return self._maps is not None

    def index(self, tools: list[Tool]) -> list[Tool]:
        """Record `tools`; return those that may be called."""
        maps: dict[str, dict[str, str]] = {}
        dropped: dict[str, str] = {}
        kept: list[Tool] = []
        for tool in tools:
            try:
                maps[tool.name] = tool_header_map(tool.input_schema)
            except ToolHeaderError as exc:
                if self._check:
                    log.warning("dropping tool %r: invalid x-mcp-header: %s", tool.name, exc)
                    dropped[tool.name] = str(exc)
                    continue
                maps[tool.name] = {}
            kept.append(tool)
        self._maps, self._dropped = maps, dropped
        return kept

    def header_map(self, name: str) -> Mapping[str, str]:
        """The `x-mcp-header` map of tool `name` ({} if unknown).

        Raises ClientError for a tool that was dropped for invalid annotations.
        """
        if name in self._dropped:
            raise ClientError(f"tool {name!r} was dropped: {self._dropped[name]}")
        return (self._maps or {}).get(name, {})

    def forget(self) -> None:
        """Force a fresh `tools/list` before the next call."""
        self._maps = None
