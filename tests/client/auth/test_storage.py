"""Token storage: memory, and the 0600 file the CLI uses."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mrtr.client.auth import ClientInfo, FileTokenStorage, MemoryTokenStorage, Tokens


def test_file_roundtrip_is_private_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        store = FileTokenStorage(tmp_path / "d" / "t.json")
        store.save_client(ClientInfo(client_id="c", issuer="https://as"))
        store.save_tokens(Tokens(access_token="a", refresh_token="r", expires_at=5.0))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "d" / "t.json").st_mode) == 0o600
    again = FileTokenStorage(tmp_path / "d" / "t.json")
    assert again.load_client() == ClientInfo(client_id="c", issuer="https://as")
    tokens = again.load_tokens()
    assert tokens is not None and tokens.refresh_token == "r" and tokens.expires_at == 5.0
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["t.json"]  # no temp file left


def test_a_missing_or_corrupt_file_is_empty(tmp_path: Path) -> None:
    assert FileTokenStorage(tmp_path / "none.json").load_tokens() is None
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    store = FileTokenStorage(bad)
    assert store.load_tokens() is None and store.load_client() is None
    store.save_tokens(Tokens(access_token="a"))  # and it is replaced cleanly
    assert store.load_tokens() == Tokens(access_token="a")


def test_memory_storage_and_freshness() -> None:
    store = MemoryTokenStorage()
    store.save_tokens(Tokens(access_token="a", expires_at=100.0))
    tokens = store.load_tokens()
    assert tokens is not None and tokens.fresh(69.0) and not tokens.fresh(71.0)
    assert Tokens(access_token="a").fresh(1e12)  # no expiry known: used until refused
