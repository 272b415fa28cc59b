"""Python's cyclic garbage collector paused around bulk work that makes no reference cycles.

An ingest allocates millions of small containers (row dicts, tuples of parsed profile rows) that live until
their batch is written. Every 700 new containers the collector walks the young ones, and every few of those
walks the older generations too, over objects that reference counting frees anyway: about a tenth of the
profile parsers' CPU with many objects alive, about 4% of the 30,615-row benchmark ingest's
(``docs/bench-ingest.md``, fifth pass). Anything cyclic made meanwhile is collected once the collector runs
again.

Example:
    >>> import gc
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; afterwards it is as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
