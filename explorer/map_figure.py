"""The map's WebGL scatter: one ``Scattergl`` trace per colour group, so 30k points stay fluid.

Hover text comes from the archive, so it is HTML-escaped before Plotly's hover labels (which read a
few tags) see it.

Example:
    >>> import pandas as pd
    >>> pts = pd.DataFrame({"kernel_id": ["a", "b"], "x": [0.0, 1.0], "y": [0.0, 1.0],
    ...     "kernel_name": ["k<b>", "k2"], "task_name": ["t", "t"], "source": ["s", "s"], "level": [1, 2],
    ...     "category": [None, "gemm"], "strategy": [None, None], "tags": ["tiling, unroll", None],
    ...     "correct": [True, False], "speedup_eager": [1.5, None], "speedup_compile": [None, None],
    ...     "verdict": ["passed", "failed"], "failing_checks": [None, "output-matches"]})
    >>> fig, ids = map_figure(pts, "level")
    >>> [t["type"] for t in fig["data"]], ids
    (['scattergl', 'scattergl'], [['a'], ['b']])
    >>> [t["name"] for t in map_figure(pts, "strategy", tag="unroll")[0]["data"]]
    ['unroll', 'other tags or untagged']
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

MAX_GROUPS = 14
UNKNOWN = "(none)"
OTHER = "(other)"
PALETTE = (
    "#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F", "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F",
    "#17BECF", "#BCBD22", "#393B79", "#AD494A", "#637939",
)
MUTED = "#C8C8C8"
VERDICT_COLOURS: dict[str, str] = {"passed": "#59A14F", "flagged": "#F28E2B", "failed": "#E15759", "unverified": MUTED}
CORRECT_COLOURS: dict[str, str] = {"correct": "#59A14F", "incorrect": "#E15759"}
SPEEDUP_SCALE: list[list[Any]] = [[0.0, "#B2182B"], [0.5, "#7F7F7F"], [1.0, "#2166AC"]]
"""Slower red, 1x a mid grey (visible on the white background), faster blue."""
UNTAGGED = "other tags or untagged"
MATCH_COLOUR = "#111111"


@dataclass(frozen=True)
class Colouring:
    """How to colour the map: label for the picker and the ``map_points`` column it reads."""

    label: str
    column: str
    numeric: bool = False


COLOURINGS: dict[str, Colouring] = {
    "category": Colouring("Task category", "category"),
    "strategy": Colouring("Strategy tag", "tags"),
    "source": Colouring("Source", "source"),
    "level": Colouring("Level", "level"),
    "verdict": Colouring("Verifier verdict", "verdict"),
    "correct": Colouring("Correct (by sources)", "correct"),
    "speedup": Colouring("Speedup over eager", "speedup_eager", numeric=True),
}


def _escaped(values: pd.Series) -> pd.Series:
    from explorer.views import visible_text

    text = values.astype(object).map(lambda v: "-" if v is None or v != v else visible_text(v)[:160])
    for raw, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#x27;")):
        text = text.str.replace(raw, entity, regex=False)
    return text


def hover_text(points: pd.DataFrame) -> np.ndarray:
    """One hover label per point (kernel, task, speedup over eager, source, verifier verdict and its failing
    checks), archive text HTML-escaped and cut to 160 characters.

    Kept short: at 30k points the labels are most of the figure's bytes."""
    from explorer.views import fmt_speedup

    speed_text = points["speedup_eager"].astype(float).map(fmt_speedup)
    verdict = points["verdict"].fillna("unverified") if "verdict" in points else pd.Series("unverified", points.index)
    failing = points["failing_checks"] if "failing_checks" in points else pd.Series(None, points.index, dtype=object)
    failing_text = failing.map(lambda v: "" if v is None or v != v else " (" + html.escape(str(v)[:160]) + ")")
    text = ("<b>" + _escaped(points["kernel_name"]) + "</b><br>" + _escaped(points["task_name"])
            + "<br>" + speed_text + " eager · " + _escaped(points["source"]) + "<br>verifier: " + verdict
            + failing_text)
    return text.to_numpy(dtype=object)


HOVER = "%{text}<extra>%{fullData.name}</extra>"


