"""`mrtr tools` against an HTTP server that is not (only) MCP: a proxy's or a framework's
refusal in plain text is shown (one line, bounded, escaped), not only its status."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cli.test_call import cli
from tests.client.rogue import serve


async def refuse(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """403 text/plain with a multi-line, long, hostile body."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    body = b"Forbidden:\n  ask the admin\x1b[2J to allow you\n" + b"x" * 1000
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture()
def refusing() -> Iterator[str]:
    yield from serve(refuse)


def test_a_plain_text_refusal_shows_its_body_issue19(refusing: str) -> None:
    out = cli("tools", f"{refusing}/mcp")
    assert (out.returncode, out.stdout) == (1, "")
    shown = "Forbidden: ask the admin\\x1b[2J to allow you " + "x" * 158 + "..."
    assert out.stderr == (f"mrtr: HTTP 403 from {refusing}/mcp: not an MCP reply "
                          f"(text/plain): {shown}\n")
