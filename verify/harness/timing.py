"""Timing one callable the same way for the candidate and the baselines.

Per timed call: fresh input *contents* made outside the timed region, the L2 cache flushed by writing a
buffer of twice its size, a device-wide synchronize, then CUDA events around the call and a device-wide
synchronize before the host clock stops. The event time, the host wall time and the host time of the call
itself (from before the start event until the call returned, without the wait for the device) are kept for
every call, plus a fingerprint of each of its outputs (computed after the clock stopped) so the parent can re-check
that timed calls returned right answers. The clock's functions are captured when the harness starts,
before any candidate code is imported, so a candidate that replaces ``torch.cuda.Event`` or
``time.perf_counter`` does not change what this module calls.

Example:
    >>> summarize([1.0, 2.0, 3.0, 4.0])["median"]
    2.5
"""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time
from typing import Any

from verify.harness.tensors import call_fingerprints, is_symmetric


class Clock:
    """Timer functions captured at harness start (before the candidate is imported)."""

    def __init__(self, torch: Any, device: str) -> None:
        self.device = device
        self.perf_ns = time.perf_counter_ns
        self.torch = torch
        if device == "cuda":
            self.sync = torch.cuda.synchronize
            self.event_class = torch.cuda.Event
            self.record = torch.cuda.Event.record
            self.elapsed = torch.cuda.Event.elapsed_time
            self.device_sync_c = getattr(torch._C, "_cuda_synchronize", None)
        else:
            self.sync = lambda: None
            self.device_sync_c = None

    def full_sync(self) -> None:
        """Device-wide synchronize through the captured function (and the C entry point when present)."""
        self.sync()
        if self.device_sync_c is not None:
            self.device_sync_c()

    def new_events(self) -> tuple[Any, Any]:
        """A (start, end) pair of timing events (None on CPU)."""
        if self.device != "cuda":
            return None, None
        return self.event_class(enable_timing=True), self.event_class(enable_timing=True)


