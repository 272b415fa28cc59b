"""Baselines measured once per task and GPU in a batch (``KA_BASELINE_CACHE``), run on the CPU."""

from __future__ import annotations

from pathlib import Path

from batch_testing import HONEST, HONEST_TANH, MUTATING, TASK, TASK_TANH

from verify.runner import VerifyOptions, verify_code

OPTIONS = VerifyOptions(device="cpu", trials=2, shape_probe=False, target_seconds=0.05)


def test_a_second_kernel_of_the_same_task_reuses_the_baselines_and_keeps_its_verdict(tmp_path: Path) -> None:
    env = {"KA_BASELINE_CACHE": str(tmp_path / "baselines"), "KA_BASELINE_KEY": "batch-secret"}
    first = verify_code(TASK, HONEST, "model-new", OPTIONS, env=env)
    honest_again = verify_code(TASK, HONEST + "# the same kernel, another file\n", "model-new", OPTIONS, env=env)
    second = verify_code(TASK, MUTATING, "model-new", OPTIONS, env=env)
    other = verify_code(TASK_TANH, HONEST_TANH, "model-new", OPTIONS, env=env)
    # The timed outputs are checked against the cached baselines' fingerprints: same inputs, same weights.
    assert honest_again["baselines"]["from"] == "cache"
    assert {n: c["verdict"] for n, c in honest_again["checks"].items()} == \
        {n: c["verdict"] for n, c in first["checks"].items()}
    assert honest_again["status"] == first["status"]
    assert first["baselines"]["from"] == "measured" and other["baselines"]["from"] == "measured"
    assert second["baselines"] == {"from": "cache", "key": first["baselines"]["key"], "overhead": "task"}
    assert other["baselines"]["key"] != first["baselines"]["key"]
    assert second["timings"]["eager"] == first["timings"]["eager"]
    assert second["screen"] == first["screen"]
    assert first["status"] in ("passed", "flagged") and other["status"] in ("passed", "flagged")
    assert second["status"] == "failed" and second["checks"]["input-mutation"]["verdict"] == "fail"
    assert second["speed"]["eager_ms"] == first["speed"]["eager_ms"]
    assert second["speed"]["kernel_ms"] is not None


def test_a_rewritten_entry_is_not_believed_and_the_baselines_are_measured_again(tmp_path: Path) -> None:
    import json

    env = {"KA_BASELINE_CACHE": str(tmp_path / "baselines"), "KA_BASELINE_KEY": "batch-secret"}
    first = verify_code(TASK, HONEST, "model-new", OPTIONS, env=env)
    [entry] = (tmp_path / "baselines").glob(f"{first['baselines']['key']}*.json")
    signed = json.loads(entry.read_text())
    payload = json.loads(signed["payload"])
    for message in payload["messages"]:
        if message["kind"] == "timing" and message["which"] == "eager":
            message["result"]["event_ms"] = [v * 10 for v in message["result"]["event_ms"]]
    entry.write_text(json.dumps({"payload": json.dumps(payload), "mac": signed["mac"]}))
    again = verify_code(TASK, HONEST, "model-new", OPTIONS, env=env)
    assert again["baselines"]["from"] == "measured"


def test_without_the_variable_nothing_is_cached(tmp_path: Path) -> None:
    report = verify_code(TASK, HONEST, "model-new", OPTIONS)
    assert "baselines" not in report and report["timings"]["eager"] is not None


def test_two_kernels_of_a_task_started_together_measure_its_baselines_once(tmp_path: Path) -> None:
    """On the H100 the four slots of a batch started on kernels of one task at once and all measured."""
    from concurrent.futures import ThreadPoolExecutor

    env = {"KA_BASELINE_CACHE": str(tmp_path / "baselines"), "KA_BASELINE_KEY": "batch-secret"}
    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda kernel: verify_code(TASK, kernel, "model-new", OPTIONS, env=env),
                                [HONEST, HONEST + "# another file\n"]))
    assert sorted(r["baselines"]["from"] for r in reports) == ["cache", "measured"]
    assert reports[0]["timings"]["eager"] == reports[1]["timings"]["eager"]
    assert reports[0]["status"] == reports[1]["status"]


