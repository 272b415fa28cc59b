"""Deriving the call of real cuda-binding kernels from the module form (AI CUDA Engineer Archive sample)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from verify.harness.task import (
    CallDerivationError,
    copy_matching_state,
    derive_call,
    load_module,
    parse_forward_signature,
)


@pytest.fixture(scope="module")
def sakana(shared_data: Path) -> list[dict]:
    return [json.loads(line) for line in (shared_data / "sakana-archive" / "sample.jsonl").open()]


def test_every_sample_signature_parses(sakana: list[dict]) -> None:
    parsed = 0
    for row in sakana:
        try:
            params = parse_forward_signature(row["CUDA_Code"])
        except CallDerivationError:
            assert "PYBIND11_MODULE" not in row["CUDA_Code"] or not row["Correct"]
            continue
        parsed += 1
        assert params and params[0].kind == "tensor"
    assert parsed >= len(sakana) - 2


@pytest.mark.parametrize("level", [1, 2, 3])
def test_derived_arguments_match_what_the_kernel_expects(sakana: list[dict], level: int, tmp_path: Path) -> None:
    row = next(r for r in sakana if r["Level_ID"] == level and r["Correct"])
    task = load_module(row["PyTorch_Code_Module"], f"ka_test_task_{level}", tmp_path)
    torch.manual_seed(0)
    init = task.get_init_inputs()
    model = task.Model(*init)
    inputs = task.get_inputs()
    build, explanation = derive_call(model, init, parse_forward_signature(row["CUDA_Code"]), len(inputs))
    args = build(inputs)
    assert args[: len(inputs)] == inputs
    if level == 2:  # forward(x, conv_weight, conv_bias, bias)
        assert [tuple(a.shape) for a in args[1:]] == [(16, 3, 3, 3), (16,), (16, 1, 1)]
        assert "conv_weight <- conv.weight (by name)" in explanation
    if level == 3:  # forward(x, weights, biases): the Linear layers' weights and biases in order
        weights, biases = args[1], args[2]
        assert [tuple(w.shape) for w in weights] == [(400, 1000), (800, 400), (500, 800)]
        assert [tuple(b.shape) for b in biases] == [(400,), (800,), (500,)]
        functional = torch.relu(torch.nn.functional.linear(inputs[0], weights[0], biases[0]))
        assert torch.allclose(functional, torch.relu(model.network[0](inputs[0])))


def test_a_parameter_that_matches_nothing_is_an_error(tmp_path: Path) -> None:
    task = load_module("import torch\nclass Model(torch.nn.Module):\n    pass\n", "ka_test_empty", tmp_path)
    params = parse_forward_signature('torch::Tensor f(torch::Tensor x, torch::Tensor w) {}\n'
                                     'PYBIND11_MODULE(n, m) { m.def("forward", &f); }')
    with pytest.raises(CallDerivationError, match="w"):
        derive_call(task.Model(), [], params, 1)


def test_weights_are_copied_by_name_then_by_shape() -> None:
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    candidate = torch.nn.Module()
    candidate.first = torch.nn.Linear(4, 3)
    candidate.extra = torch.nn.Parameter(torch.zeros(7))
    mapping = copy_matching_state(reference, candidate)
    assert mapping["copied"]["first.weight"] == "0.weight"
    assert torch.equal(candidate.first.weight, reference[0].weight)
    assert mapping["unmatched_candidate"] == ["extra"]
    assert set(mapping["unused_reference"]) == {"1.weight", "1.bias"}
