"""Small view helpers shared by the pages: safe text, one value format, tables, verdicts and empty states.

Archive text (names, code, errors, profile text) is user-generated content: it is shown with
``explorer.code_view`` (escaped static HTML), ``st.text`` or ``st.dataframe``, or passed through ``plain``
before it reaches Markdown, and never as markup of its own. Every value a page shows goes through ``fmt`` (or ``show_table``, which uses it per
cell), so a missing value is always ``-`` and a speedup always reads the same way.

Example:
    >>> plain("**bold** <b>x</b> :red[y]")
    '\\\\*\\\\*bold\\\\*\\\\* \\\\<b\\\\>x\\\\</b\\\\> \\\\:\\u2060red\\\\[y\\\\]'
    >>> fmt(None), fmt(float("nan"), "speedup"), fmt(1.234, "speedup"), fmt(1 / 435, "speedup")
    ('-', '-', '1.23x', '1/435x')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from explorer import page_script
from explorer import params as url
from explorer.archive import Unavailable, archive_path, fetch

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|:~$=^&])")
_BIDI_AND_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
WORD_JOINER = "\u2060"
TITLE_CHARS = 120
NAME_COLUMN_PX = 280
"""Width of task and kernel name columns: wide enough for CUDA-L2's names, which differ only in the
shape at their end."""
MISSING = "-"
ERROR_CELL_CHARS = 200
"""Error text a table cell holds (the task page's kernels table): the start of each error, not all of it.
Errors run to 4.5 kB; 328 rows of them were half of the task page's 454 kB table, which travels twice (values
and display text). The kernel's page shows the whole text."""

CODE_LANGUAGE: dict[str, str] = {
    "cuda-binding": "cpp",
    "cuda-source": "cpp",
    "model-new": "python",
    "python": "python",
}

INGEST_HINT = """kernel-archive ingest sakana ../shared/data/sakana-archive/sample.jsonl
kernel-archive ingest kernelbench ../shared/data/kernelbench
kernel-archive ingest cuda-l1 ../shared/data/cuda-l1/h100.jsonl"""

EMBED_HINT = "kernel-archive embed"


def visible_text(text: Any) -> str:
    """``text`` without bidi overrides, zero-width characters and control characters (they reorder or hide
    what a reader sees), and with line breaks as spaces."""
    raw = "" if text is None else str(text)
    raw = _BIDI_AND_INVISIBLE.sub("", raw)
    return "".join(ch if ch.isprintable() else " " for ch in raw)


def plain(text: Any, max_chars: int | None = None) -> str:
    """``text`` made literal for Markdown labels and titles: bidi controls removed, every Markdown character
    escaped, and each colon followed by a word joiner so ``:material/x:`` or ``:smile:`` stays text.
    With ``max_chars``, longer text is cut with an ellipsis."""
    shown = visible_text(text)
    if max_chars is not None and len(shown) > max_chars:
        shown = shown[: max_chars - 1] + "\u2026"
    return _MARKDOWN_SPECIAL.sub(r"\\\1", shown).replace(":", ":" + WORD_JOINER)


def clip(value: Any, max_chars: int) -> Any:
    """``value`` as text of at most ``max_chars`` characters (cut with an ellipsis); missing values stay as they
    are (``fmt`` shows them as ``-``).

    Example:
        >>> len(clip("x" * 5000, 200)), clip("out of memory", 200), clip(None, 200)
        (200, 'out of memory', None)
    """
    if is_missing(value):
        return value
    shown = str(value)
    return shown if len(shown) <= max_chars else shown[: max_chars - 1] + "\u2026"


def title(text: Any) -> None:
    """A page title from archive text: literal, at most ``TITLE_CHARS`` characters (the full text below)."""
    shown = visible_text(text)
    st.title(plain(shown, TITLE_CHARS))
    if len(shown) > TITLE_CHARS:
        with st.expander("Full name"):
            st.text(shown)


def code_span(text: Any) -> str:
    """``text`` as an inline code span (no Markdown inside it); backticks become quotes."""
    return "`" + visible_text(text).replace("`", "'") + "`"


