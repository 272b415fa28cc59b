"""Worker processes that never outlive the ingest that started them.

A parser pool's workers hold a copy of the parent's memory (and its open archive file); if the parent
is killed (``kill -9``, SIGTERM, an OOM kill) they must not linger. On Linux each worker asks the
kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere, workers ignore
Ctrl+C, which the parent handles once for the whole ingest.

Example:
    >>> from concurrent.futures import ProcessPoolExecutor
    >>> with ProcessPoolExecutor(1, initializer=init_worker, initargs=(os.getpid(),)) as pool:
    ...     pool.submit(abs, -3).result()
    3
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal this process gets when the thread that created it dies (linux/prctl.h)."""


def die_with_parent(parent_pid: int) -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies; returns whether that is in force.

    If the parent already died before the request (the process was re-parented), exits at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:
        os._exit(1)
    return True


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""``mallopt`` parameters (glibc malloc.h)."""
WORKER_MALLOC: dict[int, int] = {M_MMAP_THRESHOLD: 64 << 20, M_TRIM_THRESHOLD: 256 << 20}
"""A worker's malloc keeps the memory it frees for the next batch: by default each batch's strings and
buffers (tens of MB, some large enough to be mapped on their own) go back to the kernel and fault in again,
about 500,000 page faults and 0.7 s of system CPU over the 30,615-row benchmark ingest (90,000 with these)."""


def keep_freed_memory() -> bool:
    """Apply ``WORKER_MALLOC`` to this process (glibc only); returns whether it was applied."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    mallopt = getattr(libc, "mallopt", None)
    return mallopt is not None and all(mallopt(option, value) == 1 for option, value in WORKER_MALLOC.items())


def init_worker(parent_pid: int) -> None:
    """Pool initializer: die with ``parent_pid``, leave Ctrl+C to the parent, and keep freed memory for reuse.

    The cyclic garbage collector stays off (``ingest.gc_pause``): a worker lives for one ingest and parses
    strings into tuples and Arrow tables, which reference counting frees; walking what it inherited from the
    parent would also copy those pages into the worker.
    """
    gc.disable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    die_with_parent(parent_pid)
    keep_freed_memory()


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Hold Ctrl+C (SIGINT) back while workers are forked: a worker then starts with it blocked until its
    initializer ignores it, and the parent gets it, once, when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
