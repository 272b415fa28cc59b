"""Verifying many kernels: one job per kernel, results handed to a callback as each one finishes.

This is the seam every batch producer goes through (``kernel-archive verify`` on a selection,
``kernel-archive collect`` on a run folder): a job carries everything the eval script needs, so the
pipeline needs no archive connection, and ``on_result`` decides where a report goes (the archive, a run
folder). Jobs whose ``key`` is in ``done`` are skipped, which is how a batch resumes.

With none of ``gpus``, ``compile_workers``, ``build_cache`` or ``ray`` the jobs run one after another
in this process's order. With any of them the batch pipeline runs (``verify.batch``): jobs grouped by
task, builds on every core into the content-addressed build cache, one eval script per GPU at a time, or
the same on a Ray cluster; each report still reaches ``on_result`` as its kernel finishes, in the
calling thread. Every verification is the single kernel's eval script, so verdicts do not change.

Example:
    >>> job = VerifyJob(key="k1", task_code="class Model: pass", kernel_code="class ModelNew: pass",
    ...                 form="model-new")
    >>> job.key, job.meta
    ('k1', {})
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from verify.jobs import ResultCallback, VerifyJob, error_report
from verify.runner import VerifyError, VerifyOptions, verify_code

if TYPE_CHECKING:
    from verify.batch.workers import Stopped

__all__ = ["ProgressSink", "ResultCallback", "VerifyJob", "error_report", "verify_jobs"]


class ProgressSink(Protocol):
    """Where a batch reports each finished kernel (``verify.batch.progress.BatchProgress``)."""

    def update(self, report: dict[str, Any], *, build_state: str | None = None, prebuild_s: float = 0.0) -> None:
        """Count one finished kernel."""


def verify_jobs(
    jobs: Iterable[VerifyJob],
    options: VerifyOptions,
    on_result: ResultCallback,
    *,
    done: Collection[str] = (),
    force: bool = False,
    gpus: str | int | None = None,
    compile_workers: int | None = None,
    slots_per_gpu: int | None = None,
    build_cache: str | os.PathLike[str] | bool | None = None,
    ray: str | None = None,
    ray_init: dict[str, Any] | None = None,
    arch: str | None = None,
    progress: ProgressSink | None = None,
    time_budget_s: float | None = None,
    stop_after_s: float | None = None,
    exclusive: Collection[str] = (),
    on_stopped: Callable[[Stopped], None] | None = None,
    heavy: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Verify each job not in ``done`` (all of them with ``force``), calling ``on_result(job, report)`` as each finishes.

    Args:
        gpus: GPUs for the batch: a count or a comma list of ids (default: every visible GPU).
        compile_workers: builds at once (default: one per core left after the GPU seats).
        slots_per_gpu: eval scripts running at once per GPU (default: the host's ``batch_shape``, nine on 16
            cores a GPU, else three; three under Ray: ``default_slots``); ``KA_GPU_SEATS`` (default: the shape's, six or
            three) of them hold the GPU's gate at once, the others start up and judge meanwhile.
        build_cache: the build cache folder (default ``~/.cache/kernel-archive/builds``); False: none.
        ray: a Ray cluster address, or ``local`` to start one here.
        ray_init: extra ``ray.init`` arguments (tests start a small local instance).
        arch: the GPU architectures to build for (default: this host's GPUs, or ``TORCH_CUDA_ARCH_LIST``).
        progress: told about each finished kernel.
        time_budget_s: batch only: start no kernel after this many seconds (the rest waits for a resume).
        stop_after_s: batch only: stop the kernels still running after this many seconds; they are not
            reported (no verdict, no error), so a resume verifies them again.
        exclusive: batch only: keys verified first, each holding its GPU alone throughout (pass the kernels an
            earlier batch stopped: heavy verifications that share a GPU can all finish late, so under a hard limit
            a resumed batch could otherwise stop the same kernels again and again).
        on_stopped: batch only: told about each kernel ``stop_after_s`` stopped (``verify.batch.workers.Stopped``).
        heavy: batch only: where heavy kernels go (``verify.batch.weight``): ``mixed`` (in plan order), ``first``
            or ``last`` (before or after the light ones, fewer at once on a GPU); default ``KA_BATCH_HEAVY``, else
            ``BATCH_HEAVY``.
        log: batch only: told one-line notes on the batch's set-up (how many kernels were weighed heavy).

    Returns:
        How many reports ended in each status (``error`` for a script that gave none).
    """
    if any(v is not None for v in (gpus, compile_workers, slots_per_gpu, build_cache, ray)):
        return _verify_batch(jobs, options, on_result, done=done, force=force, gpus=gpus,
                             compile_workers=compile_workers, slots_per_gpu=slots_per_gpu, build_cache=build_cache,
                             ray=ray, ray_init=ray_init, arch=arch, progress=progress, time_budget_s=time_budget_s,
                             stop_after_s=stop_after_s, exclusive=exclusive, on_stopped=on_stopped, heavy=heavy,
                             log=log)
    summary: dict[str, int] = {}
    done = () if force else done
    for job in jobs:
        if job.key in done:
            continue
        try:
            report = verify_code(job.task_code, job.kernel_code, job.form, options,
                                 functional_code=job.functional_code, meta=job.meta)
        except (ValueError, VerifyError) as error:
            report = error_report(job, error)
        on_result(job, report)
        status = report.get("status", "error")
        summary[status] = summary.get(status, 0) + 1
        if progress is not None:
            progress.update(report)
    return summary


