"""Benchmark: what the candidate's step watch costs inside a timed call and around it (harness 1.18, issue 13).

The watch (``verify.harness.watch.StepWatch``) opens a window around each timed call's untimed steps. Up to harness
1.17 every window switched its ``sys.monitoring`` events on and off, and each switch makes the interpreter instrument
again every function that runs next, the timed call's included. From 1.18 a series holds the events on
(``StepWatch.holding``) and a window only registers its callbacks. This times a loop shaped like the harness's
(inputs made in a window, the timed call, its output fingerprinted in a window) three ways: without the watch, with
a window that switches the events (``per-window``), and held. Two calls: a library-only module (``nn.Sequential`` of
three layers) and a candidate-style ``ModelNew`` whose own ``forward`` (in a folder the watch counts as the
candidate's) calls ``nn.Linear`` and ``F.relu``. It runs on the CPU; under Python 3.11 (no ``sys.monitoring``) the
watch is a profile function and the per-window and held rows are the same mechanism.

    python bench/step_watch.py              # table
    python bench/step_watch.py --json       # last line: JSON

JSON keys: ``python``, ``monitoring`` (whether this Python has ``sys.monitoring``), ``calls``, and for each case
(``library module``, ``candidate module``) and way (``plain``, ``per-window``, ``held``): ``timed_call_us`` (median
host time of the timed call) and ``loop_us`` (the whole loop per call), each the median of ``--repeats`` series.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CANDIDATE = '''import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return F.relu(self.lin(x))
'''


def series(model: Any, x: Any, calls: int, watch: Any) -> tuple[float, float]:
    """(median timed-call microseconds, loop microseconds per call) of one series shaped like the harness's."""
    from verify.harness.tensors import call_fingerprints

    window = watch if watch is not None else contextlib.nullcontext()
    timed = []
    start = time.perf_counter()
    for _ in range(calls):
        with window:
            inputs = x * 1.0
        t0 = time.perf_counter()
        out = model(inputs)
        timed.append(time.perf_counter() - t0)
        with window:
            call_fingerprints(out)
    loop = (time.perf_counter() - start) / calls
    return 1e6 * statistics.median(timed), 1e6 * loop


def measure(calls: int, repeats: int) -> dict[str, Any]:
    """Each case timed each way, ``repeats`` series each, interleaved."""
    import torch

    # The harness's modules are all loaded before a watch is made, as in the run child: it knows their code then.
    import verify.harness.tensors  # noqa: F401
    from verify.harness.watch import _MONITORING, StepWatch

    torch.set_num_threads(1)
    folder = Path(tempfile.mkdtemp(prefix="ka-step-watch-"))
    (folder / "ka_bench_candidate.py").write_text(CANDIDATE)
    sys.path.insert(0, str(folder))
    candidate = __import__("ka_bench_candidate").ModelNew()
    library = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))
    x = torch.randn(4, 16)
    known = (os.path.dirname(torch.__file__),)
    result: dict[str, Any] = {"python": sys.version.split()[0], "monitoring": _MONITORING is not None, "calls": calls}
    with torch.no_grad():
        for case, model in (("library module", library), ("candidate module", candidate)):
            samples: dict[str, list[tuple[float, float]]] = {"plain": [], "per-window": [], "held": []}
            watch = StepWatch([str(folder)], known)
            for _ in range(repeats):
                samples["plain"].append(series(model, x, calls, None))
                samples["per-window"].append(series(model, x, calls, watch))
                with watch.holding():
                    samples["held"].append(series(model, x, calls, watch))
            if watch.found or watch.hooks:
                raise SystemExit(f"the watch found something in a benchmark of honest code: {watch.found} {watch.hooks}")
            result[case] = {way: {"timed_call_us": round(statistics.median(s[0] for s in runs), 2),
                                  "loop_us": round(statistics.median(s[1] for s in runs), 1)}
                            for way, runs in samples.items()}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls a series")
    parser.add_argument("--repeats", type=int, default=3, help="series each way (the median is reported)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = parser.parse_args()
    result = measure(args.calls, args.repeats)
    print(f"Python {result['python']}, sys.monitoring: {'yes' if result['monitoring'] else 'no (profile function)'}")
    print(f"{'case':18s} {'way':11s} {'timed call us':>14s} {'loop us/call':>13s}")
    for case in ("library module", "candidate module"):
        for way, figures in result[case].items():
            print(f"{case:18s} {way:11s} {figures['timed_call_us']:14.2f} {figures['loop_us']:13.1f}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
