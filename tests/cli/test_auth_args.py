"""`mrtr call` with OAuth: the options, and the real program through a real authorization flow."""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pexpect  # type: ignore[import-untyped]
import pytest

from mrtr.cli._auth_args import add_auth_options, auth_from, default_token_file
from mrtr.client.auth import FileTokenStorage, MemoryTokenStorage
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from tests.cli import app as cli_app
from tests.cli.test_call import fill_return_form, spawn
from tests.client.auth.authserver import AuthServer, LiveAS, authenticator_for
from tests.transports.conftest import LiveServer


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_auth_options(parser)
    return parser.parse_args(argv)


def test_no_auth_means_no_oauth() -> None:
    assert auth_from(parse("--no-auth"), "http://h/mcp", {}) is None


def test_the_default_token_file_is_per_server_under_xdg_state() -> None:
    env = {"XDG_STATE_HOME": "/s", "HOME": "/h"}
    one, two = default_token_file("http://a/mcp", env), default_token_file("http://b/mcp", env)
    assert one.parent == Path("/s/mrtr/tokens") and one != two
    assert default_token_file("http://a/mcp", {"HOME": "/h"}).parent == \
        Path("/h/.local/state/mrtr/tokens")


def test_options_and_environment_reach_the_oauth_client(tmp_path: Path) -> None:
    env = {"MRTR_CLIENT_ID": "cid", "MRTR_CLIENT_SECRET": "s3", "MRTR_SCOPES": "a b",
           "MRTR_TOKEN_FILE": str(tmp_path / "t.json")}
    auth = auth_from(parse(), "http://h/mcp", env)
    assert auth is not None
    storage = auth.flow.storage
    assert isinstance(storage, FileTokenStorage) and storage.path == tmp_path / "t.json"
    client = storage.load_client()
    assert client is not None and (client.client_id, client.client_secret) == ("cid", "s3")
    assert auth.flow.settings.scopes == ("a", "b")
    flags = auth_from(parse("--scope", "x", "--token-file", "-", "--client-id", "c2"),
                      "http://h/mcp", env)
    assert flags is not None and flags.flow.settings.scopes == ("x",)
    assert isinstance(flags.flow.storage, MemoryTokenStorage)


def test_client_credentials_needs_a_client_and_a_secret() -> None:
    with pytest.raises(ValueError, match="--client-credentials needs"):
        auth_from(parse("--client-credentials", "--client-id", "c"), "http://h/mcp", {})
    auth = auth_from(parse("--client-credentials", "--client-id", "c", "--client-secret", "s",
                           "--token-file", "-"), "http://h/mcp", {})
    assert auth is not None and auth.flow.grant == "client_credentials"


class LiveMcp:
    """tests.cli.app behind McpApp with an OAuth authenticator, on uvicorn (127.0.0.1)."""

    def __init__(self, server: AuthServer) -> None:
        self.auth_server = server
        self.app = McpApp(Dispatcher(cli_app.app))
        self.live = LiveServer(self.app)
        self.url = ""

    def __enter__(self) -> LiveMcp:
        self.url = f"{self.live.__enter__().url}/mcp"
        self.app.authenticator = authenticator_for(self.auth_server, self.url)
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)


@pytest.fixture()
def protected() -> Iterator[tuple[AuthServer, LiveMcp]]:
    with LiveAS() as server, LiveMcp(server) as mcp:
        yield server, mcp


def approve(child: pexpect.spawn) -> None:
    """Play the user's browser: open the printed URL, follow the redirect to the loopback."""
    child.expect(r"Open this URL to authorize:\s+(http\S+)")
    url = child.match.group(1)
    reply = httpx.get(url, follow_redirects=False, timeout=10)
    assert reply.status_code == 302
    location = reply.headers["location"]
    assert location.startswith("http://127.0.0.1:") and "/callback?" in location
    landed = httpx.get(location, timeout=10)
    assert landed.status_code == 200 and "close this window" in landed.text


@pytest.mark.slow
def test_mrtr_call_authorizes_then_runs_an_mrtr_flow(
        protected: tuple[AuthServer, LiveMcp], tmp_path: Path) -> None:
    server, mcp = protected
    tokens = tmp_path / "tokens.json"
    child = spawn("call", mcp.url, "book_return", "order_id=A1", "--no-browser",
                  "--token-file", str(tokens))
    approve(child)
    fill_return_form(child)
    child.sendline("y")
    child.expect("Return booked: A1, 2 box")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert stat.S_IMODE(os.stat(tokens).st_mode) == 0o600
    # The next command reuses the stored token: no URL to open, no new authorization.
    child = spawn("tools", mcp.url, "--no-browser", "--token-file", str(tokens))
    child.expect("book_return")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "Open this URL" not in (child.before or "")
    assert server.paths().count("/authorize") == 1


def test_no_auth_against_a_protected_server_fails_clearly(
        protected: tuple[AuthServer, LiveMcp]) -> None:
    _, mcp = protected
    child = spawn("tools", mcp.url, "--no-auth")
    child.expect("Unauthorized")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert "/authorize" not in protected[0].paths()
