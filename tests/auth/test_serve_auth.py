"""`mrtr serve --auth-*` and MRTR_AUTH_*: the example served as a resource server (#15)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from mrtr.cli import main
from mrtr.http import McpApp
from tests.auth.authserver import AuthServer
from tests.transports.conftest import ROOT, call, cli_env, free_port, post_args, spawn_cli, stop


def mcp(url: str, name: str, token: str | None = None, **arguments: Any) -> httpx.Response:
    args = post_args(call(name, arguments))
    if token is not None:
        args["headers"]["authorization"] = f"Bearer {token}"
    return httpx.post(url, timeout=10, **args)


def wait_refusing(url: str, server: subprocess.Popen[bytes]) -> None:
    """Wait until the server answers 401 to a request without a token (auth is on)."""
    deadline = time.monotonic() + 30
    while True:
        assert server.poll() is None and time.monotonic() < deadline, "mrtr serve did not start"
        try:
            if mcp(url, "whoami").status_code == 401:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)


@pytest.mark.slow
def test_15_mrtr_serve_auth_issuer_end_to_end(auth: AuthServer) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**cli_env(), "MRTR_AUTH_SCOPES": "notes:read"}  # flags and env vars combine
    server = spawn_cli("serve", "examples/auth_server.py:app", "--port", str(port),
                       "--auth-issuer", auth.issuer, "--log-level", "warning", env=env)
    try:
        wait_refusing(url, server)
        metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
        assert mcp(url, "whoami").headers["www-authenticate"] == (
            f'Bearer scope="notes:read", resource_metadata="{metadata_url}"')
        metadata = httpx.get(metadata_url, timeout=10).json()
        assert metadata["authorization_servers"] == [auth.issuer]
        assert metadata["scopes_supported"] == ["notes:read", "notes:write"]
        # A client-credentials token for this resource (RFC 8707), from the real token endpoint.
        issued = httpx.post(f"{auth.issuer}/token", auth=("service", "service-secret"), data={
            "grant_type": "client_credentials", "scope": "notes:read", "resource": url},
            timeout=10).json()
        token = issued["access_token"]
        who = mcp(url, "whoami", token)
        assert who.json()["result"]["content"][0]["text"] == (
            "You are service (client service); scopes: notes:read.")
        denied = mcp(url, "delete_note", token, title="x")
        assert denied.status_code == 403
        assert 'scope="notes:read notes:write"' in denied.headers["www-authenticate"]
        # Step up, then `mrtr call` runs a two-round flow (a confirmation) with that token.
        stepped = httpx.post(f"{auth.issuer}/token", auth=("service", "service-secret"), data={
            "grant_type": "client_credentials", "scope": "notes:read notes:write",
            "resource": url}, timeout=10).json()["access_token"]
        bearer = ["--header", f"Authorization: Bearer {stepped}"]
        assert mcp(url, "add_note", stepped, title="g", text="milk").status_code == 200
        flow = subprocess.run([sys.executable, "-m", "mrtr.cli", "call", url, "delete_note",
                               "title=g", *bearer], input="y\n", capture_output=True,
                              text=True, env=cli_env(), cwd=ROOT, timeout=60)
        assert (flow.returncode, flow.stdout.strip()) == (0, "Deleted 'g'."), flow.stderr
        assert "Delete the note 'g'?" in flow.stderr
    finally:
        stop(server)


def test_15_auth_options_without_an_issuer_are_a_usage_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for var in [k for k in os.environ if k.startswith("MRTR_AUTH_")]:
        monkeypatch.delenv(var)
    assert main(["serve", "examples/auth_server.py:app", "--auth-audience", "x"]) == 2
    assert "--auth-issuer" in capsys.readouterr().err


def test_15_a_plain_http_issuer_off_loopback_is_refused(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_AUTH_ISSUER", "http://login.example.com")
    assert main(["serve", "examples/auth_server.py:app"]) == 2
    assert "https" in capsys.readouterr().err


def test_15_auth_with_stdio_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "examples/auth_server.py:app", "--stdio",
                 "--auth-issuer", "https://login.example.com"]) == 2
    assert "HTTP only" in capsys.readouterr().err


def test_15_workers_get_the_auth_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from mrtr.auth import AuthSettings, ResourceServer
    from mrtr.server import generate_key
    from mrtr.serving import _serve

    settings = AuthSettings(issuer="https://login.example.com", scopes=("notes:read",))
    monkeypatch.setenv("MRTR_SERVE_TARGET", "examples.auth_server:app")
    monkeypatch.setenv("MRTR_STATE_KEYS", generate_key())
    monkeypatch.setenv("MRTR_SERVE_AUTH", settings.to_json())
    app = _serve._worker_app()
    assert isinstance(app, McpApp) and isinstance(app.guard, ResourceServer)
    assert app.guard.settings == settings
    monkeypatch.setenv("MRTR_SERVE_AUTH", "")
    plain = _serve._worker_app()
    assert isinstance(plain, McpApp) and plain.authenticator is None


def test_15_the_example_create_app_guards_with_the_issuer(
        auth: AuthServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from examples import auth_server
    from tests.auth.conftest import RESOURCE, tool

    monkeypatch.setenv("MRTR_AUTH_ISSUER", auth.issuer)
    monkeypatch.delenv("MRTR_AUTH_RESOURCE", raising=False)
    app = auth_server.create_app()
    assert tool(app, "list_notes", None).status_code == 401
    reader = auth.mint(aud=RESOURCE, sub="ann", scope="notes:read")
    assert tool(app, "list_notes", reader).json()["result"]["content"][0]["text"] == "No notes."
    assert tool(app, "delete_note", reader, arguments={"title": "x"}).status_code == 403
    writer = auth.mint(aud=RESOURCE, sub="ann", scope="notes:read notes:write")
    done = tool(app, "delete_note", writer, arguments={"title": "x"}).json()["result"]
    assert done["content"][0]["text"] == "No note 'x'."
