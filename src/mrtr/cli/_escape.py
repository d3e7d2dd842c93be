"""Server text made safe for a terminal: control characters are shown as escapes, never obeyed."""

# Design: whatever a server sends (messages, titles, descriptions, choices, URLs, results) may
# carry ANSI sequences, carriage returns, backspaces or bidi overrides that hide or rewrite what
# the user sees, such as the URL they are asked to open. Such characters are shown as visible
# escapes (`\x1b`, `\u202e`) rather than dropped, so the user can tell something was there.
# URLs are stricter: everything but printable ASCII is escaped, so a look-alike host shows.
from __future__ import annotations

import re

__all__ = ["escape", "escape_json", "escape_url"]

# C0 but tab and newline, DEL, C1, and the invisible format characters that reorder or hide
# text (bidi marks, embeddings, overrides and isolates; zero-width space; line and paragraph
# separators; BOM; interlinear annotations). ZWJ/ZWNJ stay: emoji and scripts need them.
_INVISIBLE = r"\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb"
_UNSAFE = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
_UNSAFE_LINE = re.compile(rf"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")
_UNSAFE_JSON = re.compile(rf"[\x7f-\x9f{_INVISIBLE}]")  # JSON encoders escape C0 already
_NOT_URL = re.compile(r"[^\x21-\x5b\x5d-\x7e]")  # all but printable ASCII (and the backslash)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else (
        f"\\U{code:08x}")


def escape(text: str, *, newlines: bool = True) -> str:
    """`text` with control and invisible format characters escaped (`\\x1b`, `\\u202e`).

    Tabs and newlines stay when `newlines`; otherwise they are escaped too (one line).
    """
    return (_UNSAFE if newlines else _UNSAFE_LINE).sub(_visible, text)


def escape_url(url: str) -> str:
    """`url` with every character but printable ASCII escaped, the whole of it shown."""
    return _NOT_URL.sub(_visible, url)


def escape_json(text: str) -> str:
    """JSON text with DEL, C1 and invisible format characters as `\\uXXXX` (still equal JSON)."""
    return _UNSAFE_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
