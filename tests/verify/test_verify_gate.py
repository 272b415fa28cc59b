"""The GPU gate: exclusive, two eval scripts take the device in turn; shared, only their timed work does (on the CPU)."""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from batch_testing import HONEST, TASK

from verify.harness.common import wait_until
from verify.harness.gate import GATE_FILL_FACTOR, GATE_FILLS, GATE_REQUESTS, GATE_YIELDS, GateKeeper, GpuGate
from verify.harness.parent import ChildProcess
from verify.runner import VerifyOptions, verify_code

SHARED = {"mode": "shared", "fill": GATE_FILL_FACTOR}
"""A shared-mode report's ``gate`` less its pieces, under the default ``KA_GPU_FILL``."""

TIMELINE_RESOLUTION_S = 0.001


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
        assert report["status"] == "flagged" and _gate_without_pieces(report) == SHARED
        # The trusted child's baselines and the candidate's timed series: each asked for the GPU alone.
        assert len(_alone_windows(report, "trusted")) == 1 and len(_alone_windows(report, "run")) == 1
    for mine, theirs in (got, got[::-1]):
        for start, end in _alone_windows(mine, "trusted") + _alone_windows(mine, "run"):
            # Each timeline is rounded to the millisecond from its own origin, so two reports' events order
            # exactly only a millisecond apart: the other's last message before the yield that let this one
            # go can read up to 1 ms inside the window (CI once saw 0.05 ms).
            inside = [t for t in _gpu_work(theirs) if start + TIMELINE_RESOLUTION_S < t < end - TIMELINE_RESOLUTION_S]
            assert not inside, (start, end, inside)


def _gate_without_pieces(report: dict[str, Any]) -> dict[str, Any]:
    """The report's ``gate`` less ``pieces``, which every shared-mode report has (harness 1.35), as a dict."""
    gate = dict(report["gate"])
    assert isinstance(gate.pop("pieces"), dict), report["gate"]
    return gate


def _wait_for_alone(gate: GpuGate, beside: GpuGate) -> threading.Thread:
    """``gate.alone()`` in a thread, once ``beside`` (holding the gate shared) sees it waiting."""
    waiting = threading.Thread(target=gate.alone)
    waiting.start()
    assert wait_until(beside.writer_waiting, 10), "the timed series never queued"
    return waiting


