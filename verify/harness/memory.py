"""What a verification's evidence needs in host memory, against what the host has left.

The parent judges with every trial's references and the candidate's outputs in its memory at once: with the
default five trials (three calls on the first two) and the probes, about 140 bytes for each element of a
float32 output. CUDA-L1's level 2 task 34 (1.07 billion output elements) needs more than a 128 GiB host has,
and the out-of-memory killer ended its verification with no verdict. So once the trusted child has computed the
first trial's references and the shape and init probes', it says how large they and the outputs are (``sized``)
and waits; the parent compares what the whole evidence will need with the memory the host has left and answers
with the first trials that fit (``trials_within``). The trusted child computes references for those only, the
candidate's outputs on the others are neither sent nor kept, and the candidate still runs every trial, so the
checks that read its messages (aliasing, mutated inputs, threads, fake tensors) see them all. The report names the
trials left unjudged and why (``trials_reduced``). The decision depends on the task's output sizes, the host and
the batch's other reservations, never on the candidate.

In a batch several verifications share the host, and each sees only the memory free at one moment: two of
CUDA-L1's largest tasks at once overcommitted it, and the out-of-memory killer ended one (sessions 32, 38, 44).
So a verification whose evidence reaches ``LEDGER_FROM`` reserves it in the batch's ledger (``MemoryLedger``, a
folder that ``KA_MEMORY_LEDGER`` names), counts the other reservations as taken, and waits for room while not
even its first trial fits beside them. Its parent settles the reservation as each reference and output arrives
(``verify.harness.parent.TrialPlanner.arrived``), since from then on the host's free memory counts those bytes.

Example:
    >>> sizes = [TrialSize(ref_bytes=12, out_bytes=4, calls=3)] * 2 + [TrialSize(ref_bytes=12, out_bytes=4, calls=1)] * 3
    >>> trials_within(sizes, extra_bytes=16, room=200), trials_within(sizes, extra_bytes=16, room=80)
    (5, 2)
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MEMORY_FILL = 0.9
"""The share of the available memory the rest of the evidence may take: the judge, the children's own memory and
the rest of the host need the remainder."""

MEMORY_LIMIT_ENV = "KA_MEMORY_AVAILABLE"
"""Bytes a verification assumes the host has available, instead of reading it (a smaller host's decision, or a
share of a host that runs several verifications at once)."""

LEDGER_ENV = "KA_MEMORY_LEDGER"
"""The batch's ledger folder (``verify.batch.workers.gate_environment``); unset, a verification reserves nothing."""

LEDGER_FROM = 4 * 2**30
"""Evidence (bytes, every trial's) from which a verification reserves its memory in the ledger and may wait for
room. Below it a verification judges every trial that fits in what the host has free, as alone: 4 GiB is the
evidence of an output of about 30 million float32 elements, and a batch's nine such at once fit on any GPU host.
Of the CUDA-L1 H100 file's 210 kernels, 27-31 reach it (their outputs sized on the meta device, at 124-140 bytes
of evidence an output element)."""

LEDGER_FROM_ENV = "KA_MEMORY_LEDGER_FROM"
"""Bytes instead of ``LEDGER_FROM`` (a small host, or a test)."""

LEDGER_POLL_S = 0.25
"""How often a verification waiting for room in the ledger looks again."""


@dataclass(frozen=True)
class TrialSize:
    """One trial's evidence: its references (held already), one candidate call's outputs, the calls kept."""

    ref_bytes: int
    out_bytes: int
    calls: int


def evidence_needed(sizes: list[TrialSize], extra_bytes: int, held_bytes: int = 0) -> int:
    """Bytes the evidence of the trials of ``sizes`` takes beyond ``held_bytes`` (what is in memory already): each
    trial's references and its ``calls`` x ``out_bytes`` of the candidate's outputs, with ``extra_bytes``.

    Example:
        >>> evidence_needed([TrialSize(12, 4, 3), TrialSize(12, 4, 1)], extra_bytes=16, held_bytes=12)
        44
    """
    return sum(s.ref_bytes + s.calls * s.out_bytes for s in sizes) + extra_bytes - held_bytes