def is_missing(value: Any) -> bool:
    """None, NaN, NaT, pd.NA, an empty string, or the text ``None`` / ``nan`` some sources write."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() in ("", "None", "nan", "NaN", "null")
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _speedup(value: float) -> str:
    if value <= 0:
        return "0x"
    if value < 0.1:
        return f"1/{1 / value:,.0f}x"
    return f"{value:,.0f}x" if value >= 100 else f"{value:.2f}x"


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    return f"{value:.4g}"


FORMATS: dict[str, Callable[[Any], str]] = {
    "text": lambda v: visible_text(v),
    "number": _number,
    "int": lambda v: f"{int(v):,}",
    "speedup": lambda v: _speedup(float(v)),
    "ms": lambda v: f"{float(v):.4g} ms",
    "share": lambda v: f"{float(v):.1%}",
    "sci": lambda v: f"{float(v):.2e}",
    "float3": lambda v: f"{float(v):.3f}",
    "bool": lambda v: "yes" if bool(v) else "no",
    "time": lambda v: str(v)[:19],
    "list": lambda v: ", ".join(str(x) for x in v) or MISSING,
}
"""How each kind of value reads; ``fmt`` picks one, missing values always read ``MISSING``."""


def fmt(value: Any, kind: str = "text") -> str:
    """``value`` as the explorer shows it everywhere: ``-`` when missing, else by ``FORMATS[kind]``.

    Example:
        >>> fmt(0.0, "speedup"), fmt(250.4, "speedup"), fmt(True, "bool"), fmt("None"), fmt(0.5, "share")
        ('0x', '250x', 'yes', '-', '50.0%')
    """
    if not isinstance(value, list | tuple) and is_missing(value):
        return MISSING
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    try:
        return FORMATS[kind](value)
    except (TypeError, ValueError, OverflowError):
        return visible_text(value)


def fmt_speedup(value: Any) -> str:
    """``1.23x``, ``1/435x`` or ``-``."""
    return fmt(value, "speedup")


def fmt_share(value: Any) -> str:
    """``45.6%`` or ``-``."""
    return fmt(value, "share")


COLUMN_TITLES: dict[str, str] = {
    "rank": "#", "kernel_name": "kernel", "task_name": "task", "measured_by": "measured by", "gpu": "GPU",
    "gpus": "GPUs", "timing_mode": "timing mode", "speedup_eager": "x eager", "speedup_compile": "x compile",
    "kernel_ms": "kernel time", "eager_ms": "eager time", "compile_ms": "compile time", "max_diff": "max diff",
    "n_kernels": "kernels", "lineage_step": "edit step", "problem_id": "problem", "kb_version": "KernelBench version",
    "share_correct": "share correct", "fast_1": "fast_1", "fast_2": "fast_2", "median_speedup_eager": "median x eager",
    "median_speedup_compile": "median x compile", "median_best_speedup": "median best",
    "geomean_best_speedup": "geomean best", "shared_tasks": "shared tasks", "share_tasks_solved": "tasks solved",
    "failing_checks": "failing checks", "check_name": "check", "verification_id": "verification",
    "measurement_id": "measurement", "kernel_id": "kernel id", "task_id": "task id", "n_trials": "trials",
    "mean_ms": "mean", "std_ms": "std", "min_ms": "min", "max_ms": "max", "ncu_profiles": "NCU",
    "torch_profiles": "torch", "clang_tidy_reports": "clang-tidy", "first_ingested_at": "first ingested",
    "last_ingested_at": "last ingested", "n_rows": "rows", "content_hash": "content hash", "origin": "origin",
    "kernel_ms_median": "kernel (median)", "kernel_ms_iqr": "kernel (IQR)", "eager_ms_median": "eager (median)",
    "compile_ms_median": "compile (median)", "harness_version": "harness", "cuda_version": "CUDA",
    "torch_version": "torch", "started_at": "started", "finished_at": "finished", "release_file": "release file",
    "gpu_ms": "GPU time", "gpu_busy": "GPU busy", "device_time_total_us": "device time (us)",
    "cpu_time_total_us": "CPU time (us)", "a": "a", "b": "b",
}
"""Human titles of the archive's column names; others read as the name with spaces."""

COLUMN_KINDS: dict[str, str] = {
    "speedup_eager": "speedup", "speedup_compile": "speedup", "median_speedup_eager": "speedup",
    "median_speedup_compile": "speedup", "median_best_speedup": "speedup", "geomean_best_speedup": "speedup",
    "best": "speedup", "kernel_ms": "ms", "eager_ms": "ms", "compile_ms": "ms", "mean_ms": "ms", "std_ms": "ms",
    "min_ms": "ms", "max_ms": "ms", "kernel_ms_median": "ms", "kernel_ms_iqr": "ms", "eager_ms_median": "ms",
    "compile_ms_median": "ms", "gpu_ms": "ms", "gpu_busy": "share", "share_correct": "share", "fast_1": "share",
    "fast_2": "share", "share_tasks_solved": "share", "max_diff": "sci", "distance": "float3", "gpus": "list",
    "origins": "list",
}
"""The ``FORMATS`` kind of known columns; other columns are formatted by their dtype."""


