"""Server text is shown, never obeyed: control and invisible characters become escapes (#11)."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from mrtr.cli._escape import escape, escape_json, escape_url

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e"
                    "\u2060-\u2069\ufeff\ufff9-\ufffb]")


def test_exact_escapes() -> None:
    assert escape("ok\x1b[2K\rfake\x08\x07\u202eexe.pdf\nnext\tcol") == (
        "ok\\x1b[2K\\x0dfake\\x08\\x07\\u202eexe.pdf\nnext\tcol")
    assert escape("a\nb\tc", newlines=False) == "a\\x0ab\\x09c"
    assert escape("\x9b31m\x7f\u2028\ufeff") == "\\x9b31m\\x7f\\u2028\\ufeff"
    assert escape("café 😀 👩\u200d💻 ≥ µ") == "café 😀 👩\u200d💻 ≥ µ"


def test_urls_show_only_printable_ascii() -> None:
    assert escape_url("https://a.example/p?q=1&r=%20#f") == "https://a.example/p?q=1&r=%20#f"
    assert escape_url("https://good.example\u2044@evil.example/ x\\") == (
        "https://good.example\\u2044@evil.example/\\x20x\\x5c")
    assert escape_url("https://\u0430pple.example/\U0001f600") == (
        "https://\\u0430pple.example/\\U0001f600")


@given(st.text())
def test_nothing_unsafe_survives(text: str) -> None:
    assert not UNSAFE.search(escape(text))
    assert not re.search(r"[\n\t]", escape(text, newlines=False))
    assert re.fullmatch(r"[\x21-\x7e]*", escape_url(text))


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Zl", "Zp"))))
def test_safe_text_is_unchanged(text: str) -> None:
    assert escape(text) == text == escape(text, newlines=False)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_escaped_json_is_the_same_json(value: object) -> None:
    text = escape_json(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert not UNSAFE.search(text)
