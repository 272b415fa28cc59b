"""The map page under AppTest, and the figure and selection helpers behind it."""

from __future__ import annotations

import pandas as pd
import pytest
from explorer_testing import add_derived_rows, assert_clean, echarts, texts
from handmade_archive import Handmade

from explorer.map_figure import COLOURINGS, SPEEDUP_BINS, hover_frame, map_figure, selected_kernel_ids


def test_without_embeddings_the_map_says_to_run_embed(open_app, handmade: Handmade) -> None:
    at = open_app(handmade.path, "map")
    assert_clean(at)
    assert "kernel-archive embed" in texts(at)
    assert not at.get("echarts_chart") and not at.get("plotly_chart")


def _drawn(option: dict) -> list[dict]:
    return [series for series in option["series"] if series.get("large")]


def test_map_plots_every_projected_kernel_on_canvas_coloured_from_the_url(open_app, handmade: Handmade) -> None:
    ids = list(handmade.kernels.values())
    add_derived_rows(handmade.path, ids, tagged={handmade.kernels["a1"]: "shared-memory-tiling"})
    at = open_app(handmade.path, "map", color="source")
    assert_clean(at)
    assert not at.get("plotly_chart")
    ((option, (points,)),) = echarts(at)
    assert sorted(series["name"] for series in _drawn(option)) == ["alpha", "beta"]
    assert sorted(option["legend"]["data"]) == ["alpha", "beta"]
    assert len(points) == len(ids) and str(points["x"].dtype) == "float32"
    assert points.columns.tolist() == ["x", "y", "group", "kernel", "task", "speedup", "source", "verifier"]
    assert not points.isna().any().any() and not points.isin(["None", "nan", "<NA>"]).any().any()
    assert "9 kernels" in texts(at)
    at.button_group(key="map_colour").set_value("speedup").run()
    assert_clean(at)
    assert at.query_params["color"] in ("speedup", ["speedup"])
    for colour in COLOURINGS:
        at.button_group(key="map_colour").set_value(colour).run()
        assert_clean(at)
        ((option, (points,)),) = echarts(at)
        assert len(points) == len(ids)
    at.text_input(key="map_q").set_value("a1").run()
    assert_clean(at)
    assert at.query_params["q"] in ("a1", ["a1"]) and "match" in texts(at)
    ((option, _),) = echarts(at)
    assert option["series"][-1]["name"] == "matches" and len(option["series"][-1]["data"]) >= 1


def test_map_remembers_search_tag_and_a_small_selection_in_the_url(open_app, handmade: Handmade) -> None:
    ids = list(handmade.kernels.values())
    add_derived_rows(handmade.path, ids, tagged={handmade.kernels["a1"]: "shared-memory-tiling"})
    at = open_app(handmade.path, "map", color="strategy", tag="shared-memory-tiling", q="Relu",
                  selected=f"{handmade.kernels['a1']},{handmade.kernels['b1']}")
    assert_clean(at)
    assert at.selectbox(key="map_tag").value == "shared-memory-tiling"
    assert at.text_input(key="map_q").value == "Relu"
    assert sorted(at.dataframe[0].value["kernel_id"]) == sorted([handmade.kernels["a1"], handmade.kernels["b1"]])


@pytest.mark.parametrize("value", ["<script>", "x" * 5000, "speedup' --"])
def test_unknown_colouring_falls_back_to_category(open_app, handmade: Handmade, value: str) -> None:
    add_derived_rows(handmade.path, list(handmade.kernels.values()))
    at = open_app(handmade.path, "map", color=value)
    assert_clean(at)
    assert at.button_group(key="map_colour").value == "category"


