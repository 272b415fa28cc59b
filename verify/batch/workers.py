"""The local batch: builds on every CPU core, several eval scripts per GPU behind its gate, reports streamed back.

Builds run in a thread pool (each build is its own process group, ``build_cache.prebuild``). Each GPU has
``slots`` threads (default: the host's ``batch_shape``); each takes, in plan order, the first job whose build has
finished (tried: a failed prebuild still goes to the GPU, whose own compile step then decides) and runs the
eval script with ``CUDA_VISIBLE_DEVICES`` set to that GPU and ``KA_GPU_GATE`` naming the GPU's lock file.
The script holds that lock (``verify.harness.gate.GpuGate``) from its first GPU work to its last, and one of
the GPU's seats with it; in the ``shared`` mode (``BATCH_GATE_MODE``) untimed GPU work of the
seated verifications overlaps and each timed series has the GPU alone, in the ``exclusive`` mode one GPU never
runs two verifications' GPU work at once. Either way the scripts without a seat start their processes, import
torch or judge meanwhile. ``KA_BASELINE_CACHE`` names the GPU's
baseline folder, so a task's baselines are measured once per GPU (``verify.harness.parent.BaselineCache``);
the script's isolation (trusted child, candidate children, parent judging) is exactly the single kernel's.
The jobs named ``exclusive`` (kernels an earlier batch stopped at its hard limit) go first and hold their GPU
alone throughout, whatever the batch's mode: heavy verifications sharing one GPU can all finish late, and under a
hard limit none might ever finish (``Stopped``). The jobs named ``heavy`` (``verify.batch.weight``) go first or last
(``heavy_where``), and a slot takes one only while fewer than ``HEAVY_SEATS`` of them run on its GPU. A script
killed by a signal while sharing its GPU is run once more, alone (``verify_one``).
Reports come back to the calling thread, which hands each to ``on_result`` as it arrives (the archive write
happens there, one at a time).

Example:
    >>> parse_gpus("0,2"), parse_gpus("3")
    (['0', '2'], ['0', '1', '2'])
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from verify.batch.build_cache import BuildCache, BuildResult, build_niceness, stop_prebuilds
from verify.batch.weight import HEAVY_SEATS, heavy_order
from verify.batch.zygotes import SlotZygotes
from verify.harness.gate import parse_fill, parse_seats
from verify.runner import BatchStopped, ScriptKilled, VerifyError, VerifyOptions, verify_code

if TYPE_CHECKING:
    from verify.jobs import VerifyJob


@dataclass(frozen=True)
class BatchShape:
    """How many eval scripts a batch runs per GPU (``slots``), and how many of them hold its gate at once
    (``seats``), on a host with at least ``cores_per_gpu`` CPU cores a GPU; ``measured`` says where it comes from."""

    cores_per_gpu: int
    slots: int
    seats: int
    measured: str


BATCH_SHAPES: tuple[BatchShape, ...] = (
    BatchShape(16, 9, 6, "one H200 with 16 cores (sessions 19-22, docs/verify-batch.md): 17.6 kernels a minute with "
                         "the builds cached, against 4.2 one at a time (7.1 with three and three, session 20); every status the "
                         "same as one at a time, and timings as far apart as two runs one at a time are"),
    BatchShape(0, 3, 3, "an H100 with 16 cores before the zygotes (session 12): three slots kept the gate held 89% "
                        "of the time; the shape for hosts with fewer cores a GPU, and under Ray"),
)
"""The batch's default shape by host, first match wins. Only a slot's first kernel imports torch (its zygote,
``verify.batch.zygotes``), but each script's parent and children still take about 27 CPU-seconds a kernel, so
a host with fewer cores a GPU gets fewer scripts. ``--slots-per-gpu`` and ``KA_GPU_SEATS`` override it."""

SLOTS_PER_GPU = BATCH_SHAPES[-1].slots
"""Eval scripts per GPU where the host's cores are not known to be enough for more (and under Ray, whose GPU
nodes the driver does not see): each holds the GPU's gate only for its GPU work, the others start their
processes or judge meanwhile."""

GPU_SEATS = BATCH_SHAPES[-1].seats
"""Verifications holding one GPU's gate at once (``verify.harness.gate.GpuGate`` seats) on such a host. With more
scripts than seats the others start their processes or judge while the seated ones use the GPU."""


def batch_shape(gpus: int = 1, cores: int | None = None) -> BatchShape:
    """The default shape for ``gpus`` GPUs on a host with ``cores`` CPU cores (default: those this process may use).

    Example:
        >>> batch_shape(1, cores=16).slots, batch_shape(2, cores=16).slots, batch_shape(1, cores=2).seats
        (9, 3, 3)
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    per_gpu = cores // max(1, gpus)
    return next(shape for shape in BATCH_SHAPES if per_gpu >= shape.cores_per_gpu)


