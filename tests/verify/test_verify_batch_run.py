"""The batch pipeline end to end on CPU: real eval scripts, a real build cache, a kill and a restart, Ray."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from batch_testing import EXTENSION, HONEST, HONEST_TANH, MUTATING, TASK_TANH, job

from verify.pipeline import verify_jobs
from verify.runner import VerifyOptions

REPO = Path(__file__).resolve().parents[2]
OPTIONS = VerifyOptions(trials=2, device="cpu", target_seconds=0.05, shape_probe=False)


def _failed_checks(report: dict[str, Any]) -> set[str]:
    return {n for n, c in report.get("checks", {}).items() if c["verdict"] == "fail"}


@pytest.mark.slow
def test_a_batch_on_two_slots_gives_the_single_kernel_verdicts_and_reuses_builds(tmp_path: Path) -> None:
    jobs = [job("ext", kernel=EXTENSION), job("honest", kernel=HONEST), job("mutating", kernel=MUTATING),
            job("tanh", kernel=HONEST_TANH, task=TASK_TANH)]
    reports: dict[str, dict[str, Any]] = {}
    summary = verify_jobs(jobs, OPTIONS, lambda j, r: reports.__setitem__(j.key, r), gpus=2, compile_workers=2,
                          build_cache=tmp_path / "builds")
    assert sum(summary.values()) == 4
    assert reports["mutating"]["status"] == "failed" and "input-mutation" in _failed_checks(reports["mutating"])
    for key in ("ext", "honest", "tanh"):
        assert reports[key]["checks"].get("correctness", {}).get("verdict") == "pass", reports[key].get("error")
        # CPU-only candidates have no GPU code: not-a-kernel fails or warns, nothing else (status flagged).
        assert _failed_checks(reports[key]) <= {"not-a-kernel"} and reports[key]["status"] == "flagged"
    assert reports["ext"]["batch"]["build"]["state"] == "built"
    # Nothing in their code builds: no prebuild, their own compile step imported them.
    assert {reports[k]["batch"]["build"]["state"] for k in ("honest", "mutating", "tanh")} == {"none"}
    for report in reports.values():
        # The gate is taken only once the trusted child has started and says it is ready.
        events = {(role, event): at for at, role, event in reversed(report["timeline"])}
        assert events[("trusted", "mark:ready")] <= events[("parent", "gpu-gate")], report["timeline"]
    again: dict[str, dict[str, Any]] = {}
    verify_jobs(jobs[:1], OPTIONS, lambda j, r: again.__setitem__(j.key, r), gpus=1, build_cache=tmp_path / "builds")
    assert again["ext"]["batch"]["build"]["state"] == "hit"
    assert again["ext"]["checks"]["correctness"]["verdict"] == "pass"
    # Built once: the run's compile step found ninja's outputs up to date (a rebuild takes tens of seconds).
    assert again["ext"]["step_seconds"]["compile"] < reports["ext"]["batch"]["build"]["seconds"]
    alone = verify_jobs(jobs[2:3], OPTIONS, lambda j, r: again.__setitem__("alone", r))
    assert alone == {"failed": 1} and _failed_checks(again["alone"]) == _failed_checks(reports["mutating"])


@pytest.mark.slow
def test_a_batchs_verifications_plan_their_trials_and_reserve_large_evidence_in_its_ledger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every verification counts as large here, on a host said to have room for every trial of one of them.
    monkeypatch.setenv("KA_MEMORY_LEDGER_FROM", "1")
    monkeypatch.setenv("KA_MEMORY_AVAILABLE", "100000")
    jobs = [job("honest", kernel=HONEST), job("tanh", kernel=HONEST_TANH, task=TASK_TANH)]
    reports: dict[str, dict[str, Any]] = {}
    verify_jobs(jobs, OPTIONS, lambda j, r: reports.__setitem__(j.key, r), gpus=1, compile_workers=1,
                build_cache=tmp_path / "builds")
    for report in reports.values():
        assert report["memory"]["reserved_bytes"] > 0 and "trials_reduced" not in report, report.get("error")
        assert any(mark == "memory-planned:2" for _, role, mark in report["timeline"] if role == "parent")


RESULTS_BATCH = """
import json, sys
sys.path[:0] = [{repo!r}, {tests!r}]
from batch_testing import job, HONEST, HONEST_TANH, TASK_TANH
from verify.pipeline import verify_jobs
from verify.runner import VerifyOptions

