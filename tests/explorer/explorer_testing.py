"""Helpers for the explorer's AppTest tests: hostile URL values and text extraction from a run."""

from __future__ import annotations

from typing import Any

HOSTILE_VALUES: tuple[str, ...] = (
    "' OR 1=1 --",
    "1; DROP TABLE kernels; --",
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "x" * 10_000,
    "☃💥 ünïcødé \u202e",
    "../../etc/passwd",
    "%00\x00",
    "**bold** :red[x] [link](javascript:alert(1))",
    "",
)

def texts(at: Any) -> str:
    """Every message, caption, title and text element of an AppTest run, joined, to search in."""
    parts: list[str] = []
    for kind in ("title", "header", "subheader", "caption", "info", "warning", "error", "success", "text",
                 "markdown", "code", "metric"):
        for element in getattr(at, kind):
            parts.append(str(getattr(element, "value", "")))
            parts.append(str(getattr(element, "label", "")))
    parts.extend(code_boxes(at))
    return "\n".join(parts)


def code_boxes(at: Any) -> list[str]:
    """The text of every code box of an AppTest run (``explorer.code_view``, drawn with ``st.html``)."""
    from explorer.code_view import CONTAINER_CLASS, code_text

    return [code_text(h.value) for h in at.html if f'class="{CONTAINER_CLASS}"' in h.value]


def assert_clean(at: Any) -> None:
    """No exception element in the run."""
    assert not at.exception, [e.message for e in at.exception]


def add_derived_rows(path: Any, kernel_ids: list[str], tagged: dict[str, str] | None = None) -> str:
    """Write a current layout placing ``kernel_ids`` on a line, neighbours in that order, and strategy tags,
    as ``kernel-archive embed`` would; returns the layout id. Test data: positions carry no meaning."""
    from archive_db.bundle import Bundle
    from archive_db.connection import connect
    from archive_db.writer import ArchiveWriter, utcnow

    bundle = Bundle()
    bundle.add("layouts", layout_id="test-layout", model="test-model", method="umap", params="{}",
               n_fitted=len(kernel_ids), state_hash="test", created_at=utcnow(), is_current=True)
    for i, kernel_id in enumerate(kernel_ids):
        bundle.add("projections", kernel_id=kernel_id, layout_id="test-layout", x=float(i), y=float(i % 3),
                   placed_by="fit")
        for rank, other in enumerate((k for k in kernel_ids if k != kernel_id), start=1):
            bundle.add("neighbours", kernel_id=kernel_id, model="test-model", rank=rank, neighbour_id=other,
                       distance=0.1 * rank)
    for kernel_id, tag in (tagged or {}).items():
        bundle.add("kernel_tags", kernel_id=kernel_id, tag=tag, line=2, evidence="__global__ void k() {}")
    with connect(path) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)
    return "test-layout"


def decoded(values: Any) -> list[Any]:
    """A Plotly array as a list, decoding the ``{"bdata", "dtype"}`` form Plotly uses for numeric arrays."""
    import base64

    import numpy as np

    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def figures(at: Any) -> dict[str, dict[str, Any]]:
    """The Plotly figure specs (JSON) of an AppTest run by element key."""
    import json

    return {chart.key: json.loads(chart.proto.spec) for chart in at.get("plotly_chart")}


def echarts(at: Any) -> list[tuple[dict[str, Any], list[Any]]]:
    """The ECharts charts of an AppTest run, in page order: (option, its Arrow datasets as data frames, in the
    order the option names them)."""
    import json

    import pyarrow as pa

    charts = []
    for chart in at.get("echarts_chart"):
        frames = {d.name: pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in chart.proto.datasets}
        option = json.loads(chart.proto.spec)
        named = [d["source"]["name"] for d in option.get("dataset", []) if isinstance(d.get("source"), dict)]
        charts.append((option, [frames[name] for name in named]))
    return charts


def vega_charts(at: Any) -> list[tuple[dict[str, Any], Any]]:
    """The Vega-Lite charts of an AppTest run, in page order: (spec, the data frame it draws)."""
    import json

    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    return [(json.loads(chart.proto.spec), convert_arrow_bytes_to_pandas_df(chart.proto.data.data))
            for chart in at.get("vega_lite_chart")]


KERNEL_TABS: tuple[str, ...] = ("Code", "Measurements", "Profiles", "Static analysis & tags", "Related",
                                "Verification")
TASK_TABS: tuple[str, ...] = ("Kernels", "Reference", "Baselines", "Lineage")


def every_tab(open_app: Any, db: Any, page: str, tabs: tuple[str, ...], **params: Any) -> list[Any]:
    """One run of a detail page per tab (only the open tab's content runs), opened from the URL's ``tab``."""
    return [open_app(db, page, tab=tab, **params) for tab in tabs]


def frames(runs: list[Any]) -> list[Any]:
    """Every dataframe's value over several runs."""
    return [d.value for at in runs for d in at.dataframe]
