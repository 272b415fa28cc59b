"""Cores kept free for timing: a batch's processes run on the host's other cores.

In a batch a timed series has the GPU alone (``verify.harness.gate.alone_on_gpu``), but not the host: the other
scripts' parents judge, their zygotes and compile steps start, and builds run, all beside the process that
times. A host-bound kernel's time is mostly the launching thread's, so that load moved such kernels' speedups
a median 15-41% between batches of six to twelve scripts a GPU (docs/verify-batch.md, session 19). A batch
therefore keeps a few CPUs per GPU (``TIMING_CPUS``, ``KA_TIMING_CPUS_PER_GPU``) off every process it starts,
and names them to that GPU's eval scripts (``KA_TIMING_CPUS``). A child holding the GPU alone moves its threads
onto them and back before it lets go, so exactly one process runs there at a time: the one timing.

CPUs are taken a whole physical core at a time (both hyper-threads), from the highest-numbered core down, so
no sibling of a timing core runs other work.

Example:
    >>> plan = plan_cpus(["0"], per_gpu=2, cpus=range(8), cores={c: c // 2 for c in range(8)})
    >>> sorted(plan.timing["0"]), sorted(plan.shared)
    ([6, 7], [0, 1, 2, 3, 4, 5])
    >>> plan.environment("0")
    {'KA_TIMING_CPUS': '6,7'}
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TIMING_CPUS = 2
"""CPUs kept per GPU for the process that times: the launching thread and the CUDA driver's own threads."""

MIN_SHARED_CPUS_PER_GPU = 6
"""By default CPUs are kept only where this many per GPU remain for everything else (builds, parents, the
other children): on 16 cores and one GPU, 2 kept and 14 shared; none on a 2-core CI machine."""

TIMING_CPUS_ENV = "KA_TIMING_CPUS_PER_GPU"
"""The batch's knob: CPUs kept per GPU (``0`` keeps none); unset means ``TIMING_CPUS`` where the host has room."""


@dataclass(frozen=True)
class CpuPlan:
    """Which CPUs the batch's processes share and which each GPU's timed series gets alone."""

    shared: frozenset[int]
    timing: Mapping[str, frozenset[int]] = field(default_factory=dict)

    def environment(self, gpu: str) -> dict[str, str]:
        """What one GPU's eval scripts need: ``KA_TIMING_CPUS`` naming its timing CPUs (nothing when none)."""
        cpus = self.timing.get(gpu)
        return {"KA_TIMING_CPUS": ",".join(map(str, sorted(cpus)))} if cpus else {}

    def confine(self) -> None:
        """Run the calling thread, and every process it starts from now on, on the shared CPUs only."""
        if self.timing and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, self.shared)


def physical_cores(cpus: Iterable[int]) -> dict[int, int]:
    """Each CPU's physical core (its lowest-numbered sibling), as ``/sys`` gives it; the CPU itself where it does
    not say."""
    cores: dict[int, int] = {}
    for cpu in cpus:
        siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            cores[cpu] = min(_parse_list(siblings.read_text()))
        except (OSError, ValueError):
            cores[cpu] = cpu
    return cores


def requested_per_gpu(environ: Mapping[str, str] | None = None) -> int | None:
    """``KA_TIMING_CPUS_PER_GPU`` as a number (None when unset: the host decides).

    Raises:
        ValueError: the variable is not a whole number of at least 0.
    """
    value = (os.environ if environ is None else environ).get(TIMING_CPUS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise ValueError(f"{TIMING_CPUS_ENV} must be a whole number of CPUs per GPU (0: keep none), not {value!r}")
    return int(value)


def plan_cpus(gpus: list[str], per_gpu: int | None = None, *, cpus: Iterable[int] | None = None,
              cores: Mapping[int, int] | None = None) -> CpuPlan:
    """Keep ``per_gpu`` CPUs for each GPU's timed series; the rest are shared.

    ``per_gpu`` None takes ``KA_TIMING_CPUS_PER_GPU``, else ``TIMING_CPUS`` when ``MIN_SHARED_CPUS_PER_GPU`` per
    GPU remain, else none. ``cpus`` defaults to this process's affinity, ``cores`` to the host's topology.

    Raises:
        ValueError: an explicit ``per_gpu`` would leave no CPU for the rest of the batch.
    """
    allowed = sorted(set(os.sched_getaffinity(0) if cpus is None else cpus))
    explicit = requested_per_gpu() if per_gpu is None else per_gpu
    wanted = explicit if explicit is not None else TIMING_CPUS
    if wanted <= 0 or not gpus:
        return CpuPlan(frozenset(allowed))
    if explicit is None and len(allowed) - wanted * len(gpus) < MIN_SHARED_CPUS_PER_GPU * len(gpus):
        return CpuPlan(frozenset(allowed))
    core_of = physical_cores(allowed) if cores is None else cores
    by_core: dict[int, list[int]] = {}
    for cpu in allowed:
        by_core.setdefault(core_of.get(cpu, cpu), []).append(cpu)
    free = sorted(by_core.values(), key=max, reverse=True)
    timing: dict[str, frozenset[int]] = {}
    for gpu in gpus:
        taken: list[int] = []
        while len(taken) < wanted and free:
            taken += free.pop(0)
        timing[gpu] = frozenset(taken)
    shared = frozenset(cpu for group in free for cpu in group)
    if not shared or any(len(t) < wanted for t in timing.values()):
        raise ValueError(f"keeping {wanted} CPUs for each of {len(gpus)} GPUs leaves none for the rest of the "
                         f"batch: this process may use {len(allowed)} ({TIMING_CPUS_ENV})")
    return CpuPlan(shared, timing)


def _parse_list(text: str) -> list[int]:
    """A kernel CPU list (``0-3,8``) as numbers."""
    out: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out += range(int(lo), int(hi) + 1)
        elif part:
            out.append(int(part))
    return out
