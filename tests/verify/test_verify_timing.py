"""``verify.harness.timing``: timed series sized by their spread (issue 13), on the CPU with a scripted clock."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterator

import pytest
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


def test_every_output_of_a_timed_call_is_fingerprinted() -> None:
    clock = Clock(torch, "cpu")
    result = time_callable(clock, lambda inputs: (inputs[0] * 2, inputs[0].sum()), [torch.ones(4)], 7,
                           min_calls=3, max_calls=3, target_s=0.0, warmup=1)
    assert [len(call) for call in result["fingerprints"]] == [2, 2, 2]
    assert all(first[0] != second[0] for first, second in result["fingerprints"])



def test_the_harness_steps_around_each_timed_call_are_timed_apart_from_it() -> None:
    clock = scripted_clock(itertools.cycle([1_000_000]))
    scripted, offset = clock.perf_ns, [0]
    clock.perf_ns = lambda: scripted() + offset[0]  # type: ignore[method-assign]

    def reset() -> None:
        offset[0] += 3_000_000  # this step of the harness takes 3 ms

    result = time_callable(clock, clock.scripted_call, [torch.ones(4)], 7, min_calls=5, max_calls=5, target_s=1.0,
                           reset=reset, warmup=0)
    assert set(result["untimed"]) == {"inputs", "reset", "flush", "fingerprint"}
    assert result["untimed"]["reset"]["median"] == 3.0 and result["untimed"]["reset"]["n"] == 5
    assert result["untimed"]["inputs"]["median"] == result["untimed"]["fingerprint"]["median"] == 0.0
    assert result["event"]["median"] == 1.0 and result["wall"]["median"] == 1.0


def test_a_calls_inputs_and_outputs_are_dropped_before_the_next_inputs_are_made(monkeypatch) -> None:
    from verify.harness import timing

    events: list[str] = []
    made = timing.fresh_inputs

    def fresh_inputs(*args: object, **kwargs: object) -> list[torch.Tensor]:
        events.append("made")
        return made(*args, **kwargs)

    def call(inputs: list[torch.Tensor]) -> torch.Tensor:
        out = inputs[0] * 2
        weakref.finalize(inputs[0], events.append, "inputs dropped")
        weakref.finalize(out, events.append, "output dropped")
        events.append("called")
        return out

    monkeypatch.setattr(timing, "fresh_inputs", fresh_inputs)
    time_callable(Clock(torch, "cpu"), call, [torch.ones(4)], 7, min_calls=3, max_calls=3, target_s=0.0, warmup=0)
    timed = events[events.index("made"):]
    assert timed == ["made", "called", "output dropped", "inputs dropped"] * 3 or \
        timed == ["made", "called", "inputs dropped", "output dropped"] * 3, timed


def test_no_garbage_collection_runs_from_making_the_inputs_to_stopping_the_timer() -> None:
    import gc

    seen: list[bool] = []

    def call(inputs: list[torch.Tensor]) -> torch.Tensor:
        seen.append(gc.isenabled())
        return inputs[0] * 2

    assert gc.isenabled()
    time_callable(Clock(torch, "cpu"), call, [torch.ones(4)], 7, min_calls=3, max_calls=3, target_s=0.0, warmup=0,
                  prepare=lambda inputs: seen.append(gc.isenabled()), reset=lambda: seen.append(gc.isenabled()))
    assert seen == [False] * 9 and gc.isenabled()

# The timed calls of a task with two outputs (harness 1.15): a kernel right on every trial and probe that cuts
# corners on its second output from its 13th call on (the nine trials and three warm-up calls come first). Before
# 1.15 only the first output of a timed call was checked, and both tricks passed.
TWO_OUTPUTS_TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
    def forward(self, x):
        y = self.lin(x)
        return torch.relu(y), torch.tanh(y).sum(dim=1)
def get_inputs():
    return [torch.randn(64, 128)]
def get_init_inputs():
    return [128]
'''
TWO_OUTPUTS_HONEST = TWO_OUTPUTS_TASK.replace("class Model(", "class ModelNew(").split("def get_inputs")[0]
LATE_SECOND_OUTPUT = TWO_OUTPUTS_TASK.replace("class Model(", "class ModelNew(").split("def get_inputs")[0].replace(
    "        y = self.lin(x)\n        return torch.relu(y), torch.tanh(y).sum(dim=1)\n",
    "        self.calls = getattr(self, 'calls', 0) + 1\n"
    "        y = self.lin(x)\n"
    "        if self.calls <= CORNERS_FROM:\n"
    "            self.second = torch.tanh(y).sum(dim=1)\n"
    "            return torch.relu(y), self.second.clone()\n"
    "        return torch.relu(y), SECOND\n").replace("import torch.nn as nn\n", "import torch.nn as nn\nCORNERS_FROM = 12\n")
STALE_SECOND = LATE_SECOND_OUTPUT.replace("SECOND\n", "self.second.clone()\n")
BF16_SECOND = LATE_SECOND_OUTPUT.replace("SECOND\n", "torch.tanh(y.bfloat16()).float().sum(dim=1)\n")


def _verify_two_outputs(kernel: str) -> dict:
    from verify.runner import VerifyOptions, verify_code

    return verify_code(TWO_OUTPUTS_TASK, kernel, "model-new",
                       VerifyOptions(trials=3, device="cpu", target_seconds=0.05, shape_probe=False))


@pytest.mark.slow
def test_a_stale_second_output_on_the_timed_calls_fails_caching() -> None:
    report = _verify_two_outputs(STALE_SECOND)
    assert report["checks"]["correctness"]["verdict"] == "pass", report["checks"]["correctness"]
    check = report["checks"]["caching"]
    assert check["verdict"] == "fail" and "timed calls returned wrong outputs" in check["evidence"][0], check


@pytest.mark.slow
def test_a_second_output_in_bf16_on_the_timed_calls_is_lower_precision() -> None:
    report = _verify_two_outputs(BF16_SECOND)
    assert report["checks"]["correctness"]["verdict"] == "pass", report["checks"]["correctness"]
    assert report["checks"]["caching"]["verdict"] == "pass", report["checks"]["caching"]
    check = report["checks"]["lower-precision"]
    assert check["verdict"] == "warn" and check["evidence"][0].startswith("timed calls:"), check


@pytest.mark.slow
def test_an_honest_kernel_with_two_outputs_passes_both_checks_on_its_timed_calls() -> None:
    report = _verify_two_outputs(TWO_OUTPUTS_HONEST)
    for name in ("correctness", "caching", "lower-precision"):
        assert report["checks"][name]["verdict"] == "pass", report["checks"][name]
    assert report["checks"]["lower-precision"]["evidence"][0].startswith("timed calls:")


@pytest.mark.slow
def test_a_tensor_subclass_returned_on_the_timed_calls_fails_caching() -> None:
    # Exactly torch.Tensor on the trials (fake-tensor checks them), a subclass on the timed calls: a subclass could
    # answer the fingerprint's own operations, so it is fingerprinted as agreeing with nothing.
    from verify.runner import VerifyOptions, verify_code

    kernel = TWO_OUTPUTS_HONEST.replace("import torch.nn as nn\n", "import torch.nn as nn\nCORNERS_FROM = 12\n"
                                        "class Answer(torch.Tensor):\n    pass\n").replace(
        "        y = self.lin(x)\n        return torch.relu(y), torch.tanh(y).sum(dim=1)\n",
        "        self.calls = getattr(self, 'calls', 0) + 1\n        y = self.lin(x)\n"
        "        out = torch.relu(y), torch.tanh(y).sum(dim=1)\n"
        "        return out if self.calls <= CORNERS_FROM else (out[0].as_subclass(Answer), out[1])\n")
    report = verify_code(TWO_OUTPUTS_TASK, kernel, "model-new",
                         VerifyOptions(trials=3, device="cpu", target_seconds=0.05, shape_probe=False))
    assert report["checks"]["correctness"]["verdict"] == "pass", report["checks"]["correctness"]
    assert report["checks"]["fake-tensor"]["verdict"] == "pass", report["checks"]["fake-tensor"]
    check = report["checks"]["caching"]
    assert check["verdict"] == "fail" and "timed calls returned wrong outputs" in check["evidence"][0], check
