"""DPoP on the resource server (#32, RFC 9449): each §4.3 check, binding, replay, nonces, modes.

In process (httpx.ASGITransport into McpApp), with the real local authorization server's keys:
each test sends a request that one check alone must refuse, and a control request shows the
same setup accepts a proof without that fault.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from mrtr.auth import AuthSettings, ResourceServer
from mrtr.http import McpApp
from mrtr.server import Dispatcher, Sealer
from mrtr.stores import Claim, MemoryStore, StoreUnavailable
from tests.auth.authserver import AuthServer, jwk_thumbprint
from tests.auth.conftest import secure_app, settings
from tests.transports.conftest import call, post_args, run

RESOURCE = "http://127.0.0.1:8000/mcp"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Key:
    """A client's DPoP key pair, and proofs made with it: any part can be left out or wrong."""

    def __init__(self, alg: str = "ES256") -> None:
        self.alg = alg
        if alg.startswith("ES"):
            self.private: Any = ec.generate_private_key(ec.SECP256R1())
            self.jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        elif alg == "EdDSA":
            self.private = ed25519.Ed25519PrivateKey.generate()
            self.jwk = jwt.algorithms.OKPAlgorithm.to_jwk(self.private.public_key(),
                                                          as_dict=True)
        else:
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key(),
                                                          as_dict=True)

    @property
    def jkt(self) -> str:
        return jwk_thumbprint(self.jwk)

    def proof(self, token: str | None = None, *, htm: str = "POST", htu: str = RESOURCE,
              iat: float | None = None, drop: tuple[str, ...] = (), signer: Any = None,
              header: dict[str, Any] | None = None, **claims: Any) -> str:
        body: dict[str, Any] = {"jti": secrets.token_urlsafe(12), "htm": htm, "htu": htu,
                                "iat": int(time.time() if iat is None else iat), **claims}
        if token is not None and "ath" not in claims:
            body["ath"] = _b64(hashlib.sha256(token.encode()).digest())
        heads: dict[str, Any] = {"typ": "dpop+jwt", "jwk": self.jwk, **(header or {})}
        for name in drop:
            body.pop(name, None)
            heads.pop(name, None)
        return jwt.encode(body, signer or self.private, algorithm=self.alg, headers=heads)


def app_with(auth: AuthServer, mode: str = "require", *, store: Any = "own",
             **overrides: Any) -> McpApp:
    server = secure_app()[0]
    dispatcher = Dispatcher(server) if store == "own" else Dispatcher(server, store=store)
    guard = ResourceServer(settings(auth, dpop=mode, resource=RESOURCE, **overrides))
    return McpApp(dispatcher, authenticator=guard)


def bound(auth: AuthServer, key: Key) -> str:
    return auth.mint(aud=RESOURCE, scope="notes:read", cnf={"jkt": key.jkt})


def send(app: McpApp, token: str | None = None, *proofs: str, scheme: str = "DPoP",
         method: str = "POST") -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
            args = post_args(call("whoami"))
            headers = list(args["headers"].items())
            if token is not None:
                headers.append(("authorization", f"{scheme} {token}"))
            headers += [("dpop", p) for p in proofs]
            return await c.request(method, "/mcp", content=args["content"], headers=headers)
    return run(go())


def refused_with(reply: httpx.Response, error: str) -> bool:
    challenge = reply.headers.get("www-authenticate", "")
    return reply.status_code == 401 and challenge.startswith(f'DPoP error="{error}"')


# -- a good proof, every algorithm ----------------------------------------------------------------

@pytest.mark.parametrize("alg", ["ES256", "RS256", "PS256", "EdDSA"])
def test_a_proof_with_its_bound_token_is_accepted(auth: AuthServer, alg: str) -> None:
    app, key = app_with(auth), Key(alg)
    token = bound(auth, key)
    reply = send(app, token, key.proof(token))
    assert reply.status_code == 200, reply.text
    assert "service" in reply.json()["result"]["content"][0]["text"]


# -- RFC 9449 §4.3, one check each ----------------------------------------------------------------

def _unsigned(key: Key, token: str, alg: str) -> str:
    header = {"typ": "dpop+jwt", "alg": alg, "jwk": key.jwk}
    body = {"jti": "j1", "htm": "POST", "htu": RESOURCE, "iat": int(time.time())}
    encode = lambda v: _b64(json.dumps(v).encode())  # noqa: E731
    return f"{encode(header)}.{encode(body)}."


