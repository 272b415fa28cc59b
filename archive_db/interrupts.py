"""Ctrl+C that a database call swallowed: remembered, and raised again where stopping is safe.

DuckDB checks for signals while a query runs. A SIGINT that lands then ends as
``RuntimeError('Query interrupted')`` or, when the query finishes anyway, not at all: the KeyboardInterrupt
is consumed inside the call and the ingest would go on to commit. :func:`catching` installs a SIGINT handler
that records the request before raising as Python's own does; :func:`check` raises KeyboardInterrupt when
one was recorded. The writer checks before it commits, so an interrupted write never commits.

Example:
    >>> with catching():
    ...     requested()
    False
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_requested = threading.Event()


def requested() -> bool:
    """Whether Ctrl+C came since :func:`catching` started."""
    return _requested.is_set()


def check() -> None:
    """Raise KeyboardInterrupt if Ctrl+C came, even if the call it interrupted swallowed it.

    Example:
        >>> check()
    """
    if _requested.is_set():
        raise KeyboardInterrupt


def _handler(signum: int, frame: FrameType | None) -> None:
    _requested.set()
    raise KeyboardInterrupt


@contextmanager
def catching() -> Iterator[None]:
    """Record Ctrl+C while the block runs (only the main thread may install signal handlers; a process started
    with SIGINT ignored, as by ``nohup``, keeps ignoring it)."""
    previous = signal.getsignal(signal.SIGINT)
    install = threading.current_thread() is threading.main_thread() and previous is not signal.SIG_IGN
    _requested.clear()
    if install:
        signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGINT, previous)
        _requested.clear()
