"""The test authorization server itself: the flows a client test can run against it (#15)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.auth.authserver import AuthServer
from tests.auth.conftest import RESOURCE, guarded, tool


def test_15_authorization_code_with_pkce_then_refresh(auth: AuthServer) -> None:
    registered = httpx.post(f"{auth.issuer}/register", json={"redirect_uris": ["x"]}).json()
    client_id = registered["client_id"]
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    redirect = "http://127.0.0.1:1/callback"
    approved = httpx.get(f"{auth.issuer}/authorize", params={
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect,
        "code_challenge": challenge.rstrip(b"=").decode(), "code_challenge_method": "S256",
        "state": "st", "scope": "notes:write", "resource": RESOURCE})
    assert approved.status_code == 302
    query = parse_qs(urlsplit(approved.headers["location"]).query)
    assert query["state"] == ["st"] and query["iss"] == [auth.issuer]
    form = {"grant_type": "authorization_code", "code": query["code"][0], "client_id": client_id,
            "redirect_uri": redirect, "code_verifier": "wrong"}
    assert httpx.post(f"{auth.issuer}/token", data=form).status_code == 400
    approved = httpx.get(approved.request.url)  # a fresh code: the failed one was spent
    form["code"] = parse_qs(urlsplit(approved.headers["location"]).query)["code"][0]
    form["code_verifier"] = verifier
    issued = httpx.post(f"{auth.issuer}/token", data=form).json()
    app = guarded(auth)
    response = tool(app, "whoami", issued["access_token"])
    assert response.json()["result"]["content"][0]["text"] == (
        f"{auth.issuer} {auth.user} {client_id} notes:write")
    refreshed = httpx.post(f"{auth.issuer}/token", data={
        "grant_type": "refresh_token", "refresh_token": issued["refresh_token"],
        "client_id": client_id}).json()
    assert tool(app, "whoami", refreshed["access_token"]).status_code == 200


def test_15_metadata_of_the_test_authorization_server(auth: AuthServer) -> None:
    url = f"{auth.issuer}/.well-known/oauth-authorization-server"
    metadata = httpx.get(url).json()
    assert metadata["issuer"] == auth.issuer
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert httpx.get(metadata["jwks_uri"]).json()["keys"][0]["kid"] == auth.keys[0][0]
