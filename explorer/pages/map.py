"""Map: the current UMAP layout of kernel code embeddings as a canvas scatter; select to list, click to open.

The colouring (``color``), the highlighted strategy tag (``tag``), the search (``q``) and a small
selection (``selected``, up to ``MAX_SELECTED_IN_URL`` kernel ids) live in the URL.
"""

from __future__ import annotations

import streamlit as st

from explorer import page_script
from explorer import params as url
from explorer.archive import Unavailable
from explorer.map_figure import (
    COLOURINGS,
    layout_figure,
    layout_points,
    search_mask,
    selected_kernel_ids,
    tag_counts,
)
from explorer.views import (
    VERDICT_HELP,
    code_span,
    link_help,
    plain,
    read,
    require_content,
    show_embed_needed,
    show_table,
    show_unavailable,
)

SELECTION_COLUMNS = ["kernel_name", "task_name", "level", "category", "source", "verdict", "strategy",
                     "correct", "speedup_eager", "speedup_compile", "failing_checks"]
MAX_SELECTED_IN_URL = 200
MAX_SELECTED_ROWS = 1_000


def _state_from_url() -> None:
    qp = st.query_params
    if "map_colour" not in st.session_state:
        wanted = qp.get("color")
        st.session_state["map_colour"] = wanted if wanted in COLOURINGS else "category"
    if "map_q" not in st.session_state:
        st.session_state["map_q"] = url.clean_text(qp.get("q")) or ""
    if "map_tag" not in st.session_state:
        st.session_state["map_tag"] = url.clean_text(qp.get("tag"))
    if "map_selected" not in st.session_state:
        raw = (qp.get("selected") or "").split(",")
        st.session_state["map_selected"] = [k for k in (url.clean_id(r) for r in raw) if k][:MAX_SELECTED_IN_URL]


def _write_url(colour: str, tag: str | None, search: str | None, selected: list[str]) -> None:
    st.query_params.from_dict(url.encode({
        "color": colour, "tag": tag if colour == "strategy" else None, "q": search,
        "selected": ",".join(selected) if 0 < len(selected) <= MAX_SELECTED_IN_URL else None,
    }))


def main() -> None:
    st.title("Map")
    require_content()
    layout = read("current_layout")
    if layout is None or not layout["n_points"]:
        show_embed_needed("The map")
        st.caption("It embeds every kernel's normalised code, lays the vectors out with UMAP and stores the "
                   "layout; this page only reads it, so it stays fast on 30k kernels.")
        return
    _state_from_url()
    try:
        points = layout_points(layout["layout_id"])
    except Unavailable as error:
        show_unavailable(error)
        return
    st.segmented_control("Colour by", list(COLOURINGS), key="map_colour", format_func=lambda c: COLOURINGS[c].label,
                         help=VERDICT_HELP if st.session_state.get("map_colour") == "verdict" else None)
    colour = st.session_state.get("map_colour") or "category"
    search_column, tag_column = st.columns(2, vertical_alignment="bottom")
    tag = None
    if colour == "strategy":
        counts = tag_counts(points)
        tags = [str(t) for t in counts.index]
        if st.session_state.get("map_tag") not in tags:
            st.session_state["map_tag"] = tags[0] if tags else None
        tag_column.selectbox("Highlight strategy tag", tags, key="map_tag", disabled=not tags,
                             format_func=lambda t: f"{t} ({int(counts[t]):,})",
                             help="Kernels using this technique are coloured; every other kernel is grey.")
        tag = st.session_state.get("map_tag")
    search_column.text_input("Find kernel or task", key="map_q", max_chars=url.MAX_PARAM_CHARS,
                             placeholder="e.g. softmax, conv",
                             help="Outlines the kernels whose kernel or task name contains this text.")
    search = url.clean_text(st.session_state.get("map_q"))
    try:
        points, fig, trace_ids = layout_figure(layout["layout_id"], colour, tag, search)
    except Unavailable as error:
        show_unavailable(error)
        return
    found = int(search_mask(points, search).sum()) if search else None
    st.caption(f"{len(points):,} kernels · {plain(layout['method'])} of {code_span(layout['model'])} "
               "embeddings · pick the box or lasso tool (top left) and drag to list kernels, click a point to open it, "
               "scroll to zoom"
               + (f" · {found:,} match {code_span(search)}" if search else "") + ".")
    # One key for every colouring: the chart is redrawn in place (about 100 ms faster than a new one); the
    # series ids tell a selection made before a recolour from one made now.
    event = st.echarts_chart(fig, key="map_chart", on_select="rerun", height=680, width="stretch")
    ids, dragged = selected_kernel_ids(event, trace_ids, [entry.get("id") for entry in fig["series"]])
    if len(ids) == 1 and not dragged and st.session_state.get("map_opened") != ids[0]:
        st.session_state["map_opened"] = ids[0]
        st.switch_page(page_script("kernel"), query_params={"kernel": ids[0]})
    if ids:
        st.session_state["map_selected"] = ids[:MAX_SELECTED_IN_URL] if len(ids) <= MAX_SELECTED_IN_URL else []
    selected = ids or st.session_state.get("map_selected", [])
    _write_url(colour, tag, search, selected)
    if not selected:
        st.caption("Nothing selected.")
        return
    chosen = points[points["kernel_id"].isin(selected)].sort_values("speedup_eager", ascending=False,
                                                                    na_position="last")
    st.subheader(f"{len(chosen):,} selected kernels")
    if len(chosen) > MAX_SELECTED_ROWS:
        st.caption(f"The {MAX_SELECTED_ROWS:,} fastest are listed.")
    show_table(chosen.head(MAX_SELECTED_ROWS), "map_selection", SELECTION_COLUMNS, links=True)
    link_help()


main()