def test_a_shared_gate_gives_way_to_a_waiting_timed_series(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    first, second, timed = GpuGate(path, "shared"), GpuGate(path, "shared"), GpuGate(path, "shared")
    assert first.acquire() and first.held == "shared"
    waiting = _wait_for_alone(timed, first)
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


def test_a_sharer_gives_way_to_a_waiting_timed_series_then_shares_again(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    first, other, timed = GpuGate(path, "shared"), GpuGate(path, "shared"), GpuGate(path, "shared")
    assert first.acquire() and other.acquire()
    # Nobody waits: giving way keeps the hold and returns at once.
    assert not first.writer_waiting() and first.give_way() and first.held == "shared"
    waiting = _wait_for_alone(timed, first)
    assert other.writer_waiting() and not timed.writer_waiting()
    giving = threading.Thread(target=first.give_way)
    giving.start()
    assert wait_until(lambda: first.held is None, 10)
    # One sharer gave way; the timed series still waits for the other, which has not reached a yield point.
    assert first.held is None and timed.held is None
    assert other.held == "shared"
    other_giving = threading.Thread(target=other.give_way)
    other_giving.start()
    waiting.join(5)
    assert timed.held == "alone" and first.held is None
    # ``other`` lets go of the lock file an instant before it writes down that it holds nothing, and the timed
    # series can be through in between (CI caught it there once, session 57).
    assert wait_until(lambda: other.held is None, 5)
    time.sleep(0.05)
    assert first.held is None, "back beside a timed series"
    assert timed.shared()
    # Both sharers come back; each passes through the turnstile for an instant, which reads as a waiting
    # writer to the other until it is through (CI once caught ``other`` there).
    giving.join(5)
    other_giving.join(5)
    assert first.held == "shared" and other.held == "shared" and not first.writer_waiting()
    for gate in (first, other, timed):
        gate.release()
    assert not first.give_way(), "a released gate holds nothing after giving way"


def _verified_beside(path: str, kernel: str, trials: int, alone_s: float, shared_s: float,
                     windows: list[tuple[float, float]], *, seats: int = 0,
                     beside: Callable[[threading.Event], None] | None = None) -> dict[str, Any]:
    """A verification of ``kernel`` on the shared gate ``path`` beside another one's timed series, which holds the GPU
    alone for ``alone_s`` (each window noted in ``windows``) and then shares it for ``shared_s``, until it is done;
    with ``seats`` every one of them takes one of that many seats, and ``beside(done)`` runs as a third neighbour."""
    done = threading.Event()

    def timed_series() -> None:
        gate = GpuGate(path, "shared", seats=seats)
        gate.acquire()
        while not done.is_set():
            gate.alone()
            start = time.monotonic()
            time.sleep(alone_s)
            windows.append((start, time.monotonic()))
            gate.shared()
            time.sleep(shared_s)
        gate.release()

    neighbours = [threading.Thread(target=timed_series)]
    if beside is not None:
        neighbours.append(threading.Thread(target=beside, args=(done,)))
    for neighbour in neighbours:
        neighbour.start()
    try:
        return verify_code(TASK, kernel, "model-new", VerifyOptions(device="cpu", trials=trials, shape_probe=False),
                           env={"KA_GPU_GATE": path, "KA_GPU_GATE_MODE": "shared"}
                           | ({"KA_GPU_SEATS": str(seats)} if seats else {}))
    finally:
        done.set()
        for neighbour in neighbours:
            neighbour.join(10)


def _logging_candidate(calls: Path) -> str:
    """The honest kernel, logging each of its calls to ``calls`` on the system-wide monotonic clock, which the
    neighbours of ``_verified_beside`` also read: the parent reads a yielding child's messages only after it is back,
    so they cannot show when it ran."""
    return HONEST.replace("return torch.relu(self.lin(x))",
                          f"import time\n        with open({str(calls)!r}, 'a') as log:\n"
                          "            log.write(repr(time.monotonic()) + chr(10))\n"
                          "        return torch.relu(self.lin(x))")


def _never_called_inside(calls: Path, windows: list[tuple[float, float]]) -> None:
    """The logged candidate ran often, the neighbour timed often, and never at once."""
    called = [float(line) for line in calls.read_text().split()]
    assert len(called) > 10 and len(windows) > 3
    for start, end in windows:
        inside = [t for t in called if start < t < end]
        assert not inside, (start, end, inside)


def test_a_verification_gives_way_to_timed_series_mid_phase_and_keeps_its_verdict(tmp_path: Path) -> None:
    path, calls = str(tmp_path / "gpu-0.lock"), tmp_path / "calls"
    windows: list[tuple[float, float]] = []
    # Another verification timing its kernel every 0.1 s, for 0.05 s each, until this one is over.
    report = _verified_beside(path, _logging_candidate(calls), 5, 0.05, 0.05, windows)
    assert {n for n, c in report["checks"].items() if c["verdict"] == "fail"} <= {"not-a-kernel"}
    assert report["status"] == "flagged"
    yields = [e for _, r, e in report["timeline"] if r == "parent" and e == "gate:run:yield"]
    assert yields, "no yield point in the trials let the neighbour's timed series go first"
    assert not [e for _, r, e in report["timeline"] if e == "gate:yield"], "a child's yield points in the timeline"
    # Every piece of work between two of a child's requests is measured, in time order, named by the messages in it:
    # one for each trial variant (its work ends with its message), and together no longer than the child's life.
    pieces = report["gate"]["pieces"]
    assert set(pieces) == {"trusted", "run"} and all(pieces.values())
    for role, role_pieces in pieces.items():
        assert all(s >= 0 and isinstance(name, str) for _, s, name in role_pieces)
        # Each starts (on the report's time line) where the one before it ended, or after it.
        assert all(b[0] >= a[0] + a[1] - 0.002 for a, b in zip(role_pieces, role_pieces[1:], strict=False))
        life = [float(t) for t, r, _ in report["timeline"] if r == role]
        assert min(life) - 0.002 <= role_pieces[0][0] and role_pieces[-1][0] + role_pieces[-1][1] <= max(life) + 0.002
    variants = [e for _, r, e in report["timeline"] if r == "run" and e == "trial"]
    assert sum(name.startswith("trial") for *_, name in pieces["run"]) == len(variants) > 0, pieces["run"]
    _never_called_inside(calls, windows)


def test_beside_a_longer_piece_a_verification_goes_on_at_yield_points_but_never_into_a_timed_window(
        tmp_path: Path) -> None:
    """Harness 1.37: with seats, a child whose piece was short goes on at a yield point while another seat's longer
    piece keeps the timed series waiting; the timed series still has the GPU alone, and the verdict is the same."""
    path, calls = str(tmp_path / "gpu-0.lock"), tmp_path / "calls"
    windows: list[tuple[float, float]] = []

    def long_pieces(done: threading.Event) -> None:
        # A neighbour whose pieces have run for seconds each time it holds the GPU: 0.3 s shared, then it builds.
        gate = GpuGate(path, "shared", seats=3)
        gate.acquire()
        while not done.is_set():
            gate.mark_piece(time.monotonic() - 5.0)
            time.sleep(0.3)
            gate.away()
            time.sleep(0.05)
            gate.shared()
        gate.release()

    report = _verified_beside(path, _logging_candidate(calls), 5, 0.05, 0.05, windows, seats=3, beside=long_pieces)
    assert report["status"] == "flagged" and _gate_without_pieces(report) == SHARED, report.get("error")
    assert {n for n, c in report["checks"].items() if c["verdict"] == "fail"} <= {"not-a-kernel"}
    fills = [e for _, r, e in report["timeline"] if r == "parent" and e.endswith(":fill")]
    assert fills, "no yield point went on beside the longer piece"
    _never_called_inside(calls, windows)


def test_the_run_child_gives_way_before_the_candidates_import(tmp_path: Path) -> None:
    """Harness 1.25: the stretch from the run child's release to the import (the reference built again, the
    weights loaded; 0.6-3 s in a loaded batch) had no yield point, and was half of what timed series waited for."""
    path = str(tmp_path / "gpu-0.lock")
    # A neighbour whose timed series holds the GPU alone 90% of the time: any yield point finds it waiting.
    report = _verified_beside(path, HONEST, 2, 0.045, 0.005, [])
    assert report["status"] == "flagged", report.get("error")
    released, imported = _mark(report, "run", "mark:released"), _mark(report, "run", "probe:import")
    before = [t for t, r, e in report["timeline"] if r == "parent" and e == "gate:run:yield" and released <= t <= imported]
    assert before, "no yield point between the run child's release and the candidate's import"


def test_yield_points_split_the_import_from_the_model_and_each_trials_inputs_references_and_sending(
        tmp_path: Path) -> None:
    """Harness 1.36: the candidate's import and its model's construction, each trial's inputs and its work (run child),
    and each trial's inputs, references and their sending (trusted child) are pieces of their own (``gate.pieces``,
    whose names are the messages inside: ``-`` for none), so a timed series waits for one, not for all of them."""
    report = verify_code(TASK, HONEST, "model-new", VerifyOptions(device="cpu", trials=3, shape_probe=False),
                         env={"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"})
    assert report["status"] == "flagged", report.get("error")
    run = [name for *_, name in report["gate"]["pieces"]["run"]]
    imported = next(i for i, name in enumerate(run) if name.endswith("probe:import"))
    assert run[imported + 1] == "call", run
    # After the model: each trial's inputs loaded (no message), then its variants (one trial message each).
    assert run[imported + 2] == "-" and run[imported + 2:].count("-") == 3, run
    trusted = [name for *_, name in report["gate"]["pieces"]["trusted"]]
    # The piece that sends a trial's references (and says so) follows two without a message: its inputs, its references.
    sent = [i for i, name in enumerate(trusted) if name.split(" .. ")[0] in ("reference", "reference-state")]
    assert len(sent) == 3 and all(trusted[i - 2:i] == ["-", "-"] for i in sent), trusted


def test_the_parent_holds_nothing_between_its_children(tmp_path: Path) -> None:
    """Harness 1.26: from the trusted child's exit to the run child's release neither child has GPU work, and a timed
    series waiting for the GPU alone waited for the parent reading the references (0.9-1.2 s for large outputs)."""
    windows: list[tuple[float, float]] = []
    # A neighbour whose timed series holds the GPU alone for 20 ms at a time and asks again 5 ms after. The trusted
    # child's last request is to share again after its baselines, which lets the neighbour queue (the turnstile), so
    # when the parent lets go the neighbour is waiting, and the parent cannot share again before it is done.
    report = _verified_beside(str(tmp_path / "gpu-0.lock"), HONEST, 2, 0.02, 0.005, windows)
    assert report["status"] == "flagged", report.get("error")
    origin = report["timeline_origin"]
    exited, released = _mark(report, "trusted", "exit"), _mark(report, "run", "mark:released")
    away, back = _mark(report, "parent", "gpu-away"), _mark(report, "parent", "gpu-back")
    assert exited <= away <= back <= released
    inside = [(start, end) for start, end in windows
              if origin + away - TIMELINE_RESOLUTION_S <= start and end <= origin + back + TIMELINE_RESOLUTION_S]
    assert inside, "no timed series had the GPU alone while the parent held nothing between its children"


def test_giving_way_is_a_no_op_without_a_shared_hold(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    exclusive, timed = GpuGate(path), GpuGate(path, "shared")
    assert exclusive.acquire() and not exclusive.writer_waiting() and exclusive.give_way()
    assert exclusive.held == "alone"
    exclusive.release()
    assert GpuGate(None).give_way() and not GpuGate(None).writer_waiting()
    assert timed.acquire() and timed.alone() and not timed.writer_waiting() and timed.held == "alone"
    timed.release()


def test_the_keeper_lets_a_yield_go_first_only_when_a_timed_series_waits(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    gate, timed = GpuGate(path, "shared"), GpuGate(path, "shared")
    gate.acquire()
    frozen: list[bool] = []
    keeper = GateKeeper(gate, str(tmp_path / "grant"), "run", freeze=frozen.append)
    assert keeper.handle({"kind": "gate", "which": "yield", "n": 1}) == "yield"
    assert (tmp_path / "grant-1").exists() and keeper.marks == [] and frozen == [] and gate.held == "shared"
    waiting = _wait_for_alone(timed, gate)
    answered = threading.Thread(target=keeper.handle, args=({"kind": "gate", "which": "yield", "n": 2},))
    answered.start()
    waiting.join(5)
    assert timed.held == "alone" and not (tmp_path / "grant-2").exists() and frozen == [True]
    timed.release()
    answered.join(5)
    assert (tmp_path / "grant-2").exists() and frozen == [True, False] and gate.held == "shared"
    assert [e for _, e in keeper.marks] == ["gate:run:yield", "gate:run:shared"]
    # Each answer is kept with when it was asked for and granted: the second stood back while the other was timed.
    assert [granted for _, _, granted in keeper.answers] == ["yield", "yield"]
    asked, answered, _ = keeper.answers[1]
    assert answered - asked >= keeper.marks[1][0] - keeper.marks[0][0] > 0
    # Yields are not requests: past GATE_REQUESTS of them the gate still shares.
    for number in range(10, 10 + GATE_REQUESTS):
        keeper.handle({"kind": "gate", "which": "yield", "n": number})
    assert keeper.handle({"kind": "gate", "which": "shared", "n": 98}) == "shared" and gate.held == "shared"
    gate.release()


def test_past_its_yields_a_child_keeps_the_gpu_as_before_yields(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    gate, timed = GpuGate(path, "shared"), GpuGate(path, "shared")
    gate.acquire()
    keeper = GateKeeper(gate, str(tmp_path / "grant"), "run")
    for number in range(GATE_YIELDS):
        keeper.handle({"kind": "gate", "which": "yield", "n": number})
    waiting = _wait_for_alone(timed, gate)
    assert keeper.handle({"kind": "gate", "which": "yield", "n": 999}) == "yield"
    assert gate.held == "shared" and timed.held is None and keeper.marks == []
    gate.release()
    waiting.join(5)
    assert timed.held == "alone"
    timed.release()


def test_each_seat_says_when_its_running_piece_began_and_a_seat_no_one_holds_says_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    a, b, c = (GpuGate(path, "shared", seats=4) for _ in range(3))
    assert a.acquire() and b.acquire() and c.acquire()
    now = time.monotonic()
    # Sharing from acquire on: b's and c's pieces run, a's own is not counted.
    assert 0 <= a.longest_piece_s(now) < 10
    b.mark_piece(now - 5.0)
    c.mark_piece(now - 7.0)
    assert a.longest_piece_s(now) == pytest.approx(7.0) and b.longest_piece_s(now) == pytest.approx(7.0)
    assert c.longest_piece_s(now) == pytest.approx(5.0)
    c.away()
    assert a.longest_piece_s(now) == pytest.approx(5.0), "going away ends a piece"
    b.mark_piece(0.0)
    assert a.longest_piece_s(now) == 0.0
    # The fourth seat's file says a piece has run 100 s, but no verification holds that seat: a killed one left it.
    free = next(i for i in range(4) if i not in {g._seat_index for g in (a, b, c)})
    descriptor = os.open(f"{path}.seat-{free}", os.O_RDWR)
    os.pwrite(descriptor, struct.pack("<d", now - 100.0), 0)
    os.close(descriptor)
    assert a.longest_piece_s(now) == 0.0
    assert c.shared() and 0 <= a.longest_piece_s() < 5.0, "sharing again starts a piece"
    c.mark_piece(now - 7.0)
    c.release()
    assert a.longest_piece_s(now) == 0.0, "releasing ends a piece"
    a.release()
    b.mark_piece(now - 5.0)
    assert b.alone()
    written = Path(f"{path}.seat-{b._seat_index}").read_bytes()
    assert struct.unpack("<d", written[:8]) == (0.0,), "the GPU alone is no piece of shared work"
    b.release()
    assert GpuGate(path, "shared").longest_piece_s() == 0.0, "a gate without seats reads no one's"


def test_a_sharer_goes_on_at_a_yield_point_while_a_longer_piece_keeps_the_timed_series_waiting(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    sharer, long, timed = (GpuGate(path, "shared", seats=3) for _ in range(3))
    assert sharer.acquire() and long.acquire() and timed.acquire()
    keeper = GateKeeper(sharer, str(tmp_path / "grant"), "run", freeze=[].append)
    assert keeper.handle({"kind": "gate", "which": "yield", "n": 1}) == "yield" and keeper.marks == []
    long.mark_piece(time.monotonic() - 10.0)
    waiting = _wait_for_alone(timed, sharer)
    # Its piece took milliseconds, and another seat's has run 10 s: the timed series waits for that one anyway.
    for number in range(2, 2 + GATE_FILLS):
        assert keeper.handle({"kind": "gate", "which": "yield", "n": number}) == "yield"
        assert (tmp_path / f"grant-{number}").exists() and sharer.held == "shared" and timed.held is None
    assert [e for _, e in keeper.marks] == ["gate:run:fill"] * GATE_FILLS
    # GATE_FILLS in a row: the next one stands back like any other.
    standing = threading.Thread(target=keeper.handle, args=({"kind": "gate", "which": "yield", "n": 50},))
    standing.start()
    assert wait_until(lambda: sharer.held is None, 5)
    long.release()
    waiting.join(5)
    assert timed.held == "alone" and not (tmp_path / "grant-50").exists()
    timed.shared()
    standing.join(5)
    assert sharer.held == "shared" and [e for _, e in keeper.marks][-2:] == ["gate:run:yield", "gate:run:shared"]
    for gate in (sharer, timed):
        gate.release()


def test_a_sharer_stands_back_when_no_longer_piece_runs_elsewhere_or_filling_is_off(tmp_path: Path) -> None:
    for fill, other_s in ((GATE_FILL_FACTOR, 0.0), (0.0, 10.0), (0.001, 10.0)):
        path = str(tmp_path / f"gpu-{fill}.lock")
        sharer, other, timed = (GpuGate(path, "shared", seats=3, fill=fill) for _ in range(3))
        assert sharer.acquire() and other.acquire() and timed.acquire()
        keeper = GateKeeper(sharer, str(tmp_path / f"grant-{fill}"), "run")
        keeper.handle({"kind": "gate", "which": "yield", "n": 1})
        time.sleep(0.05)
        other.mark_piece(time.monotonic() - other_s if other_s else 0.0)
        waiting = _wait_for_alone(timed, sharer)
        standing = threading.Thread(target=keeper.handle, args=({"kind": "gate", "which": "yield", "n": 2},))
        standing.start()
        assert wait_until(lambda gate=sharer: gate.held is None, 5), (fill, other_s)
        other.release()
        waiting.join(5)
        timed.release()
        standing.join(5)
        assert [e for _, e in keeper.marks] == ["gate:run:yield", "gate:run:shared"], (fill, other_s)
        sharer.release()


def test_the_fill_factor_comes_from_the_environment_and_bad_values_name_the_variable() -> None:
    assert GpuGate.from_environment({"KA_GPU_GATE": "x", "KA_GPU_FILL": "3.5"}).fill == 3.5
    assert GpuGate.from_environment({"KA_GPU_GATE": "x"}).fill == GATE_FILL_FACTOR
    for bad in ("-1", "many", "inf", "nan"):
        with pytest.raises(ValueError, match="KA_GPU_FILL"):
            GpuGate.from_environment({"KA_GPU_GATE": "x", "KA_GPU_FILL": bad})


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
        assert report["status"] == "flagged" and _gate_without_pieces(report) == SHARED, report.get("error")
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


def test_over_hands_the_gpu_alone_to_the_next_child_only_when_the_parent_says_it_is_ready(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    gate, other = GpuGate(path, "shared"), GpuGate(path, "shared")
    gate.acquire()
    other.acquire()
    ready: list[bool] = []
    trusted = GateKeeper(gate, str(tmp_path / "trusted"), "trusted", hand_over=lambda: ready.pop(0))
    frozen: list[bool] = []
    run = GateKeeper(gate, str(tmp_path / "run"), "run", freeze=frozen.append, marks=trusted.marks)
    other.release()
    assert trusted.handle({"kind": "gate", "which": "alone", "n": 1}) == "alone"
    ready.append(True)
    assert trusted.handle({"kind": "gate", "which": "over", "n": 2}) == "over" and gate.held == "alone"
    assert (tmp_path / "trusted-2").exists() and not ready
    # The run child's request finds the GPU already alone: granted at once, its candidate never frozen.
    assert run.handle({"kind": "gate", "which": "alone", "n": 1}) == "alone" and frozen == []
    assert run.handle({"kind": "gate", "which": "shared", "n": 2}) == "shared" and gate.held == "shared"
    assert [e for _, e in trusted.marks] == ["gate:trusted:alone", "gate:trusted:over", "gate:run:alone",
                                             "gate:run:shared"]
    # Not ready (or no hand-over at all, as for a run child whose candidate asks for it): ``over`` is ``shared``.
    trusted.handle({"kind": "gate", "which": "alone", "n": 3})
    ready.append(False)
    assert trusted.handle({"kind": "gate", "which": "over", "n": 4}) == "shared" and gate.held == "shared"
    run.handle({"kind": "gate", "which": "alone", "n": 3})
    assert run.handle({"kind": "gate", "which": "over", "n": 4}) == "shared" and gate.held == "shared"
    # Over from a shared hold asks the parent nothing.
    assert trusted.handle({"kind": "gate", "which": "over", "n": 5}) == "shared" and not ready
    third = GpuGate(path, "shared")
    assert third.acquire() and third.held == "shared"
    third.release()
    gate.release()


FORGER = """import json, os
_root = os.path.dirname(os.getcwd())
_names = ["trusted-done", "overhead-go", "go", "gpu-ours", "plan",
          *(f"gate-{role}-{n}" for role in ("trusted", "run") for n in range(1, 65))]
for _name in _names:
    with open(os.path.join(_root, _name), "w") as _file:
        _file.write(json.dumps({"judged": [0]}) if _name == "plan" else "go")
with open(LOG, "a") as _log:
    _log.write(os.path.basename(os.getcwd()) + " " + str(len(_names)) + "\\n")
""" + HONEST


def test_signal_files_a_candidate_forges_at_import_release_no_child_early(tmp_path: Path) -> None:
    log = tmp_path / "forged.log"
    kernel = FORGER.replace("LOG", repr(str(log)))
    report = verify_code(TASK, kernel, "model-new", VerifyOptions(device="cpu", trials=3, shape_probe=False),
                         env={"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"})
    # The compile child ran the forging code before the trusted child's gate, go and plan, and the run child's release.
    assert log.read_text().splitlines()[0] == "candidate 133"
    assert {n for n, c in report["checks"].items() if c["verdict"] == "fail"} <= {"not-a-kernel"}, report.get("error")
    assert report["status"] == "flagged"
    assert _mark(report, "trusted", "mark:gpu-ours") >= _mark(report, "parent", "gpu-gate")
    assert _mark(report, "trusted", "mark:go") >= _mark(report, "compile", "exit")
    assert _mark(report, "run", "mark:released") >= _mark(report, "trusted", "exit")
    # Each child's request for the GPU alone waited for its parent's grant, not for the forged file.
    for role in ("trusted", "run"):
        asked = [float(t) for t, r, e in report["timeline"] if r == role and e == "gate:alone"]
        granted = [float(t) for t, r, e in report["timeline"] if r == "parent" and e == f"gate:{role}:alone"]
        assert len(asked) == len(granted) == 1 and asked[0] <= granted[0], report["timeline"]
    assert len(report.get("trials_reduced", {}).get("references", [0, 1, 2])) == 3


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


def _dies_once(marker: Path, how: str, when: str = "True") -> str:
    return (f"import os, signal\n        if {when} and not os.path.exists({str(marker)!r}):\n"
            f"            open({str(marker)!r}, 'w').close()\n            os.kill(os.getpid(), signal.{how})\n")


def test_a_verification_whose_child_the_host_killed_while_sharing_runs_again_alone(tmp_path: Path) -> None:
    options = VerifyOptions(device="cpu", trials=2, shape_probe=False)
    env = {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"}
    # The reference's float64 pass runs only in the trusted child: it dies as the out-of-memory killer ends it.
    task = TASK.replace("return torch.relu(self.lin(x))",
                        _dies_once(tmp_path / "trusted-once", "SIGKILL", "x.dtype == torch.float64")
                        + "        return torch.relu(self.lin(x))")
    report = verify_code(task, HONEST, "model-new", options, env=env)
    assert report["gate"] == {"mode": "exclusive", "rerun": "the trusted child was killed by SIGKILL while sharing the GPU"}
    assert report["status"] == "flagged" and "killed" not in report
    kernel = HONEST.replace("return torch.relu(self.lin(x))",
                            _dies_once(tmp_path / "run-once", "SIGKILL") + "        return torch.relu(self.lin(x))")
    report = verify_code(TASK, kernel, "model-new", options, env=env)
    assert report["gate"] == {"mode": "exclusive", "rerun": "the run child was killed by SIGKILL while sharing the GPU"}
    assert {n for n, c in report["checks"].items() if c["verdict"] == "fail"} <= {"not-a-kernel"}


def test_a_rerun_for_a_child_the_host_killed_waits_to_be_alone_on_the_host(tmp_path: Path) -> None:
    options = VerifyOptions(device="cpu", trials=2, shape_probe=False)
    host_lock = str(tmp_path / "host.lock")
    env = {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared", "KA_HOST_GATE": host_lock}
    calls = tmp_path / "reference-calls"
    task = TASK.replace("return torch.relu(self.lin(x))",
                        f"if x.dtype == torch.float64:\n            open({str(calls)!r}, 'a').write('.')\n        "
                        + _dies_once(tmp_path / "trusted-once", "SIGKILL", "x.dtype == torch.float64")
                        + "        return torch.relu(self.lin(x))")
    other = GpuGate(host_lock, "shared")  # another verification of the batch, on the host throughout
    assert other.acquire()
    reports: list[dict] = []
    thread = threading.Thread(target=lambda: reports.append(verify_code(task, HONEST, "model-new", options, env=env)))
    thread.start()
    try:
        assert wait_until(lambda: (tmp_path / "trusted-once").exists(), 120.0), "the first run's trusted child died"
        time.sleep(4.0)
        assert calls.read_text() == ".", "the rerun waits while another verification holds the host"
        assert not reports
    finally:
        other.release()
    thread.join(timeout=300)
    [report] = reports
    assert report["gate"] == {"mode": "exclusive", "host": "alone",
                              "rerun": "the trusted child was killed by SIGKILL while sharing the GPU"}
    assert report["status"] == "flagged" and len(calls.read_text()) > 1
    # Released: a verification of the batch gets the host beside others again.
    again = [GpuGate(host_lock, "shared"), GpuGate(host_lock, "shared")]
    assert all(g.acquire() for g in again)
    for g in again:
        g.release()
    # With the GPU alone throughout (an exclusive batch), the host is still shared: the same rerun, alone on it.
    (tmp_path / "trusted-once").unlink()
    report = verify_code(task, HONEST, "model-new", options, env=env | {"KA_GPU_GATE_MODE": "exclusive",
                                                                        "KA_GPU_GATE": str(tmp_path / "gpu-1.lock")})
    assert report["gate"] == {"mode": "exclusive", "host": "alone",
                              "rerun": "the trusted child was killed by SIGKILL while sharing the host"}
    assert report["status"] == "flagged"


def test_a_child_that_crashes_or_is_killed_without_sharing_gets_no_second_run(tmp_path: Path) -> None:
    options = VerifyOptions(device="cpu", trials=2, shape_probe=False)
    shared = {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"}
    crash = HONEST.replace("return torch.relu(self.lin(x))",
                           _dies_once(tmp_path / "segv", "SIGSEGV") + "        return torch.relu(self.lin(x))")
    report = verify_code(TASK, crash, "model-new", options, env=shared)
    assert _gate_without_pieces(report) == SHARED and report["killed"] == {"run": 11} and report["status"] == "failed"
    killed = HONEST.replace("return torch.relu(self.lin(x))",
                            _dies_once(tmp_path / "alone", "SIGKILL") + "        return torch.relu(self.lin(x))")
    report = verify_code(TASK, killed, "model-new", options, env={"KA_GPU_GATE": str(tmp_path / "gpu-1.lock")})
    assert report["gate"] == {"mode": "exclusive"} and report["killed"] == {"run": 9} and report["status"] == "failed"


def test_a_kernel_that_kills_itself_every_time_gets_one_second_run_and_still_fails(tmp_path: Path) -> None:
    kernel = HONEST.replace("return torch.relu(self.lin(x))",
                            "import os, signal\n        os.kill(os.getpid(), signal.SIGKILL)\n"
                            "        return torch.relu(self.lin(x))")
    env = {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"}
    report = verify_code(TASK, kernel, "model-new", VerifyOptions(device="cpu", trials=2, shape_probe=False), env=env)
    assert report["gate"] == {"mode": "exclusive", "rerun": "the run child was killed by SIGKILL while sharing the GPU"}
    assert report["status"] == "failed" and report["killed"] == {"run": 9}


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
            time.sleep(4.0)  # another verification's timed series
            return super().alone()

    grants = str(tmp_path / "grant")
    keeper = GateKeeper(SlowGate(str(tmp_path / "gpu.lock"), "shared"), grants, "run")
    child = ChildProcess([sys.executable, "-c", CHILD_ASKING_FOR_THE_GPU, grants], role="run",
                         env=dict(os.environ), cwd=tmp_path, keeper=keeper)
    # 3 s cover the child's start on a loaded host; the 4 s wait for the gate would not fit without the pause.
    report = child.wait(3.0)
    keeper.gate.release()
    assert not report.timed_out and report.returncode == 0
    assert 3.9 < child.paused_s < 10 and [e for _, e in keeper.marks] == ["gate:run:alone"]
