"""docs/auth-client.md: its example runs against a protected server and is shown verbatim."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import stat
from pathlib import Path

from mrtr.client.auth import HeadlessRedirect
from tests.cli.test_auth_args import LiveMcp

from .authserver import LiveAS

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "auth" / "oauth_client.py"
DOC = ROOT / "docs" / "auth-client.md"


def test_the_oauth_example_lists_the_tools_of_a_protected_server(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("oauth_client_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tokens = tmp_path / "tokens.json"
    with LiveAS() as server, LiveMcp(server) as mcp:
        names = asyncio.run(module.main(mcp.url, HeadlessRedirect(), tokens))
        again = asyncio.run(module.main(mcp.url, HeadlessRedirect(), tokens))
        assert server.paths().count("/authorize") == 1
    assert "book_return" in names and names == again
    assert stat.S_IMODE(os.stat(tokens).st_mode) == 0o600


def test_the_doc_shows_the_example_verbatim() -> None:
    code = EXAMPLE.read_text(encoding="utf-8")
    assert f'```python title="examples/auth/oauth_client.py"\n{code}```' in DOC.read_text()
