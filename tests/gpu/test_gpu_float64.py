"""GPU suite for ``verify.harness.float64``: the way a float64 twin runs is chosen where cuDNN is, on real tasks.

The CPU tests (``tests/verify/test_verify_float64.py``) hold the choice's logic on a fake clock; these hold it on the
device: KernelBench's level 1 task 68 (a 3D transposed convolution, 2.8 s a float64 forward with cuDNN on an H200,
0.24 s without) keeps ATen, with outputs that agree with cuDNN's to float64 rounding; a fast task never times a
second way; and an LSTM task that kept its state in fp32 attributes runs in float64.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import pytest
from gpu_testing import GPU_DATA

pytestmark = pytest.mark.gpu

TASKS = GPU_DATA / "cuda-l1-h100-tasks.jsonl"


def _task(level: int, task_id: int) -> Any:
    from verify.harness.task import load_module

    if not TASKS.exists():
        pytest.skip(f"no task rows at {TASKS}: run python tests/gpu/copy_gpu_data.py where ../shared/data exists")
    for line in TASKS.read_text().splitlines():
        row = json.loads(line)
        if (row["level_id"], row["task_id"]) == (level, task_id):
            return load_module(row["ref_code"], f"ka_gpu_f64_{level}_{task_id}", tempfile.mkdtemp())
    pytest.skip(f"level {level} task {task_id} is not in {TASKS}")


def _twin(level: int, task_id: int) -> tuple[Any, Any, Any]:
    import torch

    from verify.harness.common import pin_flags
    from verify.harness.float64 import Float64Reference
    from verify.harness.roles import REFERENCE_RNG_SEED, _build_reference
    from verify.harness.tensors import make_inputs

    pin_flags(torch)
    task = _task(level, task_id)
    model, _ = _build_reference(torch, task, None, "model-new", 7, "cuda")
    twin = Float64Reference(torch, model, seed=REFERENCE_RNG_SEED,
                            build=lambda: _build_reference(torch, task, None, "model-new", 7, "cuda")[0])
    return model, twin, make_inputs(task.get_inputs, 3, "randn", "cuda")


def test_a_slow_cudnn_float64_convolution_keeps_aten_and_the_same_outputs() -> None:
    import torch

    _, twin, inputs = _twin(1, 68)
    by_cudnn = twin(inputs)[0]
    by_aten = twin(inputs)[0]
    summary = twin.summary()
    assert summary["cudnn"] is False and summary["seconds"]["aten"] < summary["seconds"]["cudnn"], summary
    assert twin(inputs)[0].dtype == torch.float64 and twin.cudnn is False
    scale = float(by_cudnn.abs().max())
    assert float((by_cudnn - by_aten).abs().max()) <= 1e-10 * scale
    assert torch.backends.cudnn.enabled


def test_a_fast_task_never_times_a_second_way() -> None:
    import torch

    _, twin, inputs = _twin(1, 19)
    with torch.no_grad():
        twin.module(*[x.double() for x in inputs])  # the float64 kernel loaded: the first timed forward is warm
    for _ in range(3):
        twin(inputs)
    assert twin.summary()["cudnn"] is True and set(twin.summary()["seconds"]) == {"cudnn"}, twin.summary()


def test_an_lstm_with_its_state_in_attributes_runs_in_float64_on_the_gpu() -> None:
    import torch

    from verify.harness.roles import reference_outputs

    model, twin, inputs = _twin(3, 35)
    ref32, ref64, precision = reference_outputs(torch, model, twin, inputs)
    assert precision == "float64" and ref64[0].dtype == torch.float64 and ref64[0].is_cuda
    error = float((ref32[0].double() - ref64[0]).norm() / ref64[0].norm())
    assert 0 < error < 1e-4, error
