"""The GPU gate: exclusive, two eval scripts take the device in turn; shared, only their timed work does (on the CPU)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from batch_testing import HONEST, TASK

from verify.harness.gate import GATE_REQUESTS, GateKeeper, GpuGate
from verify.harness.parent import ChildProcess
from verify.runner import VerifyOptions, verify_code


def _mark(report: dict[str, Any], role: str, event: str) -> float:
    return next(float(t) for t, r, e in report["timeline"] if r == role and e == event)


def test_two_verifications_sharing_a_gate_take_the_device_one_after_the_other(tmp_path: Path) -> None:
    got = _two_at_once(VerifyOptions(device="cpu", trials=2, shape_probe=False),
                       {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock")})
    for report in got:
        assert report["status"] in ("passed", "flagged"), report.get("error")
        assert _mark(report, "trusted", "mark:gpu-ours") >= _mark(report, "parent", "gpu-gate")
    _one_after_the_other(got)


def test_behind_the_gate_a_kernel_that_needs_the_gpu_at_import_is_compiled_again_with_it(tmp_path: Path) -> None:
    needs_gpu = ('import os\nif os.environ.get("CUDA_VISIBLE_DEVICES") == "":\n'
                 '    raise RuntimeError("no GPU at import")\n' + HONEST)
    options = VerifyOptions(device="cpu", trials=2, shape_probe=False)
    gated = verify_code(TASK, needs_gpu, "model-new", options, env={"KA_GPU_GATE": str(tmp_path / "gpu-0.lock")})
    plain = verify_code(TASK, HONEST, "model-new", options, env={"KA_GPU_GATE": str(tmp_path / "gpu-0.lock")})
    assert [e for _, r, e in gated["timeline"] if r == "parent"][:2] == ["compile-needs-gpu", "gpu-gate"]
    assert [e for _, r, e in plain["timeline"] if r == "parent"][:2] == ["compiled-without-gpu", "gpu-gate"]
    assert gated["checks"]["compiles"]["verdict"] == "pass" and gated["status"] == plain["status"]


def _alone_windows(report: dict[str, Any], role: str) -> list[tuple[float, float]]:
    origin = report["timeline_origin"]
    marks = [(origin + float(t), e) for t, r, e in report["timeline"] if r == "parent" and e.startswith(f"gate:{role}:")]
    starts = [t for t, e in marks if e.endswith(":alone")]
    ends = [t for t, e in marks if e.endswith(":shared")]
    return [(start, min(e for e in ends if e >= start)) for start in starts]


def _two_at_once(options: VerifyOptions, env: dict[str, str]) -> list[dict[str, Any]]:
    """Two verifications of the honest kernel started together behind the gate ``env`` names; their reports."""
    got: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: got.append(verify_code(TASK, HONEST, "model-new", options, env=env)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 2
    return got


def _one_after_the_other(reports: list[dict[str, Any]]) -> None:
    """Assert the two reports' GPU spans (taking the gate to the run child's exit) do not overlap."""
    # The timelines' origin is the system-wide monotonic clock, so the two scripts' spans compare exactly
    # (timing them from this process's start of each call put a loaded machine's start-up in the margin).
    spans = [(r["timeline_origin"] + _mark(r, "parent", "gpu-gate"), r["timeline_origin"] + _mark(r, "run", "exit"))
             for r in reports]
    first, second = sorted(spans)
    # The run child's exit is read a few milliseconds after the gate is released.
    assert second[0] >= first[1] - 0.05, spans


def _gpu_work(report: dict[str, Any]) -> list[float]:
    """When the report's children sent anything but a gate request, between taking the gate and the run's exit."""
    origin = report["timeline_origin"]
    start, end = _mark(report, "parent", "gpu-gate"), _mark(report, "run", "exit")
    return [origin + float(t) for t, r, e in report["timeline"]
            if r in ("trusted", "run") and not e.startswith("gate") and start < float(t) < end]


def test_a_shared_gate_overlaps_untimed_work_but_never_timed_work(tmp_path: Path) -> None:
    got = _two_at_once(VerifyOptions(device="cpu", trials=3, shape_probe=False),
                       {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"})
    for report in got:
        # CPU-only candidates have no GPU code: not-a-kernel fails or warns, nothing else (status flagged).
        assert {n for n, c in report["checks"].items() if c["verdict"] == "fail"} <= {"not-a-kernel"}
        assert report["status"] == "flagged" and report["gate"] == {"mode": "shared"}
        # The trusted child's baselines and the candidate's timed series: each asked for the GPU alone.
        assert len(_alone_windows(report, "trusted")) == 1 and len(_alone_windows(report, "run")) == 1
    for mine, theirs in (got, got[::-1]):
        for start, end in _alone_windows(mine, "trusted") + _alone_windows(mine, "run"):
            inside = [t for t in _gpu_work(theirs) if start < t < end]
            assert not inside, (start, end, inside)


def test_a_shared_gate_gives_way_to_a_waiting_timed_series(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    first, second, timed = GpuGate(path, "shared"), GpuGate(path, "shared"), GpuGate(path, "shared")
    assert first.acquire() and first.held == "shared"
    waiting = threading.Thread(target=timed.alone)
    waiting.start()
    time.sleep(0.1)
    assert timed.held is None, "alone while another verification shares the GPU"
    # A timed series waits: new untimed work queues behind it (the turnstile), not beside the holder.
    late = threading.Thread(target=second.shared)
    late.start()
    time.sleep(0.1)
    assert second.held is None
    first.release()
    waiting.join(5)
    assert timed.held == "alone"
    time.sleep(0.05)
    assert second.held is None
    assert timed.shared() and timed.held == "shared"
    late.join(5)
    assert second.held == "shared"
    for gate in (first, second, timed):
        gate.release()


def test_away_lets_others_have_the_gpu_and_release_ends_a_wait(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    builder, timed = GpuGate(path, "shared"), GpuGate(path, "shared")
    builder.acquire()
    builder.away()
    assert builder.held is None and timed.alone() and timed.held == "alone"
    waiting = threading.Thread(target=builder.shared)
    waiting.start()
    time.sleep(0.05)
    builder.release()  # from another thread: the wait ends instead of hanging the parent
    waiting.join(2)
    assert not waiting.is_alive() and builder.held is None
    timed.release()


def test_seats_bound_how_many_verifications_hold_the_gate_and_release_frees_one(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    first, second, third, fourth = (GpuGate(path, "shared", seats=2) for _ in range(4))
    assert first.acquire() and second.acquire() and first.held == second.held == "shared"
    waiting = threading.Thread(target=third.acquire)
    waiting.start()
    time.sleep(0.1)
    assert waiting.is_alive() and third.held is None, "a third verification took a gate with two seats"
    second.release()
    waiting.join(5)
    assert third.held == "shared"
    # A release from another thread ends a wait for a seat, as it ends a wait for the lock.
    stuck = threading.Thread(target=fourth.acquire)
    stuck.start()
    time.sleep(0.05)
    fourth.release()
    stuck.join(2)
    assert not stuck.is_alive() and fourth.held is None
    # Seated, a verification moves between shared and alone as before.
    third.release()
    assert first.alone() and first.held == "alone"
    first.release()


def test_seats_come_from_the_environment_and_bad_values_name_the_variable(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    gate = GpuGate.from_environment({"KA_GPU_GATE": path, "KA_GPU_GATE_MODE": "shared", "KA_GPU_SEATS": "4"})
    assert (gate.mode, gate.seats) == ("shared", 4)
    assert GpuGate.from_environment({"KA_GPU_GATE": path}).seats == 0
    for bad in ("two", "-1", "1.5"):
        with pytest.raises(ValueError, match="KA_GPU_SEATS"):
            GpuGate.from_environment({"KA_GPU_GATE": path, "KA_GPU_SEATS": bad})


def test_one_seat_keeps_two_shared_verifications_gpu_work_apart(tmp_path: Path) -> None:
    got = _two_at_once(VerifyOptions(device="cpu", trials=2, shape_probe=False),
                       {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared", "KA_GPU_SEATS": "1"})
    for report in got:
        assert report["status"] == "flagged" and report["gate"] == {"mode": "shared"}, report.get("error")
    _one_after_the_other(got)


def test_in_the_exclusive_mode_every_hold_is_alone_and_away_keeps_it(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    gate, other = GpuGate(path), GpuGate(path, "shared")
    assert not gate.sharing and gate.acquire() and gate.held == "alone"
    gate.away()
    assert gate.shared() and gate.held == "alone"
    assert other._flock(0, "shared", block=False) is False
    gate.release()
    with pytest.raises(ValueError, match="KA_GPU_GATE_MODE"):
        GpuGate(path, "sometimes")


def test_the_keeper_answers_requests_freezes_the_candidate_while_it_waits_and_caps_requests(tmp_path: Path) -> None:
    gate = GpuGate(str(tmp_path / "gpu.lock"), "shared")
    gate.acquire()
    frozen: list[bool] = []
    keeper = GateKeeper(gate, str(tmp_path / "grant"), "run", freeze=frozen.append)
    assert keeper.handle({"kind": "gate", "which": "alone", "n": 1}) == "alone"
    assert frozen == [True, False] and (tmp_path / "grant-1").exists() and gate.held == "alone"
    assert keeper.handle({"kind": "gate", "which": "alone", "n": 2}) == "alone" and frozen == [True, False]
    assert keeper.handle({"kind": "gate", "which": "shared", "n": 3}) == "shared" and gate.held == "shared"
    for bad in ({"kind": "gate", "which": "forever", "n": 4}, {"kind": "gate", "which": "alone", "n": "5"},
                {"kind": "trial", "which": "alone", "n": 6}):
        assert keeper.handle(bad) is None
    for number in range(10, 10 + GATE_REQUESTS):
        keeper.handle({"kind": "gate", "which": "shared", "n": number})
    # Past the cap every request is answered with the GPU alone: never less than the exclusive mode.
    assert keeper.handle({"kind": "gate", "which": "away", "n": 99}) == "alone" and gate.held == "alone"
    assert [e for _, e in keeper.marks][:3] == ["gate:run:alone", "gate:run:alone", "gate:run:shared"]
    gate.release()


def test_a_verification_out_of_gpu_memory_while_sharing_runs_again_alone(tmp_path: Path) -> None:
    marker = tmp_path / "ran-once"
    flaky = HONEST.replace(
        "return torch.relu(self.lin(x))",
        f"import os\n        if not os.path.exists({str(marker)!r}):\n            open({str(marker)!r}, 'w').close()\n"
        "            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')\n"
        "        return torch.relu(self.lin(x))")
    options = VerifyOptions(device="cpu", trials=2, shape_probe=False)
    env = {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"}
    report = verify_code(TASK, flaky, "model-new", options, env=env)
    assert marker.exists()
    assert report["gate"] == {"mode": "exclusive", "rerun": "out of GPU memory while sharing the GPU"}
    assert {n for n, c in report["checks"].items() if c["verdict"] == "fail"} <= {"not-a-kernel"}


CHILD_ASKING_FOR_THE_GPU = """
import json, os, sys, time
fd = int(sys.argv[sys.argv.index("--channel") + 1])
os.write(fd, (json.dumps({"kind": "gate", "which": "alone", "n": 1}) + "\\n").encode())
while not os.path.exists(sys.argv[1] + "-1"):
    time.sleep(0.01)
"""


def test_waiting_for_the_gate_does_not_count_against_a_childs_time_limit(tmp_path: Path) -> None:
    class SlowGate(GpuGate):
        def alone(self) -> bool:
            time.sleep(1.5)  # another verification's timed series
            return super().alone()

    grants = str(tmp_path / "grant")
    keeper = GateKeeper(SlowGate(str(tmp_path / "gpu.lock"), "shared"), grants, "run")
    child = ChildProcess([sys.executable, "-c", CHILD_ASKING_FOR_THE_GPU, grants], role="run",
                         env=dict(os.environ), cwd=tmp_path, keeper=keeper)
    report = child.wait(1.0)
    keeper.gate.release()
    assert not report.timed_out and report.returncode == 0
    assert 1.4 < child.paused_s < 5 and [e for _, e in keeper.marks] == ["gate:run:alone"]
