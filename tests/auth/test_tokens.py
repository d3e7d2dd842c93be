"""Token claims: times with leeway, the principal's parts and scopes (#15)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.auth import InvalidToken, Principal, TokenCache, principal_of
from mrtr.auth._tokens import check_times
from tests.transports.conftest import run


@given(st.floats(-1e6, 1e6), st.floats(0, 120), st.floats(-1e3, 1e3))
def test_15_exp_with_leeway(exp: float, leeway: float, offset: float) -> None:
    now = exp + offset
    if now < exp + leeway:
        check_times({"exp": exp}, now, leeway)
    else:
        with pytest.raises(InvalidToken):
            check_times({"exp": exp}, now, leeway)


@given(st.floats(-1e6, 1e6), st.floats(0, 120), st.floats(-1e3, 1e3))
def test_15_nbf_with_leeway(nbf: float, leeway: float, offset: float) -> None:
    now = nbf + offset
    if now >= nbf - leeway:
        check_times({"nbf": nbf}, now, leeway)
    else:
        with pytest.raises(InvalidToken):
            check_times({"nbf": nbf}, now, leeway)


@pytest.mark.parametrize("claims", [{"exp": "soon"}, {"exp": True}, {"nbf": [1]}])
def test_15_times_must_be_numbers(claims: dict[str, object]) -> None:
    with pytest.raises(InvalidToken):
        check_times(claims, 0.0, 0.0)


def test_15_principal_of_reads_client_and_scopes() -> None:
    p = principal_of({"iss": "i", "sub": "s", "azp": "c", "scp": ["a", "b", 3]})
    assert (p.issuer, p.subject, p.client_id, p.scopes) == ("i", "s", "c", frozenset("ab"))
    q = principal_of({"iss": "i", "sub": "s", "client_id": "x", "azp": "c", "scope": "a  b"})
    assert q.client_id == "x" and q.scopes == {"a", "b"} and q.claims["azp"] == "c"
    assert principal_of({"iss": "i", "sub": "s"}).client_id is None


@pytest.mark.parametrize("claims", [{"iss": "i"}, {"sub": "s"}, {"iss": "i", "sub": ""},
                                    {"iss": 1, "sub": "s"}])
def test_15_principal_needs_issuer_and_subject(claims: dict[str, object]) -> None:
    with pytest.raises(InvalidToken):
        principal_of(claims)


class Counting:
    """A verifier that accepts tokens named "good-*" (exp 1100) and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def verify(self, token: str, audiences: Sequence[str], /) -> Principal:
        self.calls += 1
        if not token.startswith("good"):
            raise InvalidToken("bad")
        return principal_of({"iss": "i", "sub": token, "exp": 1100})


def test_15_token_cache_remembers_accepted_tokens_until_seconds_or_exp() -> None:
    now = [1000.0]
    inner = Counting()
    cache = TokenCache(inner, seconds=60, size=2, clock=lambda: now[0])
    for _ in range(3):
        assert run(cache.verify("good-1", ["a"])).subject == "good-1"
    assert inner.calls == 1
    run(cache.verify("good-1", ["b"]))  # another audience: checked on its own
    assert inner.calls == 2
    for _ in range(2):
        with pytest.raises(InvalidToken):
            run(cache.verify("bad", ["a"]))
    assert inner.calls == 4  # refusals are not remembered
    now[0] = 1061.0  # past the 60 s
    run(cache.verify("good-1", ["a"]))
    assert inner.calls == 5
    now[0] = 1099.0
    run(cache.verify("good-1", ["a"]))
    assert inner.calls == 5
    now[0] = 1100.0  # exp ends the entry before its 60 s do
    run(cache.verify("good-1", ["a"]))
    assert inner.calls == 6


def test_15_token_cache_is_bounded() -> None:
    cache = TokenCache(Counting(), seconds=60, size=2, clock=lambda: 0.0)
    for n in range(5):
        run(cache.verify(f"good-{n}", ["a"]))
    assert len(cache._seen) == 2
