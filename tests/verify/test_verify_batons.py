"""Stale torch build batons are taken over, live ones are waited for (``verify/harness/batons.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from verify.harness import batons as batons_module
from verify.harness.batons import baton_open_elsewhere, guarded_baton, install_baton_guard, remove_stale_baton

FINE = "torch::Tensor f(torch::Tensor x) { return x + 1; }"


def _old(path: Path, seconds: float = 60.0) -> Path:
    path.touch()
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def _holder(code: str, path: Path) -> subprocess.Popen[str]:
    """A process that runs ``code`` (``path`` is bound) and prints ``ready`` once it holds the baton."""
    process = subprocess.Popen([sys.executable, "-c", f"import fcntl, os, sys, time\npath = {str(path)!r}\n{code}\n"
                                "print('ready', flush=True)\ntime.sleep(60)"],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def test_a_baton_left_by_a_dead_process_is_removed(tmp_path: Path) -> None:
    lock = _old(tmp_path / "lock")
    assert remove_stale_baton(lock) and not lock.exists()
    assert not remove_stale_baton(lock)


def test_a_fresh_baton_is_left_alone_even_unheld(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    lock.touch()
    assert not remove_stale_baton(lock) and lock.exists()


def test_a_plain_torch_baton_kept_open_by_a_live_process_is_left_alone(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    holder = _holder("fd = os.open(path, os.O_CREAT | os.O_EXCL)", lock)  # as torch's FileBaton holds it
    try:
        _old(lock)
        assert baton_open_elsewhere(lock)
        assert not remove_stale_baton(lock) and lock.exists()
    finally:
        holder.kill()
        holder.wait()
    assert not baton_open_elsewhere(lock)
    assert remove_stale_baton(lock) and not lock.exists()


def test_a_locked_baton_is_left_alone_where_its_holder_cannot_be_inspected(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "lock"
    holder = _holder("fd = os.open(path, os.O_CREAT | os.O_EXCL)\nfcntl.flock(fd, fcntl.LOCK_EX)", lock)
    try:
        _old(lock)
        # A holder whose /proc/PID/fd this process may not read (another user, not dumpable) is still seen by its lock.
        monkeypatch.setattr(batons_module, "baton_open_elsewhere", lambda *_a, **_k: False)
        assert not remove_stale_baton(lock) and lock.exists()
    finally:
        holder.kill()
        holder.wait()
    assert remove_stale_baton(lock)


class FakeBaton:
    """torch's ``FileBaton`` as torch 2.x writes it (the part the guard relies on)."""

    def __init__(self, lock_file_path: str, wait_seconds: float = 0.01) -> None:
        self.lock_file_path = lock_file_path
        self.wait_seconds = wait_seconds
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        try:
            self.fd = os.open(self.lock_file_path, os.O_CREAT | os.O_EXCL)
            return True
        except FileExistsError:
            return False

    def wait(self) -> None:
        while os.path.exists(self.lock_file_path):
            time.sleep(self.wait_seconds)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        os.remove(self.lock_file_path)


def test_the_guarded_baton_takes_over_a_stale_one_and_holds_its_own_against_others(tmp_path: Path) -> None:
    baton_class = guarded_baton(FakeBaton)
    lock = _old(tmp_path / "lock")
    first = baton_class(str(lock))
    assert first.try_acquire() and lock.exists()
    _old(lock)
    second = baton_class(str(lock))
    assert not second.try_acquire(), "a live guarded baton, however old, is not stale"
    first.release()
    assert not lock.exists() and first.fd is None
    assert second.try_acquire()
    second.release()


def test_a_waiter_whose_holder_dies_finishes_instead_of_waiting_forever(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    holder = _holder("fd = os.open(path, os.O_CREAT | os.O_EXCL)\nfcntl.flock(fd, fcntl.LOCK_EX)", lock)
    waiter = guarded_baton(FakeBaton)(str(lock))
    assert not waiter.try_acquire()
    done = threading.Event()
    thread = threading.Thread(target=lambda: (waiter.wait(), done.set()), daemon=True)
    thread.start()
    time.sleep(1.5)
    assert not done.is_set(), "the holder lives: the waiter waits"
    holder.kill()
    holder.wait()
    assert done.wait(batons_module.BATON_STALE_AFTER_S + 10), "the holder died: the waiter must not wait forever"
    assert not lock.exists()


def test_the_guard_replaces_torchs_baton_once() -> None:
    from torch.utils import cpp_extension

    original = cpp_extension.FileBaton
    try:
        assert install_baton_guard() and cpp_extension.FileBaton.ka_guard
        guarded = cpp_extension.FileBaton
        assert install_baton_guard() and cpp_extension.FileBaton is guarded
        assert issubclass(guarded, original)
    finally:
        cpp_extension.FileBaton = original


LOAD = """
import sys, time
from torch.utils.cpp_extension import load_inline
from verify.harness.batons import install_baton_guard
if sys.argv[2] == "guard":
    install_baton_guard()
t0 = time.monotonic()
module = load_inline(name="ka_baton_fine", cpp_sources=[{source!r}], functions=["f"], build_directory=sys.argv[1])
print("built", round(time.monotonic() - t0, 1), flush=True)
"""


@pytest.mark.slow
def test_a_build_whose_earlier_builder_was_killed_resumes_instead_of_hanging(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    script = tmp_path / "load.py"
    script.write_text(LOAD.format(source=FINE))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    _old(build / "lock")  # what a builder killed mid-build (SIGKILL) leaves behind
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, str(script), str(build), "plain"], env=env, timeout=15, capture_output=True)
    done = subprocess.run([sys.executable, str(script), str(build), "guard"], env=env, timeout=600,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "built" in done.stdout, done.stderr[-2000:]
    assert not (build / "lock").exists()
