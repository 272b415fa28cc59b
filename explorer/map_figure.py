"""The map's WebGL scatter: one ``Scattergl`` trace per colour group, so 30k points stay fluid.

Hover text comes from the archive, so it is HTML-escaped before Plotly's hover labels (which read a
few tags) see it.

Example:
    >>> import pandas as pd
    >>> pts = pd.DataFrame({"kernel_id": ["a", "b"], "x": [0.0, 1.0], "y": [0.0, 1.0],
    ...     "kernel_name": ["k<b>", "k2"], "task_name": ["t", "t"], "source": ["s", "s"], "level": [1, 2],
    ...     "category": [None, "gemm"], "strategy": [None, None], "correct": [True, False],
    ...     "speedup_eager": [1.5, None], "speedup_compile": [None, None]})
    >>> fig, ids = map_figure(pts, "level")
    >>> [t["type"] for t in fig["data"]], ids
    (['scattergl', 'scattergl'], [['a'], ['b']])
"""

from __future__ import annotations

import html
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Colouring:
    """How to colour the map: label for the picker and the ``map_points`` column it reads."""

    label: str
    column: str
    numeric: bool = False


COLOURINGS: dict[str, Colouring] = {
    "category": Colouring("Task category", "category"),
    "strategy": Colouring("Strategy tag", "strategy"),
    "source": Colouring("Source", "source"),
    "level": Colouring("Level", "level"),
    "correct": Colouring("Correctness", "correct"),
    "speedup": Colouring("Speedup over eager", "speedup_eager", numeric=True),
}


def _escaped(values: pd.Series) -> pd.Series:
    text = values.astype(object).where(values.notna(), "").astype(str)
    for raw, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#x27;")):
        text = text.str.replace(raw, entity, regex=False)
    return text


def hover_text(points: pd.DataFrame) -> np.ndarray:
    """One hover label per point (kernel, task, speedup over eager, source), archive text HTML-escaped.

    Kept short: at 30k points the labels are most of the figure's bytes."""
    speed = points["speedup_eager"].astype(float)
    speed_text = speed.map(lambda v: "-" if v != v else f"{v:.2f}x")
    text = ("<b>" + _escaped(points["kernel_name"]) + "</b><br>" + _escaped(points["task_name"])
            + "<br>" + speed_text + " eager · " + _escaped(points["source"]))
    return text.to_numpy(dtype=object)


HOVER = "%{text}<extra>%{fullData.name}</extra>"


def _labels(points: pd.DataFrame, column: str) -> pd.Series:
    values = points[column]
    if column == "correct":
        return values.map({True: "correct", False: "incorrect"}).fillna("not measured")
    if column == "level":
        return values.map(lambda v: UNKNOWN if v is None or v != v else f"level {int(v)}")
    labels = values.astype(object).where(values.notna(), UNKNOWN).astype(str)
    top = [v for v in labels.value_counts().index if v != UNKNOWN][:MAX_GROUPS]
    return labels.where(labels.isin([*top, UNKNOWN]), OTHER)


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
    "margin": {"l": 0, "r": 0, "t": 10, "b": 0}, "legend": {"itemsizing": "constant"},
    "xaxis": {"showticklabels": False, "title": None, "zeroline": False, "showgrid": False},
    "yaxis": {"showticklabels": False, "title": None, "zeroline": False, "showgrid": False},
    "dragmode": "zoom", "hovermode": "closest", "plot_bgcolor": "rgba(0,0,0,0)",
}


def map_figure(points: pd.DataFrame, colour: str, height: int = 680) -> tuple[dict[str, Any], list[list[str]]]:
    """The figure (a Plotly figure dict: built without Plotly's per-trace validation, which costs a second
    at 30k points), and per trace the kernel ids of its points (to map a selection back to kernels)."""
    spec = COLOURINGS[colour]
    size = marker_size(len(points))
    hover = hover_text(points)
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
            "size": size, "color": np.clip(np.log2(speed[measured]), -3, 3), "colorscale": "RdBu", "cmin": -3,
            "cmax": 3, "opacity": 0.85,
            "colorbar": {"title": {"text": "x eager"}, "tickvals": [-3, -2, -1, 0, 1, 2, 3],
                         "ticktext": ["1/8", "1/4", "1/2", "1", "2", "4", "8"]}}))
        ids.append(kernel_ids[measured].tolist())
    else:
        labels = _labels(points, spec.column)
        counts = labels.value_counts()
        order = [v for v in counts.index if v not in (UNKNOWN, OTHER, "not measured")]
        order += [v for v in (OTHER, UNKNOWN, "not measured") if v in counts.index]
        label_array = labels.to_numpy(dtype=object)
        for i, label in enumerate(order):
            mask = label_array == label
            colour_value = MUTED if label in (UNKNOWN, OTHER, "not measured") else PALETTE[i % len(PALETTE)]
            if spec.column == "correct":
                colour_value = {"correct": "#59A14F", "incorrect": "#E15759"}.get(label, MUTED)
            traces.append(_trace(points, hover, mask, label, {"size": size, "color": colour_value, "opacity": 0.8}))
            ids.append(kernel_ids[mask].tolist())
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


def _cached_figure(stamp: tuple[int, ...], layout_id: str, colour: str) -> tuple[dict[str, Any], list[list[str]]]:
    from explorer.archive import fetch

    return map_figure(fetch("map_points", layout_id), colour)


def layout_figure(layout_id: str, colour: str) -> tuple[pd.DataFrame, dict[str, Any], list[list[str]]]:
    """The points of a layout with their figure, cached per archive state, layout and colouring, so a
    rerun of the map (a selection, a click) does not rebuild 30k hover labels.

    Raises:
        explorer.archive.Unavailable: as ``fetch``.
    """
    import streamlit as st

    from explorer.archive import archive_path, fetch, file_stamp

    cached = st.cache_data(max_entries=16, show_spinner=False)(_cached_figure)
    figure, ids = cached(file_stamp(archive_path()) or (), layout_id, colour)
    return fetch("map_points", layout_id), figure, ids
