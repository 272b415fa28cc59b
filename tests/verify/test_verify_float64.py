"""The reference's float64 twin (harness 1.24): every floating tensor it holds in float64, built again where the
module closes over itself, and the faster of cuDNN and ATen for its forward.

Before 1.24 the twin was ``copy.deepcopy(model).double()``: KernelBench's LSTM and GRU tasks (level 3 tasks 35-42)
keep their initial state in a plain attribute that ``double`` leaves in fp32, and minGPT's block (level 3 task 44)
calls its MLP through a lambda that a copy still binds to the fp32 original. Their float64 forward failed, so their
kernels were judged against fp32 alone, with no ``lower-precision`` check.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch

from verify.harness import float64 as float64_module
from verify.harness.float64 import FLOAT64_PROBE_S, Float64Reference, as_float64, closes_over
from verify.harness.roles import REFERENCE_RNG_SEED, _build_reference, reference_outputs
from verify.harness.task import load_module
from verify.harness.tensors import make_inputs
from verify.runner import VerifyOptions, verify_code

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "cuda-l1" / "h100.jsonl"

LSTM_TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.h0 = torch.randn((num_layers, batch_size, hidden_size))
        self.c0 = torch.randn((num_layers, batch_size, hidden_size))
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.c0.to(x.device)
        out, _ = self.lstm(x, (self.h0, self.c0))
        return out[:, -1, :]
batch_size, sequence_length, input_size, hidden_size, num_layers = 4, 16, 8, 16, 2
def get_inputs():
    return [torch.randn(batch_size, sequence_length, input_size)]
def get_init_inputs():
    return [input_size, hidden_size, num_layers]
'''

# The task's own module as the candidate: honest by construction.
HONEST_LSTM = LSTM_TASK.replace("class Model(nn.Module):", "class ModelNew(nn.Module):")
# Less exact than fp32 by a factor of about 1000, with nothing a static rule names: inputs rounded to 1/256.
ROUNDED_LSTM = HONEST_LSTM.replace("self.lstm(x,", "self.lstm(torch.round(x * 256) / 256,")
assert ROUNDED_LSTM != HONEST_LSTM != LSTM_TASK


class Block(torch.nn.Module):
    """minGPT's shape: the forward calls a lambda that closes over a submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = torch.nn.ModuleDict({"fc": torch.nn.Linear(4, 4)})
        m = self.mlp
        self.mlpf = lambda x: m["fc"](x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlpf(x)


def _lstm_model() -> tuple[Any, Any]:
    folder = tempfile.mkdtemp()
    task = load_module(LSTM_TASK, "ka_test_lstm_task", folder)
    model, _ = _build_reference(torch, task, None, "model-new", 11, "cpu")
    return task, model


def test_plain_tensor_attributes_are_widened_and_the_lstm_runs_in_float64() -> None:
    task, model = _lstm_model()
    inputs = make_inputs(task.get_inputs, 3, "randn", "cpu")
    with pytest.raises(RuntimeError, match="dtype"):
        copy.deepcopy(model).double()(inputs[0].double())
    twin = Float64Reference(torch, model, seed=REFERENCE_RNG_SEED)
    assert twin.module.h0.dtype == torch.float64 and model.h0.dtype == torch.float32
    ref32, ref64, precision = reference_outputs(torch, model, twin, inputs)
    assert precision == "float64" and ref64[0].dtype == torch.float64
    error = float((ref32[0].double() - ref64[0]).norm() / ref64[0].norm())
    assert 0 < error < 1e-5


def test_as_float64_leaves_integers_parameters_and_other_values_alone() -> None:
    m = torch.nn.Linear(2, 2)
    m.index, m.pair, m.name, m.scale = torch.arange(3), (torch.ones(1), 2), "x", 0.5
    as_float64(torch, m)
    assert m.index.dtype == torch.int64 and m.pair[0].dtype == torch.float64 and m.pair[1] == 2
    assert isinstance(m.weight, torch.nn.Parameter) and m.weight.dtype == torch.float64
    assert (m.name, m.scale) == ("x", 0.5)


def test_a_module_closing_over_itself_is_built_again_with_the_models_weights() -> None:
    torch.manual_seed(0)
    model = Block()
    with torch.no_grad():
        model.mlp["fc"].weight.fill_(0.25)
    assert closes_over(model) == ["mlpf"]
    x = torch.randn(2, 4)
    copied = Float64Reference(torch, model, seed=1)
    with pytest.raises(RuntimeError, match="dtype"):
        copied([x])
    twin = Float64Reference(torch, model, seed=1, build=Block)
    assert twin.built and twin.summary()["twin"] == "built"
    assert torch.allclose(twin([x])[0], model(x).double(), atol=1e-6)
    assert bool((twin.module.mlp["fc"].weight == 0.25).all())


def test_a_module_without_closures_is_copied_even_when_it_could_be_built() -> None:
    def never() -> Any:
        raise AssertionError("a module without closures must not be built again")

    twin = Float64Reference(torch, torch.nn.Linear(2, 2), seed=1, build=never)
    assert twin.summary() == {"twin": "copied", "cudnn": None, "seconds": {}}
    twin([torch.ones(1, 2)])
    assert twin.summary() == {"twin": "copied", "cudnn": True, "seconds": {}}, "nothing on a GPU: nothing to time"


class _Clocked(torch.nn.Module):
    """A forward whose duration (on a fake clock) depends on whether cuDNN is on; it records the ways it ran.

    The clock and the record are reached through functions, which a twin's deep copy shares with the original.
    """

    def __init__(self, tick: Any, record: Any, cudnn_s: float, aten_s: float, aten_fails: bool) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))
        self.tick, self.record = tick, record
        self.cudnn_s, self.aten_s, self.aten_fails = cudnn_s, aten_s, aten_fails

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        on = torch.backends.cudnn.enabled
        self.record(on)
        if not on and self.aten_fails:
            raise RuntimeError("no float64 kernel without cuDNN")
        self.tick(self.cudnn_s if on else self.aten_s)
        return x * self.weight