def trials_within(sizes: list[TrialSize], extra_bytes: int, room: int, *, held_bytes: int = 0,
                  fill: float = MEMORY_FILL) -> int:
    """How many of the first trials the parent can judge when ``room`` bytes are free: at least one.

    With ``n`` trials kept, their evidence (``evidence_needed``) beyond ``held_bytes`` must fit in ``fill`` of
    ``room``.

    Example:
        >>> trials_within([TrialSize(10, 5, 1)] * 3, extra_bytes=0, room=30, held_bytes=10, fill=1.0)
        2
    """
    n = len(sizes)
    while n > 1 and evidence_needed(sizes[:n], extra_bytes, held_bytes) > fill * room:
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


@dataclass(frozen=True)
class MemoryPlan:
    """What ``MemoryLedger.plan`` decided: the first ``judged`` of ``planned`` trials, and what it saw."""

    planned: int
    judged: int
    needed_bytes: int
    """Every trial's evidence beyond what was held when it planned."""
    available_bytes: int | None
    reserved_by_others: int = 0
    """The other verifications' reservations it counted as taken."""
    reserved_bytes: int = 0
    """What it reserved (0 below the ledger's threshold, ``LEDGER_FROM``)."""
    waited_s: float = 0.0

    def reduced(self, indices: list[int]) -> dict[str, Any] | None:
        """The report's ``trials_reduced`` for trials ``indices`` (in order), or None when every trial is judged.

        Example:
            >>> MemoryPlan(planned=3, judged=1, needed_bytes=3 * 2**30, available_bytes=2**30).reduced([0, 1, 2])["why"]
            'judged on 1 of 3 trials: all of them would need 3.0 GiB more host memory, and 1.0 GiB was free \
(verify.harness.memory); the candidate still ran every trial, whose other checks see them'
        """
        if self.judged >= self.planned:
            return None
        gib = 2.0 ** 30
        free = self.available_bytes or 0
        others = (f", {self.reserved_by_others / gib:.1f} GiB of it reserved by other verifications of the batch"
                  if self.reserved_by_others else "")
        return {"planned": self.planned, "judged": self.judged, "unjudged": indices[self.judged:],
                "needed_bytes": self.needed_bytes, "available_bytes": self.available_bytes,
                "reserved_by_others": self.reserved_by_others, "waited_s": round(self.waited_s, 3),
                "why": f"judged on {self.judged} of {self.planned} trials: all of them would need "
                       f"{self.needed_bytes / gib:.1f} GiB more host memory, and {free / gib:.1f} GiB was free{others} "
                       "(verify.harness.memory); the candidate still ran every trial, whose other checks see them"}


_ENTRIES = itertools.count(1)


