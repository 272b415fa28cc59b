"""The batch pipeline on a GPU: CUDA-L1 kernels built into the cache with GPUs hidden, then verified."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gpu_testing import GPU_DATA

from verify.pipeline import VerifyJob, verify_jobs
from verify.runner import VerifyOptions

pytestmark = pytest.mark.gpu


def _cuda_l1_jobs() -> list[VerifyJob]:
    path = GPU_DATA / "cuda-l1-h100.jsonl"
    if not path.is_file():
        pytest.skip(f"no {path}: run python tests/gpu/copy_gpu_data.py and carry .gpu_data")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [VerifyJob(key=f"L{r['level_id']}-T{r['task_id']}", task_code=r["ref_code"], kernel_code=r["custom_code"],
                      form="model-new") for r in rows[:2]]


def test_a_cold_then_warm_batch_builds_once_and_keeps_the_verdicts(tmp_path: Path) -> None:
    jobs = _cuda_l1_jobs()
    options = VerifyOptions(trials=3, compile_baseline=False, target_seconds=0.3)
    cold: dict[str, dict[str, Any]] = {}
    warm: dict[str, dict[str, Any]] = {}
    verify_jobs(jobs, options, lambda j, r: cold.__setitem__(j.key, r), gpus=1, build_cache=tmp_path)
    verify_jobs(jobs, options, lambda j, r: warm.__setitem__(j.key, r), gpus=1, build_cache=tmp_path, force=True)
    for job in jobs:
        assert cold[job.key]["status"] in ("passed", "flagged", "failed"), cold[job.key].get("error")
        assert warm[job.key]["batch"]["build"]["state"] in ("hit", "failed", "none")
        assert cold[job.key]["status"] == warm[job.key]["status"]
        if cold[job.key]["batch"]["build"]["state"] == "built":
            assert warm[job.key]["step_seconds"]["compile"] < 20, warm[job.key]["timeline"]
