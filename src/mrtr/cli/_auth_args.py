"""The OAuth options of `mrtr call` and friends, and the OAuth client they build."""

# Design: OAuth is on by default for HTTP servers and costs nothing until a server answers 401:
# then the authorization URL is printed (and a browser opened when there is a graphical one),
# the redirect comes back to 127.0.0.1 on a random port, and the tokens are kept in a 0600 file
# per server URL under $XDG_STATE_HOME/mrtr/tokens, so the next command needs no browser.
# Secrets come from the environment rather than flags (a flag shows in `ps`).
from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from mrtr.client.auth import (
    ClientInfo,
    FileTokenStorage,
    LoopbackRedirect,
    MemoryTokenStorage,
    OAuth,
    OAuthSettings,
    TokenStorage,
)

__all__ = ["add_auth_options", "auth_from", "default_token_file"]

ENV_CLIENT_ID = "MRTR_CLIENT_ID"
ENV_CLIENT_SECRET = "MRTR_CLIENT_SECRET"
ENV_SCOPES = "MRTR_SCOPES"
ENV_TOKEN_FILE = "MRTR_TOKEN_FILE"
ENV_NO_BROWSER = "MRTR_NO_BROWSER"


def add_auth_options(sub: argparse.ArgumentParser) -> None:
    group = sub.add_argument_group("OAuth (used when the server answers 401)")
    group.add_argument("--client-id", metavar="ID",
                       help=f"a pre-registered OAuth client id (env {ENV_CLIENT_ID}; default: "
                            "register dynamically)")
    group.add_argument("--client-secret", metavar="SECRET",
                       help=f"its secret (prefer env {ENV_CLIENT_SECRET})")
    group.add_argument("--scope", action="append", default=None, metavar="SCOPE",
                       help=f"ask for SCOPE (repeatable; env {ENV_SCOPES}; default: what the "
                            "server names)")
    group.add_argument("--token-file", metavar="PATH",
                       help=f"where tokens are kept, mode 0600 (env {ENV_TOKEN_FILE}; '-' for "
                            "memory only; default: one file per server under "
                            "$XDG_STATE_HOME/mrtr/tokens)")
    group.add_argument("--no-browser", action="store_true",
                       help=f"only print the authorization URL (env {ENV_NO_BROWSER}=1)")
    group.add_argument("--client-credentials", action="store_true",
                       help="use the client credentials grant (machine to machine; needs "
                            "--client-id and a secret)")
    group.add_argument("--no-auth", action="store_true", help="never run OAuth")


def default_token_file(url: str, env: Mapping[str, str]) -> Path:
    """The token file for the server at `url` (its name is a hash of the URL)."""
    state = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "state")
    name = hashlib.sha256(url.encode("utf-8")).hexdigest()[:32] + ".json"
    return Path(state).expanduser() / "mrtr" / "tokens" / name


def auth_from(args: argparse.Namespace, url: str,
              env: Mapping[str, str] | None = None) -> OAuth | None:
    """The OAuth client the options ask for; None with --no-auth.

    Raises ValueError for a usage error (--client-credentials without a client).
    """
    env = os.environ if env is None else env
    if args.no_auth:
        return None
    client_id = args.client_id or env.get(ENV_CLIENT_ID) or None
    secret = args.client_secret or env.get(ENV_CLIENT_SECRET) or None
    scopes = args.scope or (env.get(ENV_SCOPES) or "").split() or None
    client = ClientInfo(client_id=client_id, client_secret=secret) if client_id else None
    settings = OAuthSettings(client_name="mrtr", scopes=tuple(scopes) if scopes else None)
    storage = _storage(args.token_file or env.get(ENV_TOKEN_FILE), url, env)
    if args.client_credentials:
        if client is None or secret is None:
            raise ValueError("--client-credentials needs --client-id and a client secret "
                             f"(--client-secret or {ENV_CLIENT_SECRET})")
        return OAuth(grant="client_credentials", client=client, storage=storage,
                     settings=settings)
    no_browser = args.no_browser or env.get(ENV_NO_BROWSER, "") not in ("", "0")
    return OAuth(redirect=LoopbackRedirect(open_browser=not no_browser), client=client,
                 storage=storage, settings=settings)


def _storage(path: str | None, url: str, env: Mapping[str, str]) -> TokenStorage:
    if path == "-":
        return MemoryTokenStorage()
    return FileTokenStorage(Path(path) if path else default_token_file(url, env))
