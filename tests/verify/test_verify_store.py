"""Storing reports in the archive, and the verify / eval-script CLI on the real sample archive (no GPU)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archive_db.connection import connect
from archive_db.verifications import report_bundle
from kernel_archive.cli import app
from verify.store import store_report

REPORT = {
    "harness_version": "1.0", "mode": "full", "status": "flagged", "started_at": "2026-11-21T07:00:00+00:00",
    "finished_at": "2026-11-21T07:01:00+00:00",
    "environment": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.1", "cuda": "13.0", "torch": "2.11.0"},
    "tolerance": {"atol": 0.01}, "trials": [{"index": 0, "max_abs": 1e-4, "passed": True}],
    "speed": {"kernel_ms": 0.5, "kernel_iqr_ms": 0.01, "eager_ms": 1.0, "eager_iqr_ms": 0.02, "compile_ms": 0.8,
              "compile_iqr_ms": 0.01, "speedup_eager": 2.0, "speedup_compile": 1.6, "speedup_graph": 1.5},
    "checks": {"correctness": {"verdict": "pass", "evidence": ["ok"]},
               "not-a-kernel": {"verdict": "warn", "evidence": ["library kernels took 80%", "static: ..."]}},
    "log": "child logs",
}


def test_report_becomes_rows() -> None:
    bundle, verification_id = report_bundle(REPORT, "k1")
    row = bundle.rows["verifications"][0]
    assert row["gpu"] == "H100 SXM" and row["kernel_ms_median"] == 0.5 and row["status"] == "flagged"
    checks = {r["check_name"]: r for r in bundle.rows["verification_checks"]}
    assert checks["not-a-kernel"]["evidence"].startswith("library kernels")
    measurement = bundle.rows["measurements"][0]
    assert measurement["source"] == "verify" and measurement["verification_id"] == verification_id
    assert measurement["correct"] is True and measurement["speedup_eager"] == 2.0
    assert bundle.rows["measurement_scores"][0]["name"] == "verify.speedup_cuda_graph"


def test_store_report_writes_one_short_transaction(archive_path: Path) -> None:
    first = store_report(archive_path, REPORT, "k1")
    second = store_report(archive_path, REPORT, "k1")
    assert first != second
    with connect(archive_path, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM verifications WHERE kernel_id = 'k1'").fetchall()[0][0] == 2
        assert con.execute("SELECT count(*) FROM verification_checks").fetchall()[0][0] == 4
        assert con.execute("SELECT count(*) FROM measurements WHERE source = 'verify'").fetchall()[0][0] == 2  # one per run


def test_a_kernels_verifications_carry_the_gpus_own_time_from_the_stored_report(archive_path: Path) -> None:
    from archive_db.queries import VERIFICATION_RUNS

    listed = {**REPORT, "kernels": {"candidate": [{"device_us": 300.0}, {"device_us": 100.0}]}}
    store_report(archive_path, listed, "k1")
    store_report(archive_path, REPORT, "k1")
    with connect(archive_path, read_only=True) as con:
        rows = con.execute(VERIFICATION_RUNS, ["k1"]).fetchdf()
    listed_row = rows[rows["gpu_ms"].notna()].iloc[0]
    assert listed_row["gpu_ms"] == pytest.approx(0.4) and listed_row["gpu_busy"] == pytest.approx(0.8)
    assert rows["gpu_ms"].isna().sum() == 1 and rows["gpu_busy"].isna().sum() == 1, "no listing, no GPU time"
    assert "report" not in rows.columns and "log" not in rows.columns


def _kernel(archive: Path, source: str, form: str) -> str:
    with connect(archive, read_only=True) as con:
        rows = con.execute(
            "SELECT k.kernel_id FROM kernels k JOIN tasks t USING (task_id) WHERE k.source = ? AND k.form = ? "
            "AND k.code IS NOT NULL AND t.reference_code IS NOT NULL ORDER BY t.level, k.name LIMIT 1", [source, form]
        ).fetchall()
    if not rows:
        pytest.skip(f"no {form} kernel from {source} in the sample archive")
    return rows[0][0]


def test_cli_static_only_on_a_real_cuda_l1_kernel_is_stored(sample_archive: Path) -> None:
    kernel_id = _kernel(sample_archive, "cuda-l1", "model-new")
    result = CliRunner().invoke(app, ["verify", kernel_id, "--static-only", "--json", "--db", str(sample_archive)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["status"] == "static-only" and report["verification_id"]
    with connect(sample_archive, read_only=True) as con:
        from archive_db.queries import kernel_detail

        detail = kernel_detail(con, kernel_id)
    assert detail is not None and len(detail.verifications) == 1
    assert set(detail.verification_checks["check_name"]) >= {"not-a-kernel", "fallback"}


def test_cli_eval_script_for_an_archive_kernel(sample_archive: Path, tmp_path: Path) -> None:
    kernel_id = _kernel(sample_archive, "sakana", "cuda-binding")
    target = tmp_path / "eval.py"
    result = CliRunner().invoke(app, ["eval-script", kernel_id, "-o", str(target), "--db", str(sample_archive)])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    ast.parse(text)
    assert "PYBIND11_MODULE" in text and "class Model" in text and kernel_id in text


def test_cli_refuses_batches_without_the_explicit_flag(sample_archive: Path) -> None:
    result = CliRunner().invoke(app, ["verify", "--source", "sakana", "--db", str(sample_archive)])
    assert result.exit_code == 2
    assert "untrusted" in result.output


def test_cli_static_only_batch_needs_no_flag(sample_archive: Path) -> None:
    result = CliRunner().invoke(app, ["verify", "--source", "sakana", "--limit", "3", "--static-only",
                                      "--db", str(sample_archive)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("static-only") == 3 + 1


def test_explorer_can_render_the_eval_script_from_a_kernel_id(sample_archive: Path) -> None:
    from verify.script import render_eval_script

    kernel_id = _kernel(sample_archive, "cuda-l1", "model-new")
    with connect(sample_archive, read_only=True) as con:
        text = render_eval_script(kernel_id=kernel_id, con=con)
    assert "class ModelNew" in text
