"""The batch on a Ray cluster: builds as CPU tasks, verifications as GPU tasks, reports back to the driver.

Each build runs on whatever node has two free CPUs (a CPU-only node builds for the GPUs' architecture:
the driver pins ``TORCH_CUDA_ARCH_LIST`` from its own GPUs or ``--arch``), in that node's build cache,
and returns the finished build folder as a tar archive through Ray's object store. Each verification is
a task holding half of one of Ray's GPUs (Ray sets ``CUDA_VISIBLE_DEVICES``; the eval script's GPU gate
keeps the two tasks' GPU work apart and they share the task's baselines, as in the local batch): it
unpacks the build into its own node's cache when that lacks it, runs the eval script exactly as the local
batch does, and returns the report. The driver hands reports to ``on_result`` as they complete, so the archive, the resume and the
progress display are the local batch's, and so is ``exclusive``: those jobs are submitted first and hold their GPU
alone throughout. Without ``cuda`` (CPU tests) a verification takes one CPU. A Ray worker
process runs one task at a time and stays for the next, so it keeps a zygote for its scripts as a local slot does
(``verify.batch.zygotes``).

Example:
    >>> ray_init_arguments("local", "/repo")["runtime_env"]["env_vars"]["PYTHONPATH"].split(os.pathsep)[0]
    '/repo'
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import sys
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify.batch.build_cache import MARKER, BuildCache, BuildResult, Toolchain
from verify.batch.weight import HEAVY_SEATS, heavy_order
from verify.batch.workers import (
    SLOTS_PER_GPU,
    STOPPED_BEFORE,
    Finished,
    Stopped,
    batch_record,
    gate_environment,
    verify_one,
)
from verify.batch.zygotes import SlotZygotes, slot_zygotes_enabled
from verify.harness.parent import scrubbed_environment
from verify.runner import BatchStopped

if TYPE_CHECKING:
    from verify.jobs import VerifyJob
    from verify.runner import VerifyOptions

REPO = Path(__file__).resolve().parents[2]


RAY_TEMP_MAX = 36
"""The longest temporary folder a local Ray instance starts under: its sockets are
``TEMP/ray/session_<time>_<pid>/sockets/plasma_store`` (about 70 bytes more), and a Unix socket's path may not
pass 107 bytes. Under a longer ``TMPDIR`` the instance gets ``/tmp/ray``."""


def ray_init_arguments(address: str, repo: str | os.PathLike[str] = REPO, temp: str | None = None,
                       **extra: Any) -> dict[str, Any]:
    """``ray.init`` arguments: ``local`` starts a Ray instance here; anything else joins that cluster.

    On a cluster the ``verify`` package is shipped to every worker (``py_modules``), so nodes need only
    Python with torch and ray; locally the workers import it from this checkout, and the instance's files go
    under ``temp`` (default the temporary folder), or ``/tmp/ray`` where that is too long for its sockets.

    Example:
        >>> ray_init_arguments("local", "/repo", temp="/t/" + "x" * 40)["_temp_dir"]
        '/tmp/ray'
        >>> "_temp_dir" in ray_init_arguments("local", "/repo", temp="/tmp")
        False
    """
    if address == "local":
        # Workers inherit nothing of the driver's PYTHONPATH once runtime_env sets it: keep it (Ray itself may
        # be installed there).
        path = os.pathsep.join([str(repo), *filter(None, [os.environ.get("PYTHONPATH")])])
        arguments = {"runtime_env": {"env_vars": {"PYTHONPATH": path}}, "include_dashboard": False, **extra}
        if len(os.fsencode(temp or tempfile.gettempdir())) > RAY_TEMP_MAX:
            arguments.setdefault("_temp_dir", "/tmp/ray")
        return arguments
    return {"address": address, "runtime_env": {"py_modules": [str(Path(repo) / "verify")]}, **extra}


def pack_entry(entry: Path) -> bytes:
    """A build folder as a gzip'd tar (paths relative to the folder)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(str(entry), arcname=".")
    return buffer.getvalue()


def unpack_entry(data: bytes, entry: Path) -> None:
    """Unpack a build folder into ``entry`` unless it already holds a finished build there."""
    if (entry / MARKER).exists():
        return
    entry.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(str(entry), filter="data")


