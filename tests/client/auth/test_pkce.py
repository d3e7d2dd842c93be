"""PKCE S256 (RFC 7636)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from mrtr.client.auth import challenge_of, new_pkce
from mrtr.client.auth._pkce import Pkce


def test_rfc7636_appendix_b_vector() -> None:
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert challenge_of(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_fresh_verifiers_are_long_unreserved_and_distinct() -> None:
    pairs = [new_pkce() for _ in range(50)]
    assert len({p.verifier for p in pairs}) == 50
    for pair in pairs:
        assert re.fullmatch(r"[A-Za-z0-9._~-]{43,128}", pair.verifier)
        assert pair.challenge == challenge_of(pair.verifier)


@given(st.text(alphabet="ABCabc019-._~", min_size=43, max_size=128))
def test_challenge_is_unpadded_base64url_of_43_chars(verifier: str) -> None:
    challenge = Pkce(verifier).challenge
    assert len(challenge) == 43 and re.fullmatch(r"[A-Za-z0-9_-]+", challenge)
