"""Benches that measure the GPU refuse to run without one, and say how to exercise their logic instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("name", ["timed_series.py", "transfers.py"])
def test_without_a_gpu_it_says_how_to_run(name: str) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the bench runs instead of refusing")
    done = subprocess.run([sys.executable, str(BENCH / name)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--device cpu" in done.stderr
