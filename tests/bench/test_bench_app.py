"""bench/app.py's wait for a new browser context to settle: it waits while a process it started is busy,
and not once they are idle."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

BUSY_S = 1.5


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_app", ROOT / "bench" / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_app"] = module
    spec.loader.exec_module(module)
    return module


def test_wait_settled_waits_for_a_busy_child_then_stops() -> None:
    bench = load_bench()
    busy = subprocess.Popen([sys.executable, "-c",
                             f"import time\nend = time.time() + {BUSY_S}\nwhile time.time() < end: pass\ntime.sleep(30)"])
    try:
        time.sleep(0.2)
        waited = bench.wait_settled()
        assert waited >= BUSY_S - 0.5, f"returned after {waited:.2f} s while the child was still spinning"
        assert waited < bench.SETTLE_MAX_S, "never saw the child go idle"
        again = bench.wait_settled()
        assert again < 4 * bench.SETTLE_WINDOW_S, f"waited {again:.2f} s with every child asleep"
    finally:
        busy.kill()
        busy.wait()
