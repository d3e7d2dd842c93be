"""DPoP on the resource server (RFC 9449): proofs checked, keys bound to tokens, jti single-use."""

# Design: a proof is checked in the order of RFC 9449 §4.3, cheapest first, before the access
# token is verified; what is spent (the `jti`, in the store) is spent last, so a request refused
# for any other reason burns nothing. The proof's public key is rebuilt from its `jwk` header by
# PyJWT (as the token keys are; this package imports no cryptography library itself) and kept
# per RFC 7638 thumbprint, so a client's key is parsed once, not per request. `htu` is compared
# with the resource URL the server was configured with (or derived from its socket), never with
# a Host header. Replay: `put_if_absent` of a digest of (thumbprint, jti) with the proof's
# lifetime (iat + window) as expiry: one atomic step in the store every replica shares, so a
# proof is accepted once across replicas, and the entries expire by themselves. Nonces are
# sealed by the Dispatcher's key ring (another audience than requestState), valid `window`
# seconds: any replica sharing the keys accepts them, and none keeps a list.
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import jwt
import msgspec

from mrtr.errors import InvalidRequestState, MrtrError
from mrtr.server import Binding, Dispatcher, Sealer
from mrtr.stores import ClaimStatus, MemoryStore, Store

__all__ = ["InvalidProof", "Proof", "ProofChecker", "bound_key", "same_url", "thumbprint"]

MAX_PROOF_BYTES = 8192  # an RSA-4096 key's proof is about 1.5 KB
MAX_JTI = 256
_PRIVATE = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_MEMBERS = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}
_NONCE_AUDIENCE = "mrtr:dpop-nonce"
_NONCE = Binding(method="dpop-nonce", target="", arguments_digest=b"", principal=None)
_KEYS_KEPT = 1024


class InvalidProof(MrtrError):
    """A DPoP proof refused: `error` is its RFC 9449 code, the message is for the log only."""

    def __init__(self, reason: str, error: str = "invalid_dpop_proof") -> None:
        super().__init__(reason)
        self.error = error


class Proof(NamedTuple):
    """What a checked proof binds: its key's thumbprint, and its `jti` and `iat` to spend."""

    jkt: str
    jti: str
    iat: float


