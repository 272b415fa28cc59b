"""Cores kept for timing: the plan, the move of a child's threads, and a batch whose timed calls run on them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from batch_testing import HONEST, MUTATING, job

from verify.batch.cpus import CpuPlan, plan_cpus, requested_per_gpu
from verify.batch.workers import LocalBatch, default_compile_workers
from verify.harness.parent import timing_cpus
from verify.runner import VerifyOptions

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")

SMT = {cpu: cpu % 8 for cpu in range(16)}
"""Eight cores with two hyper-threads each, numbered as Linux does: CPU n and n + 8 share a core."""


def test_a_gpu_gets_a_whole_physical_core_from_the_top_and_the_rest_is_shared() -> None:
    plan = plan_cpus(["0"], 2, cpus=range(16), cores=SMT)
    assert plan.timing == {"0": frozenset({7, 15})}
    assert plan.shared == frozenset(range(16)) - {7, 15}
    assert plan.environment("0") == {"KA_TIMING_CPUS": "7,15"} and plan.environment("1") == {}


def test_each_gpu_gets_cores_of_its_own() -> None:
    plan = plan_cpus(["0", "1"], 2, cpus=range(16), cores={c: c for c in range(16)})
    assert plan.timing == {"0": frozenset({14, 15}), "1": frozenset({12, 13})}
    assert len(plan.shared) == 12 and not plan.shared & (plan.timing["0"] | plan.timing["1"])
    three = plan_cpus(["0"], 3, cpus=range(16), cores=SMT)
    assert three.timing["0"] == frozenset({6, 7, 14, 15}), "whole cores: three CPUs take two of them"


def test_by_default_cpus_are_kept_only_where_the_host_has_room(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KA_TIMING_CPUS_PER_GPU", raising=False)
    assert plan_cpus(["0"], cpus=range(16), cores=SMT).timing == {"0": frozenset({7, 15})}
    assert plan_cpus(["0"], cpus=range(2)).timing == {}
    assert plan_cpus(["0"], cpus=range(2)).shared == frozenset({0, 1})
    assert plan_cpus(["0", "1"], cpus=range(12), cores={c: c for c in range(12)}).timing == {}
    monkeypatch.setenv("KA_TIMING_CPUS_PER_GPU", "0")
    assert plan_cpus(["0"], cpus=range(16), cores=SMT).timing == {}
    monkeypatch.setenv("KA_TIMING_CPUS_PER_GPU", "1")
    assert plan_cpus(["0"], cpus=range(2), cores={0: 0, 1: 1}).timing == {"0": frozenset({1})}


def test_a_plan_that_leaves_nothing_to_share_or_a_bad_variable_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="leaves none for the rest of the batch"):
        plan_cpus(["0"], 2, cpus=range(2), cores={0: 0, 1: 1})
    with pytest.raises(ValueError, match="KA_TIMING_CPUS_PER_GPU must be a whole number"):
        requested_per_gpu({"KA_TIMING_CPUS_PER_GPU": "two"})
    with pytest.raises(ValueError, match="KA_TIMING_CPUS must be a comma list"):
        timing_cpus({"KA_TIMING_CPUS": "7-15"})


def test_builds_are_counted_on_the_shared_cpus_only() -> None:
    assert default_compile_workers(1, 6, cores=14) == 8
    assert default_compile_workers(1, 6, cores=4) == 1


def test_a_child_moves_every_thread_onto_the_timing_cpus_and_back(tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    code = textwrap.dedent(f"""
        import json, os, threading
        from verify.harness.gate import move_threads
        os.sched_setaffinity(0, {{{cpus[0]}}})
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        def seen():
            return sorted({{line.split(":")[1].strip() for tid in os.listdir("/proc/self/task")
                           for line in open(f"/proc/self/task/{{tid}}/status") if line.startswith("Cpus_allowed_list")}})
        before = move_threads([{cpus[1]}])
        during = seen()
        move_threads(before)
        after = seen()
        stop.set()
        print(json.dumps({{"before": sorted(before), "during": during, "after": after}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    seen = json.loads(out)
    assert seen == {"before": [cpus[0]], "during": [str(cpus[1])], "after": [str(cpus[0])]}


# The kernel notes the CPUs it may run on at every call: trials share, the timed series runs on the kept CPU.
AFFINITY = "import json as _json, os as _os\n" + HONEST.replace(
    "return torch.relu(self.lin(x))",
    "open(LOG, 'a').write(_json.dumps(sorted(_os.sched_getaffinity(0))) + '\\n')\n        return torch.relu(self.lin(x))")


def _batch(jobs: list, cpus: CpuPlan | None) -> dict[str, dict]:
    reports: dict[str, dict] = {}
    LocalBatch(jobs, VerifyOptions(trials=2, device="cpu", target_seconds=0.05), gpus=["0"], compile_workers=1,
               cache=None, slots=1, cpus=cpus).run(lambda finished: reports.setdefault(finished.job.key, finished.report))
    return reports


@pytest.mark.slow
def test_a_batch_times_on_the_kept_cpus_and_keeps_every_verdict(tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    log = tmp_path / "affinity.log"
    plan = CpuPlan(frozenset(cpus[:-1]), {"0": frozenset(cpus[-1:])})
    jobs = [job("honest"), job("mutating", kernel=MUTATING),
            job("affinity", kernel=AFFINITY.replace("LOG", repr(str(log))))]
    kept, plain = _batch(jobs, plan), _batch(jobs[:2], None)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert cpus[-1:] in calls, "the timed series ran on the kept CPU"
    assert cpus[:-1] in calls, "the trials ran on the shared CPUs"
    assert all(seen in (cpus[-1:], cpus[:-1]) for seen in calls)
    assert all(r["gate"]["timing_cpus"] == cpus[-1:] for r in kept.values())
    assert all("timing_cpus" not in r["gate"] for r in plain.values())
    for key in ("honest", "mutating"):
        assert kept[key]["status"] == plain[key]["status"], key
        assert ({k: v["verdict"] for k, v in kept[key]["checks"].items()}
                == {k: v["verdict"] for k, v in plain[key]["checks"].items()}), key
    assert kept["mutating"]["status"] == "failed" and kept["honest"]["status"] != "failed"
    assert kept["affinity"]["status"] == kept["honest"]["status"]
