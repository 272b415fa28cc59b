"""Leaderboard: the best kernel per task under the filters in the URL, and sources ranked on shared tasks."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import streamlit as st

from archive_db.queries import LeaderboardFilter
from explorer import page_script
from explorer import params as url
from explorer.filters import CHOICES, GROUPINGS, VIEWS
from explorer.views import (
    NAME_COLUMN_PX,
    VERDICT_HELP,
    code_span,
    fmt,
    fmt_share,
    fmt_speedup,
    link_help,
    plain,
    read,
    require_content,
    show_table,
    table_height,
)

ROWS_PER_PAGE = 100
# The menu's "Leaderboard" link carries no parameters, so the page keeps its last ones in the session and
# restores them: the filters survive a visit to a kernel page. (Comments, not strings: a page is a script
# and Streamlit's magic would draw a bare string.)
SAVED_QUERY = "lb_saved_query"
URL_KEYS: tuple[str, ...] = (*(c.key for c in CHOICES), "q", "min_speedup", "include_incorrect", "hand_written",
                             "rejected", "sort", "view", "group", "page")


def _query() -> dict[str, list[str]]:
    """The URL's leaderboard parameters, or the session's saved ones when the URL has none."""
    qp = st.query_params
    current = {key: qp.get_all(key) for key in URL_KEYS if qp.get_all(key)}
    if not current and st.session_state.get(SAVED_QUERY):
        current = dict(st.session_state[SAVED_QUERY])
    return current


def _state_from_url(options: dict[str, list[Any]]) -> list[str]:
    """Fill the filter widgets' state from the URL where the session has none; return what was dropped."""
    qp = _query()

    def one(key: str) -> str | None:
        values = qp.get(key) or []
        return values[-1] if values else None

    dropped: list[str] = []
    for spec in CHOICES:
        if f"lb_{spec.key}" not in st.session_state:
            kept, bad = url.pick_known(qp.get(spec.key, []), options[spec.key])
            st.session_state[f"lb_{spec.key}"] = kept
            dropped += [f"{spec.key}={b}" for b in bad]
    if "lb_q" not in st.session_state:
        st.session_state["lb_q"] = url.clean_text(one("q")) or ""
    if "lb_min" not in st.session_state:
        raw = one("min_speedup")
        value = url.parse_float(raw, 0.0, 10_000.0)
        if raw is not None and value is None:
            dropped.append(f"min_speedup={raw[:40]}")
        st.session_state["lb_min"] = value or 0.0
    for key, name in (("lb_incorrect", "include_incorrect"), ("lb_hand", "hand_written"), ("lb_rejected", "rejected")):
        if key not in st.session_state:
            st.session_state[key] = bool(url.parse_bool(one(name)))
    if "lb_sort" not in st.session_state:
        st.session_state["lb_sort"] = "compile" if one("sort") == "compile" else "eager"
    if "lb_view" not in st.session_state:
        st.session_state["lb_view"] = "compare" if one("view") == "compare" else "best"
    if "lb_group" not in st.session_state:
        st.session_state["lb_group"] = one("group") if one("group") in GROUPINGS else "source"
    if "lb_page" not in st.session_state:
        st.session_state["lb_page"] = int(url.parse_float(one("page"), 1, 1_000_000) or 1)
    return dropped


def _facet_label(counts: dict[Any, int], prefix: str = "") -> Any:
    return lambda value: f"{prefix}{value} ({counts.get(value, 0):,})"


def _active_filters() -> list[str]:
    """The filters that narrow the leaderboard now, as short literal phrases (shown while the popover is shut)."""
    state = st.session_state
    active = [f"{spec.label.lower()} {', '.join(plain(v) for v in state[f'lb_{spec.key}'])}"
              for spec in CHOICES if state[f"lb_{spec.key}"]]
    if url.clean_text(state["lb_q"]):
        active.insert(0, f"search {code_span(url.clean_text(state['lb_q']))}")
    if state["lb_min"]:
        active.append(f"best speedup at least {fmt_speedup(state['lb_min'])}")
    active += [label for key, label in (("lb_incorrect", "incorrect kernels included"),
                                        ("lb_rejected", "rejected kernels shown"),
                                        ("lb_hand", "hand-written only")) if state[key]]
    if state["lb_sort"] == "compile":
        active.append("speedup over torch.compile")
    return active


