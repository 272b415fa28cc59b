"""Heavy kernels (verify.batch.weight, verify.harness.sizing): which ones, and where a batch puts them."""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from batch_testing import HONEST, TASK, job

from verify.batch import weight, workers
from verify.batch.build_cache import BuildResult
from verify.batch.plan import task_of
from verify.batch.workers import LocalBatch
from verify.pipeline import VerifyJob, verify_jobs
from verify.runner import VerifyOptions

COMPILING = {
    "a call": "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        self.f = torch.compile(f)\n",
    "a decorator": "import torch\n@torch.compile(mode='max-autotune')\ndef f(x):\n    return x\n",
    "Inductor's config imported": "import torch._inductor.config as config\nconfig.coordinate_descent_tuning = True\n",
    "Inductor's config from torch": "from torch import _inductor\n",
    "compile imported from torch": "from torch import compile as c\nf = c(g)\n",
    "Dynamo's settings": "import torch\ntorch._dynamo.config.cache_size_limit = 64\n",
}
NOT_COMPILING = {
    "a comment": "import torch\n# torch.compile(m) was slower\n",
    "a string": "import torch\nnote = 'no torch.compile here'\n",
    "regular expressions": "import re\np = re.compile('x')\n",
    "torch.compiler": "import torch\n@torch.compiler.disable\ndef f(x):\n    return x\n",
    "a load_inline kernel": "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='k', cpp_sources=[''])\n",
    "code that does not parse": "def f(:\n    torch.compile(g)\n",
}


@pytest.mark.parametrize("what", sorted(COMPILING))
def test_a_candidate_that_compiles_itself_is_self_tuning(what: str) -> None:
    assert weight.calls_torch_compile(COMPILING[what])
    assert weight.self_tuning([job("k", kernel=COMPILING[what])])["k"].startswith("self-tuning: ")


@pytest.mark.parametrize("what", sorted(NOT_COMPILING))
def test_a_candidate_that_only_mentions_compiling_is_light(what: str) -> None:
    assert weight.calls_torch_compile(NOT_COMPILING[what]) is None


def _cuda_l1(shared_data: Path) -> list[dict[str, Any]]:
    path = shared_data / "cuda-l1" / "h100.jsonl"
    if not path.is_file():
        pytest.skip(f"no CUDA-L1 H100 file at {path}")
    return [json.loads(line) for line in path.open() if line.strip()]


def test_the_cuda_l1_candidates_that_compile_themselves_are_those_a_line_search_finds(shared_data: Path) -> None:
    rows = _cuda_l1(shared_data)
    found = {(r["level_id"], r["task_id"]) for r in rows if weight.calls_torch_compile(r.get("custom_code") or "")}
    searched = {(r["level_id"], r["task_id"]) for r in rows
                if any(what in line.split("#")[0] for line in (r.get("custom_code") or "").splitlines()
                       for what in ("torch.compile", "torch._inductor", "torch._dynamo"))}
    # Level 2 tasks 34, 49 and 85 stalled or were stopped in session 42 (docs/verify-batch.md).
    assert found == searched and {(2, 34), (2, 49), (2, 85)} <= found