def _labels(points: pd.DataFrame, column: str, tag: str | None = None) -> pd.Series:
    values = points[column] if column in points else pd.Series(None, index=points.index, dtype=object)
    if column == "correct":
        return values.astype(object).map(lambda v: "not measured" if pd.isna(v) else "correct" if v else "incorrect")
    if column == "level":
        return values.astype(object).map(lambda v: UNKNOWN if pd.isna(v) else f"level {int(v)}")
    if column == "verdict":
        return values.astype(object).map(lambda v: "unverified" if pd.isna(v) else str(v))
    if column == "tags":
        chosen = tag or top_tag(points)
        if chosen is None:
            return pd.Series(UNKNOWN, index=points.index, dtype=object)
        has = values.astype(object).map(lambda v: not pd.isna(v) and chosen in str(v).split(", "))
        return has.map({True: chosen, False: UNTAGGED})
    labels = values.astype(object).where(values.notna(), UNKNOWN).astype(str)
    top = [v for v in labels.value_counts().index if v != UNKNOWN][:MAX_GROUPS]
    return labels.where(labels.isin([*top, UNKNOWN]), OTHER)


def tag_counts(points: pd.DataFrame) -> pd.Series:
    """Kernels per strategy tag among the points, most common first."""
    if "tags" not in points or points["tags"].isna().all():
        return pd.Series(dtype=int)
    return points["tags"].dropna().str.split(", ").explode().value_counts()


def top_tag(points: pd.DataFrame) -> str | None:
    """The most common strategy tag among the points (the default one to highlight)."""
    counts = tag_counts(points)
    return str(counts.index[0]) if len(counts) else None


def search_mask(points: pd.DataFrame, query: str | None) -> np.ndarray:
    """Which points' kernel or task name contains ``query`` (case-insensitive), or whose id is ``query``."""
    if not query:
        return np.zeros(len(points), dtype=bool)
    needle = query.strip().lower()
    names = (points["kernel_name"].fillna("").astype(str).str.lower().str.contains(needle, regex=False)
             | points["task_name"].fillna("").astype(str).str.lower().str.contains(needle, regex=False))
    return (names | (points["kernel_id"] == query.strip())).to_numpy(dtype=bool)


def _trace(points: pd.DataFrame, hover: np.ndarray, mask: np.ndarray, name: str,
           marker: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scattergl", "mode": "markers", "name": html.escape(name),
            "x": points["x"].to_numpy(dtype=np.float32)[mask], "y": points["y"].to_numpy(dtype=np.float32)[mask],
            "text": hover[mask],
            "hovertemplate": HOVER, "marker": marker}


def marker_size(n_points: int) -> int:
    """Point size: larger for small maps, small enough that 30k points do not merge into blobs."""
    return 8 if n_points < 1_000 else 6 if n_points < 5_000 else 4


LAYOUT: dict[str, Any] = {
    "margin": {"l": 0, "r": 0, "t": 40, "b": 0},
    "legend": {"itemsizing": "constant", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.01},
    "xaxis": {"showticklabels": False, "title": None, "zeroline": False, "showgrid": False},
    "yaxis": {"showticklabels": False, "title": None, "zeroline": False, "showgrid": False},
    "dragmode": "zoom", "hovermode": "closest", "plot_bgcolor": "rgba(0,0,0,0)",
}


def map_figure(points: pd.DataFrame, colour: str, height: int = 680, tag: str | None = None,
               search: str | None = None, hover: np.ndarray | None = None) -> tuple[dict[str, Any], list[list[str]]]:
    """The figure (a Plotly figure dict), and per trace the kernel ids of its points (to map a selection
    back to kernels).

    ``tag`` is the strategy tag to highlight when colouring by strategy (default: the most common);
    points matching ``search`` are drawn again on top, larger and outlined. ``hover`` is
    ``hover_text(points)`` when the caller already has it (it is most of the cost at 30k points)."""
    spec = COLOURINGS[colour]
    size = marker_size(len(points))
    hover = hover_text(points) if hover is None else hover
    kernel_ids = points["kernel_id"].to_numpy(dtype=object)
    traces: list[dict[str, Any]] = []
    ids: list[list[str]] = []
    if spec.numeric:
        speed = points[spec.column].astype(float).to_numpy()
        measured = speed > 0
        if (~measured).any():
            traces.append(_trace(points, hover, ~measured, "incorrect or unmeasured",
                                 {"size": size, "color": MUTED, "opacity": 0.5}))
            ids.append(kernel_ids[~measured].tolist())
        traces.append(_trace(points, hover, measured, "x eager", {
            "size": size, "color": np.clip(np.log2(speed[measured]), -3, 3), "colorscale": SPEEDUP_SCALE, "cmin": -3,
            "cmax": 3, "opacity": 0.85,
            "colorbar": {"title": {"text": "x eager"}, "tickvals": [-3, -2, -1, 0, 1, 2, 3],
                         "ticktext": ["1/8", "1/4", "1/2", "1", "2", "4", "8"]}}))
        ids.append(kernel_ids[measured].tolist())
    else:
        labels = _labels(points, spec.column, tag)
        counts = labels.value_counts()
        muted = (UNKNOWN, OTHER, "not measured", UNTAGGED, "unverified")
        order = [v for v in counts.index if v not in muted]
        order += [v for v in muted if v in counts.index]
        fixed = {"correct": CORRECT_COLOURS, "verdict": VERDICT_COLOURS}.get(spec.column, {})
        label_array = labels.to_numpy(dtype=object)
        for i, label in enumerate(order):
            mask = label_array == label
            colour_value = fixed.get(label) or (MUTED if label in muted else PALETTE[i % len(PALETTE)])
            traces.append(_trace(points, hover, mask, label, {"size": size, "color": colour_value, "opacity": 0.8}))
            ids.append(kernel_ids[mask].tolist())
    matches = search_mask(points, search)
    if matches.any():
        traces.append(_trace(points, hover, matches, f"matches '{search}'", {
            "size": size + 4, "color": "rgba(0,0,0,0)", "line": {"color": MATCH_COLOUR, "width": 2}}))
        ids.append(kernel_ids[matches].tolist())
    return {"data": traces, "layout": {**LAYOUT, "height": height}}, ids


