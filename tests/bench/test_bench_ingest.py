"""bench/ingest.py's synthetic million-kernel archive, built small: it fits the schema and its summary."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
from scripts_testing import load_script

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def load_bench():
    return load_script("bench/ingest.py", "bench_ingest")


def test_synthetic_archive_is_written_with_a_fresh_summary(tmp_path: Path) -> None:
    from archive_db.connection import connect
    from archive_db.queries import LeaderboardFilter, leaderboard
    from archive_db.summary import summary_is_fresh

    bench = load_bench()
    bench.build_synthetic(tmp_path / "small.duckdb", 3000, n_tasks=40)
    with connect(tmp_path / "small.duckdb", read_only=True) as con:
        assert summary_is_fresh(con)
        fast = leaderboard(con, LeaderboardFilter())
        gpus = tuple(r[0] for r in con.execute("SELECT DISTINCT gpu FROM measurements").fetchall())
        full = leaderboard(con, replace(LeaderboardFilter(), gpus=gpus))
    assert len(fast) == 40
    pd.testing.assert_frame_equal(fast, full)
