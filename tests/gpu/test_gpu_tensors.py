"""GPU suite for ``verify.harness.tensors``: the fingerprint of large outputs on the device, and end to end.

The CPU tests (``tests/verify/test_verify_tensors.py``) hold the definition; these hold it where the timed calls
compute it, from the CUDA generator's signs, and check that a verification of a task with an output above
``FINGERPRINT_CACHED_ELEMENTS`` passes an honest kernel and fails one that returns stale outputs on its timed calls.
"""

from __future__ import annotations

import pytest
from test_gpu_verify import RELU_TASK, _model_new, verdict, verify

pytestmark = pytest.mark.gpu

LARGE_RELU_TASK = RELU_TASK.replace("torch.rand(4096, 1024)", "torch.rand(4096, 2048)")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_large_outputs_fingerprint_on_the_device_keeps_its_definition(dtype: str) -> None:
    import torch

    from verify.harness import tensors

    n = tensors.FINGERPRINT_CACHED_ELEMENTS * 2 + 4099
    x = (torch.randn(n, device="cuda") + 0.25).to(getattr(torch, dtype))
    quick = tensors.fingerprint(x)
    defined = tensors._exact_fingerprint(torch, x.to(torch.float64), 4)
    assert quick[-1] == defined[-1] == 0.0
    assert all(abs(a - b) <= 1e-9 * defined[0] for a, b in zip(quick, defined, strict=True)), (quick, defined)
    wrong = x.clone()
    wrong[4096 * 300: 4096 * 301] += 0.5
    assert not tensors.fingerprints_agree(quick, tensors.fingerprint(wrong), 1e-4)


def test_an_honest_kernel_with_a_large_output_passes() -> None:
    report = verify(LARGE_RELU_TASK, _model_new("    def forward(self, x):\n        return torch.relu(x) + 0.0\n"))
    assert verdict(report, "caching") == "pass", report.get("checks")


def test_stale_large_outputs_on_the_timed_calls_are_caught() -> None:
    stale = _model_new(
        "        self.calls = 0\n        self.kept = None\n"
        "    def forward(self, x):\n        self.calls += 1\n"
        "        if self.calls > 40 and self.kept is not None:\n            return self.kept\n"
        "        self.kept = torch.relu(x)\n        return self.kept.clone()\n")
    report = verify(LARGE_RELU_TASK, stale)
    assert report["status"] == "failed" and verdict(report, "caching") == "fail", report.get("checks")
