"""bench/pch.py: a build with the shared precompiled torch header costs less CPU than one without, and its JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "pch.py"


@pytest.mark.slow
def test_the_pch_bench_makes_the_header_once_and_builds_cheaper_with_it() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--builds", "1", "--json"],
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result) == {"builds", "cpu_s_without", "cpu_s_with", "wall_s_without", "wall_s_with", "saved_share",
                           "make_cpu_s", "pch_bytes", "python", "compiler"}
    assert result["builds"] == 1 and result["pch_bytes"] > 1 << 20
    # The header replaces most of main.cpp's compile; the process start, torch's import and the link remain.
    assert result["cpu_s_with"] < result["cpu_s_without"] < result["make_cpu_s"]
    assert "without a precompiled header" in done.stdout
