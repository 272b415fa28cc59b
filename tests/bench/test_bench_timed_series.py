"""bench/timed_series.py: the timed loop's cost per call, with and without the fingerprint and the step watch, and its
JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "timed_series.py"


def test_the_timed_series_bench_reports_every_case_and_part() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--device", "cpu", "--max-calls", "40", "--json"],
                          capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result) == {"device", "calls", "per_call_ms", "without_fingerprint_ms", "fingerprint_ms", "watched_ms",
                           "watched_by_profile_ms", "monitoring", "parts_us", "after_profiler_ms", "teardown_cupti",
                           "call_host_us", "watched_call_host_us", "watched_by_profile_call_host_us"}
    cases = {"trivial kernel", "linear 128x1024", "conv, 2M outputs", "elementwise, 32M"}
    assert set(result["calls"]) == set(result["per_call_ms"]) == set(result["fingerprint_ms"]) == cases
    assert set(result["watched_ms"]) == set(result["watched_by_profile_ms"]) == set(result["after_profiler_ms"]) == cases
    assert set(result["call_host_us"]) == set(result["watched_call_host_us"]) == cases
    assert all(us > 0 for us in result["watched_by_profile_call_host_us"].values())
    assert result["monitoring"] is hasattr(sys, "monitoring")
    assert all(30 <= n <= 40 for n in result["calls"].values())
    assert all(ms > 0 for ms in result["per_call_ms"].values())
    assert all(us > 0 for us in result["parts_us"].values()) and len(result["parts_us"]) == 7
    assert "no fingerprint" in done.stdout and "by profile" in done.stdout and "part of the loop" in done.stdout
    assert "the timed call itself" in done.stdout

