"""DPoP proofs (RFC 9449) and the nonce retries at the token endpoint and the resource."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Generator
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mrtr.client.auth import (
    AuthFlow,
    Authorize,
    AuthStep,
    Callback,
    ClientInfo,
    DPoP,
    HTTPSend,
    MemoryTokenStorage,
    OAuthSettings,
    RedirectUri,
)


def pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def verify(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header = jwt.get_unverified_header(proof)
    key = jwt.PyJWK(header["jwk"], algorithm="ES256")
    return header, jwt.decode(proof, key.key, algorithms=["ES256"])


def test_a_proof_is_well_formed_fresh_and_bound_to_the_token() -> None:
    dpop = DPoP(pem(), clock=lambda: 1_000.0)
    url = httpx.URL("https://rs.example/mcp?x=1#f")
    one, two = dpop.proof("POST", url, access_token="tok"), dpop.proof("POST", url)
    header, claims = verify(one)
    assert header["typ"] == "dpop+jwt" and "d" not in header["jwk"]
    assert claims["htm"] == "POST" and claims["htu"] == "https://rs.example/mcp"
    assert claims["iat"] == 1000
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"tok").digest()).rstrip(b"=").decode()
    assert claims["ath"] == digest
    assert verify(two)[1]["jti"] != claims["jti"] and "ath" not in verify(two)[1]


def test_nonces_are_kept_per_origin() -> None:
    dpop = DPoP(pem())
    request = httpx.Request("POST", "https://as.example/token")
    answer = httpx.Response(400, headers={"DPoP-Nonce": "n1"}, request=request)
    assert dpop.remember(answer) and not dpop.remember(answer)  # the same nonce: no retry
    assert verify(dpop.proof("POST", httpx.URL("https://as.example/t")))[1]["nonce"] == "n1"
    assert "nonce" not in verify(dpop.proof("POST", httpx.URL("https://rs.example/mcp")))[1]


AS = "https://as.example"
RS = "https://rs.example/mcp"
ASM = {"issuer": AS, "authorization_endpoint": AS + "/authorize", "token_endpoint": AS + "/token"}


def test_the_flow_retries_with_the_servers_nonces() -> None:
    dpop = DPoP(pem())
    flow = AuthFlow(storage=MemoryTokenStorage(client=ClientInfo(client_id="c")),
                    grant="authorization_code", settings=OAuthSettings(), assertion=None,
                    clock=lambda: 1000.0, dpop=dpop)
    gen: Generator[AuthStep, object, None] = flow.run(httpx.Request("POST", RS))
    use_nonce = json.dumps({"error": "use_dpop_nonce"}).encode()
    sends = [httpx.Response(401, headers={"WWW-Authenticate": "DPoP"}),
             httpx.Response(401, headers={"WWW-Authenticate": 'DPoP error="use_dpop_nonce"',
                                          "DPoP-Nonce": "rs-1"}),
             httpx.Response(200)]
    tokens = [httpx.Response(400, content=use_nonce, headers={"DPoP-Nonce": "as-1"}),
              httpx.Response(200, json={"access_token": "T", "token_type": "DPoP"})]
    seen: list[tuple[str, dict[str, Any]]] = []
    answer: object = None
    while True:
        try:
            step = gen.send(answer)
        except StopIteration:
            break
        if isinstance(step, HTTPSend):
            proof = step.request.headers.get("dpop")
            seen.append(("send " + step.request.headers.get("authorization", "-"),
                         verify(proof)[1] if proof else {}))
            answer = sends.pop(0)
            answer.request = step.request
        elif isinstance(step, RedirectUri):
            answer = "http://127.0.0.1:1/cb"
        elif isinstance(step, Authorize):
            answer = Callback(code="c", state=httpx.URL(step.url).params["state"])
        elif str(step.url) == AS + "/token":
            seen.append(("token", verify(step.headers["dpop"])[1]))
            answer = tokens.pop(0)
            answer.request = step
        else:
            docs = {AS + "/.well-known/oauth-authorization-server": ASM,
                    "https://rs.example/.well-known/oauth-protected-resource/mcp": {
                        "resource": RS, "authorization_servers": [AS]}}
            doc = docs.get(str(step.url))
            answer = httpx.Response(404 if doc is None else 200, json=doc, request=step)
    assert [what for what, _ in seen] == ["send -", "token", "token", "send DPoP T",
                                          "send DPoP T"]
    assert "nonce" not in seen[1][1] and seen[2][1]["nonce"] == "as-1"
    assert "nonce" not in seen[3][1] and seen[4][1]["nonce"] == "rs-1"
    assert seen[3][1]["jti"] != seen[4][1]["jti"]


@pytest.mark.parametrize("token_type", ["Bearer", "bearer"])
def test_an_unbound_token_is_sent_as_bearer(token_type: str) -> None:
    from mrtr.client.auth import Tokens

    flow = AuthFlow(storage=MemoryTokenStorage(), grant="authorization_code",
                    settings=OAuthSettings(), assertion=None, clock=lambda: 0.0,
                    dpop=DPoP(pem()))
    request = httpx.Request("POST", RS)
    flow._present(request, Tokens(access_token="T", token_type=token_type))
    assert request.headers["authorization"] == "Bearer T" and "dpop" not in request.headers
