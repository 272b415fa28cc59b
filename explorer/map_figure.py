"""The map's scatter as an ECharts option (``st.echarts_chart``): canvas series in ECharts' ``large`` mode, one
per colour group, over one Arrow dataset, so 30k points stay light (no 4.7 MB Plotly bundle, no WebGL).

The points travel once per colouring as an Arrow dataset (coordinates as float32, names as dictionary
columns); the hover box is built in the browser from those columns by ECharts' default tooltip, which
HTML-escapes them, and is not a string per point. ECharts draws the map legend, labels and tooltip as
canvas text or escaped text, so archive names are never read as markup.

Example:
    >>> import pandas as pd
    >>> pts = pd.DataFrame({"kernel_id": ["a", "b"], "x": [0.0, 1.0], "y": [0.0, 1.0],
    ...     "kernel_name": ["k<b>", "k2"], "task_name": ["t", "t"], "source": ["s", "s"], "level": [1, 2],
    ...     "category": [None, "gemm"], "strategy": [None, None], "tags": ["tiling, unroll", None],
    ...     "correct": [True, False], "speedup_eager": [1.5, None], "speedup_compile": [None, None],
    ...     "verdict": ["passed", "failed"], "failing_checks": [None, "output-matches"]})
    >>> option, ids = map_figure(pts, "level")
    >>> [(s["name"], s.get("large", False)) for s in option["series"]], ids
    ([('level 1', True), ('level 2', True), ('level 1', False), ('level 2', False)], [['a'], ['b'], ['a'], ['b']])
    >>> map_figure(pts, "strategy", tag="unroll")[0]["legend"]["data"]
    ['unroll', 'other tags or untagged']
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
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
UNMEASURED = "incorrect or unmeasured"
SPEEDUP_BINS: tuple[tuple[float, str, str], ...] = (
    (0.25, "under 1/4x", "#B2182B"),
    (0.5, "1/4x to 1/2x", "#D6604D"),
    (0.9, "1/2x to 0.9x", "#E8A07F"),
    (1.1, "about 1x", "#7F7F7F"),
    (2.0, "1.1x to 2x", "#7FB2D5"),
    (4.0, "2x to 4x", "#4393C3"),
    (float("inf"), "4x or more", "#2166AC"),
)
"""Upper bound (exclusive), label and colour of each speedup band: slower red, about 1x a mid grey (visible
on the white background), faster blue."""
UNTAGGED = "other tags or untagged"
MATCH_COLOUR = "#111111"
MUTED_LABELS = (UNKNOWN, OTHER, "not measured", UNTAGGED, "unverified", UNMEASURED)
HOVER_COLUMNS = {"task": "task_name", "speedup": "speedup_eager", "source": "source", "verifier": "verdict"}
"""The hover box's rows after the kernel name: its title and the ``map_points`` column it shows."""
MAX_HOVER_CHARS = 160
LEGEND_TEXT_PX = 170
"""Legend entries longer than this are cut with an ellipsis. (No legend tooltip: ECharts writes its text as
HTML unescaped.)"""


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


def _shown(values: pd.Series) -> pd.Series:
    """Archive text as the hover box shows it: bidi and invisible characters removed, cut, ``-`` if missing.
    (ECharts escapes it; it is not escaped here.)"""
    from explorer.views import visible_text

    return values.astype(object).map(lambda v: "-" if v is None or v != v else visible_text(v)[:MAX_HOVER_CHARS])


def hover_frame(points: pd.DataFrame) -> pd.DataFrame:
    """The hover box's columns, one row per point: kernel, task, speedup over eager (``fmt_speedup``), source,
    and the verifier's verdict with its failing checks. Repeated values are categoricals, so they travel
    once each as Arrow dictionaries.

    Example:
        >>> hover_frame(pd.DataFrame({"kernel_name": ["k"], "task_name": ["t"], "source": ["s"],
        ...     "speedup_eager": [2.0], "verdict": ["flagged"], "failing_checks": ["timing"]})).iloc[0].tolist()
        ['k', 't', '2.00x', 's', 'flagged (timing)']
    """
    from explorer.views import fmt_speedup

    verdict = points["verdict"].fillna("unverified") if "verdict" in points else pd.Series("unverified", points.index)
    failing = points["failing_checks"] if "failing_checks" in points else pd.Series(None, points.index, dtype=object)
    failing_text = _shown(failing).map(lambda v: "" if v == "-" else f" ({v})")
    return pd.DataFrame({
        "kernel": _shown(points["kernel_name"]),
        "task": _shown(points["task_name"]).astype("category"),
        "speedup": points["speedup_eager"].astype(float).map(fmt_speedup).astype("category"),
        "source": _shown(points["source"]).astype("category"),
        "verifier": (verdict.astype(str) + failing_text).astype("category"),
    }, index=points.index)