def column_title(name: str) -> str:
    """The title a table gives column ``name``."""
    return COLUMN_TITLES.get(name, name.replace("_", " "))


def _kind(name: str, series: pd.Series) -> str:
    if name in COLUMN_KINDS:
        return COLUMN_KINDS[name]
    if pd.api.types.is_bool_dtype(series):
        return "bool"
    if pd.api.types.is_datetime64_any_dtype(series):
        return "time"
    if pd.api.types.is_numeric_dtype(series):
        return "number"
    return "text"


def styled(frame: pd.DataFrame) -> Any:
    """``frame`` as a pandas Styler whose every cell reads as ``fmt`` writes it: columns without missing
    values keep their numbers (they sort as numbers), columns with gaps become their formatted text with
    ``-`` in the gaps, boolean columns yes / no text."""
    frame = frame.copy()
    for name in frame.columns:
        if _is_boolean(frame[name]):
            frame[name] = frame[name].map(lambda v: None if is_missing(v) else ("yes" if v else "no")).astype(object)
    kinds = {name: _kind(str(name), frame[name]) for name in frame.columns}
    for name in frame.columns:
        if any(is_missing(value) for value in frame[name]):
            # The grid draws a null cell as "None" whatever the Styler says, so a column with gaps
            # becomes its formatted text; columns without gaps stay numbers (and sort as numbers).
            frame[name] = frame[name].map(_formatter(kinds[name])).astype(object)
            kinds[name] = "text"
    formats = {name: _formatter(kind) for name, kind in kinds.items()}
    return frame.style.format(formats, na_rep=MISSING)


