"""The built-in demo archive: what it holds, that it matches the GPU suite it came from, and every page on it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from explorer_testing import KERNEL_TABS, assert_clean, every_tab, texts
from scripts_testing import load_script

from archive_db.connection import connect
from archive_db.queries import LeaderboardFilter, leaderboard
from ingest.adapters.demo import DATA
from kernel_archive.demo import build_demo

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path, what = build_demo(tmp_path_factory.mktemp("demo") / "demo.duckdb", embed=False, showcase=None)
    assert what.startswith("built: 26 kernels with 26 verification reports"), what
    return path


def test_the_demo_holds_every_kernel_with_its_h100_report(demo_archive: Path) -> None:
    with connect(demo_archive, read_only=True) as con:
        kernels = con.execute("SELECT count(*) FROM kernels WHERE source = 'demo'").fetchall()[0][0]
        runs = dict(con.execute("SELECT status, count(*) FROM verifications GROUP BY 1").fetchall())
        gpus = {g for (g,) in con.execute("SELECT DISTINCT gpu FROM verifications").fetchall()}
        checks = con.execute("SELECT count(*) FROM verification_checks").fetchall()[0][0]
        categories = {c for (c,) in con.execute("SELECT DISTINCT category FROM tasks").fetchall()}
    assert kernels == 26
    assert set(runs) == {"passed", "flagged", "failed"} and sum(runs.values()) == 26
    assert runs["failed"] >= 10
    assert gpus == {"H100 SXM"}, "the reports name an NVIDIA H100 80GB HBM3: the SXM card"
    assert checks >= 26 * 20
    assert {"activation", "matmul/GEMM"} <= categories


def test_building_again_reuses_the_file_and_a_rebuild_adds_nothing_twice(demo_archive: Path, tmp_path: Path) -> None:
    assert build_demo(demo_archive, embed=False, showcase=None) == (demo_archive, "already built")
    copy = tmp_path / "copy.duckdb"
    build_demo(copy, embed=False, showcase=None)
    _, what = build_demo(copy, embed=False, rebuild=True, showcase=None)
    assert what.startswith("built: 26 kernels"), what
    assert not copy.with_name(copy.name + ".building").exists()


def test_the_demo_data_is_the_gpu_suites_current_code() -> None:
    script = load_script("scripts/make_demo_data.py", "make_demo_data")
    cases = {name: (task, kernel, form) for name, task, kernel, form in script._cases(script._suite()).values()}
    with gzip.open(DATA, "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    assert len(records) == 26
    for record in records:
        task, kernel, form = cases[record["kernel_name"]]
        assert (record["task_code"], record["kernel_code"], record["form"]) == (task, kernel, form), record["kernel_name"]
        assert record["report"]["environment"]["gpu"] == "NVIDIA H100 80GB HBM3"


def test_every_page_renders_on_the_demo(open_app: Any, demo_archive: Path) -> None:
    at = open_app(demo_archive)
    assert_clean(at)
    with connect(demo_archive, read_only=True) as con:
        expected = leaderboard(con, LeaderboardFilter(limit=100))
        failed = con.execute("SELECT kernel_id FROM verifications WHERE status = 'failed' LIMIT 1").fetchall()[0][0]
    assert len(expected) >= 1
    assert at.dataframe[0].value["kernel_id"].tolist() == expected["kernel_id"].tolist()
    for page in ("map", "sources"):
        assert_clean(open_app(demo_archive, page))
    header = open_app(demo_archive, "kernel", kernel=failed)
    assert_clean(header)
    assert header.metric[0].value == "failed" and "Failing checks" in header.metric[0].proto.help
    at = open_app(demo_archive, "kernel", kernel=failed, tab="Verification")
    assert_clean(at)
    verdicts = [d.value for d in at.dataframe if "verdict" in getattr(d.value, "columns", [])]
    assert verdicts and (verdicts[0]["verdict"] == "fail").any(), texts(at)[:2000]


def test_pages_render_on_a_demo_built_from_a_showcase_run(open_app: Any, tmp_path: Path) -> None:
    from run_dir_fixtures import collected, own_run

    path, _ = build_demo(tmp_path / "demo.duckdb", embed=False, showcase=collected(own_run(tmp_path / "showcase")))
    with connect(path, read_only=True) as con:
        kernel, task = con.execute("SELECT kernel_id, task_id FROM kernels WHERE source = 'showcase' "
                                   "AND name = 'naive'").fetchall()[0]
    runs = every_tab(open_app, path, "kernel", KERNEL_TABS, kernel=kernel)
    for at in runs:
        assert_clean(at)
    shown = "\n".join(texts(at) for at in runs)
    assert "relu_kernel" in shown and "bugprone-implicit-widening-of-multiplication-result" in shown
    for page, params in (("task", {"task": task}), ("sources", {}), ("map", {})):
        assert_clean(open_app(path, page, **params))