def _filter_widgets(options: dict[str, list[Any]], rejected: int) -> LeaderboardFilter:
    # The filters live in a popover, not the sidebar: the browser mounts a popover's widgets only when it
    # is opened, and eleven widgets (five multiselects) cost the leaderboard ~0.2 s of every load.
    active = _active_filters()
    button, summary = st.columns([1, 5], vertical_alignment="center")
    with button.popover(f"Filters ({len(active)} active)" if active else "Filters", width="stretch"):
        st.text_input("Search task or kernel", key="lb_q", max_chars=url.MAX_PARAM_CHARS,
                      placeholder="e.g. matmul, conv, softmax", help="Substring of the task or kernel name, or an id.")
        for spec in CHOICES:
            counts = read("facet_counts", spec.field)
            st.multiselect(spec.label, options[spec.key], key=f"lb_{spec.key}", placeholder="any",
                           format_func=_facet_label(counts, "level " if spec.key == "level" else ""),
                           disabled=not options[spec.key],
                           help=(f"Kernels with each {spec.label.lower()} in brackets." if options[spec.key]
                                 else f"No {spec.label.lower()} recorded yet."))
        st.number_input("Min speedup of the task's best kernel", min_value=0.0, max_value=10_000.0, step=0.25,
                        key="lb_min", format="%.2f")
        st.toggle("Include incorrect kernels", key="lb_incorrect",
                  help="Rank every measurement, not only those judged correct.")
        st.toggle(f"Show rejected kernels ({rejected:,})", key="lb_rejected",
                  help="Kernels whose latest run of our verifier failed or flagged them are hidden by default, "
                       "whatever their source claimed.")
        st.toggle("Hand-written only", key="lb_hand",
                  help="Leave out kernels tagged library-call (ATen, cuBLAS, cuDNN, CUTLASS calls).")
        st.radio("Speedup over", ["eager", "compile"], key="lb_sort", horizontal=True,
                 format_func=lambda s: {"eager": "eager PyTorch", "compile": "torch.compile"}[s])
    summary.caption(" · ".join(active) if active else "Correct kernels, every level, source, GPU, category and tag.")
    state = st.session_state
    return LeaderboardFilter(
        levels=tuple(state["lb_level"]), sources=tuple(state["lb_source"]), gpus=tuple(state["lb_gpu"]),
        categories=tuple(state["lb_category"]), tags=tuple(state["lb_tag"]),
        correct_only=not state["lb_incorrect"], hand_written_only=state["lb_hand"],
        trust_verifier=not state["lb_rejected"], min_speedup=state["lb_min"] or None,
        search=url.clean_text(state["lb_q"]), sort_by=state["lb_sort"], limit=ROWS_PER_PAGE,
    )


def filter_query(f: LeaderboardFilter, page: int = 1) -> dict[str, str | list[str]]:
    """The URL parameters of a leaderboard filter (what the page writes, and what export starts from)."""
    return url.encode({
        "q": f.search, "level": f.levels, "category": f.categories, "source": f.sources, "gpu": f.gpus,
        "tag": f.tags, "min_speedup": f.min_speedup, "include_incorrect": not f.correct_only,
        "hand_written": f.hand_written_only, "rejected": not f.trust_verifier,
        "sort": None if f.sort_by == "eager" else f.sort_by,
        "view": None if _view() == "best" else _view(),
        "group": None if _group() == "source" else _group(),
        "page": None if page <= 1 else page,
    })


def _write_url(f: LeaderboardFilter, page: int) -> None:
    query = filter_query(f, page)
    st.query_params.from_dict(query)
    st.session_state[SAVED_QUERY] = {k: v if isinstance(v, list) else [v] for k, v in query.items()}


def _view() -> str:
    return st.session_state.get("lb_view") or "best"


def _group() -> str:
    return st.session_state.get("lb_group") or "source"


def _summary(f: LeaderboardFilter) -> None:
    s = read("leaderboard_summary", f)
    cells = (
        ("Tasks covered", f"{s['tasks']:,}", "Tasks with at least one measurement under these filters."),
        ("Kernels", f"{s['kernels']:,}", "Distinct kernels measured under these filters."),
        ("Share correct", fmt_share(s["share_correct"]), "Share of measurements judged correct."),
        ("fast_1", fmt_share(s["fast_1"]), "Share of tasks with a correct kernel faster than the baseline."),
        ("fast_2", fmt_share(s["fast_2"]), "Share of tasks with a correct kernel over 2x faster."),
        ("Median best speedup", fmt_speedup(s["median_best_speedup"]), "Median over tasks of the best correct speedup."),
    )
    for column, (label, value, help_text) in zip(st.columns(len(cells), border=True), cells, strict=True):
        column.metric(label, value, help=help_text)


BEST_COLUMNS = ["rank", "task_name", "kernel_name", "speedup_eager", "verdict", "source", "level", "gpu",
                "speedup_compile", "failing_checks", "category", "n_kernels", "kernel_ms", "eager_ms", "compile_ms",
                "correct"]



