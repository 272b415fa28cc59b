"""kernel_archive.collect: results written into the run folder, resumable, and readable by the run-dir adapter."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest
from run_dir_fixtures import CHEAT, RELU, RELU_PY, TORCH_EVENTS, demo_records, ncu_csv, own_run

from ingest.adapter import IngestRequest
from ingest.runner import ingest_source
from kernel_archive.collect import CollectOptions, collect
from verify.pipeline import VerifyJob
from verify.profilers import clang_tidy_executable
from verify.runner import VerifyOptions

REPO = Path(__file__).resolve().parents[2]
FIXTURE_KERNELS = {"relu/naive": RELU, "relu/inline": RELU_PY, "relu/cheat": CHEAT}


class FakeVerifier:
    """Stands in for verify.pipeline.verify_jobs: answers each job with the demo's real report of that kernel."""

    def __init__(self) -> None:
        self.records = demo_records()
        self.calls: list[tuple[list[VerifyJob], VerifyOptions, set[str]]] = []

    def __call__(self, jobs: Iterable[VerifyJob], options: VerifyOptions, on_result: Any, *,
                 done: Collection[str] = ()) -> dict[str, int]:
        jobs = list(jobs)
        self.calls.append((jobs, options, set(done)))
        summary: dict[str, int] = {}
        for job in jobs:
            if job.key in done:
                continue
            report = self.records[FIXTURE_KERNELS[job.key]]["report"]
            on_result(job, report)
            summary[report["status"]] = summary.get(report["status"], 0) + 1
        return summary


VERIFY_ONLY = CollectOptions(ncu=False, torch_profile=False, clang_tidy=False)


@pytest.fixture(autouse=True)
def _own_build_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds the tests start land in the test's folder, never in the user's ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def test_verify_reports_land_in_results(tmp_path: Path) -> None:
    run = own_run(tmp_path / "run", results=False)
    fake = FakeVerifier()
    summary = collect(run, VERIFY_ONLY, verify=fake)
    jobs, options, done = fake.calls[0]
    assert sorted(j.key for j in jobs) == sorted(FIXTURE_KERNELS) and done == set()
    assert {j.task_code for j in jobs} == {(run / "tasks" / "relu.py").read_text()}
    assert options.device == "cuda" and options.trials == 5
    assert summary.statuses == {"passed": 2, "failed": 1} and summary.written["verify"] == 3
    report = json.loads((run / "results" / "relu" / "cheat.json").read_text())
    assert report["status"] == "failed"


def test_collect_resumes_and_force_redoes(tmp_path: Path) -> None:
    run = own_run(tmp_path / "run", results=False)
    fake = FakeVerifier()
    collect(run, VERIFY_ONLY, verify=fake)
    again = collect(run, VERIFY_ONLY, verify=fake)
    assert fake.calls[1][2] == set(FIXTURE_KERNELS) and again.written["verify"] == 0
    assert again.skipped["verify"] == 3
    forced = collect(run, CollectOptions(ncu=False, torch_profile=False, clang_tidy=False, force=True), verify=fake)
    assert fake.calls[2][2] == set() and forced.written["verify"] == 3


def test_collected_run_ingests_with_verifications(tmp_path: Path) -> None:
    run = own_run(tmp_path / "run", results=False)
    collect(run, VERIFY_ONLY, verify=FakeVerifier())
    db = tmp_path / "a.duckdb"
    ingest_source(db, "run-dir", IngestRequest("mine", str(run)))
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT k.name, v.status FROM verifications v JOIN kernels k USING (kernel_id) "
                           "ORDER BY k.name").fetchall()
        baselines = con.execute("SELECT count(*) FROM baselines WHERE variant = 'eager'").fetchall()
    assert rows == [("cheat", "failed"), ("inline", "passed"), ("naive", "passed")]
    assert baselines == [(1,)]


def test_cpu_device_runs_only_clang_tidy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import verify.profilers

    seen: list[str] = []
    monkeypatch.setattr(verify.profilers, "clang_tidy_executable", lambda: "clang-tidy")
    monkeypatch.setattr(verify.profilers, "run_clang_tidy",
                        lambda code: seen.append(code) or "kernel.cu:1:1: warning: w [performance-x]\n")
    run = own_run(tmp_path / "run", results=False)
    fake = FakeVerifier()
    summary = collect(run, CollectOptions(device="cpu"), verify=fake)
    assert fake.calls == []
    assert summary.written["clang-tidy"] == 2 and len(seen) == 2
    assert summary.problems == ["relu/cheat: no CUDA source for clang-tidy"]
    assert sorted(p.name for p in (run / "results" / "relu").iterdir()) == [
        "inline.clang-tidy.txt", "naive.clang-tidy.txt"]
    assert collect(run, CollectOptions(device="cpu"), verify=fake).skipped["clang-tidy"] == 2


