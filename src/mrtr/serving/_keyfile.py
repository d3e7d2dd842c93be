"""The development key file: one private requestState key per user, so restarts keep flows alive.

`mrtr serve` uses it for a single local process that has no `MRTR_STATE_KEYS`.
"""

# Design: the file is 0600 in a 0700 directory, owned by this user and never followed through a
# symlink; anything looser is refused rather than repaired, except the directory's mode, which
# we created. Its name says nothing secret. It is created atomically (a private temp file linked
# into place), so two servers starting together agree on one key. Only the path is ever logged.
from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from mrtr.server import generate_key, parse_keys

__all__ = ["default_key_file", "read_or_create_key"]

FILE_NAME = "requeststate.key"


def default_key_file(env: Mapping[str, str]) -> Path | None:
    """`$XDG_STATE_HOME/mrtr/requeststate.key` (else under ~/.local/state); None without a home."""
    state = env.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):  # the XDG spec: a relative value is ignored
        home = env.get("HOME", "")
        if not os.path.isabs(home):
            return None
        state = os.path.join(home, ".local", "state")
    return Path(state) / "mrtr" / FILE_NAME


def read_or_create_key(path: Path) -> bytes:
    """Return the key stored in `path`, creating the file (and its directory) if missing.

    Raises OSError when the file cannot be read or created, ValueError when it or its directory
    is not private to this user or does not hold a key (never quoting key material).
    """
    _private_directory(path.parent)
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    temporary = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(generate_key() + "\n")
        os.link(temporary, path)  # fails if another server created it first: use theirs
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)
    return _read(path)


def _private_directory(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ValueError(f"{directory} is not a directory owned by this user")
    if info.st_mode & 0o077:
        os.chmod(directory, 0o700)


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, encoding="ascii", errors="replace") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise ValueError(f"{path} is not a file owned by this user")
        if info.st_mode & 0o077:
            raise ValueError(f"{path} is open to other users (chmod 600 it, or delete it)")
        text = source.read(4096).strip()
    try:
        return parse_keys(text)[0]
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
