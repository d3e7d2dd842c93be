"""`mrtr serve --auth-dpop require` end to end (#32): real uvicorn, real httpx, real stores.

The mrtr client (OAuth client credentials with a DPoP key) runs a multi-round flow against the
example server; its token is then refused as a bearer token; a proof replayed on the same
replica and on another replica sharing SQLite or Redis is refused; so is a proof for another
URL or method; the nonce challenge and the retry with the nonce work.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mrtr.client import Client, Handlers, HTTPTransport
from mrtr.client.auth import ClientInfo, DPoP, MemoryTokenStorage, OAuth
from mrtr.protocol import ElicitRequestParams, ElicitResult
from mrtr.server import generate_key
from tests.auth.authserver import AuthServer
from tests.stores.conftest import REDIS_SERVER, start_redis, stop_redis
from tests.transports.conftest import call, cli_env, free_port, post_args, spawn_cli, stop

pytestmark = pytest.mark.slow


def pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def serve(auth: AuthServer, port: int, resource: str, *extra: str,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    server = spawn_cli("serve", "examples/auth_server.py:app", "--port", str(port),
                       "--auth-issuer", auth.issuer, "--auth-resource", resource,
                       "--auth-dpop", "require", "--log-level", "warning", *extra,
                       env={**cli_env(), **(env or {})})
    deadline = time.monotonic() + 30
    while True:
        assert server.poll() is None and time.monotonic() < deadline, "mrtr serve did not start"
        try:
            if post(f"http://127.0.0.1:{port}/mcp").status_code == 401:
                return server
        except httpx.TransportError:
            time.sleep(0.1)


def post(url: str, token: str | None = None, proof: str | None = None, *,
         scheme: str = "DPoP", name: str = "whoami", method: str = "POST") -> httpx.Response:
    args = post_args(call(name))
    if token is not None:
        args["headers"]["authorization"] = f"{scheme} {token}"
    if proof is not None:
        args["headers"]["dpop"] = proof
    return httpx.request(method, url, timeout=10, **args)


async def accept(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirm": True})


def oauth(dpop: DPoP, storage: MemoryTokenStorage) -> OAuth:
    return OAuth(grant="client_credentials", storage=storage, dpop=dpop,
                 client=ClientInfo(client_id="service", client_secret="service-secret"))


@pytest.fixture()
def replicas(auth: AuthServer, tmp_path: Path, request: pytest.FixtureRequest
             ) -> Iterator[tuple[str, str]]:
    """Two `mrtr serve` replicas sharing a store and keys (one public resource URL), and
    the URLs they are reached at."""
    kind = request.param
    redis = None
    if kind == "sqlite":
        store = f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        if REDIS_SERVER is None:
            pytest.skip("redis-server is not installed")
        redis, store = start_redis(tmp_path)
    ports = free_port(), free_port()
    resource = f"http://127.0.0.1:{ports[0]}/mcp"  # what a load balancer would publish
    env = {"MRTR_STATE_KEYS": generate_key(), "MRTR_STORE": store}
    servers = [serve(auth, port, resource, "--auth-dpop-nonce", env=env) for port in ports]
    try:
        yield resource, f"http://127.0.0.1:{ports[1]}/mcp"
    finally:
        for server in servers:
            stop(server)
        if redis is not None:
            stop_redis(redis)


def test_32_the_mrtr_client_runs_a_flow_with_dpop_and_the_token_is_no_bearer_token(
        auth: AuthServer) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = serve(auth, port, url, "--auth-dpop-nonce")
    try:
        dpop, storage = DPoP(pem()), MemoryTokenStorage()

        async def flow() -> list[str]:
            transport = HTTPTransport(url, auth=oauth(dpop, storage))
            async with Client(transport, handlers=Handlers(elicitation=accept)) as client:
                texts = []
                for name, arguments in (("whoami", {}),
                                        ("add_note", {"title": "g", "text": "milk"}),
                                        ("delete_note", {"title": "g"})):  # two rounds
                    result = await client.call_tool(name, arguments)
                    texts.append(result.content[0].text)  # type: ignore[union-attr]
                return texts

        texts = asyncio.run(asyncio.wait_for(flow(), 60))
        assert texts[0].startswith("You are service (client service)")
        assert texts[1:] == ["Added 'g'.", "Deleted 'g'."]
        tokens = storage.load_tokens()
        assert tokens is not None and tokens.token_type == "DPoP"
        # The same token without its key: refused as a bearer token, and with a proof of
        # another key.
        bearer = post(url, tokens.access_token, scheme="Bearer")
        assert bearer.status_code == 401 and bearer.headers["www-authenticate"].startswith(
            'DPoP error="invalid_token"')
        thief = DPoP(pem())
        stolen = post(url, tokens.access_token,
                      thief.proof("POST", httpx.URL(url), access_token=tokens.access_token))
        assert stolen.status_code == 401
    finally:
        stop(server)


def _proof(dpop: DPoP, url: str, token: str, method: str = "POST", at: str | None = None
           ) -> str:
    return dpop.proof(method, httpx.URL(at or url), access_token=token)


def _token(auth: AuthServer, resource: str, dpop: DPoP) -> str:
    token_url = httpx.URL(f"{auth.issuer}/token")
    issued = httpx.post(token_url, auth=("service", "service-secret"), timeout=10,
                        headers={"dpop": dpop.proof("POST", token_url)},
                        data={"grant_type": "client_credentials", "scope": "notes:read",
                              "resource": resource}).json()
    assert issued["token_type"] == "DPoP"
    token: str = issued["access_token"]
    return token


def _with_nonce(url: str, token: str, dpop: DPoP, **kwargs: Any) -> httpx.Response:
    """The nonce challenge, then the retry with the nonce (as the RFC 9449 §9 client does)."""
    first = post(url, token, _proof(dpop, url, token), **kwargs)
    assert first.status_code == 401 and 'error="use_dpop_nonce"' in first.headers[
        "www-authenticate"]
    assert dpop.remember(first)
    return first


@pytest.mark.parametrize("replicas", ["sqlite", "redis"], indirect=True)
def test_32_a_proof_is_single_use_across_replicas(auth: AuthServer,
                                                  replicas: tuple[str, str]) -> None:
    one, two = replicas  # one is also the resource URL both replicas check htu against
    dpop = DPoP(pem())
    token = _token(auth, one, dpop)
    _with_nonce(one, token, dpop)
    proof = _proof(dpop, one, token)  # now with the nonce replica one issued
    assert post(one, token, proof).status_code == 200
    replayed = post(one, token, proof)
    assert replayed.status_code == 401 and 'error="invalid_dpop_proof"' in replayed.headers[
        "www-authenticate"]
    assert post(two, token, proof).status_code == 401  # the other replica saw it too
    fresh = _proof(dpop, one, token)  # a new proof, the nonce of replica one: shared keys
    assert post(two, token, fresh).status_code == 200
    # Another URL, another method: refused, never a 500.
    other_url = post(one, token, _proof(dpop, one, token, at=one.replace("/mcp", "/other")))
    assert other_url.status_code == 401
    other_method = post(one, token, _proof(dpop, one, token, method="PUT"))
    assert other_method.status_code == 401
    assert post(one, token, _proof(dpop, one, token)).status_code == 200
