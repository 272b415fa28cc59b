"""Every page on the archive built from all of ../shared/data by the real adapters."""

from __future__ import annotations

from pathlib import Path

from explorer_testing import assert_clean, code_boxes, texts

from archive_db.connection import connect
from archive_db.queries import LeaderboardFilter, leaderboard


def _kernel_with(db: Path, sql: str) -> str:
    with connect(db, read_only=True) as con:
        rows = con.execute(sql).fetchall()
    assert rows, sql
    return str(rows[0][0])


def test_every_page_renders_on_the_real_sample_archive(open_app, sample_archive: Path) -> None:
    at = open_app(sample_archive)
    assert_clean(at)
    table = at.dataframe[0].value
    with connect(sample_archive, read_only=True) as con:
        expected = leaderboard(con, LeaderboardFilter(limit=100))
    assert table["kernel_id"].tolist() == expected["kernel_id"].tolist()
    assert len(at.multiselect(key="lb_source").options) >= 4
    for page in ("map", "sources"):
        assert_clean(open_app(sample_archive, page))
    task_id = str(expected["task_id"].iloc[0])
    at = open_app(sample_archive, "task", task=task_id)
    assert_clean(at)
    assert at.dataframe[0].value["task_id"].eq(task_id).all() if "task_id" in at.dataframe[0].value else True


def test_a_sakana_kernel_page_has_ncu_metrics_rules_and_clang_tidy(open_app, sample_archive: Path) -> None:
    kernel_id = _kernel_with(sample_archive, """
        SELECT k.kernel_id FROM kernels k WHERE k.source = 'sakana'
          AND EXISTS (SELECT 1 FROM ncu_metrics m WHERE m.kernel_id = k.kernel_id)
          AND EXISTS (SELECT 1 FROM clang_tidy_findings c WHERE c.kernel_id = k.kernel_id)
        ORDER BY k.kernel_id LIMIT 1""")
    at = open_app(sample_archive, "kernel", kernel=kernel_id)
    assert_clean(at)
    assert any("__global__" in c for c in code_boxes(at))
    profiles = open_app(sample_archive, "kernel", kernel=kernel_id, tab="Profiles")
    static = open_app(sample_archive, "kernel", kernel=kernel_id, tab="Static analysis & tags")
    frames = [d.value for run in (profiles, static) for d in run.dataframe]
    assert any("metric" in f and len(f) >= 20 for f in frames)
    assert any("findings" in f and f["findings"].sum() >= 1 for f in frames)
    with connect(sample_archive, read_only=True) as con:
        rule, description = con.execute("SELECT rule, description FROM ncu_rules WHERE kernel_id = ? "
                                        "ORDER BY length(description) DESC LIMIT 1", [kernel_id]).fetchall()[0]
    assert description in [t.value for t in profiles.text]  # the whole rule text, not a cut cell


def test_a_cuda_l1_kernel_page_explains_its_named_scores(open_app, sample_archive: Path) -> None:
    kernel_id = _kernel_with(sample_archive, """
        SELECT m.kernel_id FROM measurements m JOIN measurement_scores s USING (measurement_id)
        WHERE s.name LIKE 'cuda_l1.%' ORDER BY m.kernel_id LIMIT 1""")
    at = open_app(sample_archive, "kernel", kernel=kernel_id, tab="Measurements")
    assert_clean(at)
    scores = next(d.value for d in at.dataframe if "meaning" in d.value)
    assert scores["meaning"].str.startswith("CUDA-L1").all()


def test_a_task_with_baselines_shows_them(open_app, sample_archive: Path) -> None:
    task_id = _kernel_with(sample_archive, """
        SELECT b.task_id FROM baselines b JOIN kernels k ON k.task_id = b.task_id
        WHERE b.task_id IS NOT NULL ORDER BY b.task_id LIMIT 1""")
    at = open_app(sample_archive, "task", task=task_id, tab="Baselines")
    assert_clean(at)
    assert any("variant" in d.value and len(d.value) >= 1 for d in at.dataframe)
    assert "No baseline timings" not in texts(at)


def test_compare_view_falls_back_to_the_pair_sharing_most_tasks(open_app, sample_archive: Path) -> None:
    at = open_app(sample_archive, view="compare")
    assert_clean(at)
    assert "comparing the two that share the most tasks" in texts(at)
    compared = at.dataframe[0].value
    assert len(compared) == 2 and (compared["shared_tasks"] > 0).all()