results = {results!r}
done = set()
try:
    done = {{json.loads(line)["key"] for line in open(results)}}
except FileNotFoundError:
    pass
jobs = [job(f"k{{i}}", kernel=HONEST + f"# {{i}}\\n") for i in range(3)] + [job("t", kernel=HONEST_TANH, task=TASK_TANH)]

def store(job, report):
    with open(results, "a") as out:
        out.write(json.dumps({{"key": job.key, "status": report["status"]}}) + "\\n")
        out.flush()

options = VerifyOptions(trials=1, device="cpu", target_seconds=0.05, shape_probe=False)
print(verify_jobs(jobs, options, store, done=done, gpus=1, compile_workers=2, build_cache={cache!r}))
"""


@pytest.mark.slow
def test_a_batch_killed_at_a_random_point_and_restarted_verifies_every_kernel_exactly_once(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    script = tmp_path / "batch.py"
    script.write_text(RESULTS_BATCH.format(repo=str(REPO), tests=str(REPO / "tests" / "verify"), results=str(results),
                                           cache=str(tmp_path / "builds")))
    first = subprocess.Popen([sys.executable, str(script)], start_new_session=True, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not results.exists() or not results.read_text().strip()):
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    killed_after = len(results.read_text().splitlines())
    assert 1 <= killed_after < 4
    second = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    keys = [json.loads(line)["key"] for line in results.read_text().splitlines()]
    assert sorted(keys) == ["k0", "k1", "k2", "t"]


@pytest.mark.slow
def test_the_ray_backend_on_a_local_cpu_instance(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    # ctypes is a build hint: the honest kernel takes a build task (and its unpacking) without a minute-long real
    # build; the mutating one names none and goes straight to its GPU task.
    jobs = [job("honest", kernel="import ctypes\n" + HONEST), job("mutating", kernel=MUTATING)]
    reports: dict[str, dict[str, Any]] = {}
    summary = verify_jobs(jobs, OPTIONS, lambda j, r: reports.__setitem__(j.key, r), ray="local",
                          ray_init={"num_cpus": 3, "object_store_memory": 100 * 2**20},
                          build_cache=tmp_path / "builds")
    assert summary == {"flagged": 1, "failed": 1}
    assert _failed_checks(reports["mutating"]) >= {"input-mutation"}
    assert reports["honest"]["checks"]["correctness"]["verdict"] == "pass"
    assert reports["honest"]["batch"]["build"]["state"] == "built"
    assert (tmp_path / "builds" / reports["honest"]["batch"]["build"]["key"] / "BUILD.json").is_file()
    assert reports["mutating"]["batch"]["build"]["state"] == "none"
    # Each Ray worker keeps a zygote for its scripts, as a local slot does.
    assert all(set(r["children"].values()) == {"forked from the slot's zygote"} for r in reports.values())


@pytest.mark.slow
def test_the_ray_backend_starts_no_verification_after_the_time_budget(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    jobs = [job("honest", kernel=HONEST), job("mutating", kernel=MUTATING)]
    reports: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    summary = verify_jobs(jobs, OPTIONS, lambda j, r: reports.__setitem__(j.key, r), ray="local",
                          ray_init={"num_cpus": 3, "object_store_memory": 100 * 2**20},
                          build_cache=tmp_path / "builds", time_budget_s=0)
    assert summary == {} and reports == {}
    # The builds submitted ahead were cancelled, not waited for (one takes tens of seconds).
    assert time.monotonic() - started < 60
