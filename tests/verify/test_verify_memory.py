"""The evidence fitted to the host's memory and the batch's ledger (``verify.harness.memory``), and CPU verifications
that need them."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from batch_testing import HONEST, MUTATING, TASK

from verify.harness.gate import GpuGate
from verify.harness.memory import (
    LEDGER_ENV,
    LEDGER_FROM,
    LEDGER_FROM_ENV,
    MEMORY_LIMIT_ENV,
    MemoryLedger,
    TrialSize,
    available_bytes,
    evidence_needed,
    trials_within,
)
from verify.harness.parent import TrialPlanner
from verify.harness.report import render_text
from verify.runner import VerifyOptions, verify_code

GIB = 2**30
DEFAULT = [TrialSize(ref_bytes=12, out_bytes=4, calls=3)] * 2 + [TrialSize(ref_bytes=12, out_bytes=4, calls=1)] * 3
BIG = [TrialSize(ref_bytes=3 * GIB, out_bytes=GIB, calls=1)] * 3
"""Three trials of 4 GiB each: with the first trial's references held, 1, 5 and 9 GiB more for 1, 2 and 3 trials."""


def test_the_evidence_counts_references_outputs_and_extra_beyond_what_is_held() -> None:
    # Five trials: 5 x 12 of references, 9 calls x 4 of outputs, 20 extra.
    assert evidence_needed(DEFAULT, extra_bytes=20) == 60 + 36 + 20
    assert evidence_needed(DEFAULT, extra_bytes=20, held_bytes=12) == 104
    assert evidence_needed(DEFAULT[:1], extra_bytes=0) == 24


def test_every_trial_is_judged_when_the_evidence_fits() -> None:
    assert trials_within(DEFAULT, extra_bytes=20, room=10**9) == 5
    assert trials_within(DEFAULT, extra_bytes=20, room=104, held_bytes=12, fill=1.0) == 5, "all of it may be used"


def test_the_last_trials_go_first() -> None:
    # Beyond trial 0's 12 held bytes: 1 trial 32, 2 trials 56, 3 trials 72, 4 trials 88, 5 trials 104.
    assert trials_within(DEFAULT, extra_bytes=20, room=103, held_bytes=12, fill=1.0) == 4
    assert trials_within(DEFAULT, extra_bytes=20, room=72, held_bytes=12, fill=1.0) == 3
    assert trials_within(DEFAULT, extra_bytes=20, room=71, held_bytes=12, fill=1.0) == 2
    assert trials_within(DEFAULT, extra_bytes=20, room=120, held_bytes=12, fill=0.5) == 2


def test_at_least_one_trial_is_judged_even_when_nothing_fits() -> None:
    assert trials_within(DEFAULT, extra_bytes=10**6, room=0) == 1
    assert trials_within(DEFAULT[:1], extra_bytes=10**6, room=-5) == 1


def test_the_limit_comes_from_the_variable_or_the_least_of_host_and_cgroup(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       131072 kB\nMemFree:    1024 kB\nMemAvailable:   65536 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    assert available_bytes(meminfo, cgroup) == 64 << 20, "no cgroup files: the host's figure"
    (cgroup / "memory.max").write_text("max\n")
    assert available_bytes(meminfo, cgroup) == 64 << 20, "an unlimited cgroup: the host's figure"
    (cgroup / "memory.max").write_text(f"{48 << 20}\n")
    (cgroup / "memory.current").write_text(f"{16 << 20}\n")
    (cgroup / "memory.stat").write_text(f"anon {12 << 20}\ninactive_file {4 << 20}\n")
    assert available_bytes(meminfo, cgroup) == 36 << 20, "limit less usage, plus the file cache it can reclaim"
    assert available_bytes(tmp_path / "absent", tmp_path / "absent") is None
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "12345")
    assert available_bytes(meminfo, cgroup) == 12345


def test_this_host_has_a_figure() -> None:
    assert (available_bytes() or 0) > 0


def _ledger(folder: Path, free_gib: float, **kwargs: float) -> MemoryLedger:
    return MemoryLedger(folder, available=lambda: int(free_gib * GIB), poll_s=0.02, **kwargs)


