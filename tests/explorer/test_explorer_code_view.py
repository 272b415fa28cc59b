"""explorer.code_view: archive code shown as static, escaped, coloured HTML that keeps hostile text inert."""

from __future__ import annotations

import re

import pytest
from hostile_text import HOSTILE_TEXTS

from explorer.code_view import CONTAINER_CLASS, MAX_HIGHLIGHT_CHARS, code_html, code_text, visible_controls

SHOWN_AS_MARKS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff"
                            "\ud800-\udfff]")


def _lines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")


@pytest.mark.parametrize("language", ["cpp", "python", None, "no-such-language"])
@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_hostile_text_is_shown_as_written_and_never_as_markup(text: str, language: str | None) -> None:
    markup = code_html(text, language, line_numbers=True, height=640)
    assert markup.startswith(f'<div class="{CONTAINER_CLASS}"')
    assert not re.search(r"<(script|img|iframe|object|svg)\b", markup, re.IGNORECASE)
    assert not SHOWN_AS_MARKS.search(markup), "a control, bidi or invisible character reached the page"
    shown = code_text(code_html(text, language))
    assert shown == _lines(visible_controls(text))
    markup.encode("utf-8")  # what Streamlit's protobuf does with it: no lone surrogate may be left


def test_bidi_overrides_are_marked_where_they_are() -> None:
    shown = code_text(code_html('if (isAdmin) { /* \u202e } \u2066 if (true) */ }', "cpp"))
    assert "<U+202E>" in shown and "<U+2066>" in shown and "\u202e" not in shown


def test_line_numbers_sit_in_their_own_column_with_the_code_font() -> None:
    markup = code_html("a = 1\nb = 2\nc = 3\n", "python", line_numbers=True)
    numbers, code = markup.split('<td class="code">')
    assert re.findall(r">(\d+)</span>", numbers) == ["1", "2", "3"]
    assert "user-select:none" in numbers and numbers.count("Source Code Pro") == code.count("Source Code Pro") == 1
    assert "1" not in code_text(code).replace("= 1", "")


def test_very_long_text_is_escaped_but_not_coloured() -> None:
    text = "<b>" + "x" * MAX_HIGHLIGHT_CHARS
    markup = code_html(text, "cpp", line_numbers=True)
    assert "<b>" not in markup and "<span" not in markup and code_text(markup) == text


def test_wrapping_and_height_are_applied() -> None:
    assert "white-space:pre-wrap" in code_html("long line", None, wrap=True)
    assert "white-space:pre-wrap" not in code_html("long line", None)
    assert "max-height:640px" in code_html("x", None, height=640)