def _is_boolean(series: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(series):
        return True
    if series.dtype != object:
        return False
    values = series.dropna()
    return len(values) > 0 and values.map(lambda v: isinstance(v, bool)).all()


def _formatter(kind: str) -> Callable[[Any], str]:
    return lambda value: fmt(value, kind)


def show_table(frame: pd.DataFrame, key: str, columns: Sequence[str] | None = None,
               config: dict[str, Any] | None = None, links: bool = False, **kwargs: Any) -> Any:
    """Show ``frame`` with human column titles and every value through ``fmt``.

    With ``links``, a click on a ``kernel_name`` or ``task_name`` cell opens that kernel's or task's page
    in the same tab (the frame must hold ``kernel_id`` / ``task_id``). Returns the selection event.
    """
    shown = [c for c in (columns or frame.columns) if c in frame.columns]
    config = dict(config or {})
    for name in shown:
        config.setdefault(name, st.column_config.Column(column_title(name)))
    options: dict[str, Any] = {"hide_index": True, "key": key, "column_order": shown, "column_config": config}
    if links:
        options.update(on_select="rerun", selection_mode="single-cell")
    event = st.dataframe(styled(frame[[c for c in frame.columns if c in shown or c in ("kernel_id", "task_id")]]),
                         **options, **kwargs)
    if links:
        follow_cell(event, frame)
    return event


LINKED_CELLS: dict[str, tuple[str, str]] = {"kernel_name": ("kernel", "kernel_id"), "task_name": ("task", "task_id")}
"""Cells that open a page when clicked: column -> (page, id column)."""


def follow_cell(event: Any, frame: pd.DataFrame) -> None:
    """Open the page of the kernel or task cell the selection ``event`` names, if any."""
    selection = getattr(event, "selection", None) or {}
    cells = selection.get("cells", []) if isinstance(selection, dict) else getattr(selection, "cells", [])
    for row, column in cells or []:
        target = LINKED_CELLS.get(str(column))
        if target and 0 <= int(row) < len(frame) and target[1] in frame:
            page, id_column = target
            st.switch_page(page_script(page), query_params={page: str(frame.iloc[int(row)][id_column])})


def link_help(what: str = "kernel or task") -> None:
    """The caption that says table names are links."""
    st.caption(f"Click a {what} name to open its page.")


def table_height(rows: int, most: int = 560) -> int:
    """Pixel height of a dataframe showing ``rows`` rows, at most ``most``, so short tables have no blank rows."""
    return min(most, 38 + 35 * max(rows, 1))


VERDICT_STYLE: dict[str, tuple[str, str]] = {
    "passed": ("green", "✅"), "flagged": ("orange", "⚠️"), "failed": ("red", "❌"), "unverified": ("gray", "❔"),
}
"""Badge colour and icon of each verdict (emoji: the explorer loads no icon font)."""
VERDICT_HELP = ("Our verifier's latest run: passed, flagged (an anti-reward-hack check failed), failed "
                "(wrong results or a crash), or unverified (never run on a GPU).")


def verdict_badge(verdict: str, failing: Any = None) -> None:
    """The verdict as a coloured badge, with the failing checks beside it."""
    colour, icon = VERDICT_STYLE.get(verdict, VERDICT_STYLE["unverified"])
    st.badge(f"verifier: {verdict}", icon=icon, color=colour)
    if not is_missing(failing):
        st.caption(f"Failing checks: {plain(failing)}")


def show_empty_archive(path: Path) -> None:
    """The state of an archive with no kernels yet: what to run to fill it."""
    st.info(f"The archive at {code_span(path)} holds no kernels yet. Ingest a source to fill it, for example:",
            icon=":material/inbox:")
    st.code(INGEST_HINT, language="bash")
    st.caption("`kernel-archive sources --available` lists every source you can ingest.")


def show_unavailable(error: Unavailable) -> None:
    """Why the archive cannot be read, and what to do about it."""
    if error.kind == "missing":
        st.info(f"There is no archive at {code_span(error.path)} yet. Create it by ingesting a source:",
                icon=":material/inbox:")
        st.code(INGEST_HINT, language="bash")
        st.caption("Or point the app at another file: `kernel-archive serve --db FILE`.")
    elif error.kind == "locked":
        st.warning("The archive is being written by another process (an ingest, embed or verify run); "
                   "try again in a moment.", icon=":material/hourglass_top:")
        st.text(str(error))
        st.button("Try again", key="archive-retry", type="primary")
    else:
        st.error("This file cannot be read as a kernel archive.", icon=":material/error:")
        st.text(str(error))


def show_embed_needed(what: str) -> None:
    """The state of a view that needs ``kernel-archive embed`` to have run."""
    st.info(f"{what} needs code embeddings, which this archive does not have yet. Compute them with:",
            icon=":material/scatter_plot:")
    st.code(EMBED_HINT, language="bash")


def detail_from_url(kind: str, query: str) -> Any | None:
    """The detail that the page's ``?{kind}=ID`` deep link names (named query ``query``), or None after
    showing the page title and a friendly "not found"."""
    raw = st.query_params.get(kind)
    item_id = url.clean_id(raw)
    require_content()
    detail = read(query, item_id) if item_id else None
    if detail is None:
        st.title(f"{kind.capitalize()} not found" if raw else kind.capitalize())
        not_found(kind, url.clean_text(raw))
    return detail


def not_found(kind: str, value: str | None) -> None:
    """A friendly "not found" for a deep link, quoting the value only as plain text."""
    if value:
        st.warning(f"No {kind} with that id is in this archive.", icon=":material/search_off:")
        st.text(f"{kind} = {value[:200]!r}")
    else:
        st.info(f"Pick a {kind} from the leaderboard or the map, or open `?{kind}=ID`.", icon="🔎")
    st.page_link(page_script("leaderboard"), label="Go to the leaderboard", icon="🏆")


def page_not_found(path: str | None) -> None:
    """The page for a URL path the app does not have."""
    st.title("Page not found")
    st.warning("This app has no page at that address.", icon="🧭")
    if path:
        st.text(f"path = /{visible_text(path)[:200]}")
    st.page_link(page_script("leaderboard"), label="Go to the leaderboard", icon="🏆")


def read(name: str, *args: Any) -> Any:
    """``fetch`` for a page: on failure show why and what to do, and stop the page."""
    try:
        return fetch(name, *args)
    except Unavailable as error:
        show_unavailable(error)
        st.stop()


def require_content() -> dict[str, int]:
    """The archive's row counts; shows the "how to ingest" state and stops when it holds no kernels."""
    totals = read("totals")
    if not totals.get("kernels") and not totals.get("tasks"):
        show_empty_archive(archive_path())
        st.stop()
    return totals