def test_a_large_plan_counts_the_other_reservations_and_small_ones_never_reserve(tmp_path: Path) -> None:
    first, second = _ledger(tmp_path, 12), _ledger(tmp_path, 12)
    plan = first.plan(BIG, 0, held_bytes=3 * GIB, timeout_s=1)
    assert (plan.judged, plan.reserved_bytes, plan.reserved_by_others) == (3, 9 * GIB, 0)
    assert len(list(tmp_path.glob("*.reserved"))) == 1
    # 12 GiB free less the first's 9: 3 GiB, of which 90% holds one trial's 1 GiB and not two trials' 5.
    plan = second.plan(BIG, 0, held_bytes=3 * GIB, timeout_s=1)
    assert (plan.judged, plan.reserved_bytes, plan.reserved_by_others, plan.needed_bytes) == (1, GIB, 9 * GIB, 9 * GIB)
    small = _ledger(tmp_path, 12).plan(DEFAULT, 20, held_bytes=12, timeout_s=0)
    assert (small.judged, small.reserved_bytes, small.reserved_by_others) == (5, 0, 0), "below LEDGER_FROM: as alone"
    _ledger(tmp_path / "fresh", 12).plan(DEFAULT, 20, held_bytes=12, timeout_s=0)
    assert not (tmp_path / "fresh").exists(), "a small plan neither reads nor writes the ledger"
    first.release()
    second.release()
    assert not list(tmp_path.glob("*.reserved"))


def test_settled_bytes_are_no_longer_counted_against_others(tmp_path: Path) -> None:
    first = _ledger(tmp_path, 12)
    first.plan(BIG, 0, held_bytes=3 * GIB, timeout_s=1)
    first.settle(0)
    assert _ledger(tmp_path, 12).others() == [0]
    assert _ledger(tmp_path, 12).plan(BIG, 0, held_bytes=3 * GIB, timeout_s=0).judged == 3
    first.release()


def test_a_plan_that_cannot_fit_one_trial_beside_others_waits_for_them(tmp_path: Path) -> None:
    holder = _ledger(tmp_path, 12)
    holder.plan(BIG, 0, held_bytes=3 * GIB, timeout_s=1)
    waits: list[bool] = []

    def waiting(wait: bool) -> None:
        waits.append(wait)
        if wait:  # the holder goes 0.4 s into the wait, however late the wait starts on a loaded host
            threading.Timer(0.4, holder.release).start()

    started = time.monotonic()
    # Beside the holder's 9 GiB a 10 GiB host has 1 GiB, and 90% of it does not hold the first trial's 1 GiB.
    plan = _ledger(tmp_path, 10).plan(BIG, 0, held_bytes=3 * GIB, timeout_s=30, on_wait=waiting)
    assert time.monotonic() - started >= 0.35 and plan.waited_s >= 0.35
    assert waits == [True, False]
    assert (plan.judged, plan.reserved_by_others) == (3, 0), "the holder is gone: every trial"


def test_the_wait_ends_at_its_limit_with_one_trial(tmp_path: Path) -> None:
    holder = _ledger(tmp_path, 12)
    holder.plan(BIG, 0, held_bytes=3 * GIB, timeout_s=1)
    plan = _ledger(tmp_path, 10).plan(BIG, 0, held_bytes=3 * GIB, timeout_s=0.2)
    assert plan.judged == 1 and plan.waited_s >= 0.2 and plan.reserved_by_others == 9 * GIB
    holder.release()


def test_a_dead_holders_reservation_is_removed(tmp_path: Path) -> None:
    (tmp_path / "999-1.reserved").write_text(f"{9 * GIB} {9 * GIB}")  # no one holds its lock
    script = ("import sys, os; from verify.harness.memory import MemoryLedger, TrialSize; "
              "l = MemoryLedger(sys.argv[1], available=lambda: 12 * 2**30); "
              "print(l.plan([TrialSize(3 * 2**30, 2**30, 1)] * 3, 0, held_bytes=3 * 2**30, timeout_s=1).judged); "
              "sys.stdout.flush(); os._exit(0)")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, capture_output=True, text=True,
                          cwd=Path(__file__).parents[2])
    assert done.stdout.strip() == "3", "the unlocked reservation did not count, and was removed"
    left = [path.name for path in tmp_path.glob("*.reserved")]
    assert len(left) == 1 and left != ["999-1.reserved"], "the dead process's own stays until the ledger is read"
    assert _ledger(tmp_path, 12).others() == []
    assert not list(tmp_path.glob("*.reserved"))