def _speedup_labels(points: pd.DataFrame) -> pd.Series:
    speed = points["speedup_eager"].astype(float).to_numpy()
    bounds = np.array([upper for upper, _, _ in SPEEDUP_BINS])
    names = np.array([name for _, name, _ in SPEEDUP_BINS] + [UNMEASURED], dtype=object)
    band = np.where(speed > 0, np.searchsorted(bounds, np.nan_to_num(speed, nan=0.0), side="right"),
                    len(SPEEDUP_BINS))
    return pd.Series(names[band], index=points.index, dtype=object)


def _labels(points: pd.DataFrame, column: str, tag: str | None = None) -> pd.Series:
    values = points[column] if column in points else pd.Series(None, index=points.index, dtype=object)
    if column == "speedup_eager":
        return _speedup_labels(points)
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


def marker_size(n_points: int) -> int:
    """Point size: larger for small maps, small enough that 30k points do not merge into blobs."""
    return 8 if n_points < 1_000 else 6 if n_points < 5_000 else 4


SQUARE_MAX_PX = 4
"""Markers this small are drawn as squares: at 4 px a square reads as a dot, and the browser fills 30k squares
without tracing 30k anti-aliased arcs (docs/explorer.md, speed round 6)."""


def marker_symbol(size: int) -> str:
    """The marker shape for points of ``size`` pixels.

    Example:
        >>> marker_symbol(marker_size(30_615)), marker_symbol(marker_size(500))
        ('rect', 'circle')
    """
    return "rect" if size <= SQUARE_MAX_PX else "circle"


def groups(points: pd.DataFrame, colour: str, tag: str | None = None) -> tuple[pd.Series, list[tuple[str, str]]]:
    """Each point's group as a code into the returned ``(label, colour)`` list: the largest named groups
    first with palette colours (fixed colours for verdicts and correctness, bands in order for speedups),
    missing / other / untagged last in grey.

    Example:
        >>> codes, legend = groups(pd.DataFrame({"source": ["b", "a", "b", None]}), "source")
        >>> codes.tolist(), [label for label, _ in legend]
        ([0, 1, 0, 2], ['b', 'a', '(none)'])
    """
    spec = COLOURINGS[colour]
    labels = _labels(points, spec.column, tag)
    if spec.numeric:
        present = set(labels)
        legend = [(name, hue) for _, name, hue in SPEEDUP_BINS if name in present]
        legend += [(UNMEASURED, MUTED)] if UNMEASURED in present else []
    else:
        counts = labels.value_counts()
        order = [v for v in counts.index if v not in MUTED_LABELS]
        order += [v for v in MUTED_LABELS if v in counts.index]
        fixed = {"correct": CORRECT_COLOURS, "verdict": VERDICT_COLOURS}.get(spec.column, {})
        legend = [(label, fixed.get(label) or (MUTED if label in MUTED_LABELS else PALETTE[i % len(PALETTE)]))
                  for i, label in enumerate(order)]
    code = {label: i for i, (label, _) in enumerate(legend)}
    return labels.map(code).astype(np.int16), legend


def map_dataset(points: pd.DataFrame, codes: pd.Series, hover: pd.DataFrame | None = None) -> Any:
    """The chart's one dataset (a ``pyarrow.Table``): float32 coordinates, the group code and the hover
    columns, in the points' order (so a selected row index is a point's index)."""
    import pyarrow as pa

    hover = hover_frame(points) if hover is None else hover
    frame = pd.DataFrame({"x": points["x"].to_numpy(dtype=np.float32), "y": points["y"].to_numpy(dtype=np.float32),
                          "group": codes.to_numpy()})
    frame = pd.concat([frame, hover.reset_index(drop=True)], axis=1)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    # pandas' strings arrive as large_string (64-bit offsets): 8 bytes a kernel name of the 30k-point
    # payload's ~1.4 MB of names where 4 do; the browser reads both the same.
    return table.cast(pa.schema([_narrow(field) for field in table.schema]))


