"""`mrtr serve --auth-issuer` over real HTTP accepts only tokens for itself (#26, acceptance 1).

Black box: a `mrtr serve` subprocess on 127.0.0.1, tokens from the real local authorization
server. A token minted for another port, host or scheme is refused (401) whatever Host,
X-Forwarded-Proto, X-Forwarded-Host and Forwarded headers the client sends, also when the client
is a proxy the server was told to believe; the protected-resource metadata names the configured
resource whatever Host is sent; a public bind without --auth-resource is refused at start-up.
"""

from __future__ import annotations

import itertools
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.auth.authserver import AuthServer
from tests.auth.test_serve_auth import mcp, wait_refusing
from tests.transports.conftest import ROOT, call, cli_env, free_port, post_args, spawn_cli, stop
from tests.transports.test_nginx import NGINX, start_nginx

APP = "examples/auth_server.py:app"
PUBLIC = "https://mcp.example.com/mcp"


class Served:
    """One `mrtr serve` run: its port, URL and stderr (a file: nothing blocks on a pipe)."""

    def __init__(self, auth: AuthServer, log: Path, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = log
        self.flags = flags
        self.auth = auth

    def __enter__(self) -> Served:
        self.stderr = self.log.open("wb")
        self.process = spawn_cli("serve", APP, "--port", str(self.port), "--allow-host",
                                 "mcp.example.com", "--auth-issuer", self.auth.issuer,
                                 "--access-log", *self.flags, env=cli_env(), stderr=self.stderr)
        wait_refusing(self.url, self.process)
        self.client = httpx.Client(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        stop(self.process)
        self.stderr.close()

    def post(self, token: str, headers: dict[str, str], query: str = "") -> httpx.Response:
        args = post_args(call("whoami"), authorization=f"Bearer {token}")
        args["headers"].update(headers)
        return self.client.post(self.url + query, **args)

    def access_line(self, marker: str) -> str:
        """uvicorn's access-log line for the request whose query string held `marker`."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = [line for line in self.log.read_text().splitlines() if marker in line]
            if found:
                return found[0]
            time.sleep(0.05)
        raise AssertionError(f"no access-log line with {marker}: {self.log.read_text()}")


@pytest.fixture(scope="module")
def plain(auth: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Derived resource, forwarded headers believed from no one (the default)."""
    with Served(auth, tmp_path_factory.mktemp("plain") / "stderr") as served:
        yield served


@pytest.fixture(scope="module")
def proxied(auth: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The worst case: the client itself is a proxy the operator named."""
    with Served(auth, tmp_path_factory.mktemp("proxied") / "stderr",
                "--forwarded-allow-ips", "127.0.0.1") as served:
        yield served


def strangers(port: int) -> list[str]:
    """Resource URLs that are not this server's: another port, host, scheme, path, or all."""
    other = free_port()
    return [f"http://127.0.0.1:{other}/mcp", f"http://localhost:{port}/mcp",
            f"http://[::1]:{port}/mcp", f"http://mcp.example.com:{port}/mcp",
            f"https://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}/other",
            f"http://127.0.0.1:{port}", PUBLIC, f"https://localhost:{other}/mcp"]


def disguises(aud: str) -> Iterator[dict[str, str]]:
    """Every combination of headers claiming the request reached `aud`'s URL."""
    parts = urlsplit(aud)
    netloc, scheme = parts.netloc, parts.scheme
    for host, proto, xhost, forwarded in itertools.product(
            (None, netloc), (None, scheme, "https"), (None, netloc),
            (None, f"proto={scheme};host={netloc}", f'for=1.2.3.4;host="{netloc}";proto=https')):
        headers = {"host": host, "x-forwarded-proto": proto, "x-forwarded-host": xhost,
                   "forwarded": forwarded, "x-forwarded-for": "203.0.113.9" if proto else None}
        yield {k: v for k, v in headers.items() if v is not None}


@pytest.mark.parametrize("which", ["plain", "proxied"])
def test_26_a_token_for_another_resource_is_401_under_every_header_combination(
        which: str, request: pytest.FixtureRequest, auth: AuthServer) -> None:
    served: Served = request.getfixturevalue(which)
    ours = served.post(auth.mint(aud=served.url), {})
    assert ours.status_code == 200, ours.text  # the derived resource: http://127.0.0.1:PORT/mcp
    tried = 0
    for aud in strangers(served.port):
        token = auth.mint(aud=aud)
        for headers in disguises(aud):
            answer = served.post(token, headers)
            assert answer.status_code == 401, (aud, headers, answer.text)
            assert answer.headers["www-authenticate"] == (
                f'Bearer error="invalid_token", resource_metadata="http://127.0.0.1:'
                f'{served.port}/.well-known/oauth-protected-resource/mcp"'), (aud, headers)
            tried += 1
    print(f"\n{which}: {tried} requests with a stranger's token, every one 401")
    assert tried == 9 * 36
    # The honest token passes under the same disguises: the headers are simply not read.
    for headers in disguises(PUBLIC):
        assert served.post(auth.mint(aud=served.url), headers).status_code == 200, headers


@pytest.mark.parametrize("which", ["plain", "proxied"])
def test_26_the_metadata_names_the_configured_resource_whatever_host_is_sent(
        which: str, request: pytest.FixtureRequest) -> None:
    served: Served = request.getfixturevalue(which)
    for path in ("/.well-known/oauth-protected-resource/mcp",
                 "/.well-known/oauth-protected-resource"):
        for headers in disguises(f"https://localhost:{free_port()}/mcp"):
            document = served.client.get(f"http://127.0.0.1:{served.port}{path}",
                                         headers=headers)
            assert document.status_code == 200, (path, headers)
            assert document.json()["resource"] == served.url, (path, headers)
        no_token = mcp(served.url, "whoami", None)
        assert f'resource_metadata="http://127.0.0.1:{served.port}/.well-known/' in \
            no_token.headers["www-authenticate"]


def test_26_forwarded_headers_are_believed_only_from_named_proxies(
        plain: Served, proxied: Served, auth: AuthServer) -> None:
    """uvicorn believes X-Forwarded-For from 127.0.0.1 by default; mrtr serve only from
    --forwarded-allow-ips. (The access log shows the client address uvicorn settled on.)"""
    lines = {}
    for served in (plain, proxied):
        marker = secrets.token_hex(6)
        answer = served.post(auth.mint(aud=served.url), {"x-forwarded-for": "198.51.100.77",
                                                         "x-forwarded-proto": "https"},
                             query=f"?probe={marker}")
        assert answer.status_code == 200
        lines[served] = served.access_line(marker)
    assert "access: 127.0.0.1:" in lines[plain] and "198.51.100.77" not in lines[plain]
    assert "198.51.100.77" in lines[proxied], lines[proxied]


def test_26_a_configured_resource_is_the_only_audience_and_what_the_metadata_says(
        auth: AuthServer, tmp_path: Path) -> None:
    with Served(auth, tmp_path / "stderr", "--auth-resource", PUBLIC) as served:
        assert served.post(auth.mint(aud=PUBLIC), {}).status_code == 200
        assert served.post(auth.mint(aud=served.url), {"host": "mcp.example.com",
                                                       "x-forwarded-proto": "https"}
                           ).status_code == 401
        document = httpx.get(f"http://127.0.0.1:{served.port}/.well-known/"
                             "oauth-protected-resource/mcp", headers={"host": "localhost:1"},
                             timeout=10)
        assert document.json()["resource"] == PUBLIC


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_26_a_public_bind_without_a_resource_url_is_refused_at_start_up(host: str) -> None:
    """Refused before anything binds or loads: no traffic leaves 127.0.0.1."""
    env = {k: v for k, v in cli_env().items() if not k.startswith("MRTR_AUTH_")}
    done = subprocess.run(
        [sys.executable, "-m", "mrtr.cli", "serve", APP, "--host", host, "--port", "0",
         "--auth-issuer", "https://login.example.com"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith(f"mrtr serve: --auth-issuer on a non-loopback bind (--host {host}) "
                              "needs --auth-resource URL"), message
    assert "e.g. --auth-resource https://mcp.example.com/mcp" in message
    assert "serving on" not in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx)")
def test_26_behind_nginx_as_deploy_md_configures_it(auth: AuthServer, tmp_path: Path) -> None:
    """nginx in front, mrtr serve with --auth-resource (nginx's URL) and --forwarded-allow-ips:
    tokens for the public URL pass through nginx, tokens for the upstream's own URL do not."""
    upstream, port = free_port(), free_port()
    public = f"http://127.0.0.1:{port}/mcp"  # the URL clients use (loopback: http is allowed)
    direct = f"http://127.0.0.1:{upstream}/mcp"
    with (tmp_path / "serve.log").open("wb") as log:
        server = spawn_cli("serve", APP, "--port", str(upstream), "--auth-issuer", auth.issuer,
                           "--auth-resource", public, "--forwarded-allow-ips", "127.0.0.1",
                           env=cli_env(), stderr=log)
    proxy = None
    try:
        wait_refusing(direct, server)
        proxy = start_nginx(tmp_path, port, [upstream], extra=(
            "            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n"
            "            proxy_set_header X-Forwarded-Proto $scheme;"))
        assert mcp(public, "whoami", auth.mint(aud=public)).status_code == 200
        for aud in (direct, public.replace("http:", "https:")):
            assert mcp(public, "whoami", auth.mint(aud=aud)).status_code == 401, aud
        prm = httpx.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp",
                        headers={"host": "localhost:1"}, timeout=10)
        assert prm.json()["resource"] == public
        refused = mcp(public, "whoami", None)
        assert f'resource_metadata="http://127.0.0.1:{port}/.well-known/' in \
            refused.headers["www-authenticate"]
    finally:
        if proxy is not None:
            stop(proxy)
        stop(server)


def test_26_with_port_0_the_resource_is_the_port_it_bound(auth: AuthServer,
                                                          tmp_path: Path) -> None:
    log = tmp_path / "stderr"
    with log.open("wb") as err:
        server = spawn_cli("serve", APP, "--port", "0", "--auth-issuer", auth.issuer,
                           env=cli_env(), stderr=err)
    try:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"serving on (http://127\.0\.0\.1:(\d+)/mcp)",
                                      log.read_text())):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        url, port = found.group(1), found.group(2)
        assert mcp(url, "whoami", auth.mint(aud=url)).status_code == 200
        for host in (f"localhost:{port}", "127.0.0.1:1"):
            stranger = auth.mint(aud=f"http://{host}/mcp")
            assert mcp(url, "whoami", stranger).status_code == 401
            with_host = post_args(call("whoami"), authorization=f"Bearer {stranger}", host=host)
            assert httpx.post(url, timeout=10, **with_host).status_code == 401, host
    finally:
        stop(server)