def test_a_waiting_verification_takes_the_entry_or_measures_when_none_comes(tmp_path: Path) -> None:
    import threading
    import time

    from verify.harness.parent import BaselineCache

    def cache() -> BaselineCache:
        return BaselineCache(str(tmp_path), ["task", "model-new"], secret="k")

    measuring = cache()
    assert measuring.load_or_claim() is None
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(cache().load_or_claim()))
    waiter.start()
    time.sleep(0.5)
    assert not got, "the second verification waits while the first measures"
    measuring.store({"seed_base": 1, "template_seed": 2, "weight_seed": 3}, [{"kind": "screen"}])
    waiter.join(10)
    assert got and got[0]["seeds"]["seed_base"] == 1
    other = BaselineCache(str(tmp_path), ["other task"], secret="k")
    assert other.load_or_claim() is None
    behind = BaselineCache(str(tmp_path), ["other task"], secret="k")
    assert behind.load_or_claim(wait_s=0.3) is None, "a lock held too long costs only the wait"
    other.release()
    assert behind.load_or_claim() is None, "a measurer that failed lets the next one measure"
    behind.release()


def test_the_trivial_kernels_series_is_measured_once_per_gpu_and_reused_by_other_tasks(tmp_path: Path) -> None:
    """Session 26: the overhead series is the GPU's, not the task's; each task's first kernel timed it alone."""
    import json

    env = {"KA_BASELINE_CACHE": str(tmp_path / "baselines"), "KA_BASELINE_KEY": "batch-secret"}
    first = verify_code(TASK, HONEST, "model-new", OPTIONS, env=env)
    other = verify_code(TASK_TANH, HONEST_TANH, "model-new", OPTIONS, env=env)
    mutating = verify_code(TASK_TANH, MUTATING.replace("torch.relu", "torch.tanh"), "model-new", OPTIONS, env=env)
    assert first["baselines"]["overhead"] == "measured"
    assert other["baselines"]["from"] == "measured" and other["baselines"]["overhead"] == "cache"
    assert other["timings"]["overhead"] == first["timings"]["overhead"]
    assert other["timings"]["eager"] != first["timings"]["eager"]
    assert mutating["baselines"] == {"from": "cache", "key": other["baselines"]["key"], "overhead": "task"}
    assert mutating["timings"]["overhead"] == first["timings"]["overhead"]
    assert first["status"] in ("passed", "flagged") and other["status"] in ("passed", "flagged")
    assert mutating["status"] == "failed" and mutating["checks"]["input-mutation"]["verdict"] == "fail"
    [entry] = [p for p in (tmp_path / "baselines").glob("*.json")
               if not p.name.startswith((first["baselines"]["key"], other["baselines"]["key"]))]
    signed = json.loads(entry.read_text())
    assert [m["which"] for m in json.loads(signed["payload"])["messages"]] == ["overhead"]
    # A rewritten entry is not believed: the next task's first kernel measures the series itself.
    entry.write_text(json.dumps({"payload": signed["payload"].replace('"calls"', '"calls" ', 1), "mac": signed["mac"]}))
    sigmoid = TASK.replace("torch.relu", "torch.sigmoid")
    third = verify_code(sigmoid, HONEST.replace("torch.relu", "torch.sigmoid"), "model-new", OPTIONS, env=env)
    assert third["baselines"]["overhead"] == "measured" and third["status"] in ("passed", "flagged")


def test_the_gpus_trivial_series_that_allows_the_least_stays(tmp_path: Path) -> None:
    """An inflated series (a loaded host) would loosen the timing check for every later kernel on the GPU."""
    from verify.harness.parent import OverheadCache

    def series(gap_ms: float) -> list[dict[str, object]]:
        result = {"event_ms": [0.004] * 9, "host_ms": [0.003] * 9, "wall_ms": [0.004 + gap_ms] * 9}
        return [{"kind": "timing", "which": "eager", "result": {}},
                {"kind": "timing", "which": "overhead", "result": result}]

    def stored_gap() -> float:
        entry = OverheadCache(str(tmp_path), ["1.17", "cuda"], secret="k").load()
        assert entry is not None
        [message] = entry["messages"]
        return round(message["result"]["wall_ms"][0] - 0.004, 6)

    cache = OverheadCache(str(tmp_path), ["1.17", "cuda"], secret="k")
    cache.store({}, series(0.05))
    assert stored_gap() == 0.05
    cache.store({}, series(0.5))
    assert stored_gap() == 0.05, "a series that allows more does not replace one that allows less"
    cache.store({}, series(0.01))
    assert stored_gap() == 0.01
    cache.store({}, [{"kind": "timing", "which": "eager", "result": {}}])
    assert stored_gap() == 0.01, "messages without the series leave the entry alone"