def default_slots(gpus: int = 1, ray: bool = False) -> int:
    """Eval scripts per GPU when ``--slots-per-gpu`` does not say: the host's ``batch_shape`` for ``gpus`` GPUs,
    ``SLOTS_PER_GPU`` under Ray (the driver does not see its GPU nodes).

    Example:
        >>> default_slots(ray=True)
        3
    """
    return SLOTS_PER_GPU if ray else batch_shape(gpus).slots


def parse_gpus(spec: str | int | None) -> list[str]:
    """GPU ids from ``--gpus``: a count (``2`` = 0 and 1) or a comma list of ids; None = every visible GPU."""
    if spec is None:
        return visible_gpus() or ["0"]
    text = str(spec).strip()
    if "," in text or not text.isdigit():
        return [g.strip() for g in text.split(",") if g.strip()]
    return [str(i) for i in range(max(1, int(text)))]


def visible_gpus() -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` if set, else those nvidia-smi lists."""
    import subprocess

    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        return [g.strip() for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def default_compile_workers(gpus: int = 1, seats: int = GPU_SEATS) -> int:
    """Builds at once: one per core left after the GPU seats' own processes.

    Most kernels are one translation unit (a ``.cu``), so a build mostly keeps one core busy; the builds run
    at a lower priority (``build_cache.BUILD_NICE``), so a verification's processes get the cores they need
    first. On the H100 machine (16 cores) two builds per core-pair left 9 of 16 cores idle while every kernel
    of the showcase waited 80-100 s for its build.

    Example:
        >>> default_compile_workers(0) >= 1
        True
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    return max(1, cores - seats * gpus)


BATCH_GATE_MODE = "shared"
"""How a batch's verifications share a GPU (``verify.harness.gate``): ``shared`` lets their untimed work overlap
and gives every timed series the GPU alone; ``exclusive`` gives each verification the GPU alone throughout.
``KA_GPU_GATE_MODE`` in the batch's environment overrides it."""


def gpu_seats(gpus: int = 1) -> int:
    """Seats per GPU: ``KA_GPU_SEATS`` if set, else the host's ``batch_shape`` for ``gpus`` GPUs.

    Example:
        >>> gpu_seats() >= 1
        True
    """
    seats = parse_seats(os.environ.get("KA_GPU_SEATS") or str(batch_shape(gpus).seats))
    if seats < 1:
        raise ValueError("KA_GPU_SEATS must be at least 1 in a batch, not 0")
    return seats


def gate_environment(folder: str, key: str, gpu: str, mode: str | None = None,
                     seats: int | None = None) -> dict[str, str]:
    """What the eval script needs to share one GPU of a batch: its gate, the gate's mode, seats and fill
    (``KA_GPU_FILL``, else ``GATE_FILL_FACTOR``), the host's gate
    and memory ledger (``verify.harness.memory.MemoryLedger``), and the baseline folder.

    ``key`` signs the shared baselines; it reaches the script's parent only, never a child. ``mode`` defaults
    to ``KA_GPU_GATE_MODE``, else ``BATCH_GATE_MODE``; the seats to ``KA_GPU_SEATS``, else the host's shape.

    Example:
        >>> sorted(gate_environment("batch", "secret", "0").items())[:2]
        [('KA_BASELINE_CACHE', 'batch/baselines-gpu-0'), ('KA_BASELINE_KEY', 'secret')]
    """
    return {"KA_GPU_GATE": os.path.join(folder, f"gpu-{gpu}.lock"), "KA_HOST_GATE": os.path.join(folder, "host.lock"),
            "KA_GPU_GATE_MODE": mode or os.environ.get("KA_GPU_GATE_MODE") or BATCH_GATE_MODE,
            "KA_GPU_SEATS": str(seats or gpu_seats()), "KA_GPU_FILL": str(parse_fill(os.environ.get("KA_GPU_FILL"))),
            "KA_MEMORY_LEDGER": os.path.join(folder, "host-memory"),
            "KA_BASELINE_CACHE": os.path.join(folder, f"baselines-gpu-{gpu}"), "KA_BASELINE_KEY": key}


@dataclass
class Finished:
    """One job's outcome as the workers hand it back."""

    job: VerifyJob
    report: dict[str, Any]
    build: BuildResult | None
    gpu: str
    seconds: float


@dataclass(frozen=True)
class Stopped:
    """A job the batch's hard limit stopped (unreported): where it ran, for how long, whether alone, how far it got.

    A resumed batch passes such keys back as ``exclusive``. Heavy verifications sharing one GPU can all finish late:
    in session 30 a pass of 39 level 3 kernels on one H200 (nine scripts, six seats) finished none in 457 s, so a
    resume that shared the GPU the same way could stop the same kernels call after call.
    """

    job: VerifyJob
    gpu: str
    seconds: float
    exclusive: bool = False
    marks: tuple[tuple[float, str], ...] = ()
    """The script's parent's timeline marks up to the stop (``verify.runner.BatchStopped.marks``)."""
    origin: float | None = None
    """The parent's start on its host's monotonic clock, which ``marks`` count from (a report's ``timeline_origin``)."""


STOPPED_BEFORE = "stopped at an earlier batch's time limit while sharing the GPU"
"""Why a job of ``exclusive`` holds its GPU alone (its report's ``gate.rerun``)."""


def verify_one(job: VerifyJob, options: VerifyOptions, *, build: BuildResult | None,
               env: dict[str, str], stop_at: float | None = None,
               zygotes: SlotZygotes | None = None, alone_because: str | None = None) -> dict[str, Any]:
    """Run one job's eval script (in its build folder when there is one); an error report if it gave none.

    With ``zygotes`` the script forks its children from the slot's zygote (``verify.batch.zygotes``). With
    ``alone_because`` the script holds its GPU alone throughout, and its report's ``gate.rerun`` says why. A script
    killed by a signal while sharing its GPU (``verify.runner.ScriptKilled``: on a loaded host, most often the
    out-of-memory killer; or its parent, forked from the slot's zygote, died with it) is run once more, alone on
    its GPU and on the host (``KA_HOST_GATE_MODE=exclusive``: it waits for the host's other verifications to end,
    and they for it), its parent started as ``python script.py``; killed again, its error report stands.

    Raises:
        verify.runner.BatchStopped: the batch's hard limit ``stop_at`` (a ``time.time()``) stopped it.
    """
    from verify.jobs import error_report

    host_alone = False
    while True:
        run_env = env | ({"KA_GPU_GATE_MODE": "exclusive"} if alone_because else {}) \
            | ({"KA_HOST_GATE_MODE": "exclusive"} if host_alone else {})
        try:
            with (zygotes.for_script(fork_parent=not host_alone) if zygotes is not None
                  else contextlib.nullcontext(({}, (), None))) as (extra, fds, fork):
                report = verify_code(job.task_code, job.kernel_code, job.form, options,
                                     functional_code=job.functional_code, meta=job.meta,
                                     build_dir=build.entry if build else None,
                                     env=run_env | {"KA_DIE_WITH_PARENT": "1"} | extra, stop_at=stop_at,
                                     pass_fds=fds, fork=fork)
        except ScriptKilled as error:
            if not host_alone:
                # Most often the out-of-memory killer: alone on the host, not only on its GPU.
                alone_because, host_alone = f"killed by signal {error.signal} while sharing the host", True
                continue
            report = error_report(job, error)
        except (ValueError, VerifyError) as error:
            report = error_report(job, error)
        if alone_because:
            report.setdefault("gate", {}).setdefault("rerun", alone_because)
        return report


def batch_record(build: BuildResult | None, gpu: str, seconds: float, heavy: str | None = None) -> dict[str, Any]:
    """What the batch adds to a report under ``batch``: the GPU, the build's state and seconds, and why the kernel
    was weighed heavy (``heavy``, ``verify.batch.weight``) if it was."""
    record = {"gpu": gpu, "seconds": round(seconds, 3),
              "build": None if build is None else {"state": build.state, "seconds": round(build.seconds, 3),
                                                   "key": build.key, "error": build.error}}
    return record | ({"heavy": heavy} if heavy else {})


class LocalBatch:
    """Builds and GPU workers on this host; iterate ``run()`` for each ``Finished`` as it completes."""

    def __init__(self, jobs: list[VerifyJob], options: VerifyOptions, *, gpus: list[str],
                 compile_workers: int | None = None, cache: BuildCache | None, deadline: float | None = None,
                 stop_at: float | None = None, slots: int | None = None, exclusive: Collection[str] = (),
                 heavy: Mapping[str, str] | None = None, heavy_where: str = "last",
                 weighing: Future[dict[str, str]] | None = None) -> None:
        self.slots = max(1, slots or default_slots(len(gpus)))
        self.seats = gpu_seats(len(gpus))
        self._gates = tempfile.TemporaryDirectory(prefix="ka-gpu-gates-")
        self._baseline_key = secrets.token_hex(32)
        self.exclusive = frozenset(exclusive)
        self.heavy = dict(heavy or {})
        self.heavy_where = heavy_where
        self.jobs = heavy_order(jobs, self.heavy, where=heavy_where, first=self.exclusive)
        self._heavy_running = dict.fromkeys(gpus, 0)
        self._weighing = weighing
        self.options = options
        self.gpus = gpus
        self.compile_workers = max(1, compile_workers or default_compile_workers(len(gpus), min(self.slots, self.seats)))
        self.cache = cache
        if cache is not None:
            build_niceness()  # a bad KA_BUILD_NICE stops the batch here, not each build in its pool thread
        self._builds: dict[str, Future[BuildResult]] = {}
        self._pending = list(self.jobs)
        self._cond = threading.Condition()
        self._results: queue.Queue[Finished | BaseException | None] = queue.Queue()
        self._stop = threading.Event()
        self.deadline = deadline
        self.stop_at = stop_at
        self.stopped: list[Stopped] = []

    def _capped(self, job: VerifyJob) -> bool:
        """Whether ``job`` counts against its GPU's ``HEAVY_SEATS`` (heavy, and not alone on its GPU anyway)."""
        return job.key in self.heavy and job.key not in self.exclusive

    def _next_job(self, gpu: str) -> VerifyJob | None:
        """The first job (plan order) whose build is over and, if heavy, that ``gpu`` has room for; waits for one;
        None when all are taken."""
        with self._cond:
            while not self._stop.is_set():
                if not self._pending or (self.deadline is not None and time.monotonic() >= self.deadline):
                    return None
                if self._weighing is not None:
                    self._cond.wait(timeout=0.1)
                    continue
                full = self._heavy_running[gpu] >= HEAVY_SEATS
                for i, job in enumerate(self._pending):
                    future = self._builds.get(job.key)
                    if (future is None or future.done()) and not (full and self._capped(job)):
                        if self._capped(job):
                            self._heavy_running[gpu] += 1
                        return self._pending.pop(i)
                self._cond.wait(timeout=1.0 if self.deadline is None else
                                max(0.01, min(1.0, self.deadline - time.monotonic())))
        return None

    def _gpu_worker(self, gpu: str) -> None:
        env = {"CUDA_VISIBLE_DEVICES": gpu} if self.options.device == "cuda" else {}
        env |= gate_environment(self._gates.name, self._baseline_key, gpu, seats=self.seats)
        if self.cache is not None:
            env |= self.cache.environment()
        try:
            # Closed before this slot says it is done: the batch's end then finds its zygote waited for.
            with contextlib.closing(SlotZygotes(self.options.python, env)) as zygotes:
                while (job := self._next_job(gpu)) is not None:
                    future = self._builds.get(job.key)
                    build = future.result() if future is not None and future.exception() is None else None
                    alone = job.key in self.exclusive
                    heavy = self.heavy.get(job.key)
                    t0 = time.monotonic()
                    try:
                        report = verify_one(job, self.options, build=build, env=env, stop_at=self.stop_at,
                                            zygotes=zygotes, alone_because=STOPPED_BEFORE if alone else None)
                    except BatchStopped as stop:
                        self.stopped.append(Stopped(job, gpu, time.monotonic() - t0, alone, tuple(stop.marks),
                                                    stop.origin))
                        break
                    finally:
                        self._ended(job, gpu)
                    seconds = time.monotonic() - t0
                    report["batch"] = batch_record(build, gpu, seconds, heavy)
                    self._results.put(Finished(job, report, build, gpu, seconds))
            self._results.put(None)
        except BaseException as error:
            self._results.put(error)

    def _ended(self, job: VerifyJob, gpu: str) -> None:
        if self._capped(job):
            with self._cond:
                self._heavy_running[gpu] -= 1
                self._cond.notify_all()

    def _weighed(self, weighing: Future[dict[str, str]]) -> None:
        """Order the jobs not yet taken by the weighing's heavy kernels (none if it failed), and let the slots go."""
        if (error := weighing.exception()) is not None:
            logging.getLogger(__name__).warning("weighing the batch's kernels failed (%s): none goes %s",
                                                error, self.heavy_where)
        heavy = weighing.result() if error is None else {}
        with self._cond:
            self.heavy = dict(heavy)
            self._pending = heavy_order(self._pending, self.heavy, where=self.heavy_where, first=self.exclusive)
            self._weighing = None
            self._cond.notify_all()

    def _built(self, _: Future[BuildResult]) -> None:
        with self._cond:
            self._cond.notify_all()

    def run(self, on_finished: Callable[[Finished], None]) -> None:
        """Run every job, calling ``on_finished`` in this thread as each completes.

        With a ``deadline`` (``time.monotonic()`` seconds) no job starts after it; with ``stop_at`` (a
        ``time.time()``) the jobs still running then are stopped (``stopped`` lists them). Neither kind is
        reported, and a later batch picks them up (resume), which should name the stopped ones ``exclusive``.
        """
        pool = ThreadPoolExecutor(self.compile_workers, thread_name_prefix="ka-build") if self.cache else None
        threads: list[threading.Thread] = []
        try:
            if pool is not None and self.cache is not None:
                for job in self.jobs:
                    if (unneeded := self.cache.unneeded(job)) is not None:
                        # Ready at once: a slot may take it while the pool builds the others.
                        future = Future()
                        future.set_result(unneeded)
                    else:
                        future = pool.submit(self.cache.ensure, job, self.options)
                    self._builds[job.key] = future
                    future.add_done_callback(self._built)
            if self._weighing is not None:
                self._weighing.add_done_callback(self._weighed)
            threads = [threading.Thread(target=self._gpu_worker, args=(gpu,), name=f"ka-gpu-{gpu}-{slot}", daemon=True)
                       for gpu in self.gpus for slot in range(self.slots)]
            for thread in threads:
                thread.start()
            running = len(threads)
            while running:
                item = self._results.get()
                if item is None:
                    running -= 1
                    continue
                if isinstance(item, BaseException):
                    raise item
                on_finished(item)
        finally:
            self._stop.set()
            with self._cond:
                self._pending.clear()
                self._cond.notify_all()
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
                stop_prebuilds()
            if not any(thread.is_alive() for thread in threads):
                self._gates.cleanup()
