"""``verify.harness.tensors``: the content fingerprint the timed calls are checked by."""

from __future__ import annotations

import math

import pytest
import torch

from verify.harness.tensors import fingerprint, fingerprints_agree


def _fingerprint_in_float64(t: torch.Tensor, projections: int = 4) -> list[float]:
    """The fingerprint's definition, spelled out: float64 copy, norm, +-1 projections, non-finite count."""
    x = t.detach().reshape(-1).to(torch.float64)
    finite = torch.isfinite(x)
    x = torch.where(finite, x, torch.zeros((), dtype=x.dtype))
    values = [float(torch.linalg.vector_norm(x))]
    generator = torch.Generator()
    for k in range(projections):
        generator.manual_seed(7919 * (k + 1))
        signs = torch.randint(0, 2, (x.numel(),), generator=generator, dtype=torch.int8)
        values.append(float((x * (signs.to(torch.float64) * 2 - 1)).sum()))
    return [*values, float(int((~finite).sum()))]


@pytest.mark.parametrize("t", [
    torch.randn(1000), torch.randn(37, 5).half(), torch.randn(100).bfloat16(), torch.arange(10),
    torch.tensor([True, False, True]), torch.tensor([1.0, float("inf"), float("nan"), -2.0]), torch.empty(0),
    torch.randn(3, 4, dtype=torch.float64), torch.randn(6, 4).t(),
], ids=["f32", "f16", "bf16", "int64", "bool", "non-finite", "empty", "f64", "strided"])
def test_the_fingerprint_keeps_its_float64_definition(t: torch.Tensor) -> None:
    got, want = fingerprint(t), _fingerprint_in_float64(t)
    assert len(got) == 6 and got[-1] == want[-1]
    assert got[0] == pytest.approx(want[0], rel=1e-12, abs=1e-12)
    # The projections of a small floating output are float32 sums: within 1e-5 of the norm (the check allows 5e-2).
    assert all(abs(a - b) <= 1e-5 * max(want[0], 1e-30) for a, b in zip(got[1:5], want[1:5], strict=True))


def test_a_finite_floating_output_never_takes_the_slow_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.harness import tensors

    def refuse(*_: object) -> list[float]:
        raise AssertionError("the spelled-out definition ran")

    monkeypatch.setattr(tensors, "_exact_fingerprint", refuse)
    for t in (torch.randn(3), torch.randn(64, 64).half(), torch.randn(tensors.FINGERPRINT_CACHED_ELEMENTS + 1)):
        assert len(tensors.fingerprint(t)) == 6
    with pytest.raises(AssertionError, match="definition ran"):
        tensors.fingerprint(torch.tensor([1.0, float("nan")]))


def test_the_fingerprint_tells_a_wrong_answer_from_a_right_one_in_a_low_precision_dtype() -> None:
    right = torch.randn(4096).half()
    wrong = right.clone()
    wrong[17] += 1.0
    assert fingerprints_agree(fingerprint(right), fingerprint(right.clone()), 1e-12)
    assert not fingerprints_agree(fingerprint(right), fingerprint(wrong), 1e-4)


@pytest.mark.parametrize("t", [
    torch.tensor([1e200, 1.0], dtype=torch.float64), torch.tensor([float("inf"), -float("inf")]),
    torch.full((7,), float("nan")), torch.randn(2**22 + 1).half(),
], ids=["squares-overflow", "infinities-cancel", "all-nan", "above-the-cache"])
def test_outputs_the_fast_product_cannot_take_get_the_definition(t: torch.Tensor) -> None:
    got, want = fingerprint(t), _fingerprint_in_float64(t)
    assert got[-1] == want[-1]
    for a, b in zip(got, want, strict=True):
        assert (math.isinf(a) and a == b) or abs(a - b) <= 1e-9 * max(1.0, abs(b))


def test_the_cached_weights_are_the_seeded_ones_for_every_size() -> None:
    for n in (3, 1000, 3, 77):
        t = torch.randn(n)
        got, want = fingerprint(t), _fingerprint_in_float64(t)
        assert all(abs(a - b) <= 1e-5 * want[0] for a, b in zip(got, want, strict=True))


def test_task_inputs_are_drawn_on_the_device_and_fall_back_to_the_cpu_from_the_same_seed() -> None:
    from verify.harness.tensors import task_inputs

    on_device = task_inputs(lambda: [torch.randn(4), 3], 5, "meta")
    assert on_device[0].device.type == "meta" and on_device[1] == 3

    def needs_numpy() -> list[torch.Tensor]:
        return [torch.from_numpy(torch.randn(4).numpy())]

    fallen_back = task_inputs(needs_numpy, 5, "meta")
    torch.manual_seed(5)
    assert fallen_back[0].device.type == "cpu" and torch.equal(fallen_back[0], torch.randn(4))
    drawn = task_inputs(lambda: [torch.randn(4)], 5, "cpu")[0]
    torch.manual_seed(5)
    assert torch.equal(drawn, torch.randn(4))
