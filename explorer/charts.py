"""The explorer's small charts: speedups on a log axis read as speedups, and the task page's strip plot.

Example:
    >>> log_ticks(0.5, 20.0)[1]
    ['0.50x', '1.00x', '2.00x', '5.00x', '10.00x', '20.00x']
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from explorer.views import fmt_speedup

EAGER_LABEL = "eager PyTorch (1x)"


def log_ticks(low: float, high: float) -> tuple[list[float], list[str]]:
    """Tick positions and labels for a log speedup axis spanning [low, high]: 1-2-5 steps per decade,
    written as ``fmt_speedup`` writes speedups (so 0.2 reads ``0.20x``, never a bare ``2``).

    Example:
        >>> log_ticks(0.15, 3.0)
        ([0.2, 0.5, 1.0, 2.0], ['0.20x', '0.50x', '1.00x', '2.00x'])
    """
    values = [m * 10.0 ** e for e in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
              for m in (1, 2, 5)]
    inside = [round(v, 12) for v in values if low <= v <= high] or [1.0]
    return inside, [fmt_speedup(v) for v in inside]


def label_expression(values: list[float], labels: list[str]) -> str:
    """A Vega expression that writes each tick value in ``values`` as its label (others as nothing).

    Example:
        >>> label_expression([0.5, 1.0], ["0.50x", "1.00x"])
        'datum.value == 0.5 ? "0.50x" : datum.value == 1.0 ? "1.00x" : ""'
    """
    return "".join(f"datum.value == {v!r} ? {json.dumps(t)} : " for v, t in zip(values, labels, strict=True)) + '""'


def speedup_strip(frame: pd.DataFrame) -> dict[str, Any]:
    """A Vega-Lite strip plot of speedups on a log axis labelled as speedups, one row per ``where``,
    coloured by ``source``, with eager PyTorch marked at 1x and the kernel name and speedup on hover.

    ``frame`` holds ``speedup_eager`` (> 0), ``where``, ``source``, ``kernel`` and ``speedup`` (the
    speedup as text). Vega-Lite rather than Plotly: the task page then loads no 4.7 MB Plotly bundle, which
    took most of its time in a fresh browser.

    Example:
        >>> spec = speedup_strip(pd.DataFrame({"speedup_eager": [0.5, 3.0], "where": ["s @ H100"] * 2,
        ...     "source": ["s", "s"], "kernel": ["a", "b"], "speedup": ["0.50x", "3.00x"]}))
        >>> spec["layer"][0]["encoding"]["x"]["axis"]["values"]
        [0.5, 1.0, 2.0]
        >>> spec["layer"][1]["encoding"]["x"]
        {'datum': 1.0}
    """
    low = min(float(frame["speedup_eager"].min()), 1.0) / 1.3
    high = max(float(frame["speedup_eager"].max()), 1.0) * 1.3
    values, labels = log_ticks(low, high)
    x = {"field": "speedup_eager", "type": "quantitative", "title": "speedup over eager PyTorch (log scale)",
         "scale": {"type": "log", "domain": [low, high]},
         "axis": {"values": values, "labelExpr": label_expression(values, labels)}}
    points = {
        "mark": {"type": "circle", "size": 64, "opacity": 0.75},
        "transform": [{"calculate": "random()", "as": "jitter"}],
        "encoding": {
            "x": x, "y": {"field": "where", "type": "nominal", "title": None},
            "yOffset": {"field": "jitter", "type": "quantitative", "scale": {"domain": [-0.3, 1.3]}},
            "color": {"field": "source", "type": "nominal", "legend": None},
            "tooltip": [{"field": "kernel", "title": "kernel"}, {"field": "speedup", "title": "x eager"},
                        {"field": "where", "title": "source @ GPU"}],
        },
    }
    one = {"values": [{}]}
    eager = {"data": one, "mark": {"type": "rule", "strokeDash": [4, 4], "color": "grey"},
             "encoding": {"x": {"datum": 1.0}}}
    label = {"data": one, "mark": {"type": "text", "color": "grey", "align": "left", "baseline": "top", "dx": 4, "dy": 2},
             "encoding": {"x": {"datum": 1.0}, "y": {"value": 0}, "text": {"value": EAGER_LABEL}}}
    return {"height": min(380, 130 + 50 * int(frame["where"].nunique())), "layer": [points, eager, label]}