def test_collect_imports_no_database_code(tmp_path: Path) -> None:
    run = own_run(tmp_path / "run", results=False)
    (run / "kernels" / "relu" / "inline.py").unlink()
    (run / "kernels" / "relu" / "cheat.py").unlink()
    code = ("import sys; sys.modules['duckdb'] = None\n"
            "from kernel_archive.collect import main\n"
            f"sys.exit(main([{str(run)!r}, '--no-verify', '--no-clang-tidy']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert "--i-understand-this-runs-untrusted-code" in done.stderr and done.returncode == 2
    code = code.replace("'--no-clang-tidy'", "'--no-clang-tidy', '--device', 'cpu'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "1 kernels" in done.stdout


@pytest.mark.slow
def test_real_clang_tidy_on_a_cuda_binding_kernel(tmp_path: Path) -> None:
    if clang_tidy_executable() is None:
        pytest.skip("clang-tidy is not installed (pip install clang-tidy)")
    run = own_run(tmp_path / "run", results=False)
    (run / "kernels" / "relu" / "inline.py").unlink()
    (run / "kernels" / "relu" / "cheat.py").unlink()
    summary = collect(run, CollectOptions(device="cpu"))
    assert summary.written["clang-tidy"] == 1
    text = (run / "results" / "relu" / "naive.clang-tidy.txt").read_text()
    assert "kernel.cu:8:" in text and "[performance-unnecessary-value-param]" in text
    db = tmp_path / "a.duckdb"
    ingest_source(db, "run-dir", IngestRequest("mine", str(run)))
    with duckdb.connect(str(db), read_only=True) as con:
        checks = {r[0] for r in con.execute("SELECT check_name FROM clang_tidy_findings").fetchall()}
    assert "performance-unnecessary-value-param" in checks


def test_time_limit_starts_no_new_kernel_and_a_rerun_goes_on(tmp_path: Path) -> None:
    run = own_run(tmp_path / "run", results=False)
    fake = FakeVerifier()
    stopped = collect(run, CollectOptions(ncu=False, torch_profile=False, clang_tidy=False, time_limit_s=0),
                      verify=fake)
    assert stopped.stopped_early and stopped.written["verify"] == 0 and fake.calls[0][0] == []
    assert not (run / "results").exists()
    finished = collect(run, VERIFY_ONLY, verify=fake)
    assert not finished.stopped_early and finished.written["verify"] == 3


def test_verify_options_reach_the_pipeline(tmp_path: Path) -> None:
    fake = FakeVerifier()
    collect(own_run(tmp_path / "run", results=False),
            CollectOptions(ncu=False, torch_profile=False, clang_tidy=False, trials=2, compile_baseline=False,
                           shape_probe=False), verify=fake)
    options = fake.calls[0][1]
    assert (options.trials, options.compile_baseline, options.shape_probe) == (2, False, False)


class FakeProfiler:
    """Stands in for the eval script's --profile run: the ReLU kernels profile (inline's NCU export only on a
    second try, as when parallel runs collide on the counters); the cheat launches no kernel of its own."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.envs: list[dict[str, str]] = []

    def __call__(self, kernel: Any, task_code: str, *, ncu: bool, python: str, build_dir: Path | None = None,
                 env: dict[str, str] | None = None) -> dict[str, Any]:
        self.calls.append((kernel.name, ncu))
        self.envs.append(env or {})
        if kernel.name == "cheat":
            return {"status": "error", "torch_profile": {}, "ncu_error": "no kernels were profiled"}
        collided = kernel.name == "inline" and sum(1 for name, _ in self.calls if name == "inline") == 1
        return {"status": "profiled", "torch_profile": TORCH_EVENTS,
                "ncu_csv": None if collided or not ncu else ncu_csv()}


PROFILE_ONLY = CollectOptions(verify=False, clang_tidy=False, profile_jobs=2)


def test_profiles_are_written_and_a_missing_ncu_export_is_retried_serially(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernel_archive.collect

    fake = FakeProfiler()
    monkeypatch.setattr(kernel_archive.collect, "profile_code", fake)
    run = own_run(tmp_path / "run", results=False)
    summary = collect(run, PROFILE_ONLY)
    results = run / "results" / "relu"
    assert (results / "naive.ncu.csv").read_text() == ncu_csv()
    assert json.loads((results / "inline.torch.json").read_text()) == TORCH_EVENTS
    assert (results / "inline.ncu.csv").is_file()
    assert ("inline", True) in fake.calls[3:] and ("naive", True) not in fake.calls[3:]
    assert json.loads((results / "inline.profile.json").read_text())["attempts"] == 2
    assert summary.written == {"torch": 2, "ncu": 2}
    assert summary.problems == ["relu/cheat: no torch or ncu profile (see results/relu/cheat.profile.json)"]
    again = collect(run, PROFILE_ONLY)
    assert again.skipped == {"profile": 2, "profile (no result after 2 attempts)": 1} and not again.written
    gates = {env["KA_GPU_GATE"] for env in fake.envs}
    assert len(gates) == 1 and next(iter(gates)).endswith("gpu-0.lock"), "parallel profiles share the GPU's gate"
    assert {env["CUDA_VISIBLE_DEVICES"] for env in fake.envs} == {"0"}


def test_profiles_the_time_limit_left_out_are_not_called_missing(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H100 a collect stopped by its time limit listed 79 unprofiled kernels as problems, each pointing
    at a ``.profile.json`` that was never written."""
    import kernel_archive.collect

    fake = FakeProfiler()

    def slow(*args: Any, **kwargs: Any) -> dict[str, Any]:
        time.sleep(2.0)
        return fake(*args, **kwargs)

    monkeypatch.setattr(kernel_archive.collect, "profile_code", slow)
    run = own_run(tmp_path / "run", results=False)
    summary = collect(run, replace(PROFILE_ONLY, time_limit_s=1.0, batch=False))
    assert summary.stopped_early and len(fake.calls) == 2, fake.calls
    left_out = next(k for k in ("naive", "inline", "cheat") if k not in {name for name, _ in fake.calls})
    assert summary.skipped["profile (time limit: run again to go on)"] == 1
    assert not any(left_out in problem for problem in summary.problems), summary.problems
    assert not (run / "results" / "relu" / f"{left_out}.profile.json").exists()


def test_profiles_load_the_verify_steps_build_and_take_turns_on_each_gpu(tmp_path: Path) -> None:
    from ingest.run_folder import read_run_folder
    from kernel_archive.collect import ProfileSetup, _job
    from verify.batch.build_cache import MARKER, BuildCache, Toolchain

    run = read_run_folder(own_run(tmp_path / "run", results=False))
    naive, inline = (k for k in run.kernels if k.name in ("naive", "inline"))
    cache = BuildCache(tmp_path / "cache", Toolchain(torch="2.13.0", cuda="13.0", python="3.12", nvcc=None,
                                                     arch="9.0"))
    for kernel, ok in ((naive, True), (inline, False)):
        entry = cache.entry(_job(run, kernel))
        entry.mkdir(parents=True)
        (entry / MARKER).write_text(json.dumps({"ok": ok}))
    setup = ProfileSetup(tmp_path / "gates", ["2", "5"], cache)
    with ThreadPoolExecutor(2) as pool:
        setup.prebuild(run, [naive, inline], CollectOptions(), pool)
        assert setup.build_dir(naive) == cache.entry(_job(run, naive))
        assert setup.build_dir(inline) is None, "a failed build is compiled again by the profile, not loaded"
    assert ProfileSetup(tmp_path / "gates", ["0"]).build_dir(naive) is None
    envs = [setup.environment(i) for i in range(4)]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["2", "5", "2", "5"]
    assert envs[0]["KA_GPU_GATE"] == envs[2]["KA_GPU_GATE"] != envs[1]["KA_GPU_GATE"]
    assert envs[0]["TORCH_CUDA_ARCH_LIST"] == "9.0", "the profile builds with the verify step's toolchain"


def test_kernels_that_did_not_run_are_not_profiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernel_archive.collect

    fake = FakeProfiler()
    monkeypatch.setattr(kernel_archive.collect, "profile_code", fake)
    run = own_run(tmp_path / "run", results=False)
    (run / "results" / "relu").mkdir(parents=True)
    (run / "results" / "relu" / "naive.json").write_text('{"status": "error", "error": "nvcc failed"}')
    summary = collect(run, CollectOptions(verify=False, clang_tidy=False, ncu=False))
    assert "naive" not in {name for name, _ in fake.calls}
    assert summary.skipped["profile (did not compile or run)"] == 1
    assert all(ncu is False for _, ncu in fake.calls)


def test_the_results_table_shows_verdicts_against_expectations(tmp_path: Path) -> None:
    run = own_run(tmp_path / "run")
    (run / "kernels" / "relu" / "naive.toml").write_text('expected = "flagged"\n')
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "run_folder_table.py"), str(run)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| relu | naive | cuda-binding | flagged | passed! | 0.89x | 2.88x | 0.73x | yes | yes | yes |" in lines
    assert "| relu | cheat | model-new | failed | failed | 0.97x | - | 1.03x | - | - | - |" in lines
    assert lines[-1] == "3 kernels on 1 tasks; verdicts: failed 1, none 1, passed 1; with NCU 1, torch 1, clang-tidy 1"


class FakeBatchVerifier(FakeVerifier):
    """A verifier with the batch pipeline's arguments (verify.pipeline.verify_jobs of the scale work)."""

    def __init__(self) -> None:
        super().__init__()
        self.batch: list[dict[str, Any]] = []

    def __call__(self, jobs: Iterable[VerifyJob], options: VerifyOptions, on_result: Any, *,  # type: ignore[override]
                 done: Collection[str] = (), force: bool = False, gpus: str | int | None = None,
                 compile_workers: int | None = None, build_cache: Any = None,
                 time_budget_s: float | None = None) -> dict[str, int]:
        self.batch.append({"gpus": gpus, "compile_workers": compile_workers, "build_cache": build_cache,
                           "time_budget_s": time_budget_s})
        return super().__call__(jobs, options, on_result, done=done)


def test_the_batch_pipeline_is_used_where_the_verifier_offers_it(tmp_path: Path) -> None:
    fake = FakeBatchVerifier()
    run = own_run(tmp_path / "run", results=False)
    collect(run, CollectOptions(ncu=False, torch_profile=False, clang_tidy=False, gpus="0,1", time_limit_s=600),
            verify=fake)
    call = fake.batch[0]
    assert call["build_cache"] is True and call["gpus"] == "0,1" and call["compile_workers"] is None
    assert 0 < call["time_budget_s"] <= 600
    collect(run, CollectOptions(ncu=False, torch_profile=False, clang_tidy=False, batch=False, force=True),
            verify=fake)
    assert fake.batch[1] == {"gpus": None, "compile_workers": None, "build_cache": None, "time_budget_s": None}


def test_kernels_are_built_on_every_core_ahead_of_their_profiles(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H100 machine a collect that went on from shipped reports found no builds: each profile compiled
    its own kernel, two per GPU, and the GPUs waited on nvcc (65 s a profile against 15 s of profiling)."""
    import threading

    import kernel_archive.collect
    from verify.batch.build_cache import BuildCache, BuildResult

    started: list[str] = []
    lock = threading.Lock()

    def ensure(self: BuildCache, job: VerifyJob, options: VerifyOptions) -> BuildResult:
        with lock:
            started.append(job.key)
        time.sleep(0.5)
        entry = self.entry(job)
        entry.mkdir(parents=True, exist_ok=True)
        return BuildResult(entry.name, entry, "failed" if job.key == "relu/inline" else "built", 0.5)

    class Recording(FakeProfiler):
        def __init__(self) -> None:
            super().__init__()
            self.build_dirs: dict[str, Path | None] = {}
            self.builds_started_first: list[int] = []

        def __call__(self, kernel: Any, task_code: str, **kwargs: Any) -> dict[str, Any]:
            self.build_dirs[kernel.name] = kwargs.get("build_dir")
            with lock:
                self.builds_started_first.append(len(started))
            return super().__call__(kernel, task_code, **kwargs)

    fake = Recording()
    monkeypatch.setattr(BuildCache, "ensure", ensure)
    monkeypatch.setattr(kernel_archive.collect, "profile_code", fake)
    run = own_run(tmp_path / "run", results=False)
    collect(run, replace(PROFILE_ONLY, ncu=False, profile_jobs=1, compile_workers=3))
    assert sorted(started) == ["relu/cheat", "relu/inline", "relu/naive"], "every pending kernel is built once"
    assert fake.builds_started_first[0] == 3, "the builds start together, before the first profile is done"
    naive = fake.build_dirs["naive"]
    assert naive is not None and naive.is_relative_to(tmp_path / "xdg-cache"), naive
    assert fake.build_dirs["inline"] is None, "a failed build is compiled again by the profile, not loaded"