def test_the_sizing_child_sizes_real_tasks_and_skips_what_does_not_run_on_meta(shared_data: Path) -> None:
    rows = {(r["level_id"], r["task_id"]): r for r in _cuda_l1(shared_data)}
    jobs = [VerifyJob(key=f"L{lv}-T{t}", task_key=f"L{lv}-T{t}", task_code=rows[lv, t]["ref_code"],
                      kernel_code="", form="model-new") for lv, t in ((2, 34), (2, 60), (1, 1))]
    item = TASK.replace("return torch.relu(self.lin(x))", "return x * x.sum().item()")
    slow = TASK.replace("return torch.relu(self.lin(x))", "import time; time.sleep(100); return x")
    leaves = TASK.replace("def get_inputs", "raise SystemExit(3)\ndef get_inputs")
    jobs += [VerifyJob(key=k, task_key=k, task_code=code, kernel_code="", form="model-new")
             for k, code in (("item", item), ("slow", slow), ("exits", leaves), ("light", TASK))]
    errors: dict[str, str] = {}
    t0 = time.monotonic()
    sizes = weight.task_output_bytes(jobs, sys.executable, on_error=errors.__setitem__)
    assert time.monotonic() - t0 < 60  # the slow task stopped at its own limit, not at the child's or its sleep's end
    # Level 2 task 34: a stride-2 transposed convolution of (128, 32, 16, 32, 32) to 64 channels, in float32;
    # level 1 task 1: a 2048 x 2048 product.
    assert sizes == {"L2-T34": 128 * 64 * 32 * 64 * 64 * 4, "L2-T60": 1_007_935_488, "L1-T1": 2048 * 2048 * 4,
                     "light": 8 * 16 * 4}
    assert "item()" in errors["item"] and errors["slow"].startswith("not sized within")
    assert errors["exits"].startswith("SystemExit")


def test_the_sizing_child_runs_task_code_without_the_callers_secrets_or_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    peeking = TASK.replace("return [torch.randn(8, 16)]", "import os\n    assert 'HF_TOKEN' not in os.environ, 'saw it'\n"
                           "    assert not torch.cuda.is_available()\n    return [torch.randn(8, 16)]")
    errors: dict[str, str] = {}
    assert weight.task_output_bytes([job("p", task=peeking)], sys.executable, on_error=errors.__setitem__) == {
        task_of(job("p", task=peeking)): 8 * 16 * 4}, errors


def test_a_sizing_child_that_cannot_start_or_overruns_leaves_every_task_light(tmp_path: Path) -> None:
    jobs = [job("a")]
    errors: list[tuple[str, str]] = []
    assert weight.task_output_bytes(jobs, str(tmp_path / "no-python"), on_error=lambda t, w: errors.append((t, w))) == {}
    assert errors and "did not start" in errors[0][1]
    errors.clear()
    assert weight.task_output_bytes(jobs, sys.executable, timeout_s=0.01,
                                    on_error=lambda t, w: errors.append((t, w))) == {}
    assert errors == [("*", "the sizing child ran past 0.01 s")]


def test_outputs_from_the_threshold_on_are_heavy_and_the_first_rule_names_the_reason() -> None:
    big, under, compiling = job("big"), job("under", task=TASK + "# other task\n"), job("c", kernel=COMPILING["a call"])
    sizes = {task_of(big): weight.HEAVY_OUTPUT_BYTES, task_of(under): weight.HEAVY_OUTPUT_BYTES - 1}
    got = weight.weigh([big, under, compiling], sizes=sizes)
    assert got == {"big": "large-output: 0.54 GB of outputs", "c": "self-tuning: calls torch.compile"}
    assert [rule.name for rule in weight.HEAVY_RULES] == ["self-tuning", "large-output"]
    assert all(reason.split(":")[0] in {rule.name for rule in weight.HEAVY_RULES} for reason in got.values())


def test_the_policy_comes_from_the_argument_then_the_environment_and_a_bad_one_is_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KA_BATCH_HEAVY", raising=False)
    assert weight.policy() == weight.BATCH_HEAVY
    monkeypatch.setenv("KA_BATCH_HEAVY", "last")
    assert weight.policy() == "last" and weight.policy("mixed") == "mixed"
    monkeypatch.setenv("KA_BATCH_HEAVY", "middle")
    with pytest.raises(ValueError, match="KA_BATCH_HEAVY.*not 'middle'"):
        weight.policy()


