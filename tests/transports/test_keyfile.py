"""The development key file: private, created once, shared by servers starting together."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mrtr.server import parse_keys
from mrtr.serving._keyfile import default_key_file, read_or_create_key


def test_19_the_key_is_created_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "state" / "mrtr" / "requeststate.key"
    key = read_or_create_key(path)
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert parse_keys(path.read_text()) == [key]
    assert read_or_create_key(path) == key  # a restart gets the same key
    assert sorted(p.name for p in path.parent.iterdir()) == ["requeststate.key"]  # no temp left


def test_19_servers_starting_together_agree_on_one_key(tmp_path: Path) -> None:
    path = tmp_path / "mrtr" / "requeststate.key"
    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: read_or_create_key(path), range(32)))
    assert len(keys) == 1


def test_19_a_key_file_open_to_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mrtr" / "requeststate.key"
    read_or_create_key(path)
    path.chmod(0o644)
    with pytest.raises(ValueError) as caught:
        read_or_create_key(path)
    assert str(caught.value) == f"{path} is open to other users (chmod 600 it, or delete it)"


def test_19_a_symlinked_key_file_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.key"
    read_or_create_key(tmp_path / "real" / "requeststate.key")
    (tmp_path / "real" / "requeststate.key").rename(elsewhere)
    (tmp_path / "real" / "requeststate.key").symlink_to(elsewhere)
    with pytest.raises(OSError):
        read_or_create_key(tmp_path / "real" / "requeststate.key")


def test_19_a_loose_directory_we_own_is_tightened(tmp_path: Path) -> None:
    directory = tmp_path / "mrtr"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    read_or_create_key(directory / "requeststate.key")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_19_a_file_without_a_key_says_so_without_quoting_it(tmp_path: Path) -> None:
    path = tmp_path / "mrtr" / "requeststate.key"
    path.parent.mkdir(mode=0o700)
    path.write_text("not-a-key-secret\n")
    path.chmod(0o600)
    with pytest.raises(ValueError) as caught:
        read_or_create_key(path)
    assert str(caught.value).startswith(f"{path}: requestState key #1")
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(("env", "expected"), [
    ({"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/mrtr/requeststate.key"),
    ({"XDG_STATE_HOME": "relative", "HOME": "/h"}, "/h/.local/state/mrtr/requeststate.key"),
    ({"HOME": "/h"}, "/h/.local/state/mrtr/requeststate.key"),
    ({}, None),
])
def test_19_default_key_file_follows_xdg(env: dict[str, str], expected: str | None) -> None:
    found = default_key_file(env)
    assert (None if found is None else str(found)) == expected