def _build_task(job: VerifyJob, options: VerifyOptions, root: str, toolchain: Toolchain) -> tuple[BuildResult, bytes | None]:
    options.python = sys.executable
    result = BuildCache(root, toolchain).ensure(job, options)
    return result, pack_entry(result.entry) if result.state in ("hit", "built") else None


_worker_zygotes: dict[tuple[tuple[str, str], ...], SlotZygotes] = {}


def worker_zygotes(python: str, env: dict[str, str]) -> SlotZygotes:
    """This process's zygote for scripts started with ``env``: a new one when the part of the environment a zygote
    keeps (the allowlisted variables, the GPU among them) differs from the last task's.

    Example:
        >>> worker_zygotes(sys.executable, {"KA_SLOT_ZYGOTE": "0"}) is worker_zygotes(sys.executable, {"KA_SLOT_ZYGOTE": "0"})
        True
    """
    merged = {**os.environ, **env}
    key = (("slot zygote", str(slot_zygotes_enabled(merged))), *sorted(scrubbed_environment(merged, "").items()))
    if key not in _worker_zygotes:
        for stale in _worker_zygotes.values():
            stale.close()
        _worker_zygotes.clear()
        _worker_zygotes[key] = SlotZygotes(python, env)
    return _worker_zygotes[key]


def _verify_task(job: VerifyJob, options: VerifyOptions, root: str, toolchain: Toolchain,
                 built: tuple[BuildResult, bytes | None] | None, batch: tuple[str, str],
                 stop_at: float | None = None, exclusive: bool = False, heavy: str | None = None) -> Finished | Stopped:
    options.python = sys.executable
    cache = BuildCache(root, toolchain)
    build = None
    if built is not None:
        result, data = built
        if data is not None:
            unpack_entry(data, cache.entry(job))
        cache.entry(job).mkdir(parents=True, exist_ok=True)
        build = BuildResult(result.key, cache.entry(job), result.state, result.seconds, result.error)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "cpu")
    env = cache.environment() | ({"CUDA_VISIBLE_DEVICES": gpu} if options.device == "cuda" else {})
    batch_id, key = batch
    folder = Path(root) / "batches" / f"ka-batch-{batch_id}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    env |= gate_environment(str(folder), key, gpu)
    t0 = time.monotonic()
    try:
        report = verify_one(job, options, build=build, env=env, stop_at=stop_at,
                            zygotes=worker_zygotes(options.python, env),
                            alone_because=STOPPED_BEFORE if exclusive else None)
    except BatchStopped as stop:
        return Stopped(job, f"{_node()}:{gpu}", time.monotonic() - t0, exclusive, tuple(stop.marks), stop.origin)
    seconds = time.monotonic() - t0
    report["batch"] = batch_record(build, f"{_node()}:{gpu}", seconds, heavy)
    return Finished(job, report, build, gpu, seconds)


def _slots(resources: dict[str, float], device: str, per_gpu: int = SLOTS_PER_GPU) -> int:
    """Verifications the cluster runs at once: ``per_gpu`` per GPU (one per CPU without ``cuda``).

    Example:
        >>> _slots({"GPU": 2.0, "CPU": 32.0}, "cuda", 2), _slots({"CPU": 3.0}, "cpu")
        (4, 3)
    """
    if device == "cuda":
        return max(1, int(resources.get("GPU", 0) * per_gpu))
    return max(1, int(resources.get("CPU", 1)))


def _next_allowed(queue: Iterable[tuple[VerifyJob, Any]], running: Iterable[VerifyJob], capped: Collection[str],
                  cap: int) -> int | None:
    """Where in ``queue`` the next job to submit is: the first one, passing over the jobs keyed in ``capped`` while
    ``cap`` of them are ``running``; None when only those are left.

    Example:
        >>> from verify.jobs import VerifyJob
        >>> a, b, c = (VerifyJob(key=k, task_code="t", kernel_code=k, form="model-new") for k in "abc")
        >>> _next_allowed([(a, None), (b, None)], [c], {"a", "c"}, 1), _next_allowed([(a, None)], [c], {"a", "c"}, 1)
        (1, None)
    """
    full = sum(job.key in capped for job in running) >= cap
    return next((at for at, (job, _) in enumerate(queue) if not (full and job.key in capped)), None)


