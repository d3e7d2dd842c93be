"""End to end: `mrtr call` obtains a token through the OAuth flow and completes an MRTR flow
against `mrtr serve --auth-issuer ... --auth-audience ...` (the resource server side of #15).

The authorization server is tests/client/auth/authserver.py on 127.0.0.1 (JWTs signed with
PyJWT, JWKS served over HTTP).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pexpect  # type: ignore[import-untyped]
import pytest

from tests.cli.test_auth_args import approve
from tests.client.auth.authserver import AuthServer, LiveAS
from tests.client.rogue import free_port

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = "import sys; from mrtr.cli import main; sys.exit(main())"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    for name in ("MRTR_STATE_KEYS", "MRTR_STORE", "MRTR_CLIENT_ID", "MRTR_CLIENT_SECRET",
                 "MRTR_SCOPES", "MRTR_TOKEN_FILE"):
        env.pop(name, None)
    env["TERM"] = "dumb"  # the line forms these expectations read, not the terminal UI
    return env


pytestmark = pytest.mark.slow


@pytest.fixture()
def protected_bookings(tmp_path: Path) -> Iterator[tuple[AuthServer, str]]:
    with LiveAS() as issuer:
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        server = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, "serve", "--port", str(port), "--store", "memory:",
             "--auth-issuer", issuer.issuer, "--auth-audience", url, "examples.bookings:app"],
            cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                    break
                except httpx.TransportError:
                    assert server.poll() is None, server.stderr.read() if server.stderr else ""
                    assert time.monotonic() < deadline, "mrtr serve did not start"
                    time.sleep(0.1)
            yield issuer, url
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)
            if server.stderr is not None:
                server.stderr.close()


def test_mrtr_call_gets_a_token_and_books_a_return(
        protected_bookings: tuple[AuthServer, str], tmp_path: Path) -> None:
    issuer, url = protected_bookings
    tokens = tmp_path / "tokens.json"
    child = pexpect.spawn(sys.executable, ["-c", LAUNCH, "call", url, "book_return",
                                           "order_id=A-1001", "--no-browser",
                                           "--token-file", str(tokens)],
                          cwd=str(ROOT), env=_env(), encoding="utf-8", timeout=30)
    approve(child)
    child.expect(r"reason \(choice\): ")
    child.sendline("1")
    child.expect(r"email \(string, email\): ")
    child.sendline("ann@example.com")
    child.expect(r"boxes \(integer, 1 to 5\): ")
    child.sendline("2")
    child.expect(r"pickup_date \(string, date\): ")
    child.sendline("2026-08-03")
    child.expect(r"Send\? \[Y/n\] ")
    child.sendline("y")
    child.expect(r"confirm \(y/n\): ")
    child.sendline("y")
    child.expect(r"Return RMA-\d{4} booked: pickup on 2026-08-03")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    # The token went to the resource it was asked for, and a second command needs no browser.
    authorize = next(p for _, path, p in issuer.log if path == "/authorize")
    assert authorize["resource"].rstrip("/") == url.rstrip("/")
    again = subprocess.run([sys.executable, "-c", LAUNCH, "tools", url, "--no-browser",
                            "--token-file", str(tokens)], cwd=ROOT, env=_env(),
                           capture_output=True, text=True, timeout=30)
    assert again.returncode == 0, again.stderr
    assert "book_return" in again.stdout and "Open this URL" not in again.stderr
    assert issuer.paths().count("/authorize") == 1


def test_without_a_token_the_server_answers_401_with_its_metadata(
        protected_bookings: tuple[AuthServer, str]) -> None:
    _, url = protected_bookings
    reply = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
    assert reply.status_code == 401
    assert "resource_metadata=" in reply.headers.get("www-authenticate", "")