def thumbprint(jwk: Mapping[str, object]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK, base64url (what `cnf.jkt` holds).

    Raises InvalidProof for a key type other than EC, RSA or OKP, or missing members.
    """
    kty = jwk.get("kty")
    members = _MEMBERS.get(kty) if isinstance(kty, str) else None
    if members is None:
        raise InvalidProof(f"jwk kty {jwk.get('kty')!r} is not EC, RSA or OKP")
    picked: dict[str, str] = {}
    for name in members:
        value = jwk.get(name)
        if not isinstance(value, str):
            raise InvalidProof(f"jwk has no {name}")
        picked[name] = value
    return b64url(hashlib.sha256(msgspec.json.encode(picked)).digest())


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def same_url(htu: str, url: str) -> bool:
    """RFC 9449 §4.3 (9): `htu` names `url`, ignoring query and fragment (RFC 3986 §6 scheme
    and host case, default ports, an empty path)."""
    return _normal(htu) == _normal(url)


def _normal(url: str) -> tuple[str, str, int | None, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if port == {"http": 80, "https": 443}.get(scheme):
        port = None
    return scheme, (parts.hostname or "").lower(), port, parts.path or "/"


class ProofChecker:
    """Checks `DPoP` proofs for one resource server.

    `algorithms` are the asymmetric JWS algorithms accepted; `window` is how old a proof's
    `iat` may be, `leeway` how far ahead (seconds); `nonce` asks every proof for a nonce this
    server (or a replica sharing its keys) issued within `window`.
    """

    def __init__(self, *, algorithms: Sequence[str], window: float, leeway: float,
                 nonce: bool, clock: Callable[[], float] = time.time,
                 log: logging.Logger | None = None) -> None:
        self.algorithms = tuple(algorithms)
        self.window, self.leeway, self.nonce, self.clock = window, leeway, nonce, clock
        self.log = log or logging.getLogger("mrtr.auth")
        self._keys: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._own_store: Store | None = None
        self._own_sealer: Sealer | None = None
        self._sealers: tuple[Sealer, Sealer] | None = None

    # -- §4.3 -------------------------------------------------------------------------------------
    def check(self, proof: str, *, method: str, url: str, access_token: str | None,
              dispatcher: Dispatcher | None = None) -> Proof:
        """The proof's key and `jti` when `proof` is valid for `method url` (and bound to
        `access_token`); raises InvalidProof otherwise. The `jti` is not spent yet: `spend`.
        The numbers are those of the checks in RFC 9449 §4.3."""
        jkt, claims = self._signed(proof)
        jti, htm, htu, iat = (claims.get(n) for n in ("jti", "htm", "htu", "iat"))
        # (3) the required claims
        if not isinstance(jti, str) or not 0 < len(jti) <= MAX_JTI:
            raise InvalidProof("jti missing or too long")
        if not isinstance(htm, str) or not isinstance(htu, str):
            raise InvalidProof("htm or htu missing")
        if not isinstance(iat, int | float) or isinstance(iat, bool):
            raise InvalidProof("iat missing or not a number")
        # (8) the method, (9) the URL: the configured resource, never a request header
        if htm != method:
            raise InvalidProof(f"htm {htm!r} is not {method}")
        if not same_url(htu, url):
            raise InvalidProof(f"htu {htu!r} is not {url}")
        self._fresh(iat)  # (11)
        # (12) bound to the access token it comes with (the key binding: the caller, cnf.jkt)
        if access_token is not None:
            ath = claims.get("ath")
            digest = b64url(hashlib.sha256(access_token.encode("ascii")).digest())
            if not isinstance(ath, str) or not hmac.compare_digest(ath.encode(), digest.encode()):
                raise InvalidProof("ath is not the hash of this access token")
        # (10) the nonce this server gave
        if self.nonce:
            self._check_nonce(claims.get("nonce"), dispatcher)
        return Proof(jkt, jti, float(iat))

    def _fresh(self, iat: float) -> None:
        """RFC 9449 §4.3 (11): `iat` within the window (and at most `leeway` ahead)."""
        now = self.clock()
        if iat > now + self.leeway:
            raise InvalidProof(f"iat is {iat - now:.0f}s in the future")
        if iat < now - self.window:
            raise InvalidProof(f"iat is {now - iat:.0f}s old (window {self.window:g}s)")

    def _signed(self, proof: str) -> tuple[str, dict[str, object]]:
        """The thumbprint of the proof's key and its claims, once its header and signature
        are checked (RFC 9449 §4.3: 1, 2, 4, 5, 7, 6)."""
        # (1) one DPoP header, (2) a JWS in compact form: repeated headers arrive joined by ", "
        if "," in proof:
            raise InvalidProof("more than one DPoP header")
        if len(proof) > MAX_PROOF_BYTES or proof.count(".") != 2:
            raise InvalidProof("not a single compact JWT")
        header = _segment(proof.partition(".")[0], "header")
        # (4) typ, (5) an asymmetric algorithm ("none" and HMAC never)
        typ = header.get("typ")
        if not isinstance(typ, str) or typ.lower() != "dpop+jwt":
            raise InvalidProof(f"typ {typ!r} is not dpop+jwt")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidProof(f"alg {alg!r} is not accepted (only {', '.join(self.algorithms)})")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict):
            raise InvalidProof("no jwk header")
        # (7) a public key only
        if _PRIVATE & jwk.keys():
            raise InvalidProof("the jwk holds private key material")
        jkt = thumbprint(jwk)
        # (6) the signature, with the key in the proof (PyJWT's algorithm, without its slow
        # per-character base64 check: the segments are decoded strictly here)
        head, _, rest = proof.partition(".")
        body, _, signature = rest.partition(".")
        try:
            raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
        except ValueError:
            raise InvalidProof("the signature is not base64url") from None
        algorithm, key = self._key(jkt, alg, jwk)
        try:
            valid = algorithm.verify(f"{head}.{body}".encode("ascii"), key, raw)
        except (ValueError, TypeError, UnicodeEncodeError) as exc:
            raise InvalidProof(f"signature: {type(exc).__name__}: {exc}") from None
        if not valid:
            raise InvalidProof("signature: InvalidSignatureError: it does not verify")
        claims = _segment(body, "payload")
        return jkt, claims

    async def spend(self, proof: Proof, dispatcher: Dispatcher | None) -> None:
        """Use up the proof's `jti` (every replica sharing the store sees it).

        Raises InvalidProof when it was used before, StoreUnavailable when the store is down.
        """
        store = dispatcher.store if dispatcher is not None else None
        if store is None:
            if self._own_store is None:
                self._own_store = MemoryStore()
            store = self._own_store
        key = "dpop-jti:" + b64url(hashlib.sha256(
            f"{proof.jkt}\n{proof.jti}".encode()).digest()[:18])
        seen = await store.put_if_absent(key, b"", expires=proof.iat + self.window + 1)
        if seen.status is not ClaimStatus.NEW:
            raise InvalidProof("jti replayed: this proof was used before")

    # -- nonces -----------------------------------------------------------------------------------
    def issue_nonce(self, dispatcher: Dispatcher | None) -> str | None:
        """A fresh nonce (None unless nonces are on)."""
        return self._sealer(dispatcher).seal(b"", _NONCE) if self.nonce else None

    def _check_nonce(self, nonce: object, dispatcher: Dispatcher | None) -> None:
        if not isinstance(nonce, str):
            raise InvalidProof("no nonce", "use_dpop_nonce")
        try:
            self._sealer(dispatcher).unseal(nonce, _NONCE)
        except InvalidRequestState as exc:
            raise InvalidProof(f"nonce not accepted: {exc.reason}", "use_dpop_nonce") from None

    def _sealer(self, dispatcher: Dispatcher | None) -> Sealer:
        if dispatcher is None:
            if self._own_sealer is None:
                self._own_sealer = Sealer.ephemeral(audience=_NONCE_AUDIENCE, ttl=self.window)
            return self._own_sealer
        cached = self._sealers
        if cached is None or cached[0] is not dispatcher.sealer:
            sibling = dispatcher.sealer.for_audience(_NONCE_AUDIENCE, ttl=self.window)
            self._sealers = cached = (dispatcher.sealer, sibling)
        return cached[1]

    def _key(self, jkt: str, alg: str, jwk: dict[str, object]) -> tuple[Any, Any]:
        """PyJWT's algorithm `alg` and the public key of `jwk`, kept by thumbprint."""
        built = self._keys.get((jkt, alg))
        if built is None:
            try:
                parsed = jwt.PyJWK(jwk, algorithm=alg)
            except (jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:
                raise InvalidProof(f"jwk does not fit {alg}: {exc}") from None
            if len(self._keys) >= _KEYS_KEPT:
                del self._keys[next(iter(self._keys))]
            built = self._keys[(jkt, alg)] = (parsed.Algorithm, parsed.key)
        return built


def _segment(text: str, what: str) -> dict[str, object]:
    try:
        value = msgspec.json.decode(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, msgspec.DecodeError):
        raise InvalidProof(f"the {what} is not base64url JSON") from None
    if not isinstance(value, dict):
        raise InvalidProof(f"the {what} is not an object")
    return value


def bound_key(claims: Mapping[str, object]) -> str | None:
    """The `cnf.jkt` of a token's claims (RFC 9449 §6), None when it is not DPoP-bound."""
    cnf = claims.get("cnf")
    if not isinstance(cnf, dict):
        return None
    jkt = cnf.get("jkt")
    return jkt if isinstance(jkt, str) else None