def _probed(monkeypatch: pytest.MonkeyPatch, cudnn_s: float, aten_s: float,
            aten_fails: bool = False) -> tuple[Float64Reference, list[bool]]:
    clock, ways = [0.0], []
    monkeypatch.setattr(float64_module.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    module = _Clocked(lambda s: clock.__setitem__(0, clock[0] + s), ways.append, cudnn_s, aten_s, aten_fails)
    twin = Float64Reference(torch, module, seed=1)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))  # as on a GPU: the way is timed
    return twin, ways


def test_a_slow_cudnn_forward_is_timed_once_without_it_and_the_faster_way_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    twin, ways = _probed(monkeypatch, cudnn_s=2.8, aten_s=0.24)
    for _ in range(4):
        assert twin([torch.ones(1)])[0].dtype == torch.float64
    assert ways == [True, False, False, False]
    assert twin.summary() == {"twin": "copied", "cudnn": False, "seconds": {"cudnn": 2.8, "aten": 0.24}}
    assert torch.backends.cudnn.enabled


def test_cudnn_stays_when_it_is_fast_faster_or_the_only_way(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, ways = _probed(monkeypatch, cudnn_s=FLOAT64_PROBE_S / 2, aten_s=0.0)
    for _ in range(3):
        fast([torch.ones(1)])
    assert ways == [True, True, True] and fast.cudnn is True
    faster, ways = _probed(monkeypatch, cudnn_s=0.1, aten_s=0.3)
    for _ in range(3):
        faster([torch.ones(1)])
    assert ways == [True, False, True] and faster.cudnn is True
    only, ways = _probed(monkeypatch, cudnn_s=0.1, aten_s=0.01, aten_fails=True)
    assert only([torch.ones(1)])[0].item() == 1.0 and only([torch.ones(1)])[0].item() == 1.0
    assert ways == [True, False, True] and only.cudnn is True and torch.backends.cudnn.enabled


def test_a_model_that_cannot_run_in_float64_still_says_so() -> None:
    class Pinned(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ torch.ones(2, 2, dtype=torch.float32)

    model = Pinned()
    _, ref64, precision = reference_outputs(torch, model, Float64Reference(torch, model, seed=1), [torch.ones(1, 2)])
    assert ref64 is None and precision.startswith("float32 (float64 failed: RuntimeError")


@pytest.mark.skipif(not SHARED.exists(), reason=f"real data absent: {SHARED}")
def test_every_kernelbench_level_3_recurrent_and_mingpt_task_gets_a_float64_twin() -> None:
    """The tasks whose float64 forward failed before 1.24 are built and widened (not run: 30 s of CPU each)."""
    rows = [json.loads(line) for line in SHARED.read_text().splitlines()]
    tasks = {r["task_id"]: r["ref_code"] for r in rows if r.get("level_id") == 3 and r["task_id"] in range(35, 45)}
    assert len(tasks) >= 8
    for task_id, code in sorted(tasks.items()):
        task = load_module(code, f"ka_test_l3_{task_id}", tempfile.mkdtemp())
        model, _ = _build_reference(torch, task, None, "model-new", 5, "cpu")
        twin = Float64Reference(torch, model, seed=REFERENCE_RNG_SEED,
                                build=lambda t=task: _build_reference(torch, t, None, "model-new", 5, "cpu")[0])
        held = [v for sub in twin.module.modules() for v in vars(sub).values()
                if isinstance(v, torch.Tensor) and v.is_floating_point()]
        assert all(t.dtype == torch.float64 for t in [*held, *twin.module.parameters()]), task_id
        assert twin.built == bool(closes_over(model)), task_id


@pytest.mark.slow
def test_an_honest_lstm_passes_against_float64_and_a_less_exact_one_is_caught() -> None:
    """Harness 1.23 judged both against fp32 alone: both passed ``lower-precision``."""
    options = VerifyOptions(trials=3, device="cpu", target_seconds=0.05)
    honest = verify_code(LSTM_TASK, HONEST_LSTM, "model-new", options)
    failing = {n: c["evidence"][:2] for n, c in honest["checks"].items() if c["verdict"] in ("fail", "warn")}
    assert honest["checks"]["correctness"]["verdict"] == "pass", failing
    assert honest["checks"]["lower-precision"]["verdict"] == "pass", failing
    assert honest["reference_float64"]["twin"] == "copied"
    assert all(t.get("fp32_rel_l2") for t in honest["trials"]), honest["trials"]
    rounded = verify_code(LSTM_TASK, ROUNDED_LSTM, "model-new", options)
    assert rounded["checks"]["correctness"]["verdict"] == "pass"
    assert rounded["checks"]["lower-precision"]["verdict"] == "warn", rounded["checks"]["lower-precision"]
    assert any("computed in lower precision than fp32" in line for line in rounded["checks"]["lower-precision"]["evidence"])
