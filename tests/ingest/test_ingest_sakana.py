"""The sakana adapter on the real AI CUDA Engineer Archive rows: JSONL, parquet file, folder and hub."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ingest.adapters.sakana as sakana
from ingest.adapter import IngestRequest
from ingest.errors import IngestError
from ingest.runner import ingest_source

SAMPLE = "sakana-archive/sample.jsonl"


def sample_rows(shared_data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (shared_data / SAMPLE).open()]


def ingest(db: Path, path: str | Path, **request: Any) -> Any:
    return ingest_source(db, "sakana", IngestRequest("sakana", str(path), **request))


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=16)
    return path


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    db = tmp_path_factory.mktemp("sakana") / "archive.duckdb"
    ingest(db, shared_data / SAMPLE)
    return db


def test_sample_counts(sample_db: Path) -> None:
    assert query(sample_db, "SELECT count(*), count(DISTINCT task_id) FROM kernels") == [(82, 3)]
    assert query(sample_db, "SELECT count(*) FROM tasks") == [(3,)]
    assert query(sample_db, "SELECT correct, count(*) FROM measurements GROUP BY 1 ORDER BY 1") == [
        (False, 20), (True, 62)]
    assert query(sample_db, "SELECT DISTINCT gpu, source FROM measurements") == [("H100", "sakana")]
    per_kernel = query(sample_db, "SELECT DISTINCT n FROM (SELECT count(*) AS n FROM ncu_metrics GROUP BY kernel_id)")
    assert per_kernel == [(27,)]
    assert query(sample_db, "SELECT count(DISTINCT kernel_id), count(*) FROM ncu_metrics") == [(62, 62 * 27)]
    assert query(sample_db, "SELECT count(*), count(DISTINCT kernel_id) FROM clang_tidy_findings") == [(1046, 62)]
    # NCU dicts are stored whole as rows; only clang-tidy, whose rows drop the context lines, keeps its text
    assert query(sample_db, "SELECT kind, count(*) FROM profile_raw GROUP BY 1 ORDER BY 1") == [("clang-tidy", 62)]
    assert query(sample_db, "SELECT DISTINCT origin FROM ncu_metrics") == [("sakana",)]


def test_tasks_carry_level_problem_and_name(sample_db: Path) -> None:
    assert query(sample_db, "SELECT level, problem_id, name, first_source FROM tasks ORDER BY level") == [
        (1, 1, "1_Square_matrix_multiplication_", "sakana"),
        (2, 1, "1_Conv2D_ReLU_BiasAdd", "sakana"),
        (3, 1, "1_MLP", "sakana"),
    ]


def test_incorrect_kernels_are_kept_with_null_speedups_and_their_error(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT kernel_ms, speedup_eager, speedup_compile, eager_ms, error, max_diff "
                            "FROM measurements WHERE NOT correct")
    assert len(rows) == 20
    assert all(r[0] is None and r[1] is None and r[2] is None and r[3] is not None for r in rows)
    assert sum(r[4] is not None for r in rows) == 8
    assert any(r[4] and "PyTorch extensions root" in r[4] for r in rows)
    assert sum(r[5] is not None for r in rows) == 12
    correct = query(sample_db, "SELECT min(speedup_eager), count(*) FROM measurements WHERE correct")
    assert correct[0][0] > 0 and correct[0][1] == 62


def test_speedup_is_eager_over_kernel_time(sample_db: Path) -> None:
    for eager, kernel, speedup in query(sample_db, "SELECT eager_ms, kernel_ms, speedup_eager FROM measurements "
                                                   "WHERE correct"):
        assert speedup == pytest.approx(eager / kernel, rel=1e-6)


def test_lineage_and_experiment_recovered(sample_db: Path) -> None:
    rows = {
        name: (experiment, lineage, step, json.loads(attributes))
        for name, experiment, lineage, step, attributes in query(
            sample_db, "SELECT name, experiment, lineage, lineage_step, attributes FROM kernels")
    }
    experiment, lineage, step, facts = rows["streamed_conv2d_edit_1"]
    assert (experiment, lineage, step) == ("20250208_optimize_b5_s4_e1_sweep", "streamed_conv2d", 1)
    assert (facts["batch"], facts["sample"], facts["variant"]) == (1, 2, "edit_1")
    assert rows["streamed_conv2d_base"][:3] == ("20250208_optimize_b5_s4_e1_sweep", "streamed_conv2d", 0)
    # the directory, not the greedy name, is the lineage root: ..._base_base came from dir ..._base
    assert rows["aligned_vectorized_matmul_base_base"][1:3] == ("aligned_vectorized_matmul_base", 0)
    # incorrect kernels have no clang-tidy paths: lineage from the name suffix only
    assert rows["warp_shfl_matmul_base"][:3] == (None, "warp_shfl_matmul", 0)
    with_experiment = query(sample_db, "SELECT count(*) FROM kernels WHERE experiment IS NOT NULL")
    assert with_experiment == [(62,)]
    assert query(sample_db, "SELECT count(*) FROM kernels WHERE lineage IS NULL") == [(0,)]


def test_reingest_adds_nothing_and_parses_no_profile_again(
    sample_db: Path, shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "copy.duckdb"
    db.write_bytes(sample_db.read_bytes())
    parsed: list[int] = []
    original = sakana.profile_rows
    monkeypatch.setattr(sakana, "profile_rows", lambda jobs, origin, *rest: parsed.append(len(jobs)) or original(jobs, origin, *rest))
    summary = ingest(db, shared_data / SAMPLE)
    assert summary.rows_added == 0
    assert summary.input_records == 82
    assert sum(parsed) == 0


def test_profiles_missing_from_the_archive_are_parsed_again(sample_db: Path, shared_data: Path, tmp_path: Path) -> None:
    """The skip is per (kernel, kind): a kernel whose NCU rows are gone gets them back on re-ingest."""
    db = tmp_path / "copy.duckdb"
    db.write_bytes(sample_db.read_bytes())
    with duckdb.connect(str(db)) as con:
        victim = con.execute("SELECT min(kernel_id) FROM ncu_metrics").fetchall()[0][0]
        con.execute("DELETE FROM ncu_metrics WHERE kernel_id = ?", [victim])
        con.execute("DELETE FROM ncu_rules WHERE kernel_id = ?", [victim])
    summary = ingest(db, shared_data / SAMPLE)
    assert summary.added["ncu_metrics"] == 27 and summary.added["clang_tidy_findings"] == 0


def test_gpu_override(shared_data: Path, archive_path: Path) -> None:
    ingest(archive_path, shared_data / SAMPLE, gpu="NVIDIA A100-SXM4-80GB")
    assert query(archive_path, "SELECT DISTINCT gpu, gpu_family FROM measurements") == [("A100 80GB", "A100")]


def test_parquet_file_and_hub_layout_folder_give_the_same_archive(
    shared_data: Path, tmp_path: Path, sample_db: Path
) -> None:
    rows = sample_rows(shared_data)
    single = write_parquet(rows, tmp_path / "one" / "archive.parquet")
    by_level: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_level[row["Level_ID"]].append(row)
    folder = tmp_path / "hf"
    for level, level_rows in by_level.items():
        write_parquet(level_rows, folder / "data" / f"level_{level}-00000-of-00001.parquet")
    expected = query(sample_db, "SELECT kernel_id FROM kernels ORDER BY 1")
    for path in (single, folder):
        db = tmp_path / f"{path.name}.duckdb"
        summary = ingest(db, path)
        assert summary.input_records == 82
        assert query(db, "SELECT kernel_id FROM kernels ORDER BY 1") == expected
        assert query(db, "SELECT count(*) FROM ncu_metrics") == [(1674,)]
    # the same rows from another input add no kernels, only the new origin
    again = ingest(tmp_path / f"{folder.name}.duckdb", single)
    assert again.rows_added == 0 and again.added["source_origins"] == 1


def test_parser_pool_gives_the_same_rows_as_inline_parsing(
    shared_data: Path, tmp_path: Path, sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sakana, "POOL_MIN_ROWS", 0)
    monkeypatch.setattr(sakana, "BATCH_ROWS", 16)
    parquet = write_parquet(sample_rows(shared_data), tmp_path / "archive.parquet")
    db = tmp_path / "pool.duckdb"
    ingest(db, parquet)
    sql = "SELECT kernel_id, metric, value, variance, n FROM ncu_metrics ORDER BY 1, 2"
    assert query(db, sql) == query(sample_db, sql)
    sql = "SELECT kernel_id, seq, file, line, col, severity, check_name, message FROM clang_tidy_findings ORDER BY 1, 2"
    assert query(db, sql) == query(sample_db, sql)
    # the raw clang-tidy text comes from the parquet batch itself here, from the parsed JSON rows there
    sql = "SELECT kernel_id, origin, kind, raw FROM profile_raw ORDER BY 1, 3"
    assert query(db, sql) == query(sample_db, sql) and len(query(db, sql)) == 62


def test_raw_text_from_a_parquet_column_that_is_not_text_is_left_to_the_parser(
    shared_data: Path, tmp_path: Path
) -> None:
    """An all-null Clang_Tidy column reads as Arrow's null type: no raw rows are taken from it, and none made."""
    rows = [row | {"Clang_Tidy": None} for row in sample_rows(shared_data)]
    db = tmp_path / "no-tidy.duckdb"
    ingest(db, write_parquet(rows, tmp_path / "archive.parquet"))
    assert query(db, "SELECT count(*) FROM profile_raw") == [(0,)]
    assert query(db, "SELECT count(*) FROM clang_tidy_findings") == [(0,)]
    assert query(db, "SELECT count(*) FROM ncu_metrics") == [(1674,)]


