"""The task page under AppTest on the hand-made archive."""

from __future__ import annotations

import pandas as pd
import pytest
from explorer_testing import (
    HOSTILE_VALUES,
    TASK_TABS,
    assert_clean,
    code_boxes,
    every_tab,
    figures,
    frames,
    texts,
    vega_charts,
)
from handmade_archive import Handmade

from explorer.lineage import lineages


def test_task_page_lists_every_kernel_measurement_reference_and_lineage(open_app, handmade: Handmade) -> None:
    runs = every_tab(open_app, handmade.path, "task", TASK_TABS, task=handmade.tasks["T1"])
    for at in runs:
        assert_clean(at)
    at = runs[0]
    assert at.title[0].value == "1\\_Relu"
    kernels = at.dataframe[0].value
    assert sorted(handmade.label(k) for k in kernels["kernel_id"]) == ["a1", "a2", "b1", "b2"]
    assert set(kernels["verdict"]) == {"unverified"}
    assert [m.value for m in at.metric] == ["4", "4", "75.0%", "4.00x", "3.00x"]
    assert any("torch.relu" in c for c in code_boxes(runs[1]))
    chains = next(f for f in frames(runs) if "chain" in f)
    assert chains["chain"].tolist() == ["base 2.50x -> edit 1 1.50x"]
    assert "No baseline timings are linked to this task." in texts(runs[2])
    assert set(figures(runs[3])) == {"lineage_plot"} and not figures(at)
    ((spec, plotted),) = vega_charts(at)
    points, eager, label = spec["layer"]
    axis = points["encoding"]["x"]
    assert axis["scale"]["type"] == "log" and 1.0 in axis["axis"]["values"]
    assert '"1.00x"' in axis["axis"]["labelExpr"] and '"2.00x"' in axis["axis"]["labelExpr"]
    assert eager["encoding"]["x"] == {"datum": 1.0} and label["encoding"]["text"]["value"] == "eager PyTorch (1x)"
    assert sorted(plotted["speedup_eager"]) == [1.5, 2.5, 4.0]
    assert sorted(plotted["speedup"]) == ["1.50x", "2.50x", "4.00x"]


def test_lineages_orders_steps_and_keeps_only_correct_speedups() -> None:
    kernels = pd.DataFrame({
        "source": ["s"] * 3, "experiment": ["e"] * 3, "lineage": ["l"] * 3, "lineage_step": [1, 0, 2],
        "kernel_name": ["l_edit_1", "l_base", "l_edit_2"], "correct": [True, True, False],
        "speedup_eager": [2.0, 1.0, 9.0]})
    chains = lineages(kernels)
    assert chains["chain"].tolist() == ["base 1.00x -> edit 1 2.00x -> edit 2 -"]
    assert chains["best"].tolist() == [2.0]


@pytest.mark.parametrize("value", HOSTILE_VALUES[:-1])
def test_hostile_task_ids_get_a_friendly_not_found(open_app, handmade: Handmade, value: str) -> None:
    at = open_app(handmade.path, "task", task=value)
    assert_clean(at)
    assert "No task with that id is in this archive." in texts(at)


def test_a_kernel_in_two_release_files_is_one_row_naming_both(open_app, tmp_path, shared_data) -> None:
    from archive_db.connection import connect
    from ingest.adapter import IngestRequest
    from ingest.runner import ingest_source

    db = tmp_path / "l1.duckdb"
    for path in ("cuda-l1/h100.jsonl", "cuda-l1/codes-h100.json"):
        ingest_source(db, "cuda-l1", IngestRequest("cuda-l1", str(shared_data / path), options={}))
    with connect(db, read_only=True) as con:
        task_id, kernel_id = con.execute(
            "SELECT k.task_id, k.kernel_id FROM measurements m JOIN kernels k USING (kernel_id) "
            "WHERE len(m.origins) = 2 ORDER BY 1, 2 LIMIT 1").fetchall()[0]
    at = open_app(db, "task", task=task_id)
    assert_clean(at)
    rows = at.dataframe[0].value
    mine = rows[rows["kernel_id"] == kernel_id]
    assert len(mine) == 1, mine
    assert mine["release_file"].iloc[0] == "codes-h100.json, h100.jsonl"
    assert at.dataframe[0].proto.columns  # the column is configured with a human title


def test_long_errors_are_cut_in_the_kernels_table_and_whole_on_the_kernel_page(open_app, tmp_path) -> None:
    from archive_db.bundle import Bundle
    from archive_db.connection import connect
    from archive_db.records import add_kernel, add_measurement, add_task
    from archive_db.writer import ArchiveWriter, utcnow
    from explorer.views import ERROR_CELL_CHARS

    db = tmp_path / "errors.duckdb"
    bundle = Bundle()
    now = utcnow()
    bundle.add("sources", name="alpha", adapter="alpha", kind="release", license="MIT",
               first_ingested_at=now, last_ingested_at=now)
    task = add_task(bundle, "alpha", "import torch\nclass Model(torch.nn.Module):\n    pass\n", level=1,
                    problem_id=1, name="1_Long")
    error = "RuntimeError: " + "x" * 5000 + " END"
    kernel = add_kernel(bundle, "alpha", task, "long_error_kernel", "cuda-binding", "__global__ void k() {}")
    add_measurement(bundle, "alpha", kernel, gpu="H100", correct=False, error=error)
    with connect(db) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)
    at = open_app(db, "task", task=task)
    assert_clean(at)
    shown = at.dataframe[0].value["error"].iloc[0]
    assert len(shown) == ERROR_CELL_CHARS and shown.startswith("RuntimeError: x") and shown.endswith("\u2026")
    page = open_app(db, "kernel", kernel=kernel, tab="Measurements")
    assert error in code_boxes(page)
