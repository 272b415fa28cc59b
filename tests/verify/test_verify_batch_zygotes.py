"""A batch slot's zygote: one torch import for all the slot's scripts, each served alone and cleaned up after."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from batch_testing import HONEST, MUTATING, job
from zygote_testing import DIGEST, KERNEL, TASK, host_script, with_repo

import verify.batch.zygotes as zygotes_module
from verify.batch.workers import LocalBatch
from verify.batch.zygotes import (
    Seed,
    SlotZygote,
    SlotZygotes,
    parent_forks_enabled,
    seeds_enabled,
    slot_zygotes_enabled,
)
from verify.harness.judge import ChildReport
from verify.harness.parent import ChildProcess, scrubbed_environment
from verify.harness.zygote import ZYGOTE_FD_ENV, Zygote, _sealed_json
from verify.runner import VerifyOptions

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, SCM_RIGHTS and memfd are Linux's")

# The child prints the kernel its request carried, then runs for as long as its file says.
CHILD = """
import json, time
print("embedded:", json.dumps(EMBEDDED))
time.sleep(SLEEP)
"""


@pytest.fixture
def slot(tmp_path: Path) -> Iterator[SlotZygote]:
    started = SlotZygote(sys.executable, with_repo(dict(os.environ)), script=host_script(tmp_path))
    yield started
    started.close()


def _connect(slot: SlotZygote, kernel: str, digest: str = DIGEST) -> Zygote:
    connection = slot.connection()
    assert connection is not None
    return Zygote.connect(connection.detach(), digest=digest, embedded={"kernel_code": kernel})


def _child(folder: Path, zygote: Zygote, sleep: float = 0.0) -> ChildProcess:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "child.py").write_text(textwrap.dedent(CHILD).replace("SLEEP", repr(sleep)))
    return ChildProcess([sys.executable, str(folder / "child.py")], role="run",
                        env=with_repo(scrubbed_environment(dict(os.environ), str(folder))), cwd=folder, zygote=zygote)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_one_zygote_serves_scripts_one_after_another_each_with_its_own_kernel(slot: SlotZygote,
                                                                              tmp_path: Path) -> None:
    reports: list[ChildReport] = []
    for kernel in ("first kernel", "second kernel"):
        zygote = _connect(slot, kernel)
        try:
            reports.append(_child(tmp_path / kernel.replace(" ", "-"), zygote).wait(60))
        finally:
            zygote.close()
    assert [r.returncode for r in reports] == [0, 0]
    assert all(r.started == "forked from the slot's zygote" for r in reports)
    assert 'embedded: {"kernel_code": "first kernel"}' in reports[0].log_tail
    assert 'embedded: {"kernel_code": "second kernel"}' in reports[1].log_tail
    assert slot.served == 2 and slot.process.poll() is None and slot.ready


def test_a_closed_connection_takes_its_childrens_sessions_and_nothing_else(slot: SlotZygote, tmp_path: Path) -> None:
    ended, kept = _connect(slot, "ended"), _connect(slot, "kept")
    doomed = _child(tmp_path / "doomed", ended, sleep=600)
    living = _child(tmp_path / "living", kept, sleep=600)
    try:
        assert _alive(doomed.process.pid) and _alive(living.process.pid)
        ended.close()  # as when the script ends or is killed: its end of the connection closes
        assert _gone_within(doomed.process.pid, 30), "a child outlived its script's connection"
        assert _alive(living.process.pid), "another script's child was killed"
        after = _child(tmp_path / "after", kept)
        assert after.wait(60).returncode == 0, "the zygote serves on"
    finally:
        kept.close()
    assert _gone_within(living.process.pid, 30)


def test_a_request_from_another_harness_is_refused_and_the_child_runs_by_exec(slot: SlotZygote,
                                                                             tmp_path: Path) -> None:
    zygote = _connect(slot, "kernel", digest="another harness")
    try:
        report = _child(tmp_path / "child", zygote).wait(60)
    finally:
        zygote.close()
    assert report.started.startswith("exec (the zygote failed") and "another harness" in report.started
    # Exec'd, the child is a plain Python file with no kernel handed to it.
    assert report.returncode != 0 and "NameError" in report.log_tail


def test_a_stopped_or_killed_zygote_is_replaced_before_the_next_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zygotes_module, "PING_S", 1.0)
    env = with_repo(dict(os.environ)) | {"KA_SLOT_SEED": "0"}
    zygotes = SlotZygotes(sys.executable, env)
    monkeypatch.setattr(zygotes_module, "SlotZygote",
                        lambda python, env, seed=None: SlotZygote(python, env, script=host_script(tmp_path)))
    try:
        with zygotes.for_script() as (extra, fds, _):
            first = zygotes.current
            assert first is not None and extra == {ZYGOTE_FD_ENV: str(fds[0])}
        zygote = _connect(first, "warm")
        try:
            assert _child(tmp_path / "warm", zygote).wait(60).returncode == 0  # it has imported: pings now
        finally:
            zygote.close()
        os.kill(first.process.pid, signal.SIGSTOP)  # as a candidate could: it descends from the zygote
        with zygotes.for_script() as (extra, fds, _):
            assert (extra, fds) == ({}, ()), "a stopped zygote gets no script"
        assert zygotes.replaced == 1 and zygotes.current is None
        with zygotes.for_script() as (extra, fds, _):
            second = zygotes.current
            assert second is not None and second is not first and fds
        zygote = _connect(second, "warm")
        try:
            assert _child(tmp_path / "warm-again", zygote).wait(60).returncode == 0
        finally:
            zygote.close()
        os.kill(second.process.pid, signal.SIGKILL)  # killed once ready, it is replaced as well
        second.process.wait(30)
        with zygotes.for_script() as (extra, fds, _):
            assert (extra, fds) == ({}, ())
        assert zygotes.replaced == 2 and zygotes.enabled
    finally:
        zygotes.close()


def test_a_zygote_that_dies_before_its_imports_is_not_started_again(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken.py").write_text("raise SystemExit('no torch here')\n")
    started: list[SlotZygote] = []

    def broken(python: str, env: dict[str, str], seed: object = None) -> SlotZygote:
        started.append(SlotZygote(python, env, script=tmp_path / "broken.py"))
        return started[-1]

    monkeypatch.setattr(zygotes_module, "SlotZygote", broken)
    zygotes = SlotZygotes(sys.executable, dict(os.environ) | {"KA_SLOT_SEED": "0"})
    try:
        with zygotes.for_script() as (extra, _, _):
            assert extra, "a zygote still importing gets the script: its requests wait for it"
        started[0].process.wait(60)
        for _ in range(2):
            with zygotes.for_script() as (extra, fds, _):
                assert (extra, fds) == ({}, ())
        assert len(started) == 1 and not zygotes.enabled
    finally:
        zygotes.close()


def test_the_kernel_a_request_carries_cannot_be_changed_by_whoever_holds_it() -> None:
    fd = _sealed_json({"kernel_code": "honest"})
    try:
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"hacked", 0)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 0)
        assert json.loads(os.pread(fd, 1 << 16, 0)) == {"kernel_code": "honest"}
    finally:
        os.close(fd)


def test_the_switches() -> None:
    assert slot_zygotes_enabled({}) and slot_zygotes_enabled({"KA_SLOT_ZYGOTE": "1"})
    assert not slot_zygotes_enabled({"KA_SLOT_ZYGOTE": "0"}) and not slot_zygotes_enabled({"KA_ZYGOTE": "0"})
    assert seeds_enabled({}) and parent_forks_enabled({})
    for off in ({"KA_SLOT_SEED": "0"}, {"KA_SLOT_ZYGOTE": "0"}, {"KA_ZYGOTE": "0"}):
        assert not seeds_enabled(off)
    for off in ({"KA_FORK_PARENTS": "0"}, {"KA_SLOT_ZYGOTE": "0"}, {"KA_ZYGOTE": "0"}):
        assert not parent_forks_enabled(off)


def _parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.slow
def test_every_slots_zygote_is_forked_from_one_seed_which_ends_with_its_last_slot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Seed, "_current", None)  # not one that slots of earlier tests still hold
    env = with_repo(dict(os.environ))
    slots = [SlotZygotes(sys.executable, env) for _ in range(2)]
    try:
        seed = slots[0]._seed
        assert seed is not None and slots[1]._seed is seed and seed.users == 2
        for slot in slots:
            with slot.for_script() as (extra, fds, fork):
                assert extra and fds and fork is not None
        zygotes = [slot.current for slot in slots]
        assert all(z is not None and z.forked for z in zygotes)
        assert {_parent_pid(z.process.pid) for z in zygotes} == {seed.zygote.process.pid}
        # Its torch import and the judge's compile left no thread behind to be lost in a fork.
        assert len(os.listdir(f"/proc/{seed.zygote.process.pid}/task")) == 1
        slots[0].close()
        assert seed.zygote.process.poll() is None, "another slot still holds the seed"
        assert _alive(zygotes[1].process.pid), "a slot's zygote outlives another slot"
    finally:
        for slot in slots:
            slot.close()
    assert seed.zygote.process.wait(30) is not None and Seed._current is None
    assert not _alive(zygotes[1].process.pid)


def _batch(jobs: list, monkeypatch: pytest.MonkeyPatch, switch: str) -> dict[str, dict]:
    monkeypatch.setenv("KA_SLOT_ZYGOTE", switch)
    reports: dict[str, dict] = {}
    LocalBatch(jobs, VerifyOptions(trials=2, device="cpu", target_seconds=0.05), gpus=["0"], compile_workers=1,
               cache=None, slots=1).run(lambda finished: reports.setdefault(finished.job.key, finished.report))
    return reports


# A candidate that kills the zygote it descends from (and so, with it, a parent forked from that zygote).
KILLS_ZYGOTE = HONEST.replace("return torch.relu(self.lin(x))",
                              "import os, signal\n        os.kill(os.getppid(), signal.SIGKILL)\n"
                              "        return torch.relu(self.lin(x))")


@pytest.mark.slow
def test_a_candidate_that_kills_its_zygote_gets_the_verdict_it_gets_without_forked_parents(
        monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [job("kills", kernel=KILLS_ZYGOTE), job("honest")]
    forked = _batch(jobs, monkeypatch, "1")
    monkeypatch.setenv("KA_FORK_PARENTS", "0")
    started = _batch(jobs, monkeypatch, "1")
    assert forked["kills"]["status"] == started["kills"]["status"] == "failed"
    assert ({k: v["verdict"] for k, v in forked["kills"]["checks"].items()}
            == {k: v["verdict"] for k, v in started["kills"]["checks"].items()})
    # The forked parent died with the zygote; the script ran again alone, its parent started as before.
    assert forked["kills"]["gate"]["rerun"].startswith("killed by signal 9")
    assert "parent_started" not in forked["kills"]
    assert forked["honest"]["parent_started"] == "forked from the slot's zygote"
    assert forked["honest"]["status"] == started["honest"]["status"] != "failed"


@pytest.mark.slow
def test_a_batch_slot_forks_every_scripts_children_from_one_zygote_and_keeps_every_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = job("probe", kernel=KERNEL.replace("PROBE", repr(str(tmp_path))), task=TASK)
    jobs = [job("honest"), job("mutating", kernel=MUTATING), probe]
    slot, own = _batch(jobs, monkeypatch, "1"), _batch(jobs, monkeypatch, "0")
    assert all(set(r["children"].values()) == {"forked from the slot's zygote"} for r in slot.values())
    assert all(set(r["children"].values()) == {"forked"} for r in own.values())
    # The parents too: forked from the slot's zygote, from one seed's torch import; the judge's CPU is its own work.
    assert {r["parent_started"] for r in slot.values()} == {"forked from the slot's zygote"}
    assert all("parent_started" not in r for r in own.values())
    # A forked parent's judge runs on one thread too, though its zygote's main thread had read the default.
    assert {r["judge_threads"] for r in [*slot.values(), *own.values()]} == {1}
    for key in ("honest", "mutating", "probe"):
        assert slot[key]["status"] == own[key]["status"], key
        assert ({k: v["verdict"] for k, v in slot[key]["checks"].items()}
                == {k: v["verdict"] for k, v in own[key]["checks"].items()}), key
    assert slot["mutating"]["status"] == "failed" and slot["honest"]["status"] != "failed"
    assert all(r["cpu_s"]["zygote"] is None for r in slot.values())
    # The candidate's processes hold no socket: neither the slot's control nor any script's connection.
    seen = [json.loads(p.read_text()) for p in tmp_path.glob("fds-*.json")]
    assert len(seen) >= 4, "the compile and run children of both batches imported the kernel"
    assert not [t for fds in seen for t in fds.values() if t.startswith("socket:")]


def test_a_slot_zygote_the_seed_cannot_fork_starts_on_its_own(tmp_path: Path) -> None:
    seed = Seed.__new__(Seed)
    seed.zygote = Zygote.start([sys.executable, "-c", "pass"], env={}, cwd=tmp_path)  # exits at once: no seed
    started = SlotZygote(sys.executable, with_repo(dict(os.environ)), script=host_script(tmp_path), seed=seed)
    try:
        assert not started.forked and started.process.poll() is None
        zygote = _connect(started, "kernel")
        try:
            report = _child(tmp_path / "child", zygote).wait(60)
        finally:
            zygote.close()
        assert report.returncode == 0 and report.started == "forked from the slot's zygote", report.log_tail
    finally:
        started.close()
        seed.zygote.close()
