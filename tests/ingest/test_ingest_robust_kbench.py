"""The robust-kbench adapter on the real highlighted results CSV."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ingest.adapter import IngestRequest
from ingest.runner import ingest_source

RESULTS = "robust-kbench/highlighted-results.csv"


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    path = tmp_path_factory.mktemp("robust-kbench") / "archive.duckdb"
    ingest_source(path, "robust-kbench", IngestRequest("robust-kbench", str(shared_data / RESULTS)))
    return path


def test_counts(db: Path) -> None:
    assert query(db, "SELECT count(*), count(DISTINCT task_id) FROM kernels") == [(12, 12)]
    assert query(db, "SELECT count(*), count(*) FILTER (WHERE correct) FROM measurements") == [(12, 12)]
    assert query(db, "SELECT count(DISTINCT kernel_id) FROM ncu_metrics") == [(8,)]  # 4 rows have none
    assert query(db, "SELECT count(DISTINCT kernel_id) FROM torch_profile_events") == [(10,)]
    assert query(db, "SELECT DISTINCT origin FROM torch_profile_events") == [("robust-kbench",)]


def test_tasks_are_named_by_task_and_direction_without_reference_code(db: Path) -> None:
    tasks = query(db, "SELECT name, reference_code, level FROM tasks ORDER BY name")
    names = [t[0] for t in tasks]
    assert "layernorm/forward" in names and "mnist_cross_entropy/backward" in names
    assert "mnist_cross_entropy/forward" in names
    assert all(t[1] is None and t[2] is None for t in tasks)


def test_measurement_fields_and_scores(db: Path) -> None:
    row = query(db, """
        SELECT m.gpu, m.kernel_ms, m.speedup_eager, m.speedup_compile, m.max_diff, m.error, k.experiment, k.form
        FROM kernels k JOIN measurements m USING (kernel_id) WHERE k.name = 'layernorm_fused_vectorized'""")
    assert row == [(None, pytest.approx(0.046254224002361295), pytest.approx(165.67771031882677),
                    pytest.approx(2.0511420518529886), 0.0, None, "optimize_20250507_v_shape_prof", "cuda-binding")]
    scores = dict(query(db, """
        SELECT s.name, s.value FROM measurement_scores s JOIN measurements m USING (measurement_id)
        JOIN kernels k USING (kernel_id) WHERE k.name = 'layernorm_fused_vectorized'"""))
    assert scores == {"robust_kbench.cuda_api_cost": pytest.approx(0.065487),
                      "robust_kbench.verifier_aggregated": 1.0}


def test_attributes_keep_thought_settings_and_verifier_details(db: Path) -> None:
    (attributes,) = query(db, "SELECT attributes FROM kernels WHERE name = 'ce_backward_fusedvec'")[0]
    facts = json.loads(attributes)
    assert (facts["batch"], facts["sample"], facts["direction"]) == (9, 1, "backward")
    assert facts["settings"] == {"temperature": 1.0, "max_tokens": 8192}
    assert facts["verifier_individual"]["memory_tuned"] == 0
    assert facts["profiler_feedback"].startswith("IMPROVEMENT RECOMMENDATIONS")
    assert "compile_tuned" in facts["verifier_responses"]


def test_gpu_from_the_command_line(shared_data: Path, archive_path: Path) -> None:
    ingest_source(archive_path, "robust-kbench", IngestRequest("robust-kbench", str(shared_data / RESULTS), gpu="h100"))
    assert query(archive_path, "SELECT DISTINCT gpu FROM measurements") == [("H100",)]


def test_reingest_adds_nothing(db: Path, shared_data: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    summary = ingest_source(copy, "robust-kbench", IngestRequest("robust-kbench", str(shared_data / RESULTS)))
    assert summary.rows_added == 0 and summary.input_records == 12