def selected_kernel_ids(event: Any, trace_ids: list[list[str]]) -> tuple[list[str], bool]:
    """Kernel ids of the points an ``st.plotly_chart`` selection event names, and whether they were
    dragged (box or lasso) rather than clicked.

    Example:
        >>> selected_kernel_ids({"selection": {"points": [{"curve_number": 1, "point_index": 0}],
        ...                                   "box": [], "lasso": []}}, [["a"], ["b"]])
        (['b'], False)
    """
    selection = event.get("selection", {}) if isinstance(event, dict) else getattr(event, "selection", {})
    selection = selection or {}
    ids: list[str] = []
    for point in selection.get("points", []) or []:
        curve = point.get("curve_number")
        index = point.get("point_index", point.get("point_number"))
        if isinstance(curve, int) and isinstance(index, int) and 0 <= curve < len(trace_ids) \
                and 0 <= index < len(trace_ids[curve]):
            ids.append(trace_ids[curve][index])
    return ids, bool(selection.get("box") or selection.get("lasso"))


@dataclass(frozen=True)
class MapData:
    """A layout's points and their hover labels, shared (read-only) by every colouring and every session."""

    points: pd.DataFrame
    hover: np.ndarray


def _map_data(path: str, stamp: tuple[int, ...], layout_id: str) -> MapData:
    from explorer.archive import run_query

    points = run_query(Path(path), "map_points", layout_id)
    return MapData(points, hover_text(points))


def _figure(path: str, stamp: tuple[int, ...], layout_id: str, colour: str, tag: str | None,
            search: str | None) -> tuple[Any, list[list[str]]]:
    import plotly.graph_objects as go

    data = _cached_map_data()(path, stamp, layout_id)
    figure, ids = map_figure(data.points, colour, tag=tag, search=search, hover=data.hover)
    return go.Figure(figure), ids


@functools.cache
def _cached_map_data() -> Any:
    import streamlit as st

    return st.cache_resource(max_entries=2, show_spinner=False)(_map_data)


@functools.cache
def _cached_figure() -> Any:
    import streamlit as st

    return st.cache_resource(max_entries=16, show_spinner=False)(_figure)


def _archive_state() -> tuple[str, tuple[int, ...]]:
    from explorer.archive import Unavailable, archive_path, file_stamp

    path = archive_path()
    stamp = file_stamp(path)
    if stamp is None:
        raise Unavailable("missing", f"no archive at {path}", path)
    return str(path), stamp


def layout_points(layout_id: str) -> pd.DataFrame:
    """The points of a layout (``map_points``), kept in memory per archive state; do not modify them.

    Raises:
        explorer.archive.Unavailable: as ``fetch``.
    """
    return _cached_map_data()(*_archive_state(), layout_id).points


def layout_figure(layout_id: str, colour: str, tag: str | None = None,
                  search: str | None = None) -> tuple[pd.DataFrame, Any, list[list[str]]]:
    """The points of a layout with their figure (a validated ``plotly.graph_objects.Figure``, which
    ``st.plotly_chart`` then sends as it is) and per trace the kernel ids of its points.

    Kept in memory per archive state (``st.cache_resource``: no copy, no pickling of 30k hover labels on
    each rerun), so a rerun or another session only serialises the figure, and a new colouring reuses
    the points and hover labels. Callers must not modify what this returns.

    Raises:
        explorer.archive.Unavailable: as ``fetch``.
    """
    path, stamp = _archive_state()
    figure, ids = _cached_figure()(path, stamp, layout_id, colour, tag, search)
    return _cached_map_data()(path, stamp, layout_id).points, figure, ids