def _node() -> str:
    import socket

    return socket.gethostname()


def run_ray_batch(jobs: list[VerifyJob], options: VerifyOptions, on_finished: Callable[[Finished], None], *,
                  address: str, cache_root: str | os.PathLike[str], toolchain: Toolchain, build: bool = True,
                  init: dict[str, Any] | None = None, deadline: float | None = None,
                  stop_at: float | None = None, slots: int = SLOTS_PER_GPU,
                  exclusive: Collection[str] = (), heavy: Mapping[str, str] | None = None,
                  heavy_where: str = "last") -> list[Stopped]:
    """Verify ``jobs`` on the Ray cluster at ``address`` (``local``: a Ray started here).

    Builds are all submitted at once (a CPU node builds ahead of the GPUs); verifications only as GPU slots
    free up, so with a ``deadline`` (``time.monotonic()`` seconds) none starts after it, the builds not yet
    needed are cancelled and the call returns when the running verifications end, as the local batch does.
    With ``stop_at`` (a ``time.time()``; the nodes' clocks are assumed in step) the verifications still
    running then stop on their nodes and are not reported; the call returns them. The jobs keyed in ``exclusive``
    are submitted first and hold their GPU alone throughout, those keyed in ``heavy`` before or after the others
    (``heavy_where``), at most ``HEAVY_SEATS`` a cluster GPU in flight at once (``verify.batch.workers.LocalBatch``).
    """
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(**ray_init_arguments(address, **(init or {})))
    batch = (secrets.token_hex(8), secrets.token_hex(32))
    root = str(cache_root)
    stopped: list[Stopped] = []
    try:
        # ``slots`` verifications per GPU, as in the local batch: the gate keeps their GPU work apart.
        gpu_resources = {"num_gpus": 1 / slots, "num_cpus": 1} if options.device == "cuda" else {"num_cpus": 1}
        build_remote = ray.remote(num_cpus=2, max_retries=1)(_build_task)
        verify_remote = ray.remote(max_retries=0, **gpu_resources)(_verify_task)
        exclusive = frozenset(exclusive)
        heavy = dict(heavy or {})
        jobs = heavy_order(jobs, heavy, where=heavy_where, first=exclusive)
        cache = BuildCache(root, toolchain)
        # A job with nothing to build (``build_cache.needs_build``) takes no build task: its GPU task may start at once.
        builds = [None if not build else (unneeded, None) if (unneeded := cache.unneeded(job)) is not None
                  else build_remote.remote(job, options, root, toolchain) for job in jobs]
        window = 2 * _slots(ray.cluster_resources(), options.device, slots)
        heavy_cap = HEAVY_SEATS * max(1, int(ray.cluster_resources().get("GPU", 0)))
        queue = deque(zip(jobs, builds, strict=True))
        pending: dict[Any, VerifyJob] = {}
        while queue or pending:
            if deadline is not None and time.monotonic() >= deadline and queue:
                for _, built_ref in queue:
                    if isinstance(built_ref, ray.ObjectRef):
                        ray.cancel(built_ref)
                queue.clear()
            while queue and len(pending) < window:
                if (at := _next_allowed(queue, pending.values(), heavy.keys() - exclusive, heavy_cap)) is None:
                    break
                job, built_ref = queue[at]
                del queue[at]
                pending[verify_remote.remote(job, options, root, toolchain, built_ref, batch, stop_at,
                                             job.key in exclusive, heavy.get(job.key))] = job
            if not pending:
                break
            timeout = None if deadline is None or not queue else max(0.05, deadline - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
            for ref in ready:
                pending.pop(ref)
                if isinstance(result := ray.get(ref), Stopped):
                    stopped.append(result)
                else:
                    on_finished(result)
    finally:
        if started_here:
            ray.shutdown()
        if address == "local":
            # On a cluster each node's ``batches`` folder keeps the batch's locks and baselines (small).
            shutil.rmtree(Path(root) / "batches" / f"ka-batch-{batch[0]}", ignore_errors=True)
    return stopped
