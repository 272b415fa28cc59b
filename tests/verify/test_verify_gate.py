"""The GPU gate: two eval scripts sharing a gate never do their device work at the same time (run on the CPU)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from batch_testing import HONEST, TASK

from verify.runner import VerifyOptions, verify_code


def _mark(report: dict[str, Any], role: str, event: str) -> float:
    return next(float(t) for t, r, e in report["timeline"] if r == role and e == event)


def test_two_verifications_sharing_a_gate_take_the_device_one_after_the_other(tmp_path: Path) -> None:
    options = VerifyOptions(device="cpu", trials=2, shape_probe=False)
    gate = {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock")}
    got: list[dict[str, Any]] = []

    def verify() -> None:
        got.append(verify_code(TASK, HONEST, "model-new", options, env=gate))

    threads = [threading.Thread(target=verify) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spans = []
    for report in got:
        assert report["status"] in ("passed", "flagged"), report.get("error")
        gated = _mark(report, "parent", "gpu-gate")
        assert _mark(report, "trusted", "mark:gpu-ours") >= gated
        # The timelines' origin is the system-wide monotonic clock, so the two scripts' spans compare exactly
        # (timing them from this process's start of each call put a loaded machine's start-up in the margin).
        origin = report["timeline_origin"]
        spans.append((origin + gated, origin + _mark(report, "run", "exit")))
    first, second = sorted(spans)
    # The run child's exit is read a few milliseconds after the gate is released.
    assert second[0] >= first[1] - 0.05, spans


def test_behind_the_gate_a_kernel_that_needs_the_gpu_at_import_is_compiled_again_with_it(tmp_path: Path) -> None:
    needs_gpu = ('import os\nif os.environ.get("CUDA_VISIBLE_DEVICES") == "":\n'
                 '    raise RuntimeError("no GPU at import")\n' + HONEST)
    options = VerifyOptions(device="cpu", trials=2, shape_probe=False)
    gated = verify_code(TASK, needs_gpu, "model-new", options, env={"KA_GPU_GATE": str(tmp_path / "gpu-0.lock")})
    plain = verify_code(TASK, HONEST, "model-new", options, env={"KA_GPU_GATE": str(tmp_path / "gpu-0.lock")})
    assert [e for _, r, e in gated["timeline"] if r == "parent"][:2] == ["compile-needs-gpu", "gpu-gate"]
    assert [e for _, r, e in plain["timeline"] if r == "parent"][:2] == ["compiled-without-gpu", "gpu-gate"]
    assert gated["checks"]["compiles"]["verdict"] == "pass" and gated["status"] == plain["status"]