def test_heavy_jobs_go_first_or_last_and_their_reports_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, str]] = []

    def verify(job: VerifyJob, options: VerifyOptions, *, build: BuildResult | None, env: dict[str, str],
               stop_at: float | None = None, zygotes: Any = None, alone_because: str | None = None) -> dict[str, Any]:
        started.append((job.key, alone_because or env["KA_GPU_GATE_MODE"]))
        return {"status": "passed"}

    monkeypatch.setattr(workers, "verify_one", verify)
    monkeypatch.delenv("KA_GPU_GATE_MODE", raising=False)
    jobs = [job(k, kernel=HONEST + f"# {k}\n") for k in ("h1", "a", "h2", "b", "x")]
    heavy = {"h1": "self-tuning: calls torch.compile", "h2": "large-output: 1.07 GB of outputs", "x": "self-tuning: x"}
    for where, order in (("last", ["x", "a", "b", "h1", "h2"]), ("first", ["x", "h1", "h2", "a", "b"])):
        started.clear()
        batch = LocalBatch(jobs, VerifyOptions(), gpus=["0"], compile_workers=1, cache=None, slots=1, exclusive={"x"},
                           heavy=heavy, heavy_where=where)
        reports: dict[str, dict[str, Any]] = {}
        batch.run(lambda f, into=reports: into.__setitem__(f.job.key, f.report))
        assert [key for key, _ in started] == order
        assert started[0] == ("x", workers.STOPPED_BEFORE) and {how for _, how in started[1:]} == {"shared"}
        assert {k: r["batch"].get("heavy") for k, r in reports.items()} == {
            "x": heavy["x"], "a": None, "b": None, "h1": heavy["h1"], "h2": heavy["h2"]}
    with pytest.raises(ValueError, match="first or last, not 'middle'"):
        weight.heavy_order(jobs, heavy, where="middle")


def _weigh_later(weighing: Future[dict[str, str]], outcome: str, ended: list[float]) -> None:
    time.sleep(0.3)
    ended.append(time.monotonic())
    if outcome == "weighed":
        weighing.set_result({"h": "self-tuning: calls torch.compile"})
    else:
        weighing.set_exception(RuntimeError("the sizing went wrong"))


def test_no_job_starts_before_the_weighing_ends_and_the_weighed_order_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, float]] = []

    def verify(job: VerifyJob, options: VerifyOptions, **kwargs: Any) -> dict[str, Any]:
        started.append((job.key, time.monotonic()))
        return {"status": "passed"}

    monkeypatch.setattr(workers, "verify_one", verify)
    jobs = [job(k, kernel=HONEST + f"# {k}\n") for k in ("h", "a", "b")]
    for outcome in ("weighed", "failed"):
        started.clear()
        weighing: Future[dict[str, str]] = Future()
        batch = LocalBatch(jobs, VerifyOptions(), gpus=["0"], compile_workers=1, cache=None, slots=2,
                           weighing=weighing, heavy_where="last")
        ended: list[float] = []
        threading.Thread(target=_weigh_later, args=(weighing, outcome, ended)).start()
        reports: dict[str, dict[str, Any]] = {}
        batch.run(lambda f, into=reports: into.__setitem__(f.job.key, f.report))
        assert min(t for _, t in started) >= ended[0]
        if outcome == "weighed":
            assert [k for k, _ in started][-1] == "h" and reports["h"]["batch"]["heavy"].startswith("self-tuning")
        else:
            assert sorted(k for k, _ in started) == ["a", "b", "h"] and "heavy" not in reports["h"]["batch"]


