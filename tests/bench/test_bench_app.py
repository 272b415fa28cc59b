"""bench/app.py's wait for a new browser context to settle: it waits while a process it started is busy,
and not once they are idle."""

from __future__ import annotations

import subprocess
import sys
import time

from scripts_testing import load_script

BUSY_S = 1.5


def test_wait_settled_waits_for_a_busy_child_then_stops() -> None:
    bench = load_script("bench/app.py", "bench_app")
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
