"""``verify.harness.timing``: timed series sized by their spread (issue 13), on the CPU with a scripted clock."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import torch

from verify.harness.timing import Clock, median_is_precise, time_callable


def scripted_clock(durations_ns: Iterator[int]) -> Clock:
    """A CPU clock whose every call takes the next of ``durations_ns`` (and no time between calls)."""
    clock = Clock(torch, "cpu")
    now = [0]
    pending: list[int] = []

    def perf_ns() -> int:
        if pending:
            now[0] += pending.pop()
        return now[0]

    def call(_: list[torch.Tensor]) -> torch.Tensor:
        pending.append(next(durations_ns))
        return torch.zeros(4)

    clock.perf_ns = perf_ns
    clock.scripted_call = call  # type: ignore[attr-defined]
    return clock


def test_a_steady_series_stops_once_its_median_is_precise() -> None:
    clock = scripted_clock(itertools.cycle([1_000_000, 1_001_000, 1_002_000]))
    result = time_callable(clock, clock.scripted_call, [torch.ones(4)], 7, min_calls=30, max_calls=300, target_s=1.0)
    assert result["stopped"] == "precision" and result["calls"] == 30 < result["planned_calls"]
    assert len(result["event_ms"]) == len(result["fingerprints"]) == 30


def test_a_noisy_series_runs_to_its_planned_count() -> None:
    clock = scripted_clock(itertools.cycle([1_000_000, 3_000_000, 1_500_000, 2_500_000]))
    result = time_callable(clock, clock.scripted_call, [torch.ones(4)], 7, min_calls=30, max_calls=120, target_s=1.0)
    assert result["stopped"] == "count" and result["calls"] == result["planned_calls"] == 120


def test_precision_off_keeps_the_old_fixed_count() -> None:
    clock = scripted_clock(itertools.cycle([1_000_000]))
    result = time_callable(clock, clock.scripted_call, [torch.ones(4)], 7, min_calls=30, max_calls=80, target_s=1.0,
                           precision=None)
    assert result["calls"] == 80 and result["stopped"] == "count"


def test_one_outlier_does_not_keep_a_steady_series_going() -> None:
    samples = [1.0] * 29 + [50.0]
    assert median_is_precise(samples)
    assert not median_is_precise([1.0, 2.0, 1.0, 2.0] * 8)