def _narrow(field: Any) -> Any:
    """An Arrow field with ``large_string`` (also inside a dictionary) as ``string``."""
    import pyarrow as pa

    kind = field.type
    if pa.types.is_large_string(kind):
        return field.with_type(pa.string())
    if pa.types.is_dictionary(kind) and pa.types.is_large_string(kind.value_type):
        return field.with_type(pa.dictionary(kind.index_type, pa.string(), kind.ordered))
    return field


AXIS: dict[str, Any] = {"type": "value", "scale": True, "show": False, "splitLine": {"show": False}}


def _group_series(label: str, hue: str, dataset_index: int, size: int) -> list[dict[str, Any]]:
    """A colour group's two series over its filtered dataset: the drawn one (ECharts' ``large`` mode: one
    path for all its points, hover and click still per point) and an undrawn twin (``symbol: none``) that
    the box and lasso select from, since ``large`` series keep no per-point layout to brush."""
    drawn = {"type": "scatter", "name": label, "datasetIndex": dataset_index, "symbolSize": size,
             "symbol": marker_symbol(size), "large": True, "largeThreshold": 2_000, "progressive": 0, "selectedMode": "single",
             "itemStyle": {"color": hue, "opacity": 0.85},
             "encode": {"x": "x", "y": "y", "itemName": "kernel", "tooltip": list(HOVER_COLUMNS)}}
    return [drawn, {"type": "scatter", "name": label, "datasetIndex": dataset_index, "symbol": "none",
                    "encode": {"x": "x", "y": "y"}}]


def map_figure(points: pd.DataFrame, colour: str, height: int = 680, tag: str | None = None,
               search: str | None = None, hover: pd.DataFrame | None = None) -> tuple[dict[str, Any], list[list[str]]]:
    """The ECharts option (its dataset a ``pyarrow.Table``), and per series the kernel ids of its points (to
    map a selection back to kernels).

    Series ``0 .. n-1`` draw the ``n`` colour groups, ``n .. 2n-1`` are their brushable twins (same ids), and
    points matching ``search`` are drawn last, larger and outlined (that series ignores the mouse, so hovering
    and clicking still reach the kernel below). ``tag`` is the strategy tag to highlight when colouring by
    strategy (default: the most common). ``hover`` is ``hover_frame(points)`` when the caller already has it."""
    codes, legend = groups(points, colour, tag)
    size = marker_size(len(points))
    kernel_ids = points["kernel_id"].astype(str).to_numpy(dtype=object)
    code_array = codes.to_numpy()
    datasets: list[dict[str, Any]] = [{"source": map_dataset(points, codes, hover)}]
    pairs = []
    ids: list[list[str]] = []
    for i, (label, hue) in enumerate(legend):
        datasets.append({"fromDatasetIndex": 0, "transform": {"type": "filter", "config": {"dimension": "group", "=": i}}})
        pairs.append(_group_series(label, hue, i + 1, size))
        ids.append(kernel_ids[code_array == i].tolist())
    series = [drawn for drawn, _ in pairs] + [twin for _, twin in pairs]
    ids += ids[:]
    matches = search_mask(points, search)
    if matches.any():
        xy = np.column_stack([points["x"].to_numpy(dtype=float)[matches], points["y"].to_numpy(dtype=float)[matches]])
        series.append({"type": "scatter", "name": "matches", "silent": True, "symbolSize": size + 5, "z": 3,
                       "data": xy.round(5).tolist(),
                       "itemStyle": {"color": "rgba(0,0,0,0)", "borderColor": MATCH_COLOUR, "borderWidth": 1.5}})
        ids.append(kernel_ids[matches].tolist())
    signature = series_signature(colour, tag, search)
    for index, entry in enumerate(series):
        entry["id"] = f"{signature}-{index}"
    option: dict[str, Any] = {
        "animation": False,
        "dataset": datasets,
        "grid": {"left": 8, "right": 210, "top": 36, "bottom": 8},
        "xAxis": dict(AXIS), "yAxis": dict(AXIS),
        "tooltip": {"trigger": "item", "confine": True},
        "legend": {"type": "scroll", "orient": "vertical", "right": 0, "top": 36, "bottom": 8,
                   "data": [label for label, _ in legend], "itemWidth": 12, "itemHeight": 12,
                   "textStyle": {"width": LEGEND_TEXT_PX, "overflow": "truncate"}},
        "dataZoom": [{"type": "inside", "xAxisIndex": 0, "filterMode": "none"},
                     {"type": "inside", "yAxisIndex": 0, "filterMode": "none"}],
        "toolbox": {"left": 0, "top": 0, "feature": {"brush": {"type": ["rect", "polygon", "clear"]}}},
        # Aimed at the grid's axes, a brush is reported in the selection's ``areas`` (in data coordinates, so it
        # survives a resize); without a target it has pixels only, and a box around a single point would read
        # as a click on it.
        "brush": {"seriesIndex": list(range(len(legend), 2 * len(legend))), "xAxisIndex": 0, "yAxisIndex": 0,
                  "brushMode": "single"},
        "series": series,
    }
    return option, ids


