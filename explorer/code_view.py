"""Archive code and text as static highlighted HTML, made on the server (Pygments) and shown with ``st.html``.

``st.code`` draws with Streamlit's syntax highlighter, a browser module that registers every Prism language
when it loads: on two cores that costs each page showing code 0.6-0.7 s of the browser's time on every visit
(a page of one ``st.code`` block: 1,190 ms to draw against 450 ms for the same text in ``st.text`` and 510 ms
for this view; docs/explorer.md, speed round 6). This view sends the tokens already coloured, as inline styles.

Code is archive text: Pygments escapes every token (``<``, ``>``, ``&``, quotes), ``st.html`` sanitises the
result again and runs no script, and bidi controls, invisible and control characters are shown as
``<U+202E>``-style marks, so a kernel cannot display differently from what it is (a "Trojan Source"
reordering), hide text or move a terminal's cursor.

Example:
    >>> html = code_html('__global__ void k() { /* <b> */ }', "cpp")
    >>> "&lt;b&gt;" in html and "<b>" not in html and 'class="ka-code"' in html
    True
    >>> visible_controls("a\\u202eb")
    'a<U+202E>b'
"""

from __future__ import annotations

import functools
import html
import re

import streamlit as st
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.styles.default import DefaultStyle
from pygments.token import Error
from pygments.util import ClassNotFound

CONTAINER_CLASS = "ka-code"
"""Class of every code box's outer element (what tests and benches wait for)."""
LEXER_NAMES: dict[str, str] = {"cpp": "cuda", "c++": "cuda"}
"""Language names as pages give them -> Pygments lexer names: kernels marked C++ are CUDA C++."""
MAX_HIGHLIGHT_CHARS = 200_000
"""Longer text is shown escaped but not coloured: colouring grows with the text, and real kernels are under
100 kB."""
FONT = "'Source Code Pro', SFMono-Regular, Menlo, Consolas, monospace"
"""Streamlit's own code font (it ships Source Code Pro), then common fallbacks."""
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff"
                       "\ud800-\udfff]")


class ArchiveCodeStyle(DefaultStyle):
    """Pygments' default colours without its red box around tokens the lexer did not expect (kernels hold
    plenty of CUDA that Pygments' lexer does not know, and a box reads as a fault in the kernel)."""

    styles = {**DefaultStyle.styles, Error: ""}
    line_number_color = "#a3a8b8"
    line_number_background_color = "transparent"


def visible_controls(text: str) -> str:
    """``text`` with each bidi control, invisible character, control character (tabs and line breaks kept)
    and lone surrogate replaced by a visible ``<U+XXXX>`` mark."""
    return _CONTROLS.sub(lambda match: f"<U+{ord(match.group()):04X}>", text)


@functools.cache
def _lexer(language: str | None) -> Lexer:
    name = LEXER_NAMES.get(language or "", language or "text")
    try:
        return get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return get_lexer_by_name("text", stripnl=False, ensurenl=False)


def _pre_style(wrap: bool) -> str:
    style = f"margin:0;font-family:{FONT};font-size:14px;tab-size:4"
    return style + (";white-space:pre-wrap;overflow-wrap:anywhere" if wrap else "")


@functools.cache
def _formatter(line_numbers: bool, wrap: bool) -> HtmlFormatter:
    return HtmlFormatter(style=ArchiveCodeStyle, noclasses=True, nobackground=True,
                         linenos="table" if line_numbers else False, prestyles=_pre_style(wrap))


@functools.lru_cache(maxsize=64)
def code_html(code: str, language: str | None, *, line_numbers: bool = False, height: int | None = None,
              wrap: bool = False) -> str:
    """The HTML of one code box: ``code`` coloured as ``language`` (None: plain text), in a box of at most
    ``height`` pixels that scrolls, its lines wrapped when ``wrap``. Kept for the last 64 boxes: a page's
    reruns show the same code again (about 5 ms a kernel to colour)."""
    text = visible_controls(code)
    if len(text) > MAX_HIGHLIGHT_CHARS:
        body = f'<pre style="{_pre_style(wrap)};line-height:125%">{html.escape(text)}</pre>'
    else:
        body = highlight(text, _lexer(language), _formatter(line_numbers, wrap))
        # The line numbers' column gets the code's font and line height (Pygments styles only the code's
        # <pre>), so each number stays level with its line.
        body = body.replace('<div class="linenodiv"><pre>',
                            f'<div class="linenodiv"><pre style="{_pre_style(False)};line-height:125%;'
                            'user-select:none">', 1)
    box = "background:#f8f9fb;border-radius:0.5rem;padding:0.75rem 1rem;overflow:auto;color:#31333f"
    if height is not None:
        box += f";max-height:{int(height)}px"
    return f'<div class="{CONTAINER_CLASS}" style="{box}">{body}</div>'


def show_code(code: str, language: str | None = None, *, line_numbers: bool = False, height: int | None = None,
              wrap: bool = False) -> None:
    """Show ``code`` as ``code_html`` makes it."""
    st.html(code_html(code, language, line_numbers=line_numbers, height=height, wrap=wrap))


_TAG = re.compile(r"<[^>]*>")


def code_text(markup: str) -> str:
    """The text a code box shows (line numbers included), from its HTML: for tests and crawls.

    Example:
        >>> code_text(code_html("a < b", None))
        'a < b'
    """
    return html.unescape(_TAG.sub("", markup)).rstrip("\n")