def test_a_claim_left_by_a_reserver_that_died_before_its_rename_is_swept_by_the_next_large_plan(tmp_path: Path) -> None:
    (tmp_path / "999-1.claim").write_text(f"{9 * GIB} {9 * GIB}")
    reader = _ledger(tmp_path, 12)
    assert reader.others() == [] and (tmp_path / "999-1.claim").exists(), "a claim is neither counted nor swept by a read"
    small = _ledger(tmp_path, 12)
    small.plan(DEFAULT, 0, timeout_s=0)
    assert (tmp_path / "999-1.claim").exists(), "a small plan takes no lock, so it sweeps nothing"
    large = _ledger(tmp_path, 12, large_from=1)
    assert large.plan(BIG, 0, held_bytes=3 * GIB, timeout_s=0).judged == 3
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".claim") == []
    assert len(list(tmp_path.glob("*.reserved"))) == 1, "the large plan's own reservation is in place"
    large.release()


def test_a_reader_between_a_reservations_creation_and_its_lock_never_removes_it(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl
    import os
    import types

    from verify.harness import memory

    reader, writer = _ledger(tmp_path, 12), _ledger(tmp_path, 12, large_from=1)
    seen: list[list[int]] = []

    def flock(fd: int, operation: int) -> None:
        # A reader outside the folder's lock, the moment before the new entry (not the folder's lock) is locked.
        if operation == fcntl.LOCK_EX and not os.readlink(f"/proc/self/fd/{fd}").endswith("/.lock") and not seen:
            monkeypatch.setattr(memory, "fcntl", fcntl)
            seen.append(reader.others())
            monkeypatch.setattr(memory, "fcntl", hooked)
        fcntl.flock(fd, operation)

    hooked = types.SimpleNamespace(flock=flock, LOCK_EX=fcntl.LOCK_EX, LOCK_SH=fcntl.LOCK_SH, LOCK_NB=fcntl.LOCK_NB)
    monkeypatch.setattr(memory, "fcntl", hooked)
    writer.plan(BIG[:1], 0, timeout_s=0)
    monkeypatch.setattr(memory, "fcntl", fcntl)
    assert seen == [[]], "the reader saw the entry before it was locked"
    assert writer.reserved > 0 and reader.others() == [writer.reserved], "a reader removed a live entry"
    writer.release()
    assert reader.others() == [] and sorted(p.name for p in tmp_path.iterdir()) == [".lock"]


def test_without_a_folder_or_a_figure_nothing_is_reserved(tmp_path: Path) -> None:
    alone = MemoryLedger(None, available=lambda: 12 * GIB)
    assert alone.plan(BIG, 0, held_bytes=3 * GIB, timeout_s=0).judged == 3 and alone.reserved == 9 * GIB
    alone.settle(0)
    alone.release()
    unknown = MemoryLedger(tmp_path, available=lambda: None).plan(BIG, 0, held_bytes=3 * GIB, timeout_s=0)
    assert (unknown.judged, unknown.available_bytes) == (3, None) and not list(tmp_path.glob("*.reserved"))


def test_the_environment_names_the_folder_and_the_threshold(tmp_path: Path) -> None:
    assert MemoryLedger.from_environment({}).folder is None
    ledger = MemoryLedger.from_environment({LEDGER_ENV: str(tmp_path), LEDGER_FROM_ENV: "1000"})
    assert (ledger.folder, ledger.large_from) == (tmp_path, 1000)
    assert MemoryLedger.from_environment({LEDGER_ENV: str(tmp_path)}).large_from == LEDGER_FROM


class _Gate(GpuGate):
    def __init__(self, on_away: Callable[[], None] = lambda: None) -> None:
        super().__init__(None)
        self.calls: list[str] = []
        self.on_away = on_away

    @property
    def sharing(self) -> bool:
        return True

    def away(self) -> None:
        self.calls.append("away")
        self.on_away()

    def shared(self) -> bool:
        self.calls.append("shared")
        return True


def test_the_planner_lets_go_of_the_gpu_while_it_waits_and_writes_its_plan(tmp_path: Path) -> None:
    holder = _ledger(tmp_path / "ledger", 12)
    holder.plan(BIG, 0, held_bytes=3 * GIB, timeout_s=1)
    # The holder goes 0.3 s after the planner lets go of the GPU to wait, however late that is on a loaded host.
    gate = _Gate(on_away=lambda: threading.Timer(0.3, holder.release).start())
    trials = [{"index": i} for i in range(3)]
    planner = TrialPlanner(trials, _ledger(tmp_path / "ledger", 10), tmp_path / "plan", deep_trials=0, gate=gate,
                           timeout_s=30)
    # One trial needs 1.5 GiB more (its outputs and the probes'), three 8 GiB: none fits beside the holder's 9 GiB.
    plan = planner.handle({"kind": "sized", "ref_bytes": 3 * GIB, "out_bytes": GIB // 4, "probe_ref_bytes": 0,
                           "probe_out_bytes": 0})
    assert plan is not None and plan.judged == 3 and gate.calls == ["away", "shared"]
    assert json.loads((tmp_path / "plan").read_text()) == {"judged": [0, 1, 2]}
    assert [m for _, m in planner.marks] == ["memory-wait", "memory-room", "memory-planned:3"]
    assert planner.handle({"kind": "sized", "ref_bytes": 1, "out_bytes": 1, "probe_ref_bytes": 0,
                           "probe_out_bytes": 0}) is None, "answered once"
    planner.ledger.release()


def test_the_planner_settles_its_reservation_as_each_payload_arrives(tmp_path: Path) -> None:
    planner = TrialPlanner([{"index": i} for i in range(3)], _ledger(tmp_path, 12), tmp_path / "plan", deep_trials=0,
                           gate=GpuGate(None), timeout_s=1)
    # The first trial's references (3 GiB) arrived before the plan: they are what it holds, not what is to come.
    planner.arrived("ref-0", 3 * GIB)
    plan = planner.handle({"kind": "sized", "ref_bytes": 3 * GIB, "out_bytes": GIB // 4, "probe_ref_bytes": 0,
                           "probe_out_bytes": 0})
    assert plan is not None and plan.judged == 3 and plan.reserved_bytes == 8 * GIB
    assert _ledger(tmp_path, 12).others() == [8 * GIB]
    remaining = [8 * GIB]
    for name, nbytes in [("ref-1", 3 * GIB), ("out-0-a", GIB // 4), ("state-probe-first", GIB // 4),
                         ("inputs-0", GIB), ("out-0-b", 0), ("ref-2", 3 * GIB)]:
        planner.arrived(name, nbytes)
        remaining.append(_ledger(tmp_path, 12).others()[0])
    assert remaining == [8 * GIB, 5 * GIB, 5 * GIB - GIB // 4, 4.5 * GIB, 4.5 * GIB, 4.5 * GIB, 1.5 * GIB], \
        "references, outputs and the probe's outputs settle it; other payloads and a twin's 0 bytes do not"
    planner.arrived("out-2-a", 100 * GIB)
    assert _ledger(tmp_path, 12).others() == [0], "never below nothing"
    planner.ledger.release()


def test_a_planner_without_a_reservation_settles_nothing(tmp_path: Path) -> None:
    planner = TrialPlanner([{"index": 0}, {"index": 1}], _ledger(tmp_path, 12), tmp_path / "plan", deep_trials=0,
                           gate=GpuGate(None), timeout_s=1)
    planner.arrived("out-0-a", GIB)  # before any plan: counted, nothing to settle
    plan = planner.handle({"kind": "sized", "ref_bytes": 12, "out_bytes": 4, "probe_ref_bytes": 0,
                           "probe_out_bytes": 0})
    planner.arrived("ref-1", 12)
    assert plan is not None and plan.reserved_bytes == 0 and planner.arrived_bytes == GIB + 12
    assert not list(tmp_path.glob("*.reserved"))


def test_a_planner_that_fails_still_answers_with_every_trial(tmp_path: Path) -> None:
    planner = TrialPlanner([{"index": 0}, {"index": 1}], MemoryLedger(None), tmp_path / "plan", deep_trials=2,
                           gate=GpuGate(None), timeout_s=1)
    assert planner.handle({"kind": "sized", "ref_bytes": "many", "out_bytes": -1}) is None
    assert json.loads((tmp_path / "plan").read_text()) == {"judged": [0, 1]}
    assert planner.error and "every trial is judged" in planner.error
    assert planner.handle({"kind": "gate"}) is None


# The task's output is 8 x 16 fp32: 512 bytes a call, and 1536 bytes of references a trial (fp32 and float64). With
# trial 0's references held, 1..5 trials need 4096, 7168, 9216, 11264 and 13312 bytes more (the outputs, the other
# trials' references, the statefulness probe's four outputs and one payload in transit); 90% of 10500 holds three.
OPTIONS = VerifyOptions(device="cpu", trials=5, shape_probe=False, target_seconds=0.05)
TIGHT = {MEMORY_LIMIT_ENV: "10500"}


def test_a_verification_on_a_host_too_small_judges_the_first_trials_and_says_so() -> None:
    roomy = verify_code(TASK, HONEST, "model-new", OPTIONS)
    tight = verify_code(TASK, HONEST, "model-new", OPTIONS, env=TIGHT)
    assert "trials_reduced" not in roomy and [t["index"] for t in roomy["trials"]] == [0, 1, 2, 3, 4]
    reduced = tight["trials_reduced"]
    assert (reduced["planned"], reduced["judged"], reduced["unjudged"]) == (5, 3, [3, 4])
    assert reduced["available_bytes"] == 10500 and reduced["needed_bytes"] == 13312
    assert reduced["references"] == [0, 1, 2], "the trusted child computed no reference for an unjudged trial"
    assert reduced["outputs_sent"] == [0, 1, 2], "the run child sent no output on an unjudged trial"
    assert [t["index"] for t in tight["trials"]] == [0, 1, 2] and all(t["passed"] for t in tight["trials"])
    assert any("judged on 3 of 5 trials" in note for note in tight["notes"])
    assert tight["status"] == roomy["status"]
    assert "trials 3, 4 not judged: the host's memory" in render_text(tight)
    assert {n: c["verdict"] for n, c in tight["checks"].items()} == {n: c["verdict"] for n, c in roomy["checks"].items()}


def test_a_hack_caught_only_by_messages_is_still_caught_on_the_unjudged_trials() -> None:
    # Mutating the input shows in every trial's messages, judged or not.
    tight = verify_code(TASK, MUTATING, "model-new", OPTIONS, env=TIGHT)
    assert tight["trials_reduced"]["judged"] == 3
    assert tight["status"] == "failed" and tight["checks"]["input-mutation"]["verdict"] == "fail"
    assert "trial 4" in " ".join(tight["checks"]["input-mutation"]["evidence"])


def test_a_verification_in_a_batch_counts_and_waits_for_the_other_reservations(tmp_path: Path) -> None:
    ledger, marks = tmp_path / "ledger", tmp_path / "marks.tsv"
    env = {LEDGER_ENV: str(ledger), LEDGER_FROM_ENV: "1", MEMORY_LIMIT_ENV: "20000", "KA_MARKS_FILE": str(marks)}
    holder = MemoryLedger(ledger, available=lambda: 10**6, large_from=1)
    holder.plan([TrialSize(ref_bytes=9000, out_bytes=0, calls=1)], 0, timeout_s=0)
    # 20000 less the 9000 reserved: 90% of 11000 holds three trials (9216 bytes).
    shared = verify_code(TASK, HONEST, "model-new", OPTIONS, env=env)
    assert shared["trials_reduced"]["judged"] == 3 and shared["trials_reduced"]["reserved_by_others"] == 9000
    assert shared["memory"] == {"reserved_bytes": 9216, "reserved_by_others": 9000, "waited_s": 0.0}
    assert len(list(ledger.glob("*.reserved"))) == 1, "its own reservation ended with it"
    holder.release()
    holder.plan([TrialSize(ref_bytes=17000, out_bytes=0, calls=1)], 0, timeout_s=0)
    marks.unlink()

    def release_once_it_waits() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "memory-wait" not in (marks.read_text() if marks.exists() else ""):
            time.sleep(0.05)
        time.sleep(0.5)
        holder.release()

    # 20000 less 17000: not even the first trial's 4096 fits, so it waits until the holder is done, then judges five.
    releaser = threading.Thread(target=release_once_it_waits)
    releaser.start()
    waited = verify_code(TASK, HONEST, "model-new", OPTIONS, env=env)
    releaser.join()
    assert "trials_reduced" not in waited and [t["index"] for t in waited["trials"]] == [0, 1, 2, 3, 4]
    assert waited["memory"]["waited_s"] >= 0.4 and waited["memory"]["reserved_by_others"] == 0
    assert {"memory-wait", "memory-room", "memory-planned:5"} <= {line.split("\t")[1] for line in
                                                                   marks.read_text().splitlines()}
    assert waited["status"] == shared["status"] and waited["checks"].keys() == shared["checks"].keys()
    assert not list(ledger.glob("*.reserved"))


# The reference's first calls take 0.1 s each, so each trial's references arrive a while after the last: a reader
# polling the ledger sees every step even on a loaded host (CI once saw none above 6463, the first 11 payloads in ms).
SLOW_FIRST_CALLS = "_calls = 0\n" + TASK.replace("        return torch.relu(self.lin(x))", (
    "        global _calls\n        _calls += 1\n        if _calls <= 16:\n            import time\n"
    "            time.sleep(0.1)\n        return torch.relu(self.lin(x))"))


def test_a_verification_in_a_batch_settles_its_reservation_as_its_evidence_arrives(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    env = {LEDGER_ENV: str(ledger), LEDGER_FROM_ENV: "1", MEMORY_LIMIT_ENV: str(10**6)}
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        reader = MemoryLedger(ledger, available=lambda: 10**6)
        while not stop.is_set():
            seen.extend(reader.others())
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        report = verify_code(SLOW_FIRST_CALLS, HONEST, "model-new", OPTIONS, env=env)
    finally:
        stop.set()
        watcher.join()
    # Every trial judged: 13312 bytes reserved, settled down payload by payload while the children ran (a
    # payload's bytes include its frame's header, so the first trial's references already take a little off).
    assert report["memory"]["reserved_bytes"] == 13312 and "trials_reduced" not in report
    steps = sorted(set(seen), reverse=True)
    assert 12800 < steps[0] <= 13312 and len([b for b in steps if 0 < b < 12800]) >= 3, steps
    assert report["checks"]["correctness"]["verdict"] == "pass"


PROBED_TASK = TASK.replace("import torch.nn as nn\n", "import torch.nn as nn\nbatch_size = 8\nfeatures = 16\n").replace(
    "torch.randn(8, 16)", "torch.randn(batch_size, features)").replace("return [16]", "return [features]")


def test_the_plan_counts_the_shape_and_init_probes_references_and_outputs_exactly() -> None:
    # The shape probe (batch_size 5) and the init probe (features 8) hold 960 + 768 bytes of references and send
    # 320 + 256 bytes of outputs; trials 1..5 then need 4672, 7744, 9792, 11840 and 13888 bytes more: 90% of 11000
    # holds three.
    options = VerifyOptions(device="cpu", trials=5, shape_probe=True, target_seconds=0.05)
    report = verify_code(PROBED_TASK, HONEST, "model-new", options, env={MEMORY_LIMIT_ENV: "11000"})
    reduced = report["trials_reduced"]
    assert (reduced["judged"], reduced["needed_bytes"], reduced["references"]) == (3, 13888, [0, 1, 2])
    assert report["shape_probe"]["right"] is True and report["init_probe"]["right"] is True
    assert report["checks"]["correctness"]["verdict"] == "pass"