class MemoryLedger:
    """The host memory a batch's verifications have reserved: one file each in a shared folder, locked while it lives.

    ``plan`` decides how many trials a verification judges and, for evidence of ``LEDGER_FROM`` or more, reserves it;
    ``settle`` says how much of the reservation is still to come (what is in memory already shows in the host's own
    figure; the parent settles after each payload that arrives); ``release`` ends it. A reservation whose holder
    died (its lock is free) is removed by the next reader, so a killed verification holds nothing. Decisions are
    made under the folder's lock, one at a time. Without a folder no file is written, and a plan counts the host's
    free memory alone.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> big = [TrialSize(ref_bytes=3 * 2**30, out_bytes=2**30, calls=1)] * 3
        >>> a = MemoryLedger(folder, available=lambda: 12 * 2**30)
        >>> b = MemoryLedger(folder, available=lambda: 12 * 2**30)
        >>> a.plan(big, 0, held_bytes=3 * 2**30, timeout_s=1).judged, a.reserved
        (3, 9663676416)
        >>> b.plan(big, 0, held_bytes=3 * 2**30, timeout_s=0).judged
        1
        >>> a.release(); b.release(); b.plan(big, 0, held_bytes=3 * 2**30, timeout_s=0).judged
        3
    """

    def __init__(self, folder: str | os.PathLike[str] | None, *,
                 available: Callable[[], int | None] = available_bytes, fill: float = MEMORY_FILL,
                 poll_s: float = LEDGER_POLL_S, large_from: int = LEDGER_FROM) -> None:
        self.folder = Path(folder) if folder else None
        self.available = available
        self.large_from = large_from
        self.fill = fill
        self.poll_s = poll_s
        self.reserved = 0
        self._entry: Path | None = None
        self._fd: int | None = None

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> MemoryLedger:
        """The ledger ``KA_MEMORY_LEDGER`` names (none when it is unset), from ``KA_MEMORY_LEDGER_FROM`` bytes if set."""
        environ = dict(os.environ) if environ is None else environ
        return cls(environ.get(LEDGER_ENV) or None, large_from=int(environ.get(LEDGER_FROM_ENV) or LEDGER_FROM))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self.folder is None:
            yield
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def others(self) -> list[int]:
        """The bytes still to come of every other live reservation; a dead holder's file is removed. Call it under
        the folder's lock (``plan`` does)."""
        if self.folder is None or not self.folder.is_dir():
            return []
        found = []
        for path in sorted(self.folder.glob("*.reserved")):
            if path == self._entry:
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    text = os.pread(fd, 64, 0).decode(errors="replace").split()
                    found.append(int(text[1]) if len(text) == 2 and text[1].isdigit() else 0)
                else:
                    path.unlink(missing_ok=True)
            finally:
                os.close(fd)
        return found

    def plan(self, sizes: list[TrialSize], extra_bytes: int, *, held_bytes: int = 0, timeout_s: float,
             on_wait: Callable[[bool], None] | None = None) -> MemoryPlan:
        """How many of the first trials of ``sizes`` to judge, reserving their evidence when it is large.

        Evidence below ``large_from`` (``LEDGER_FROM``) judges every trial that fits in the host's free memory. Larger evidence
        counts the other reservations as taken, and while not even its first trial fits beside them it waits for
        them to end (``on_wait(True)`` when it starts waiting, ``on_wait(False)`` when it stops), at most
        ``timeout_s``; then it reserves what the trials it keeps need.
        """
        total = evidence_needed(sizes, extra_bytes, held_bytes)
        large = total >= self.large_from
        first = evidence_needed(sizes[:1], extra_bytes, held_bytes)
        started, waiting = time.monotonic(), False
        try:
            while True:
                # Small evidence neither reads nor writes the ledger: only a large plan takes its lock.
                with self._locked() if large else contextlib.nullcontext():
                    if large:
                        self._sweep_claims()
                    others = self.others() if large else []
                    available = self.available()
                    if available is None:
                        return MemoryPlan(len(sizes), len(sizes), total, None)
                    room = available - sum(others)
                    if (not large or not others or first <= self.fill * room
                            or time.monotonic() - started >= timeout_s):
                        judged = trials_within(sizes, extra_bytes, room, held_bytes=held_bytes, fill=self.fill)
                        if large:
                            self._reserve(evidence_needed(sizes[:judged], extra_bytes, held_bytes))
                        return MemoryPlan(len(sizes), judged, total, available, sum(others), self.reserved,
                                          time.monotonic() - started if waiting else 0.0)
                if not waiting and on_wait is not None:
                    on_wait(True)
                waiting = True
                time.sleep(self.poll_s)
        finally:
            if waiting and on_wait is not None:
                on_wait(False)

    def _sweep_claims(self) -> None:
        # Only under the folder's lock: a claim lives from its creation to its rename inside one holder's lock, so
        # any claim found there was left by a process that died in between.
        if self.folder is not None and self.folder.is_dir():
            for path in self.folder.glob("*.claim"):
                path.unlink(missing_ok=True)

    def _reserve(self, nbytes: int) -> None:
        self.reserved = nbytes
        if self.folder is None:
            return
        # Locked and written under a name no reader lists, then renamed: a reader that does not hold the folder's
        # lock would otherwise take an entry not yet locked for a dead holder's and remove it.
        name = f"{os.getpid()}-{next(_ENTRIES)}"
        claim = self.folder / f"{name}.claim"
        self._fd = os.open(claim, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._write(nbytes)
        self._entry = claim.rename(self.folder / f"{name}.reserved")

    def _write(self, remaining: int) -> None:
        assert self._fd is not None
        text = f"{self.reserved} {max(0, remaining)}".encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text, 0)

    def settle(self, remaining: int) -> None:
        """Say that ``remaining`` bytes of the reservation are still to come (the rest is in memory already)."""
        if self._fd is None:
            return
        with self._locked():
            self._write(min(remaining, self.reserved))

    def release(self) -> None:
        """End the reservation (later calls do nothing)."""
        if self._fd is None:
            return
        with self._locked():
            if self._entry is not None:
                self._entry.unlink(missing_ok=True)
            os.close(self._fd)
        self._fd, self._entry, self.reserved = None, None, 0