class _FakeDatasets:
    """Stands in for the hub: ``load_dataset`` returns a DatasetDict built from the real sample rows."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.calls: list[tuple[Any, ...]] = []

    def load_dataset(self, *args: Any, **kwargs: Any) -> Any:
        from datasets import Dataset, DatasetDict

        self.calls.append(args)
        by_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in self.rows:
            by_level[f"level_{row['Level_ID']}"].append(row)
        return DatasetDict({split: Dataset.from_list(rows) for split, rows in sorted(by_level.items())})


def test_hub_path_loads_the_dataset_by_id(
    shared_data: Path, archive_path: Path, monkeypatch: pytest.MonkeyPatch, sample_db: Path
) -> None:
    datasets = pytest.importorskip("datasets")
    fake = _FakeDatasets(sample_rows(shared_data))
    monkeypatch.setattr(datasets, "load_dataset", fake.load_dataset)
    summary = ingest_source(archive_path, "sakana", IngestRequest("sakana"))
    assert fake.calls == [("SakanaAI/AI-CUDA-Engineer-Archive",)]
    assert summary.input_records == 82
    assert query(archive_path, "SELECT kernel_id FROM kernels ORDER BY 1") == query(
        sample_db, "SELECT kernel_id FROM kernels ORDER BY 1")
    assert query(archive_path, "SELECT origin FROM source_origins") == [
        ("hf://datasets/SakanaAI/AI-CUDA-Engineer-Archive",)]


def test_unreachable_hub_is_a_clear_error(archive_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")

    def offline(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("Couldn't reach 'SakanaAI/AI-CUDA-Engineer-Archive' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(IngestError, match="could not load the dataset from the Hugging Face hub") as caught:
        ingest(archive_path, "SakanaAI/AI-CUDA-Engineer-Archive")
    assert "download the parquet files and pass their folder" in str(caught.value)


def test_same_problem_meets_in_one_task_across_sources(shared_data: Path, archive_path: Path) -> None:
    """Level-1 task 1 differs from CUDA-L1's reference only in formatting: one task row. Level-2 task 1
    differs in the bias init (a different problem for the same (level, id)): two task rows."""
    pytest.importorskip("ingest.adapters.cuda_l1", reason="the cuda-l1 adapter is not written yet")
    ingest(archive_path, shared_data / SAMPLE)
    ingest_source(archive_path, "cuda-l1", IngestRequest("cuda-l1", str(shared_data / "cuda-l1" / "h100.jsonl")))
    sources = dict(query(archive_path, """
        SELECT t.level, list(DISTINCT a.source ORDER BY a.source)
        FROM tasks t JOIN task_aliases a USING (task_id)
        WHERE t.task_id IN (SELECT task_id FROM task_aliases WHERE source = 'sakana')
        GROUP BY t.level"""))
    assert sources[1] == ["cuda-l1", "sakana"]
    assert sources[2] == ["sakana"]
    assert query(archive_path, "SELECT count(*) FROM tasks WHERE level = 2 AND problem_id = 1") == [(2,)]


def test_tags_derived_in_the_parser_pool_equal_the_post_write_hooks(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strategy tags computed per batch in the workers (``KernelDerivation``) are the rows ``annotate``
    would add after the ingest, which then finds nothing left to tag."""
    from embeddings.annotate import annotate
    from kernel_archive.workflows import ingest_and_annotate

    monkeypatch.setattr(sakana, "POOL_MIN_ROWS", 0)
    monkeypatch.setattr(sakana, "BATCH_ROWS", 16)
    parquet = write_parquet(sample_rows(shared_data), tmp_path / "archive.parquet")
    derived = ingest_and_annotate(tmp_path / "derived.duckdb", "sakana", IngestRequest("sakana", str(parquet)))
    hooked = ingest_source(tmp_path / "hooked.duckdb", "sakana", IngestRequest("sakana", str(parquet)),
                           post_write=[("annotate", annotate)])
    assert derived.added["kernel_tags"] > 100 and derived.post_write["annotate"]["tags_added"] == 0
    assert hooked.post_write["annotate"]["tags_added"] == derived.added["kernel_tags"]
    sql = "SELECT kernel_id, tag, line, evidence FROM kernel_tags ORDER BY ALL"
    assert query(tmp_path / "derived.duckdb", sql) == query(tmp_path / "hooked.duckdb", sql)


def test_reingest_derives_nothing_for_kernels_already_tagged(shared_data: Path, tmp_path: Path) -> None:
    from archive_db.annotations import tagged_kernels
    from embeddings.annotate import tag_rows
    from ingest.adapter import KernelDerivation

    asked: list[int] = []

    def counted(kernels: Any) -> Any:
        asked.append(len(kernels))
        return tag_rows(kernels)

    db = tmp_path / "archive.duckdb"
    first = ingest_source(db, "sakana", IngestRequest("sakana", str(shared_data / SAMPLE)),
                          derivation=KernelDerivation(counted, tagged_kernels))
    assert sum(asked) == 82 and first.added["kernel_tags"] > 100
    asked.clear()
    again = ingest_source(db, "sakana", IngestRequest("sakana", str(shared_data / SAMPLE)),
                          derivation=KernelDerivation(counted, tagged_kernels))
    assert again.rows_added == 0
    assert sum(asked) == 82 - len(query(db, "SELECT DISTINCT kernel_id FROM kernel_tags"))
