"""The batch pipeline on a GPU: CUDA-L1 kernels built into the cache with GPUs hidden, then verified."""

from __future__ import annotations

import json
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


Batches = tuple[list[VerifyJob], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> Batches:
    """Two CUDA-L1 kernels verified in a batch with the build cache cold, then again with it warm."""
    jobs = _cuda_l1_jobs()
    cache = tmp_path_factory.mktemp("builds")
    options = VerifyOptions(trials=3, compile_baseline=False, target_seconds=0.3)
    cold: dict[str, dict[str, Any]] = {}
    warm: dict[str, dict[str, Any]] = {}
    verify_jobs(jobs, options, lambda j, r: cold.__setitem__(j.key, r), gpus=1, build_cache=cache)
    verify_jobs(jobs, options, lambda j, r: warm.__setitem__(j.key, r), gpus=1, build_cache=cache, force=True)
    return jobs, cold, warm


def _events(report: dict[str, Any], role: str, event: str) -> list[float]:
    return [float(t) for t, r, e in report.get("timeline") or [] if r == role and e == event]


def test_the_trusted_childs_baselines_hand_the_gpu_alone_straight_to_the_run_childs_series(batches: Batches) -> None:
    _, cold, warm = batches
    for report in [*cold.values(), *warm.values()]:
        assert report["gate"]["mode"] == "shared" and report.get("timings", {}).get("overhead-pre-import"), report
        hello = _events(report, "run", "hello")[0]
        asked = [t for t in _events(report, "run", "gate:alone") if t < hello]
        granted = [t for t in _events(report, "parent", "gate:run:alone") if t < hello]
        assert len(asked) == len(granted) == 1, report["timeline"]
        over = _events(report, "parent", "gate:trusted:over")
        if (report.get("baselines") or {}).get("from", "measured") == "measured":
            # Handed over: the GPU stayed alone from the baselines' end to the run child's series, with no drain.
            assert len(over) == 1 and over[0] <= granted[0] < over[0] + 1.0, report["timeline"]
            trusted = [e for _, r, e in report["timeline"] if r == "parent" and e.startswith("gate:trusted:")]
            assert trusted[-2:] == ["gate:trusted:alone", "gate:trusted:over"], report["timeline"]
        else:
            assert not over, report["timeline"]


def test_a_cold_then_warm_batch_builds_once_and_keeps_the_verdicts(batches: Batches) -> None:
    jobs, cold, warm = batches
    for job in jobs:
        assert cold[job.key]["status"] in ("passed", "flagged", "failed"), cold[job.key].get("error")
        assert warm[job.key]["batch"]["build"]["state"] in ("hit", "failed", "none")
        assert cold[job.key]["status"] == warm[job.key]["status"]
        if cold[job.key]["batch"]["build"]["state"] == "built":
            assert warm[job.key]["step_seconds"]["compile"] < 20, warm[job.key]["timeline"]


def test_every_piece_of_shared_work_is_reported_and_the_trials_and_references_are_split(batches: Batches) -> None:
    """Harnesses 1.35 (``gate.pieces``) and 1.36 (yield points around the import, each trial's inputs, and the
    trusted child's inputs, references and their sending), on a GPU."""
    _, cold, warm = batches
    for report in [*cold.values(), *warm.values()]:
        pieces = report["gate"]["pieces"]
        run = [name for *_, name in pieces["run"]]
        variants = _events(report, "run", "trial")
        assert sum(name.startswith("trial") for name in run) == len(variants) > 0, run
        # The import ends a piece and the model's construction starts one (a JIT build in between, asking for the GPU
        # away and back, would make more pieces, not fewer).
        assert any(name.endswith("probe:import") for name in run), run
        assert any(name.split(" .. ")[0] == "call" for name in run), run
        for role, role_pieces in pieces.items():
            life = [float(t) for t, r, _ in report["timeline"] if r == role]
            assert all(s >= 0 for _, s, _ in role_pieces)
            assert role_pieces[-1][0] + role_pieces[-1][1] <= max(life) + 0.002, (role, role_pieces)
            assert all(b[0] >= a[0] + a[1] - 0.002 for a, b in zip(role_pieces, role_pieces[1:], strict=False))
        trusted = [name for *_, name in pieces["trusted"]]
        sent = [i for i, name in enumerate(trusted) if name.split(" .. ")[0] in ("reference", "reference-state")]
        assert sent and all(trusted[i - 2:i] == ["-", "-"] for i in sent), trusted
