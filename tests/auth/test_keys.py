"""KeySet: discovery, caching, one fetch for many waiting requests, fixed keys (#15)."""

from __future__ import annotations

import asyncio

import pytest

from mrtr.auth import AuthServerDown, KeySet, UnknownKey
from mrtr.auth._keys import discover
from tests.auth.authserver import AuthServer
from tests.transports.conftest import run


def test_15_concurrent_unknown_kids_share_one_fetch(auth: AuthServer) -> None:
    keys = KeySet(auth.issuer, timeout=2.0)
    kid = auth.keys[0][0]

    async def many() -> list[object]:
        return await asyncio.gather(*(keys.key(kid, "ES256") for _ in range(20)))
    found = run(many())
    assert len({id(k) for k in found}) == 1 and keys.fetches == 1


def test_15_a_key_for_another_algorithm_is_unknown(auth: AuthServer) -> None:
    keys = KeySet(auth.issuer, timeout=2.0)
    with pytest.raises(UnknownKey):
        run(keys.key(auth.keys[0][0], "RS256"))


def test_15_fixed_jwks_never_fetch(auth: AuthServer) -> None:
    keys = KeySet("https://unreachable.invalid", jwks=auth.jwks())
    assert run(keys.key(auth.keys[0][0], "ES256")).key_id == auth.keys[0][0]
    with pytest.raises(UnknownKey):
        run(keys.key("other", "ES256"))
    assert keys.fetches == 0


def test_15_a_single_key_serves_tokens_without_kid(auth: AuthServer) -> None:
    only = {"keys": auth.jwks()["keys"][:1]}
    assert run(KeySet("https://x.invalid", jwks=only).key(None, "ES256")) is not None


def test_15_discovery_checks_the_issuer(auth: AuthServer,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(discover(auth.issuer, timeout=2.0))["jwks_uri"] == f"{auth.issuer}/jwks"
    honest = auth.metadata
    monkeypatch.setattr(auth, "metadata", lambda: {**honest(), "issuer": "https://evil.example"})
    keys = KeySet(auth.issuer, timeout=2.0)  # metadata for another issuer: not used
    with pytest.raises(AuthServerDown, match="evil"):
        run(keys.key("k", "ES256"))


def test_15_stale_keys_are_fetched_again_after_max_age(auth: AuthServer) -> None:
    now = [1000.0]
    keys = KeySet(auth.issuer, timeout=2.0, max_age=60.0, clock=lambda: now[0])
    kid = auth.keys[0][0]
    run(keys.key(kid, "ES256"))
    run(keys.key(kid, "ES256"))
    assert keys.fetches == 1
    now[0] += 61
    run(keys.key(kid, "ES256"))
    assert keys.fetches == 2


def test_15_one_key_set_serves_requests_of_several_event_loops(auth: AuthServer) -> None:
    keys = KeySet(auth.issuer, timeout=2.0, min_refresh=0.0)
    kid = auth.keys[0][0]

    async def many(wanted: str) -> list[object]:
        return await asyncio.gather(*(keys.key(wanted, "ES256") for _ in range(5)),
                                    return_exceptions=True)
    for wanted in (kid, "unknown"):  # each run() is a new loop; both make requests wait
        assert not [r for r in run(many(wanted)) if isinstance(r, RuntimeError)]