@pytest.mark.parametrize("where", ["first", "last"])
def test_a_gpu_runs_at_most_heavy_seats_heavy_kernels_at_once_and_light_ones_go_past_the_waiting(
        monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    lock = threading.Lock()
    running: dict[str, set[str]] = {"0": set(), "1": set()}
    most: dict[str, int] = {"0": 0, "1": 0}
    light_beside_full = []

    def verify(job: VerifyJob, options: VerifyOptions, *, build: BuildResult | None, env: dict[str, str],
               stop_at: float | None = None, zygotes: Any = None, alone_because: str | None = None) -> dict[str, Any]:
        gpu = env["KA_GPU_GATE"].rsplit("gpu-", 1)[1].split(".")[0]
        with lock:
            heavy_now = {k for k in running[gpu] if k.startswith("h")}
            if job.key.startswith("h"):
                most[gpu] = max(most[gpu], len(heavy_now) + 1)
            elif len(heavy_now) >= weight.HEAVY_SEATS:
                light_beside_full.append(job.key)
            running[gpu].add(job.key)
        time.sleep(0.15 if job.key.startswith("h") else 0.03)
        with lock:
            running[gpu].discard(job.key)
        return {"status": "passed"}

    monkeypatch.setattr(workers, "verify_one", verify)
    keys = [f"h{i}" for i in range(6)] + [f"l{i}" for i in range(10)]
    jobs = [job(k, kernel=HONEST + f"# {k}\n") for k in keys]
    batch = LocalBatch(jobs, VerifyOptions(device="cpu"), gpus=["0", "1"], compile_workers=1, cache=None, slots=4,
                       heavy={k: "self-tuning: test" for k in keys if k.startswith("h")}, heavy_where=where)
    got: list[str] = []
    batch.run(lambda f: got.append(f.job.key))
    assert sorted(got) == sorted(keys) and max(most.values()) == weight.HEAVY_SEATS
    # Heavy ones first: with two of them running, a slot takes a light one instead of waiting for a third's turn.
    assert bool(light_beside_full) is (where == "first")
    assert all(count == 0 for count in batch._heavy_running.values())


@pytest.mark.parametrize("policy", ["mixed", "first", "last"])
def test_the_pipeline_weighs_only_under_the_last_policy_and_hands_the_heavy_on(
        monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    seen: dict[str, Any] = {}

    class Batch:
        def __init__(self, jobs: list[VerifyJob], options: VerifyOptions, **kwargs: Any) -> None:
            seen.update(kwargs)
            self.stopped: list[workers.Stopped] = []

        def run(self, on_finished: Any) -> None:
            pass

    monkeypatch.setattr(workers, "LocalBatch", Batch)
    monkeypatch.setattr(weight, "task_output_bytes", lambda jobs, python, on_error=None: {
        task_of(j): 2**30 for j in jobs if j.key == "big"})
    lines: list[str] = []
    jobs = [job("a"), job("big", task=TASK + "# big\n"), job("c", kernel=COMPILING["a call"])]
    verify_jobs(jobs, VerifyOptions(device="cpu"), lambda j, r: None, gpus=1, build_cache=False, heavy=policy,
                log=lines.append)
    heavy = seen["weighing"].result(timeout=60)
    if policy == "mixed":
        assert heavy == {} and lines == []
    else:
        assert heavy == {"big": "large-output: 1.07 GB of outputs", "c": "self-tuning: calls torch.compile"}
        assert seen["heavy_where"] == policy
        assert lines and lines[0].startswith("weighed 3 kernels in ") and f"2 heavy, verified {policy}" in lines[0]


def test_a_ray_verification_of_a_heavy_kernel_says_why_and_ray_submits_past_capped_heavy_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_verify_batch import TOOLCHAIN

    from verify.batch import ray_backend

    monkeypatch.setattr(ray_backend, "verify_one", lambda *args, **kwargs: {"status": "passed"})
    result = ray_backend._verify_task(job("a"), VerifyOptions(device="cpu"), str(tmp_path), TOOLCHAIN, None,
                                      ("b1", "k" * 64), None, False, "self-tuning: calls torch.compile")
    assert isinstance(result, workers.Finished)
    assert result.report["batch"]["heavy"] == "self-tuning: calls torch.compile"
    h1, h2, h3, a = (job(k) for k in ("h1", "h2", "h3", "a"))
    queue = [(h3, None), (a, None)]
    assert ray_backend._next_allowed(queue, [h1], {"h1", "h2", "h3"}, 2) == 0
    assert ray_backend._next_allowed(queue, [h1, h2], {"h1", "h2", "h3"}, 2) == 1
    assert ray_backend._next_allowed(queue[:1], [h1, h2], {"h1", "h2", "h3"}, 2) is None
