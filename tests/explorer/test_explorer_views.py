"""View helpers: archive text is escaped before it reaches Markdown."""

from __future__ import annotations

from explorer.views import code_span, fmt_share, fmt_speedup, kernel_url, plain, table_height, task_url


def test_plain_escapes_markdown_html_and_streamlit_directives() -> None:
    for hostile in ("<script>alert(1)</script>", "**x**", ":red[x]", "[a](javascript:1)", "$x$", "# h"):
        escaped = plain(hostile)
        assert all(ch not in escaped.replace("\\" + ch, "") for ch in "<>*[]()$#:")


def test_code_span_cannot_be_closed_early() -> None:
    assert code_span("a`b\nc") == "`a'b c`"


def test_links_are_relative_and_url_encoded() -> None:
    assert kernel_url("ab cd") == "./kernel?kernel=ab+cd"
    assert task_url("<x>") == "./task?task=%3Cx%3E"


def test_formats() -> None:
    assert fmt_speedup(1.234) == "1.23x" and fmt_speedup(None) == "-" and fmt_speedup(float("nan")) == "-"
    assert fmt_share(0.5) == "50.0%" and fmt_share(None) == "-"
    assert table_height(0) == 73 and table_height(3) == 143 and table_height(1000) == 560
