"""docs/reproductions/cuda-l1-h100.md is what its own regeneration commands write from the shipped reports."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kernel_archive.cli import app

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "reproductions"


def test_the_cuda_l1_reproduction_regenerates_from_its_shipped_reports(tmp_path: Path, shared_data: Path) -> None:
    runner, db = CliRunner(), str(tmp_path / "repro.duckdb")
    for args in (["ingest", "cuda-l1", str(shared_data / "cuda-l1" / "h100.jsonl"), "--db", db],
                 ["verify-import", str(DOCS / "cuda-l1-h100-reports.jsonl"), "--source", "cuda-l1", "--db", db],
                 ["reproduce", "cuda-l1-h100", "-o", str(tmp_path / "repro.md"), "--db", db]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    assert (tmp_path / "repro.md").read_text() == (DOCS / "cuda-l1-h100.md").read_text()
    reports = (DOCS / "cuda-l1-h100-reports.jsonl").read_text().splitlines()
    kernels = {json.loads(line)["code_sha256"] for line in reports}
    assert f"210 kernels of source `cuda-l1`; {len(kernels)} verified." in (DOCS / "cuda-l1-h100.md").read_text()
