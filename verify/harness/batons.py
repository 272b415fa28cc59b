"""torch's build batons that no process holds any more are taken over, not waited on until the compile timeout.

torch's JIT builder (``load``, ``load_inline``) guards a build folder with a ``FileBaton``: a ``lock`` file made with
``O_EXCL``, removed when the build ends, and polled by every other process until then. A process killed while it
holds one (a batch stopped at its time limit, a prebuild the batch stopped, the out-of-memory killer) leaves the file
behind, and every later process that loads that kernel from its build-cache entry waits for it, until its compile
timeout fails an honest kernel. In session 31, two CUDA-L1 kernels (level 3 tasks 43 and 50) sat in their compile
steps for 265 s and more, with no compiler running, after an earlier pass had stopped their prebuilds.

The guard's batons hold an ``flock`` on their file from creation until after it is removed. A baton counts as stale when
no process holds that lock, no process this one can inspect has the file open (a baton of plain torch keeps it open),
and it is older than ``BATON_STALE_AFTER_S`` (a live holder locks it within microseconds of making it). A stale baton
is removed, after checking under the lock that the path still names the same file, and the build resumes (ninja
rebuilds only what is missing).

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> remove_stale_baton(folder / "lock")  # no baton: nothing to remove
    False
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Any

from verify.harness.common import torch_cpp_extension

BATON_STALE_AFTER_S = 2.0
"""How old an unheld baton must be to count as stale."""


def baton_open_elsewhere(path: str | os.PathLike[str], ignore_pid: int | None = None) -> bool:
    """Whether a process other than ``ignore_pid`` that this one can inspect (``/proc/PID/fd``) has ``path`` open.

    Example:
        >>> baton_open_elsewhere("/nonexistent-ka-baton")
        False
    """
    try:
        found = os.stat(path)
    except OSError:
        return False
    target = (found.st_dev, found.st_ino)
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != ignore_pid]
    except OSError:
        return False
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(folder)
        except OSError:
            continue
        for fd in fds:
            try:
                held = os.stat(f"{folder}/{fd}")
            except OSError:
                continue
            if (held.st_dev, held.st_ino) == target:
                return True
    return False


def remove_stale_baton(path: str | os.PathLike[str], stale_after_s: float = BATON_STALE_AFTER_S) -> bool:
    """Remove the baton at ``path`` if no process holds it; whether it was removed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        found = os.fstat(fd)
        if time.time() - found.st_mtime < stale_after_s:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        if baton_open_elsewhere(path, ignore_pid=os.getpid()):
            return False
        try:
            now = os.stat(path)
        except OSError:
            return False
        if (now.st_dev, now.st_ino) != (found.st_dev, found.st_ino):
            return False
        os.remove(path)
        return True
    finally:
        os.close(fd)


def guarded_baton(base: type) -> type:
    """A subclass of torch's ``FileBaton`` class ``base`` that locks its file and takes over stale batons."""

    class GuardedBaton(base):  # type: ignore[misc, valid-type]
        ka_guard = True

        def _create(self) -> bool:
            if not base.try_acquire(self):
                return False
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            return True

        def try_acquire(self) -> bool:
            if self._create():
                return True
            return remove_stale_baton(self.lock_file_path) and self._create()

        def wait(self) -> None:
            checked = time.monotonic()
            while os.path.exists(self.lock_file_path):
                time.sleep(self.wait_seconds)
                if time.monotonic() - checked < 1.0:
                    continue
                checked = time.monotonic()
                if remove_stale_baton(self.lock_file_path) and self._create():
                    # Its holder died mid-build: finish what it started, as torch would have had it lived.
                    try:
                        _resume_build(Path(self.lock_file_path).parent)
                    finally:
                        self.release()
                    return

        def release(self) -> None:
            # Removed while still locked, so no checker finds it unlocked between the two steps.
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.lock_file_path)
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None

    return GuardedBaton


def _resume_build(folder: Path) -> None:
    if not (folder / "build.ninja").is_file():
        return
    from torch.utils import cpp_extension

    cpp_extension._run_ninja_build(str(folder), False, f"Error building extension in {folder}")


def install_baton_guard() -> bool:
    """Make torch's JIT builder use guarded batons in this process; whether the guard is in place."""
    cpp_extension = torch_cpp_extension()
    base: Any = getattr(cpp_extension, "FileBaton", None)
    if base is None:
        return False
    if not getattr(base, "ka_guard", False):
        cpp_extension.FileBaton = guarded_baton(base)
    return True
