"""bench/step_watch.py: the step watch's cost inside and around a timed call, each way, and its JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "step_watch.py"


def test_the_step_watch_bench_times_both_cases_each_way_and_finds_nothing() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--calls", "60", "--repeats", "1", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    # The bench stops with a message if the watch counted any of its honest code as the candidate's.
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result) == {"python", "monitoring", "calls", "library module", "candidate module"}
    assert result["monitoring"] is hasattr(sys, "monitoring") and result["calls"] == 60
    for case in ("library module", "candidate module"):
        assert set(result[case]) == {"plain", "per-window", "held"}
        assert all(f["timed_call_us"] > 0 and f["loop_us"] >= f["timed_call_us"] for f in result[case].values())
    assert "timed call us" in done.stdout