def _points() -> pd.DataFrame:
    return pd.DataFrame({
        "kernel_id": ["a", "b", "c"], "x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 0.0],
        "kernel_name": ["<b>bold</b>", "k2", "k3"], "task_name": ["t&t", "t", "t"], "source": ["s1", "s2", "s1"],
        "level": pd.array([1, 2, None], dtype="Int64"), "category": ["gemm", None, "gemm"],
        "strategy": [None, "tiling", None], "tags": [None, "tiling, unroll", "unroll"],
        "correct": pd.array([True, False, None], dtype="boolean"), "speedup_eager": [2.0, None, 0.5],
        "speedup_compile": [1.0, None, None], "verdict": ["flagged", "unverified", "passed"],
        "failing_checks": ["no-caching, timing", None, None]})


def _groups(option: dict, ids: list[list[str]]) -> dict[str, list[str]]:
    return {series["name"]: trace for series, trace in zip(option["series"], ids, strict=False) if series.get("large")}


@pytest.mark.parametrize("colour", list(COLOURINGS))
def test_every_colouring_places_each_point_once_and_lets_the_brush_select_it(colour: str) -> None:
    option, ids = map_figure(_points(), colour)
    drawn = _drawn(option)
    assert sorted(k for trace in ids[:len(drawn)] for k in trace) == ["a", "b", "c"]
    assert all(series["type"] == "scatter" for series in option["series"])
    assert option["legend"]["data"] == [series["name"] for series in drawn]
    twins = option["series"][len(drawn):2 * len(drawn)]
    assert [t["name"] for t in twins] == [d["name"] for d in drawn] and all(t["symbol"] == "none" for t in twins)
    assert option["brush"]["seriesIndex"] == list(range(len(drawn), 2 * len(drawn)))
    # Streamlit reports a brush's area only when the brush targets axes; without it a box around one point
    # reads as a click on that point (the browser test drags such boxes).
    assert (option["brush"]["xAxisIndex"], option["brush"]["yAxisIndex"]) == (0, 0)
    assert ids[len(drawn):2 * len(drawn)] == ids[:len(drawn)]
    (source,) = [d["source"] for d in option["dataset"] if "source" in d]
    groups = source.column("group").to_pylist()
    for i, series in enumerate(drawn):
        assert option["dataset"][series["datasetIndex"]]["transform"]["config"] == {"dimension": "group", "=": i}
        assert len(ids[i]) == groups.count(i)


def test_hover_columns_show_archive_text_literally_and_missing_as_a_dash() -> None:
    hover = hover_frame(_points())
    assert hover.columns.tolist() == ["kernel", "task", "speedup", "source", "verifier"]
    assert hover.iloc[0].tolist() == ["<b>bold</b>", "t&t", "2.00x", "s1", "flagged (no-caching, timing)"]
    assert hover.iloc[1]["speedup"] == "-" and hover.iloc[1]["verifier"] == "unverified"
    option, _ = map_figure(_points(), "category")
    assert option["series"][0]["encode"]["itemName"] == "kernel"
    assert option["series"][0]["encode"]["tooltip"] == ["task", "speedup", "source", "verifier"]


def test_the_dataset_keeps_every_hover_value_with_32_bit_string_offsets() -> None:
    import pyarrow as pa

    option, _ = map_figure(_points(), "category")
    (source,) = [d["source"] for d in option["dataset"] if "source" in d]
    kinds = [f.type.value_type if pa.types.is_dictionary(f.type) else f.type for f in source.schema]
    assert not any(pa.types.is_large_string(kind) for kind in kinds)
    assert source.column("kernel").to_pylist() == hover_frame(_points())["kernel"].tolist()
    assert source.column("task").to_pylist() == hover_frame(_points())["task"].astype(str).tolist()


def test_level_colouring_with_a_missing_level_is_not_a_traceback() -> None:
    option, ids = map_figure(_points(), "level")
    assert option["legend"]["data"] == ["level 1", "level 2", "(none)"]


def test_verdict_colours_are_fixed_and_unverified_is_grey() -> None:
    option, _ = map_figure(_points(), "verdict")
    colours = {s["name"]: s["itemStyle"]["color"] for s in _drawn(option)}
    assert colours == {"flagged": "#F28E2B", "passed": "#59A14F", "unverified": "#C8C8C8"}


