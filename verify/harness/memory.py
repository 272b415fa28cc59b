"""What a verification's evidence needs in host memory, against what the host has left.

The parent judges with every trial's references and the candidate's outputs in its memory at once: with the
default five trials (three calls on the first two) and the probes, about 140 bytes for each element of a
float32 output. CUDA-L1's level 2 task 34 (1.07 billion output elements) needs more than a 128 GiB host has,
and the out-of-memory killer ended its verification with no verdict. So once the trusted child's references
are in, the parent compares what the rest of the evidence will need with the memory the host has left, and
judges the first trials that fit (``trials_that_fit``): the other trials' references are given back before
the candidate runs, and its outputs on them are dropped as they arrive. The candidate still runs every trial,
so the checks that read its messages (aliasing, mutated inputs, threads, fake tensors) see them all. The
report names the trials left unjudged and why (``trials_reduced``). The decision depends only on the task's
output sizes and the host, never on the candidate.

Example:
    >>> sizes = [TrialSize(ref_bytes=12, out_bytes=4, calls=3)] * 2 + [TrialSize(ref_bytes=12, out_bytes=4, calls=1)] * 3
    >>> trials_that_fit(sizes, extra_bytes=16, available=100), trials_that_fit(sizes, extra_bytes=16, available=30)
    (5, 3)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MEMORY_FILL = 0.9
"""The share of the available memory the rest of the evidence may take: the judge, the children's own memory and
the rest of the host need the remainder."""

MEMORY_LIMIT_ENV = "KA_MEMORY_AVAILABLE"
"""Bytes a verification assumes the host has available, instead of reading it (a smaller host's decision, or a
share of a host that runs several verifications at once)."""


@dataclass(frozen=True)
class TrialSize:
    """One trial's evidence: its references (held already), one candidate call's outputs, the calls kept."""

    ref_bytes: int
    out_bytes: int
    calls: int


def outputs_needed(sizes: list[TrialSize], extra_bytes: int) -> int:
    """Bytes the candidate's outputs on the trials of ``sizes`` take, with ``extra_bytes``.

    Example:
        >>> outputs_needed([TrialSize(12, 4, 3), TrialSize(12, 4, 1)], extra_bytes=16)
        32
    """
    return sum(s.calls * s.out_bytes for s in sizes) + extra_bytes


def trials_that_fit(sizes: list[TrialSize], extra_bytes: int, available: int, fill: float = MEMORY_FILL) -> int:
    """How many of the first trials the parent can judge: at least one.

    With ``n`` trials kept, the candidate's outputs on them (``calls`` x ``out_bytes`` each) and ``extra_bytes``
    (the probes' outputs, one payload in transit) must fit in ``fill`` of ``available`` plus the references of the
    trials given back.

    Example:
        >>> trials_that_fit([TrialSize(10, 5, 1)] * 3, extra_bytes=0, available=9, fill=1.0)
        2
    """
    n = len(sizes)
    while n > 1:
        freed = sum(s.ref_bytes for s in sizes[n:])
        if outputs_needed(sizes[:n], extra_bytes) <= fill * (available + freed):
            break
        n -= 1
    return n


def _meminfo_available(path: Path) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_available(folder: Path) -> int | None:
    """What this process's cgroup (v2) may still take: its limit less its usage, plus its reclaimable file cache."""
    try:
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines())
        return int(limit) - int((folder / "memory.current").read_text()) + int(stat.get("inactive_file", 0))
    except (OSError, ValueError):
        return None


def available_bytes(meminfo: str | os.PathLike[str] = "/proc/meminfo",
                    cgroup: str | os.PathLike[str] | None = None) -> int | None:
    """Bytes this process could still allocate: ``KA_MEMORY_AVAILABLE`` if set, else the least of the host's
    ``MemAvailable`` and its cgroup's room; None when neither can be read.

    Example:
        >>> import tempfile
        >>> info = Path(tempfile.mkdtemp()) / "meminfo"
        >>> _ = info.write_text("MemTotal: 100 kB\\nMemAvailable: 64 kB\\n")
        >>> available_bytes(info, cgroup=info.parent)
        65536
    """
    if os.environ.get(MEMORY_LIMIT_ENV):
        return int(os.environ[MEMORY_LIMIT_ENV])
    if cgroup is None:
        try:
            own = Path("/proc/self/cgroup").read_text().strip().split("::", 1)[1]
            cgroup = Path("/sys/fs/cgroup") / own.lstrip("/")
        except (OSError, IndexError):
            cgroup = Path("/sys/fs/cgroup")
    found = [v for v in (_meminfo_available(Path(meminfo)), _cgroup_available(Path(cgroup))) if v is not None]
    return min(found) if found else None
