"""bench/embed.py's GPU path (--encode-only) runs where DuckDB is not installed, as on the device machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WITHOUT_DUCKDB = """
import runpy, sys
sys.modules["duckdb"] = None  # any import of duckdb now raises ImportError
sys.argv = ["bench/embed.py", *sys.argv[1:]]
runpy.run_path("bench/embed.py", run_name="__main__")
"""


def test_encode_only_needs_no_duckdb(shared_data: Path) -> None:
    sample = shared_data / "sakana-archive" / "sample.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_DUCKDB, "--encode-only", "--rows", "120", "--sample", str(sample), "--json"],
        capture_output=True, text=True, cwd=REPO, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["kernels"] == 120 and result["encoded"] >= 100
    assert result["encode_per_s"] > 0 and result["umap_s"] > 0 and result["incremental_100_s"] > 0
