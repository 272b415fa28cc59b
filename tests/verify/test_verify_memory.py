"""The evidence fitted to the host's memory (``verify.harness.memory``), and a CPU verification that needs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_testing import HONEST, MUTATING, TASK

from verify.harness.memory import MEMORY_LIMIT_ENV, TrialSize, available_bytes, trials_that_fit
from verify.harness.report import render_text
from verify.runner import VerifyOptions, verify_code

DEFAULT = [TrialSize(ref_bytes=12, out_bytes=4, calls=3)] * 2 + [TrialSize(ref_bytes=12, out_bytes=4, calls=1)] * 3


def test_every_trial_is_judged_when_the_evidence_fits() -> None:
    assert trials_that_fit(DEFAULT, extra_bytes=20, available=10**9) == 5
    assert trials_that_fit(DEFAULT, extra_bytes=20, available=56, fill=1.0) == 5, "all of it may be used"


def test_the_last_trials_go_first_and_their_references_count_as_given_back() -> None:
    # Five trials need 9 calls x 4 + 20 = 56 bytes; four need 52, and giving back trial 4's references (12) helps.
    assert trials_that_fit(DEFAULT, extra_bytes=20, available=40, fill=1.0) == 4
    assert trials_that_fit(DEFAULT, extra_bytes=20, available=39, fill=1.0) == 3
    assert trials_that_fit(DEFAULT, extra_bytes=20, available=20, fill=1.0) == 2
    assert trials_that_fit(DEFAULT, extra_bytes=20, available=60, fill=0.5) == 2


def test_at_least_one_trial_is_judged_even_when_nothing_fits() -> None:
    assert trials_that_fit(DEFAULT, extra_bytes=10**6, available=0) == 1
    assert trials_that_fit(DEFAULT[:1], extra_bytes=10**6, available=0) == 1


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


# The task's output is 8 x 16 fp32: 512 bytes a call and 1536 of references a trial. Five trials need
# 9 x 512 + 2560 (the probes and one payload in transit) = 7168 bytes more; 5000 available fit three trials.
OPTIONS = VerifyOptions(device="cpu", trials=5, shape_probe=False, target_seconds=0.05)
TIGHT = {MEMORY_LIMIT_ENV: "5000"}


def test_a_verification_on_a_host_too_small_judges_the_first_trials_and_says_so() -> None:
    roomy = verify_code(TASK, HONEST, "model-new", OPTIONS)
    tight = verify_code(TASK, HONEST, "model-new", OPTIONS, env=TIGHT)
    assert "trials_reduced" not in roomy and [t["index"] for t in roomy["trials"]] == [0, 1, 2, 3, 4]
    reduced = tight["trials_reduced"]
    assert (reduced["planned"], reduced["judged"], reduced["unjudged"]) == (5, 3, [3, 4])
    assert reduced["available_bytes"] == 5000 and reduced["needed_bytes"] == 7168
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