def series_signature(colour: str, tag: str | None, search: str | None) -> str:
    """A short hash naming one chart option's series (its colouring, highlighted tag and search): every
    series id starts with it, so a selection made on another option is recognised as such.

    Example:
        >>> series_signature("level", None, None) == series_signature("level", None, None) != series_signature(
        ...     "source", None, None)
        True
    """
    return hashlib.blake2b(repr((colour, tag, search)).encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def selected_kernel_ids(event: Any, series_ids: list[list[str]],
                        series_keys: Sequence[str | None] = ()) -> tuple[list[str], bool]:
    """Kernel ids of the points an ``st.echarts_chart`` selection event names, and whether they were
    brushed (box or lasso) rather than clicked.

    With ``series_keys`` (the option's series ids, in order), a selected group counts only if it names the
    same series id: the chart keeps one widget across colourings (redrawn, not rebuilt), so a selection made
    before a recolour must not be read against the new series.

    Example:
        >>> selected_kernel_ids({"selection": {"selected": [{"series_index": 0, "data_indices": [1]}],
        ...                                   "areas": []}}, [["a", "b"]])
        (['b'], False)
        >>> selected_kernel_ids({"selection": {"selected": [{"series_index": 0, "series_id": "old-0",
        ...                                   "data_indices": [1]}]}}, [["a", "b"]], ["new-0"])
        ([], False)
    """
    selection = event.get("selection", {}) if isinstance(event, dict) else getattr(event, "selection", {})
    selection = selection or {}
    ids: list[str] = []
    for group in selection.get("selected", []) or []:
        series = group.get("series_index") if isinstance(group, dict) else None
        if not isinstance(series, int) or not 0 <= series < len(series_ids):
            continue
        if series_keys and (series >= len(series_keys) or group.get("series_id") != series_keys[series]):
            continue
        for index in group.get("data_indices", []) or []:
            if isinstance(index, int) and 0 <= index < len(series_ids[series]):
                ids.append(series_ids[series][index])
    return list(dict.fromkeys(ids)), bool(selection.get("areas"))


@dataclass(frozen=True)
class MapData:
    """A layout's points and their hover columns, shared (read-only) by every colouring and every session."""

    points: pd.DataFrame
    hover: pd.DataFrame


def _map_data(path: str, stamp: tuple[int, ...], layout_id: str) -> MapData:
    from explorer.archive import run_query

    points = run_query(Path(path), "map_points", layout_id)
    return MapData(points, hover_frame(points))


def _figure(path: str, stamp: tuple[int, ...], layout_id: str, colour: str, tag: str | None,
            search: str | None) -> tuple[dict[str, Any], list[list[str]]]:
    data = _cached_map_data()(path, stamp, layout_id)
    return map_figure(data.points, colour, tag=tag, search=search, hover=data.hover)


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
                  search: str | None = None) -> tuple[pd.DataFrame, dict[str, Any], list[list[str]]]:
    """The points of a layout with their chart option and per series the kernel ids of its points.

    Kept in memory per archive state (``st.cache_resource``: no copy, no pickling on each rerun), so a rerun
    or another session only serialises the option, and a new colouring reuses the points and hover
    columns. Callers must not modify what this returns.

    Raises:
        explorer.archive.Unavailable: as ``fetch``.
    """
    path, stamp = _archive_state()
    option, ids = _cached_figure()(path, stamp, layout_id, colour, tag, search)
    return _cached_map_data()(path, stamp, layout_id).points, option, ids