def _pager(total: int) -> int:
    pages = max(1, math.ceil(total / ROWS_PER_PAGE))
    if st.session_state.get("lb_page", 1) > pages:
        st.session_state["lb_page"] = pages
    if pages > 1:
        left, right = st.columns([1, 5], vertical_alignment="bottom")
        left.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1, key="lb_page")
        page = int(st.session_state["lb_page"])
        first = (page - 1) * ROWS_PER_PAGE + 1
        right.caption(f"Tasks {first:,}-{min(total, page * ROWS_PER_PAGE):,} of {total:,}, "
                      f"{ROWS_PER_PAGE} per page.")
    return int(st.session_state.get("lb_page", 1)) if pages > 1 else 1


def _best_table(f: LeaderboardFilter, page: int, total: int) -> None:
    frame = read("leaderboard", replace(f, offset=(page - 1) * ROWS_PER_PAGE))
    if frame.empty:
        st.info("No task has a kernel that passes these filters. Loosen them under Filters.",
                icon=":material/filter_alt_off:")
        return
    config = {
        "rank": st.column_config.NumberColumn("#", width="small"),
        "task_name": st.column_config.TextColumn("task", width=NAME_COLUMN_PX, help="Click to open the task"),
        "kernel_name": st.column_config.TextColumn("kernel", width=NAME_COLUMN_PX, help="Click to open the kernel"),
        "verdict": st.column_config.TextColumn("verifier", help=VERDICT_HELP),
        "failing_checks": st.column_config.TextColumn("failing checks",
                                                      help="Checks the latest verification failed"),
        "speedup_eager": st.column_config.Column("x eager", help="Eager PyTorch time / kernel time"),
        "speedup_compile": st.column_config.Column("x compile", help="torch.compile time / kernel time"),
        "n_kernels": st.column_config.Column("kernels", help="Kernels of this task passing the filters"),
    }
    show_table(frame, "lb_table", BEST_COLUMNS, config, links=True, height=table_height(len(frame)))
    link_help()


def _compare(f: LeaderboardFilter) -> None:
    st.segmented_control("Group by", list(GROUPINGS), key="lb_group", format_func=GROUPINGS.get,
                         selection_mode="single")
    group = _group()
    label = GROUPINGS[group].lower()
    st.caption("Each group's best correct speedup per task, over only the tasks every group attempted, "
               "so nobody is rewarded for attempting easier tasks.")
    frame = read("compare_groups", group, f)
    overlap = read("group_overlap", group, f)
    if frame.empty and not overlap.empty:
        a, b = overlap.iloc[0]["a"], overlap.iloc[0]["b"]
        frame = read("compare_groups", group, f, (a, b))
        st.info(f"No task was attempted by every {label} group; comparing the two that share the most tasks, "
                f"{code_span(a)} and {code_span(b)} ({fmt(overlap.iloc[0]['shared_tasks'], 'int')} tasks). "
                "Every pair that shares a task is listed below.", icon=":material/compare_arrows:")
    if frame.empty:
        st.info(f"No two {plain(label)} groups share a task under these filters.", icon=":material/compare_arrows:")
    else:
        show_table(frame, "lb_compare", config={group: st.column_config.Column(GROUPINGS[group].lower())})
    if not overlap.empty:
        with st.expander(f"Tasks shared by each pair ({len(overlap)} pairs)"):
            show_table(overlap, "lb_overlap")


def main() -> None:
    qp = st.query_params
    for target in ("kernel", "task"):
        if target in qp:
            st.switch_page(page_script(target), query_params={target: qp.get(target, "")})
    st.title("Leaderboard")
    require_content()
    options = {spec.key: read("distinct_values", spec.field) for spec in CHOICES}
    dropped = _state_from_url(options)
    rejected = read("rejected_kernels")
    f = _filter_widgets(options, rejected)
    st.segmented_control("View", list(VIEWS), key="lb_view", format_func=VIEWS.get, label_visibility="collapsed")
    if dropped:
        st.warning("Ignored filter values from the link that match nothing in this archive: "
                   + plain(", ".join(dropped)), icon=":material/link_off:")
    _summary(f)
    if f.trust_verifier and rejected:
        st.caption(f"{rejected:,} kernels our verifier failed or flagged are hidden; "
                   "\"Show rejected kernels\" under Filters brings them back.")
    if _view() == "compare":
        _write_url(f, 1)
        _compare(f)
        return
    total = read("leaderboard_size", f)
    page = _pager(total)
    _write_url(f, page)
    _best_table(f, page, total)


main()
