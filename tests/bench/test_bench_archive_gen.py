"""The synthetic archive dataset other benches are built on: the real archive's shape, ingestible as is."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench._archive_gen import (  # noqa: E402
    COLUMNS,
    FULL_ROWS,
    SPLIT_ROWS,
    generate_archive_parquet,
    ingest_parquet,
    split_sizes,
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    return generate_archive_parquet(tmp_path_factory.mktemp("gen") / "dataset", n_rows=600, seed=3)


def test_split_sizes_follow_the_real_archive() -> None:
    assert split_sizes(FULL_ROWS) == SPLIT_ROWS
    scaled = split_sizes(600)
    assert sum(scaled.values()) == 600
    assert scaled["level_2"] > scaled["level_1"] > scaled["level_3"] > 0


def test_hub_layout_columns_and_unique_names(dataset: Path) -> None:
    files = sorted(p.name for p in (dataset / "data").glob("*.parquet"))
    assert files == [f"level_{n}-00000-of-00001.parquet" for n in (1, 2, 3)]
    rows = [r for f in sorted((dataset / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert len(rows) == 600
    assert tuple(rows[0]) == COLUMNS
    assert len({r["Kernel_Name"] for r in rows}) == 600
    assert len({r["CUDA_Code"] for r in rows}) == 600
    assert {r["Level_ID"] for r in rows} == {1, 2, 3}
    tasks = {(r["Level_ID"], r["Task_ID"]) for r in rows}
    assert len({r["PyTorch_Code_Module"] for r in rows}) == len(tasks) > 100
    for r in rows:
        assert r["Op_Name"].startswith(f"{r['Task_ID']}_")
        if r["Correct"]:
            assert r["CUDA_Speedup_Native"] == pytest.approx(r["PyTorch_Native_Runtime"] / r["CUDA_Runtime"])
            assert isinstance(ast.literal_eval(r["Torch_Profile"]), dict)
        else:
            assert r["CUDA_Runtime"] is None and r["CUDA_Speedup_Native"] == 0.0 and r["Torch_Profile"] is None
        if r["Clang_Tidy"]:
            assert f"/level_{r['Level_ID']}/task_{r['Task_ID']}/" in r["Clang_Tidy"]
        compile(r["PyTorch_Code_Functional"], "functional.py", "exec")
        assert "def module_fn(" in r["PyTorch_Code_Functional"]


def test_the_same_seed_gives_the_same_data(dataset: Path, tmp_path: Path) -> None:
    again = generate_archive_parquet(tmp_path / "again", n_rows=600, seed=3)
    for split in ("level_1", "level_3"):
        name = f"data/{split}-00000-of-00001.parquet"
        assert pq.read_table(dataset / name).equals(pq.read_table(again / name))


def test_the_sakana_adapter_ingests_it_with_every_profile(dataset: Path, tmp_path: Path) -> None:
    from archive_db.connection import connect
    from archive_db.queries import source_stats

    db = tmp_path / "archive.duckdb"
    first = ingest_parquet(db, dataset)
    again = ingest_parquet(db, dataset)
    assert first.input_records == 600 and first.added["kernels"] == 600
    assert again.rows_added == 0
    with connect(db, read_only=True) as con:
        stats = source_stats(con).set_index("source").loc["sakana"]
        functional = con.execute("SELECT count(*) FROM tasks WHERE functional_code IS NOT NULL").fetchall()[0][0]
    assert stats["kernels"] == 600 and stats["tasks"] == functional > 100
    assert stats["torch_profiles"] == stats["ncu_profiles"] > 300