def test_strategy_colouring_highlights_any_chosen_tag_not_only_the_first() -> None:
    assert map_figure(_points(), "strategy")[0]["legend"]["data"] == ["unroll", "other tags or untagged"]
    option, ids = map_figure(_points(), "strategy", tag="tiling")
    assert option["legend"]["data"] == ["tiling", "other tags or untagged"] and ids[0] == ["b"]


def test_search_outlines_the_matching_kernels_on_top() -> None:
    option, ids = map_figure(_points(), "category", search="K2")
    assert option["series"][-1]["name"] == "matches" and option["series"][-1]["silent"] and ids[-1] == ["b"]
    assert map_figure(_points(), "category", search="nothing-like-this")[1] == map_figure(_points(), "category")[1]


def test_speedups_fall_in_ordered_bands_and_one_x_is_not_white_on_white() -> None:
    option, ids = map_figure(_points(), "speedup")
    assert _groups(option, ids) == {"1/2x to 0.9x": ["c"], "2x to 4x": ["a"], "incorrect or unmeasured": ["b"]}
    about_one = dict((name, colour) for _, name, colour in SPEEDUP_BINS)["about 1x"]
    assert about_one.upper() not in ("#FFFFFF", "#F7F7F7", "WHITE")


def test_selection_maps_back_to_kernels_and_tells_clicks_from_brushes() -> None:
    ids = [["a", "b"], ["c"], ["a", "b"], ["c"]]
    click = {"selection": {"selected": [{"series_index": 1, "data_indices": [0]}], "areas": []}}
    lasso = {"selection": {"selected": [{"series_index": 2, "data_indices": [1]}, {"series_index": 3,
                                                                                  "data_indices": [0]}],
                           "areas": [{"brush_type": "polygon", "coord_range": [[0, 1], [1, 1], [0, 0]]}]}}
    junk = {"selection": {"selected": [{"series_index": 7, "data_indices": [0]}, {"series_index": "0"},
                                       {"series_index": 0, "data_indices": [5, "1", -1]}]}}
    assert selected_kernel_ids(click, ids) == (["c"], False)
    assert selected_kernel_ids(lasso, ids) == (["b", "c"], True)
    assert selected_kernel_ids(junk, ids) == ([], False)
    assert selected_kernel_ids({}, ids) == ([], False)


def test_a_selection_counts_only_on_the_option_whose_series_it_names() -> None:
    level, level_ids = map_figure(_points(), "level")
    source, source_ids = map_figure(_points(), "source")
    level_keys = [entry["id"] for entry in level["series"]]
    source_keys = [entry["id"] for entry in source["series"]]
    assert len(set(level_keys)) == len(level_keys) and not set(level_keys) & set(source_keys)
    assert level_keys == [entry["id"] for entry in map_figure(_points(), "level")[0]["series"]]
    made_on_level = {"selection": {"selected": [{"series_index": 0, "series_id": level_keys[0],
                                                 "data_indices": [0]}], "areas": []}}
    assert selected_kernel_ids(made_on_level, level_ids, level_keys) == ([level_ids[0][0]], False)
    assert selected_kernel_ids(made_on_level, source_ids, source_keys) == ([], False)
    searched = map_figure(_points(), "level", search="K2")[0]
    assert not {entry["id"] for entry in searched["series"]} & set(level_keys)


def test_large_maps_draw_small_squares_and_small_maps_circles() -> None:
    big = pd.concat([_points()] * 2_000, ignore_index=True)
    big["kernel_id"] = [f"k{i}" for i in range(len(big))]
    drawn = [s for s in map_figure(big, "level")[0]["series"] if s.get("large")]
    assert drawn and {s["symbol"] for s in drawn} == {"rect"} and {s["symbolSize"] for s in drawn} == {4}
    small = [s for s in map_figure(_points(), "level")[0]["series"] if s.get("large")]
    assert {s["symbol"] for s in small} == {"circle"}