# check -> (the proofs sent, the reason the log must give: another check refusing the same
# request would log another reason, so each case fails without its own check)
CHECKS: dict[str, tuple[Callable[[Key, str], list[str]], str]] = {
    "1 two DPoP headers": (lambda k, t: [k.proof(t), k.proof(t)], "more than one DPoP header"),
    "2 not a JWT": (lambda k, t: ["not-a-jwt"], "not a single compact JWT"),
    "3 no jti": (lambda k, t: [k.proof(t, drop=("jti",))], "jti missing"),
    "3 no htm": (lambda k, t: [k.proof(t, drop=("htm",))], "htm or htu missing"),
    "3 no htu": (lambda k, t: [k.proof(t, drop=("htu",))], "htm or htu missing"),
    "3 no iat": (lambda k, t: [k.proof(t, drop=("iat",))], "iat missing"),
    "3 no jwk": (lambda k, t: [k.proof(t, drop=("jwk",))], "no jwk header"),
    "4 typ JWT": (lambda k, t: [k.proof(t, header={"typ": "JWT"})], "is not dpop+jwt"),
    "5 alg none": (lambda k, t: [_unsigned(k, t, "none")], "alg 'none' is not accepted"),
    "5 alg HS256": (lambda k, t: [jwt.encode(
        {"jti": "j", "htm": "POST", "htu": RESOURCE, "iat": int(time.time())},
        k.jkt * 2, algorithm="HS256", headers={"typ": "dpop+jwt", "jwk": k.jwk})],
        "alg 'HS256' is not accepted"),
    "6 signed by another key": (lambda k, t: [k.proof(t, signer=Key().private)],
                                "signature: InvalidSignatureError"),
    "7 a private key in jwk": (lambda k, t: [k.proof(t, header={"jwk": {
        **k.jwk, "d": jwt.algorithms.ECAlgorithm.to_jwk(k.private, as_dict=True)["d"]}})],
        "the jwk holds private key material"),
    "8 htm GET": (lambda k, t: [k.proof(t, htm="GET")], "htm 'GET' is not POST"),
    "9 htu another path": (lambda k, t: [k.proof(t, htu="http://127.0.0.1:8000/other")],
                           "htu 'http://127.0.0.1:8000/other' is not"),
    "9 htu another host": (lambda k, t: [k.proof(t, htu="http://evil.example/mcp")],
                           "htu 'http://evil.example/mcp' is not"),
    "11 iat too old": (lambda k, t: [k.proof(t, iat=time.time() - 400)], "s old (window 300s)"),
    "11 iat in the future": (lambda k, t: [k.proof(t, iat=time.time() + 120)],
                             "s in the future"),
    "12 no ath": (lambda k, t: [k.proof(None)], "ath is not the hash of this access token"),
    "12 ath of another token": (lambda k, t: [k.proof(t + "x")],
                                "ath is not the hash of this access token"),
    "12 ath not ASCII": (lambda k, t: [k.proof(t, ath="é" * 43)],
                         "ath is not the hash of this access token"),
}


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_4_3_each_check_refuses_what_it_guards(auth: AuthServer, check: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    app, key = app_with(auth), Key()
    token = bound(auth, key)
    proofs, reason = CHECKS[check]
    with caplog.at_level(logging.INFO, "mrtr.auth"):
        reply = send(app, token, *proofs(key, token))
    assert refused_with(reply, "invalid_dpop_proof"), (reply.status_code, reply.headers)
    assert reply.json()["error"]["message"] == "Unauthorized: invalid DPoP proof"
    logged = [r.getMessage() for r in caplog.records if "DPoP proof refused" in r.getMessage()]
    assert len(logged) == 1 and reason in logged[0], logged
    assert send(app, token, key.proof(token)).status_code == 200  # the control


def test_4_3_htu_ignores_query_and_fragment_and_default_ports(auth: AuthServer) -> None:
    app, key = app_with(auth), Key()
    token = bound(auth, key)
    for htu in ("http://127.0.0.1:8000/mcp?x=1#f", "HTTP://127.0.0.1:8000/mcp"):
        assert send(app, token, key.proof(token, htu=htu)).status_code == 200


def test_4_3_10_a_nonce_is_asked_for_then_accepted(auth: AuthServer) -> None:
    app, key = app_with(auth, dpop_nonce=True), Key()
    token = bound(auth, key)
    first = send(app, token, key.proof(token))
    assert refused_with(first, "use_dpop_nonce")
    nonce = first.headers["dpop-nonce"]
    assert send(app, token, key.proof(token, nonce=nonce)).status_code == 200
    forged = send(app, token, key.proof(token, nonce=nonce[:-4] + "AAAA"))
    assert refused_with(forged, "use_dpop_nonce") and forged.headers["dpop-nonce"] != nonce
    # Another app (a replica) with other keys does not take it; with the same keys it does.
    other = app_with(auth, dpop_nonce=True)
    assert refused_with(send(other, token, key.proof(token, nonce=nonce)), "use_dpop_nonce")
    other.dispatcher = Dispatcher(secure_app()[0], sealer=app.dispatcher.sealer)
    assert send(other, token, key.proof(token, nonce=nonce)).status_code == 200


def test_4_3_10_a_nonce_expires_with_the_window(auth: AuthServer) -> None:
    now = [time.time()]
    guard = ResourceServer(settings(auth, dpop="require", resource=RESOURCE, dpop_nonce=True,
                                    dpop_window=60), clock=lambda: now[0])
    sealer = Sealer(keys=[secrets.token_bytes(32)], audience="secure", clock=lambda: now[0])
    app, key = McpApp(Dispatcher(secure_app()[0], sealer=sealer), authenticator=guard), Key()
    token = bound(auth, key)
    nonce = send(app, token, key.proof(token)).headers["dpop-nonce"]
    assert send(app, token, key.proof(token, nonce=nonce)).status_code == 200
    now[0] += 61  # the proof is fresh (its iat is now), its nonce is not
    stale = send(app, token, key.proof(token, iat=now[0], nonce=nonce))
    assert refused_with(stale, "use_dpop_nonce")
    assert send(app, token, key.proof(token, iat=now[0], nonce=stale.headers["dpop-nonce"])
                ).status_code == 200


def test_4_3_12_the_token_must_be_bound_to_the_proof_key(auth: AuthServer) -> None:
    app, key, other = app_with(auth), Key(), Key()
    token = bound(auth, other)
    assert refused_with(send(app, token, key.proof(token)), "invalid_token")
    unbound = auth.mint(aud=RESOURCE, scope="notes:read")
    assert refused_with(send(app, unbound, key.proof(unbound)), "invalid_token")
    assert send(app, token, other.proof(token)).status_code == 200
    odd = auth.mint(aud=RESOURCE, scope="notes:read", cnf={"jkt": "é" * 43})
    assert refused_with(send(app, odd, key.proof(odd)), "invalid_token")  # never a 500


def test_a_replayed_proof_is_refused(auth: AuthServer) -> None:
    app, key = app_with(auth), Key()
    token = bound(auth, key)
    proof = key.proof(token)
    assert send(app, token, proof).status_code == 200
    assert refused_with(send(app, token, proof), "invalid_dpop_proof")
    # The same jti from another key is another proof (jti values are per key).
    other = Key()
    other_token = bound(auth, other)
    jti = jwt.decode(proof, options={"verify_signature": False})["jti"]
    assert send(app, other_token, other.proof(other_token, jti=jti)).status_code == 200


def test_a_refused_proof_spends_no_jti(auth: AuthServer) -> None:
    app, key = app_with(auth), Key()
    token = bound(auth, key)
    proof = key.proof(token, jti="kept")
    assert send(app, token + "x", proof).status_code == 401  # the token fails, not the proof
    assert send(app, token, proof).status_code == 200


class DownStore(MemoryStore):
    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        raise StoreUnavailable("the store is down")


def test_a_store_down_is_a_503_not_a_500(auth: AuthServer) -> None:
    app, key = app_with(auth, store=DownStore()), Key()
    token = bound(auth, key)
    reply = send(app, token, key.proof(token))
    assert reply.status_code == 503 and "retry-after" in reply.headers


# -- bearer use, modes, challenges, metadata ------------------------------------------------------

@pytest.mark.parametrize("mode", ["off", "allow", "require"])
def test_a_dpop_bound_token_is_never_a_bearer_token(auth: AuthServer, mode: str) -> None:
    app, key = app_with(auth, mode), Key()
    reply = send(app, bound(auth, key), scheme="Bearer")
    assert reply.status_code == 401
    assert 'error="invalid_token"' in reply.headers["www-authenticate"]


def test_require_refuses_bearer_tokens_with_a_dpop_challenge(auth: AuthServer) -> None:
    app = app_with(auth, "require")
    metadata = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
    assert send(app).headers["www-authenticate"] == (
        f'DPoP algs="RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512 EdDSA", '
        f'resource_metadata="{metadata}"')
    plain = auth.mint(aud=RESOURCE, scope="notes:read")
    assert refused_with(send(app, plain, scheme="Bearer"), "invalid_token")


def test_allow_takes_both_and_challenges_with_both(auth: AuthServer) -> None:
    app, key = app_with(auth, "allow"), Key()
    plain = auth.mint(aud=RESOURCE, scope="notes:read")
    assert send(app, plain, scheme="Bearer").status_code == 200
    token = bound(auth, key)
    assert send(app, token, key.proof(token)).status_code == 200
    challenge = send(app).headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and ', DPoP algs="' in challenge
    bad = send(app, token, key.proof(token, htm="PUT")).headers["www-authenticate"]
    assert bad.startswith('DPoP error="invalid_dpop_proof"') and ", Bearer " in bad


def test_off_ignores_dpop_credentials(auth: AuthServer) -> None:
    app, key = app_with(auth, "off"), Key()
    token = bound(auth, key)
    reply = send(app, token, key.proof(token))
    assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer ")


def test_the_metadata_says_what_is_required(auth: AuthServer) -> None:
    async def metadata(app: McpApp) -> dict[str, Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
            reply = await c.get("/.well-known/oauth-protected-resource/mcp")
            body: dict[str, Any] = reply.json()
            return body
    required = run(metadata(app_with(auth, "require")))
    assert required["dpop_bound_access_tokens_required"] is True
    assert "ES256" in required["dpop_signing_alg_values_supported"]
    allowed = run(metadata(app_with(auth, "allow")))
    assert "dpop_bound_access_tokens_required" not in allowed
    assert "dpop_signing_alg_values_supported" not in run(metadata(app_with(auth, "off")))


def test_settings_check_the_dpop_options() -> None:
    with pytest.raises(ValueError, match="dpop must be"):
        AuthSettings(issuer="https://as.example", dpop="sometimes")
    with pytest.raises(ValueError, match="dpop_nonce needs"):
        AuthSettings(issuer="https://as.example", dpop_nonce=True)
    env = {"MRTR_AUTH_ISSUER": "https://as.example", "MRTR_AUTH_DPOP": "require",
           "MRTR_AUTH_DPOP_NONCE": "1"}
    parsed = AuthSettings.from_env(env)
    assert parsed is not None and (parsed.dpop, parsed.dpop_nonce) == ("require", True)
    assert AuthSettings.from_json(parsed.to_json()) == parsed


def test_require_steps_up_with_a_dpop_insufficient_scope_challenge(auth: AuthServer) -> None:
    app, key = app_with(auth, "require"), Key()
    token = bound(auth, key)

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
            args = post_args(call("write"))
            args["headers"].update({"authorization": f"DPoP {token}", "dpop": key.proof(token)})
            return await c.post("/mcp", **args)
    reply = run(go())
    assert reply.status_code == 403
    assert reply.headers["www-authenticate"].startswith(
        'DPoP error="insufficient_scope", scope="notes:read notes:write", algs="')


def test_an_introspected_token_is_bound_by_its_cnf(auth: AuthServer) -> None:
    # RFC 9449 §6.2: the introspection answer carries cnf.jkt as a JWT would.
    key = Key()
    app = app_with(auth, "require", introspection_url=f"{auth.issuer}/introspect",
                   client_id="mcp-rs", client_secret="rs-secret")
    token = auth.mint_opaque(aud=RESOURCE, scope="notes:read")
    assert refused_with(send(app, token, key.proof(token)), "invalid_token")  # not bound
    auth.opaque[token]["cnf"] = {"jkt": key.jkt}
    assert send(app, token, key.proof(token)).status_code == 200
    assert send(app, token, scheme="Bearer").status_code == 401
