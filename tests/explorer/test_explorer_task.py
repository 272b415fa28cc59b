"""The task page under AppTest on the hand-made archive."""

from __future__ import annotations

import pandas as pd
import pytest
from explorer_testing import HOSTILE_VALUES, assert_clean, decoded, figures, texts
from handmade_archive import Handmade

from explorer.lineage import lineages


def test_task_page_lists_every_kernel_measurement_reference_and_lineage(open_app, handmade: Handmade) -> None:
    at = open_app(handmade.path, "task", task=handmade.tasks["T1"])
    assert_clean(at)
    assert at.title[0].value == "1\\_Relu"
    kernels = at.dataframe[0].value
    assert sorted(handmade.label(k) for k in kernels["kernel_id"]) == ["a1", "a2", "b1", "b2"]
    assert [m.value for m in at.metric] == ["4", "4", "75.0%", "4.00x", "3.00x"]
    assert any("torch.relu" in c.value for c in at.code)
    chains = next(d.value for d in at.dataframe if "chain" in d.value)
    assert chains["chain"].tolist() == ["base 2.50x -> edit 1 1.50x"]
    assert "No baseline timings are linked to this task." in texts(at)
    charts = figures(at)
    assert set(charts) == {"task_distribution", "lineage_plot"}
    plotted = sorted(x for trace in charts["task_distribution"]["data"] for x in decoded(trace["x"]))
    assert plotted == [1.5, 2.5, 4.0]


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
