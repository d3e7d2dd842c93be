"""Where tokens and client registrations are kept: memory, or a 0600 JSON file for the CLI."""

# Design: storage is synchronous and tiny (load/save of two small records) so the sans-I/O
# flow can call it between yields; a keyring or database store implements the same Protocol.
# Records are bound to the issuer that produced them, and tokens to the resource they are for,
# so a token or client id is never presented to another authorization server (SEP-2352).
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Protocol

import msgspec

__all__ = ["ClientInfo", "FileTokenStorage", "MemoryTokenStorage", "Tokens", "TokenStorage"]


class Tokens(msgspec.Struct, frozen=True, kw_only=True):
    """An RFC 6749 §5.1 token response, with `expires_at` (epoch seconds) added on receipt."""

    access_token: str
    token_type: str = "Bearer"
    expires_in: float | None = None
    refresh_token: str | None = None
    scope: str | None = None
    expires_at: float | None = None
    issuer: str | None = None  # the authorization server that issued them
    resource: str | None = None

    def fresh(self, now: float, margin: float = 30.0) -> bool:
        """True unless the token expires within `margin` seconds."""
        return self.expires_at is None or now < self.expires_at - margin


class ClientInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A client registration: pre-registered, dynamic (RFC 7591) or a metadata document URL."""

    client_id: str
    client_secret: str | None = None
    token_endpoint_auth_method: str | None = None
    issuer: str | None = None  # None: usable with any authorization server (pre-registered)


class TokenStorage(Protocol):
    def load_tokens(self) -> Tokens | None: ...
    def save_tokens(self, tokens: Tokens | None) -> None: ...
    def load_client(self) -> ClientInfo | None: ...
    def save_client(self, client: ClientInfo | None) -> None: ...


class MemoryTokenStorage:
    """Keeps tokens for the life of the object."""

    def __init__(self, *, client: ClientInfo | None = None) -> None:
        self._tokens: Tokens | None = None
        self._client = client

    def load_tokens(self) -> Tokens | None:
        return self._tokens

    def save_tokens(self, tokens: Tokens | None) -> None:
        self._tokens = tokens

    def load_client(self) -> ClientInfo | None:
        return self._client

    def save_client(self, client: ClientInfo | None) -> None:
        self._client = client


class _Record(msgspec.Struct, kw_only=True):
    tokens: Tokens | None = None
    client: ClientInfo | None = None
    saved_at: float = 0.0


class FileTokenStorage:
    """A JSON file readable by its owner only (mode 0600, written atomically).

    A file that does not decode is treated as empty (the flow then authorizes again).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load_tokens(self) -> Tokens | None:
        return self._read().tokens

    def save_tokens(self, tokens: Tokens | None) -> None:
        record = self._read()
        record.tokens = tokens
        self._write(record)

    def load_client(self) -> ClientInfo | None:
        return self._read().client

    def save_client(self, client: ClientInfo | None) -> None:
        record = self._read()
        record.client = client
        self._write(record)

    def _read(self) -> _Record:
        try:
            return msgspec.json.decode(self.path.read_bytes(), type=_Record)
        except (OSError, msgspec.DecodeError):
            return _Record()

    def _write(self, record: _Record) -> None:
        record.saved_at = time.time()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)  # created 0600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(msgspec.json.encode(record))
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
