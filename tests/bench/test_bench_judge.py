"""bench/judge.py: the judge on synthetic honest evidence passes every output check and reports its JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "judge.py"


def test_the_judge_bench_judges_honest_outputs_as_correct() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--elements", "70000", "--trials", "2", "--repeats", "2", "--json"],
                          capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result) == {"elements", "trials", "threads", "workers", "judge_s", "judge_output_s", "weak_check_s",
                           "verdicts"}
    assert result["elements"] == 70000 and result["judge_s"] > 0 and result["weak_check_s"] > 0
    assert set(result["verdicts"].values()) == {"pass"}, result["verdicts"]
    assert "whole judge" in done.stdout and "weak check" in done.stdout
