"""Token claims: times with leeway, the principal's parts and scopes (#15)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.auth import InvalidToken, principal_of
from mrtr.auth._tokens import check_times


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
