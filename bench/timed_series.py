"""Benchmark: the host time a timed series spends per call around the call itself (harness 1.11, issue 13).

Each verification runs four timed series (the trivial-kernel overhead, eager, CUDA graph, the candidate), and for
CUDA-L1-sized kernels most run their 400 calls, so what the loop costs beside the timed call is GPU-gate time.
This runs ``verify.harness.timing.time_callable`` as a verification does (the L2 flush, fresh inputs, the
fingerprint of every output) on four calls: a trivial kernel, a 128 x 1024 linear layer, a 2M-element
convolution output and a 32M-element elementwise output. Each is timed five times: as is (twice, because the first
series of a process runs on cold clocks), with the fingerprint replaced by a constant (what the rest of the loop
costs), and with the candidate's step watch on (harness 1.16), through ``sys.monitoring`` and through a profile
function; and once more at the end, after one profiler session. It also times the loop's parts one by one. With
``--device cpu`` (which only exercises the logic) the two large cases are 64 times smaller.

    python bench/timed_series.py                  # table (needs a GPU; --device cpu exercises the logic)
    python bench/timed_series.py --json           # last line: JSON

JSON keys: ``device``, ``calls`` (case -> series length), ``per_call_ms`` (case -> host ms per call of the whole
loop, second series as is), ``without_fingerprint_ms`` (the same with a constant fingerprint),
``fingerprint_ms`` (their difference), ``watched_ms`` and ``watched_by_profile_ms`` (the whole loop with the
candidate's step watch on, harness 1.16, through ``sys.monitoring`` where this Python has it, and through a profile
function), ``monitoring`` (whether it has it), ``parts_us`` (part of the loop -> microseconds per use),
``after_profiler_ms`` (each case as is again, after one torch.profiler session in the process, as the harness's run
child has had before its timed series), ``teardown_cupti`` (the ``TEARDOWN_CUPTI`` variable Kineto read: run
the bench with it set to 0 and to 1 to see what a profiler session leaves behind), and ``call_host_us``,
``watched_call_host_us`` and ``watched_by_profile_call_host_us`` (the median host time of the timed call itself, as
is and with the watch each way: what the watch adds inside the timing, harness 1.18).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def cases(torch: Any, device: str, scale: int) -> dict[str, tuple[Callable[[list[Any]], Any], list[Any]]]:
    """The four timed calls, each a callable and its input template (``scale`` divides the large sizes)."""
    tiny = torch.zeros(1, device=device)
    linear = torch.nn.Linear(1024, 1024).to(device)
    conv = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3), torch.nn.ReLU()).to(device)
    return {
        "trivial kernel": (lambda i: tiny.add_(1), []),
        "linear 128x1024": (lambda i: linear(i[0]), [torch.randn(128, 1024, device=device)]),
        "conv, 2M outputs": (lambda i: conv(i[0]), [torch.randn(max(1, 16 // scale), 16, 64, 64, device=device)]),
        "elementwise, 32M": (lambda i: i[0] * 2, [torch.randn(32 * 2**20 // scale, device=device)]),
    }


def per_use_us(torch: Any, function: Callable[[], Any], uses: int) -> float:
    """Microseconds per use of ``function``, device synchronized before and after."""
    function()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(uses):
        function()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return 1e6 * (time.perf_counter() - start) / uses


def measure(device: str, max_calls: int) -> dict[str, Any]:
    """Per-call host time of each case's series, with and without the fingerprint, and the loop's parts."""
    import torch

    from verify.harness import timing
    from verify.harness import watch as watch_module
    from verify.harness.tensors import fingerprint
    from verify.harness.watch import StepWatch

    clock = timing.Clock(torch, device)
    flush = timing.l2_flush_buffer(torch, device)
    options = {"warmup": 3, "min_calls": 30, "max_calls": max_calls, "target_s": 1.0, "flush": flush}
    result: dict[str, Any] = {"device": device, "calls": {}, "per_call_ms": {}, "without_fingerprint_ms": {},
                              "fingerprint_ms": {}, "watched_ms": {}, "watched_by_profile_ms": {},
                              "monitoring": watch_module._MONITORING is not None, "parts_us": {},
                              "after_profiler_ms": {}, "teardown_cupti": os.environ.get("TEARDOWN_CUPTI"),
                              "call_host_us": {}, "watched_call_host_us": {}, "watched_by_profile_call_host_us": {}}
    real = timing.call_fingerprints
    chosen = cases(torch, device, 1 if device == "cuda" else 64)
    with torch.no_grad():
        for name, (call, template) in chosen.items():
            timing.time_callable(clock, call, template, 1, **options)
            series = timing.time_callable(clock, call, template, 1, **options)
            timing.call_fingerprints = lambda _: [[0.0] * 6]  # type: ignore[assignment]
            try:
                bare = timing.time_callable(clock, call, template, 1, **options)
            finally:
                timing.call_fingerprints = real  # type: ignore[assignment]
            with_ms = 1e3 * series["loop_s"] / series["calls"]
            bare_ms = 1e3 * bare["loop_s"] / bare["calls"]
            for key, monitoring in (("watched_ms", True), ("watched_by_profile_ms", False)):
                watch = StepWatch([str(REPO / "nonexistent")], (str(Path(torch.__file__).parent),),
                                  monitoring=monitoring)
                watched = timing.time_callable(clock, call, template, 1, watch=watch, **options)
                result[key][name] = round(1e3 * watched["loop_s"] / watched["calls"], 4)
                result[key.replace("_ms", "_call_host_us")][name] = round(1e3 * watched["host"]["median"], 2)
            result["call_host_us"][name] = round(1e3 * series["host"]["median"], 2)
            result["calls"][name] = series["calls"]
            result["per_call_ms"][name] = round(with_ms, 4)
            result["without_fingerprint_ms"][name] = round(bare_ms, 4)
            result["fingerprint_ms"][name] = round(with_ms - bare_ms, 4)
        small = torch.randn(128, 1024, device=device)
        big = torch.randn(32 * 2**20 // (1 if device == "cuda" else 64), device=device)
        template = [small]
        samples = [1.0 + 0.001 * (i % 37) for i in range(400)]
        parts: dict[str, Callable[[], Any]] = {
            "device-wide synchronize": clock.full_sync,
            "a pair of timing events": clock.new_events,
            "L2 flush and synchronize": lambda: (flush is not None and flush.zero_(), clock.full_sync()),
            "fresh inputs (128x1024)": lambda: timing.fresh_inputs(torch, template, 5, device, [False]),
            "fingerprint (128x1024)": lambda: fingerprint(small),
            "fingerprint (32M)" if device == "cuda" else "fingerprint (512K)": lambda: fingerprint(big),
            "precision test, 400 samples": lambda: timing.median_is_precise(samples),
        }
        for label, function in parts.items():
            # Three significant digits: a CPU "pair of timing events" takes a few hundredths of a microsecond.
            result["parts_us"][label] = float(f"{per_use_us(torch, function, 30 if '32M' in label else 200):.3g}")
        # Last, as the harness's run child does it before its timed series: one profiler session (CUPTI on the
        # GPU), then each case again as is. Whether CUPTI is torn down after it is Kineto's TEARDOWN_CUPTI.
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with profile(activities=activities):
            small.add_(1)
            clock.full_sync()
        for name, (call, template) in chosen.items():
            after = timing.time_callable(clock, call, template, 1, **options)
            result["after_profiler_ms"][name] = round(1e3 * after["loop_s"] / after["calls"], 4)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu only exercises the logic")
    parser.add_argument("--max-calls", type=int, default=400, help="series length cap (the harness's own: 400)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = parser.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device: run on a GPU machine, or pass --device cpu to exercise the logic")
    result = measure(args.device, args.max_calls)
    print(f"{'series':22s} {'calls':>6s} {'ms/call':>9s} {'no fingerprint':>15s} {'fingerprint':>12s}"
          f" {'watched':>9s} {'by profile':>11s}")
    for name, calls in result["calls"].items():
        print(f"{name:22s} {calls:6d} {result['per_call_ms'][name]:9.3f} {result['without_fingerprint_ms'][name]:15.3f}"
              f" {result['fingerprint_ms'][name]:12.3f} {result['watched_ms'][name]:9.3f}"
              f" {result['watched_by_profile_ms'][name]:11.3f}")
    print("watched: the step watch on (sys.monitoring where this Python has it: "
          f"{'yes' if result['monitoring'] else 'no'}); by profile: with a profile function")
    print(f"\n{'the timed call itself':22s} {'host us, as is':>15s} {'watched':>9s} {'by profile':>11s}")
    for name in result["calls"]:
        print(f"{name:22s} {result['call_host_us'][name]:15.2f} {result['watched_call_host_us'][name]:9.2f}"
              f" {result['watched_by_profile_call_host_us'][name]:11.2f}")
    print(f"\n{'after one profiler session':26s} {'ms/call':>9s}   (TEARDOWN_CUPTI={result['teardown_cupti']})")
    for name, ms in result["after_profiler_ms"].items():
        print(f"{name:26s} {ms:9.3f}")
    print(f"\n{'part of the loop':30s} {'us per use':>10s}")
    for label, us in result["parts_us"].items():
        print(f"{label:30s} {us:10.3g}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