def _verify_batch(
    jobs: Iterable[VerifyJob],
    options: VerifyOptions,
    on_result: ResultCallback,
    *,
    done: Collection[str],
    force: bool,
    gpus: str | int | None,
    compile_workers: int | None,
    slots_per_gpu: int | None,
    build_cache: str | os.PathLike[str] | bool | None,
    ray: str | None,
    ray_init: dict[str, Any] | None,
    arch: str | None,
    progress: ProgressSink | None,
    time_budget_s: float | None,
    stop_after_s: float | None = None,
    exclusive: Collection[str] = (),
    on_stopped: Callable[[Stopped], None] | None = None,
    heavy: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, int]:
    import time
    from concurrent.futures import ThreadPoolExecutor

    from verify.batch.build_cache import BuildCache, default_root, detect_toolchain
    from verify.batch.plan import make_plan
    from verify.batch.weight import policy, weigh_for_batch
    from verify.batch.workers import Finished, LocalBatch, default_slots, parse_gpus

    deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
    stop_at = None if stop_after_s is None else time.time() + stop_after_s
    plan = make_plan(jobs, done, force=force)
    summary: dict[str, int] = {}
    if not plan.todo:
        return summary
    chosen = policy(heavy)
    where = "first" if chosen == "first" else "last"
    # Weighed beside what comes before the first script (the toolchain's probe, the slots' start), not before it.
    weighing = ThreadPoolExecutor(1, thread_name_prefix="ka-weigh")
    heavy_keys = weighing.submit(weigh_for_batch, plan.todo, options.python, chosen, log)
    weighing.shutdown(wait=False)
    use_cache = build_cache is not False and not options.static_only
    root = Path(default_root() if build_cache in (None, True) else str(build_cache))
    toolchain = detect_toolchain(options.python, arch) if use_cache or ray else None

    def finished(item: Finished) -> None:
        on_result(item.job, item.report)
        status = item.report.get("status", "error")
        summary[status] = summary.get(status, 0) + 1
        if progress is not None:
            build = item.build
            progress.update(item.report, build_state=build.state if build else None,
                            prebuild_s=build.seconds if build and build.state == "built" else 0.0)

    if ray:
        from verify.batch.ray_backend import run_ray_batch

        assert toolchain is not None
        stopped = run_ray_batch(plan.todo, options, finished, address=ray, cache_root=root, toolchain=toolchain,
                                build=use_cache, init=ray_init, deadline=deadline, stop_at=stop_at,
                                slots=slots_per_gpu or default_slots(ray=True), exclusive=exclusive,
                                heavy=heavy_keys.result(), heavy_where=where)
    else:
        gpu_ids = parse_gpus(gpus)
        cache = BuildCache(root, toolchain) if use_cache and toolchain is not None else None
        batch = LocalBatch(plan.todo, options, gpus=gpu_ids, compile_workers=compile_workers, cache=cache,
                           deadline=deadline, stop_at=stop_at, slots=slots_per_gpu, exclusive=exclusive,
                           weighing=heavy_keys, heavy_where=where)
        batch.run(finished)
        stopped = batch.stopped
    if on_stopped is not None:
        for item in stopped:
            on_stopped(item)
    return summary