def summarize(values: list[float]) -> dict[str, float]:
    """Median, interquartile range, mean, min, max and count of a list of times."""
    if not values:
        return {"n": 0, "median": math.nan, "iqr": math.nan, "mean": math.nan, "min": math.nan, "max": math.nan}
    ordered = sorted(values)
    if len(ordered) >= 4:
        q = statistics.quantiles(ordered, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = ordered[-1] - ordered[0]
    return {
        "n": len(ordered),
        "median": statistics.median(ordered),
        "iqr": iqr,
        "mean": statistics.fmean(ordered),
        "min": ordered[0],
        "max": ordered[-1],
    }


def device_ms(kernels: list[dict[str, Any]] | None) -> float | None:
    """GPU time of one call (ms): its kernels' durations summed, from the profiled call's listing.

    Unlike the event time, it leaves out the host's part of the call (Python, launches, the GPU waiting on
    them), so it is the same in a busy batch as alone; kernels on several streams are all counted. None
    without a listing or when the call launched no kernel. It describes the call and decides nothing: a
    candidate could run less work under the profiler (the side-streams check compares it with the events).

    Example:
        >>> device_ms([{"device_us": 300.0}, {"device_us": 44.5}])
        0.3445
        >>> device_ms([]) is None
        True
    """
    total = sum(float(k.get("device_us") or 0.0) for k in kernels or [])
    return total / 1000 if total > 0 else None


HOST_BOUND_BUSY = 0.5
"""Below this share of its timed call on the GPU (``gpu_busy``), a kernel's time is mostly the host's."""


def report_device_ms(report: dict[str, Any]) -> float | None:
    """A report's GPU time per call: ``speed.device_ms``, or for reports of harnesses before it, ``device_ms`` of
    the candidate's kernel listing. None when the report cannot say.

    Example:
        >>> report_device_ms({"speed": {}, "kernels": {"candidate": [{"device_us": 450.0}]}})
        0.45
    """
    return (report.get("speed") or {}).get("device_ms") or device_ms((report.get("kernels") or {}).get("candidate"))


def gpu_busy(report: dict[str, Any]) -> float | None:
    """The share of a report's timed call the GPU was busy: ``speed.gpu_busy``, or for reports of harnesses before
    it, the candidate's ``device_ms`` over its kernel time. None when the report cannot say.

    Example:
        >>> gpu_busy({"speed": {"kernel_ms": 0.5}, "kernels": {"candidate": [{"device_us": 450.0}]}})
        0.9
    """
    speed = report.get("speed") or {}
    if speed.get("gpu_busy") is not None:
        return float(speed["gpu_busy"])
    busy = report_device_ms(report)
    return busy / float(speed["kernel_ms"]) if busy and speed.get("kernel_ms") else None


def l2_flush_buffer(torch: Any, device: str) -> Any:
    """A buffer of at least twice the GPU's L2 size (None on CPU)."""
    if device != "cuda":
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
    return torch.empty(max(2 * l2, 64 * 2**20) // 4, dtype=torch.float32, device=device)


def fresh_inputs(torch: Any, template: list[Any], seed: int, device: str,
                 symmetric: list[bool] | None = None) -> list[Any]:
    """New input contents for one timed call: floating inputs scaled elementwise by U(0.5, 1.5).

    The scaling keeps each input's sign and range (positive inputs stay positive) and its zero pattern, and
    is symmetric where the input is (``tensors.is_symmetric``), so the task's preconditions hold, while making
    every call's contents different, so a kernel that caches by pointer, id or content returns stale results.
    Non-floating inputs are kept. The same seed gives the same inputs in any process on the same device.
    ``symmetric`` (one flag per template entry) spares a series of calls the symmetry test on every call.
    """
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    out = []
    if symmetric is None:
        symmetric = [is_symmetric(x) for x in template]
    for x, mirror in zip(template, symmetric, strict=True):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            scale = torch.rand(x.shape, generator=generator, device=device, dtype=torch.float32) + 0.5
            if mirror:
                scale = (scale + scale.transpose(-1, -2)) / 2
            out.append((x.to(torch.float32) * scale).to(x.dtype).contiguous() if x.is_contiguous()
                       else (x.to(torch.float32) * scale).to(x.dtype))
        else:
            out.append(x)
    return out


# Captured when the harness starts. As in timeit, no garbage collection runs in a timed call: the collector is off
# from making a call's inputs until its outputs are fingerprinted, in every series alike, so a collection neither
# lands in one call's time nor runs a candidate's finalizers in the steps the watch looks at.
_GC_IS_ON, _GC_PAUSE, _GC_RESUME = gc.isenabled, gc.disable, gc.enable

UNTIMED_PARTS: tuple[str, ...] = ("inputs", "reset", "flush", "fingerprint")
"""The harness's own steps around each timed call, timed per call (ms) and summarised under ``untimed``: fresh
inputs (and ``prepare``), ``reset``, the L2 flush with the synchronize before the start, and after the stop the
fingerprints and the call's inputs and outputs dropped. Work a candidate hides from the timer in any of them (a
finalizer, a hook on a torch function the harness calls) makes its step slower than the same step of the
reference's series on the same inputs."""

PRECISION = 0.005
"""Timed series stop once the 95% confidence half-width of their median is below this fraction of it."""


def median_is_precise(samples: list[float], precision: float = PRECISION) -> bool:
    """Whether the median of ``samples`` is known to within ``precision`` (relative, 95% confidence).

    The median's standard error is about 1.253 sigma / sqrt(n), with sigma estimated robustly as the
    interquartile range / 1.349, so one outlier (a clock tick, another process) does not keep a series going.

    Example:
        >>> steady = [1.0 + 0.001 * (i % 7) for i in range(30)]
        >>> noisy = [1.0 + 0.3 * (i % 7) for i in range(30)]
        >>> median_is_precise(steady), median_is_precise(noisy)
        (True, False)
    """
    if len(samples) < 4:
        return False
    q = statistics.quantiles(samples, n=4, method="inclusive")
    median = statistics.median(samples)
    half_width = 1.96 * 1.253 * ((q[2] - q[0]) / 1.349) / math.sqrt(len(samples))
    return median > 0 and half_width <= precision * median


def time_callable(
    clock: Clock,
    call: Any,
    template: list[Any],
    seed_base: int,
    *,
    warmup: int = 3,
    min_calls: int = 30,
    max_calls: int = 300,
    target_s: float = 1.0,
    flush: Any = None,
    prepare: Any = None,
    reset: Any = None,
    precision: float | None = PRECISION,
    watch: Any = None,
) -> dict[str, Any]:
    """Time ``call(inputs)`` on fresh inputs; returns raw per-call times, fingerprints and a summary.

    ``prepare(inputs)`` (optional) runs outside the timed region before each call (e.g. copying inputs
    into a CUDA graph's static buffers); ``reset()`` (optional) too, before the L2 flush (restoring the CUDA
    context settings a candidate may have changed). The number of calls is chosen from the warm-up time so the
    timed calls take about ``target_s`` seconds, within [min_calls, max_calls]; the series stops earlier, after
    ``min_calls``, once its median is known to within ``precision`` (``median_is_precise`` on the event times,
    or the wall times without events): a steady kernel needs fewer calls than a noisy one. ``stopped`` says
    which limit ended it. ``watch`` (optional, a ``watch.StepWatch``) is entered around the steps from making each
    call's inputs to starting its timer, and around the fingerprints of its outputs, and held for the whole series
    (``StepWatch.holding``); what it saw is returned under ``watch``.
    """
    with watch.holding() if watch is not None else contextlib.nullcontext():
        return _time_series(clock, call, template, seed_base, warmup=warmup, min_calls=min_calls,
                            max_calls=max_calls, target_s=target_s, flush=flush, prepare=prepare, reset=reset,
                            precision=precision, watch=watch)


def _time_series(clock: Clock, call: Any, template: list[Any], seed_base: int, *, warmup: int, min_calls: int,
                 max_calls: int, target_s: float, flush: Any, prepare: Any, reset: Any, precision: float | None,
                 watch: Any) -> dict[str, Any]:
    """``time_callable``'s series, inside the watch's hold (its ``sys.monitoring`` events on throughout)."""
    torch = clock.torch
    symmetric = [is_symmetric(x) for x in template]
    warm_ns = []
    for i in range(warmup):
        inputs = fresh_inputs(torch, template, seed_base + 1_000_000 + i, clock.device, symmetric)
        if prepare is not None:
            prepare(inputs)
        if reset is not None:
            reset()
        clock.full_sync()
        t0 = clock.perf_ns()
        call(inputs)
        clock.full_sync()
        warm_ns.append(clock.perf_ns() - t0)
    per_call_s = max(min(warm_ns) / 1e9, 1e-6) if warm_ns else 1e-3
    n = int(min(max_calls, max(min_calls, target_s / per_call_s)))
    events_ms: list[float] = []
    wall_ms: list[float] = []
    host_ms: list[float] = []
    prints: list[list[list[float]]] = []
    untimed: dict[str, list[float]] = {part: [] for part in UNTIMED_PARTS}
    window = watch if watch is not None else contextlib.nullcontext()
    loop_start = clock.perf_ns()
    for i in range(n):
        began = clock.perf_ns()
        collecting = _GC_IS_ON()
        _GC_PAUSE()
        try:
            with window:
                inputs = fresh_inputs(torch, template, seed_base + i, clock.device, symmetric)
                if prepare is not None:
                    prepare(inputs)
                prepared = clock.perf_ns()
                if reset is not None:
                    reset()
                was_reset = clock.perf_ns()
                if flush is not None:
                    flush.zero_()
                clock.full_sync()
                start, end = clock.new_events()
            t0 = clock.perf_ns()
            if start is not None:
                clock.record(start)
            out = call(inputs)
            returned = clock.perf_ns()
            if end is not None:
                clock.record(end)
            clock.full_sync()
            t1 = clock.perf_ns()
            # The fingerprints are watched too: code of the candidate's that ran there (a mode it entered on its way
            # out, a tensor subclass's hook) could compute the right answer untimed and hand its fingerprint back.
            with window:
                prints.append(call_fingerprints(out))
        finally:
            if collecting:
                _GC_RESUME()
        wall_ms.append((t1 - t0) / 1e6)
        host_ms.append((returned - t0) / 1e6)
        events_ms.append(clock.elapsed(start, end) if start is not None else (t1 - t0) / 1e6)
        # Before the next inputs exist: whatever the candidate hung on this call's inputs or outputs (a finalizer)
        # runs while it has nothing of the next call to work on.
        del out, inputs
        for part, ns in zip(UNTIMED_PARTS, (prepared - began, was_reset - prepared, t0 - was_reset,
                                            clock.perf_ns() - t1), strict=True):
            untimed[part].append(ns / 1e6)
        if precision is not None and i + 1 >= min_calls and i + 1 < n and median_is_precise(events_ms, precision):
            stopped = "precision"
            break
    else:
        stopped = "count"
    loop_ns = clock.perf_ns() - loop_start
    return {
        "calls": len(events_ms),
        "planned_calls": n,
        "stopped": stopped,
        "seed_base": seed_base,
        "event_ms": events_ms,
        "wall_ms": wall_ms,
        "host_ms": host_ms,
        "fingerprints": prints,
        "loop_s": loop_ns / 1e9,
        "event": summarize(events_ms),
        "wall": summarize(wall_ms),
        "host": summarize(host_ms),
        "untimed": {part: summarize(values) for part, values in untimed.items()},
        **({"watch": watch.evidence()} if watch is not None else {}),
    }
