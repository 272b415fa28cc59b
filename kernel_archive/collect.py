"""``collect``: verify and profile every kernel of a run folder on this machine, writing results into the run.

For each kernel of the run (any layout of ``ingest.run_folder``) it writes, in
``results/<task>/<kernel>``:

- ``.json``: the ``kernel-archive verify`` report, through ``verify.pipeline.verify_jobs`` (the batch
  pipeline: its parallel compiles and per-task references);
- ``.torch.json`` and ``.ncu.csv``: torch.profiler key averages and the ``ncu --csv --page details``
  export, from the eval script's ``--profile`` mode, with ``.profile.json`` the rest of that run's report
  (command, errors, log);
- ``.clang-tidy.txt``: clang-tidy on the kernel's CUDA source (no GPU needed).

A step whose file exists is skipped unless ``force``, so an interrupted collect resumes where it stopped.
It imports no database code, so it runs on a GPU machine that has torch and nvcc but no DuckDB;
``kernel-archive ingest run-dir`` then reads the folder anywhere. Running it as a module
(``python -m kernel_archive.collect``) needs only the standard library besides torch.

Example:
    >>> CollectOptions(device="cpu").steps()
    ['clang-tidy']
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ingest.run_folder import RunFolder, RunKernel, read_run_folder
from verify.pipeline import VerifyJob, verify_jobs
from verify.runner import VerifyOptions

PROFILE_TIMEOUT_S = 1800.0
PROFILED_FILES: dict[str, str] = {"torch": "torch_profile", "ncu": "ncu_csv"}
"""Result kind -> the profile report field that holds it."""
MAX_PROFILE_ATTEMPTS = 2
"""Profile runs per kernel before collect stops retrying one that yields no profile (``--force`` resets)."""
NOT_RUNNABLE = ("error",)
"""Verify statuses after which profiling is not attempted (the kernel did not compile or run)."""


class Progress(Protocol):
    """What collect reports progress to (``archive_db.progress.Progress`` has the same shape; it is not
    imported because importing ``archive_db`` imports DuckDB, which the GPU machine lacks)."""

    def start(self, description: str, total: int | None = None) -> None: ...

    def advance(self, amount: int = 1) -> None: ...


class _Silent:
    def start(self, description: str, total: int | None = None) -> None:
        return None

    def advance(self, amount: int = 1) -> None:
        return None


@dataclass
class CollectOptions:
    """What to collect and how."""

    verify: bool = True
    ncu: bool = True
    torch_profile: bool = True
    clang_tidy: bool = True
    device: str = "cuda"
    force: bool = False
    profile_jobs: int | None = None
    """Kernels profiled at once (default two per GPU: one measured while the next starts) and clang-tidied at once."""
    trials: int = 5
    compile_baseline: bool = True
    shape_probe: bool = True
    time_limit_s: float | None = None
    """Start no new kernel after this many seconds (results so far are kept; run again to go on)."""
    batch: bool = True
    """Verify through the batch pipeline (parallel builds into the build cache, one script per GPU) where
    ``verify.pipeline.verify_jobs`` offers it; False: one kernel after another."""
    gpus: str | None = None
    compile_workers: int | None = None
    build_cache: str | None = None
    python: str = field(default_factory=lambda: sys.executable)
    task: str | None = None
    kernelbench: str | None = None

    def steps(self) -> list[str]:
        """The steps that will run: a CPU device runs only clang-tidy."""
        gpu = self.device != "cpu"
        wanted = {"verify": self.verify and gpu, "profile": (self.ncu or self.torch_profile) and gpu,
                  "clang-tidy": self.clang_tidy}
        return [step for step, on in wanted.items() if on]

    def runs_code(self) -> bool:
        """Whether the kernels' code will run (anything but clang-tidy)."""
        return bool({"verify", "profile"} & set(self.steps()))


@dataclass
class CollectSummary:
    """What a collect did, per step."""

    kernels: int = 0
    written: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    statuses: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False


class Clock:
    """The time limit of one collect: ``left()`` is False once it has passed."""

    def __init__(self, limit_s: float | None) -> None:
        self.deadline = None if limit_s is None else time.monotonic() + limit_s
        self.expired = False

    def left(self) -> bool:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.expired = True
        return not self.expired

    def remaining(self) -> float | None:
        """Seconds left, or None without a limit."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so an interrupted run leaves no half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def batch_arguments(verify: Callable[..., Any], options: CollectOptions, clock: Clock) -> dict[str, Any]:
    """The batch-pipeline arguments ``verify`` accepts: the build cache (which turns the batch on), GPUs,
    build workers and the time left; {} for a verifier without them or with ``batch`` off."""
    try:
        accepted = inspect.signature(verify).parameters
    except (TypeError, ValueError):
        return {}
    if not options.batch or "build_cache" not in accepted:
        return {}
    wanted: dict[str, Any] = {"build_cache": options.build_cache or True, "gpus": options.gpus,
                              "compile_workers": options.compile_workers, "time_budget_s": clock.remaining()}
    return {k: v for k, v in wanted.items() if v is not None and k in accepted}


def _job(run: RunFolder, kernel: RunKernel) -> VerifyJob:
    task = run.tasks[kernel.task]
    return VerifyJob(key=kernel.key, task_code=task.code or "", kernel_code=kernel.code, form=kernel.form,
                     meta={"kernel_name": kernel.name, "task_name": kernel.task, "source": run.name,
                           "level": task.level},
                     task_key=kernel.task)


def _runnable(run: RunFolder, kernel: RunKernel) -> bool:
    return run.tasks[kernel.task].code is not None


def _verify(run: RunFolder, options: CollectOptions, summary: CollectSummary, progress: Progress,
            verify: Callable[..., dict[str, int]], clock: Clock) -> None:
    kernels = [k for k in run.kernels if _runnable(run, k)]
    done = set() if options.force else {k.key for k in kernels if run.result_path(k, "report").is_file()}
    summary.skipped["verify"] += len(done)
    by_key = {k.key: k for k in kernels}
    progress.start(f"verify ({len(done)} already done)", total=len(kernels) - len(done))

    def store(job: VerifyJob, report: dict[str, Any]) -> None:
        write_atomic(run.result_path(by_key[job.key], "report"), json.dumps(report, default=str, indent=1))
        summary.written["verify"] += 1
        progress.advance(1)

    verify_options = VerifyOptions(trials=options.trials, device=options.device, python=options.python,
                                   compile_baseline=options.compile_baseline, shape_probe=options.shape_probe)
    jobs = (_job(run, k) for k in kernels if k.key in done or clock.left())
    statuses = verify(jobs, verify_options, store, done=done, **batch_arguments(verify, options, clock))
    summary.statuses = dict(statuses)


def profile_code(kernel: RunKernel, task_code: str, *, ncu: bool, python: str, build_dir: Path | None = None,
                 env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the eval script's ``--profile`` mode on a kernel not in any archive; its report.

    ``build_dir`` is the kernel's build-cache entry when the verify step built it (the profile then loads that
    build instead of compiling again); ``env`` adds variables (the build's toolchain, the GPU and its gate).
    """
    from verify.script import render_script, write_script

    text = render_script(task_code=task_code, functional_code=None, kernel_code=kernel.code, form=kernel.form,
                         meta={"kernel_name": kernel.name, "task_name": kernel.task})
    with tempfile.TemporaryDirectory(prefix="ka-collect-") as folder:
        script = write_script(text, Path(folder) / "eval_kernel.py")
        report_path = Path(folder) / "profile.json"
        command = [python, str(script), "--profile", "--json", "--report", str(report_path)]
        if not ncu:
            command.append("--no-ncu")
        if build_dir is not None:
            command += ["--build-dir", str(build_dir)]
        try:
            subprocess.run(command, capture_output=True, text=True, timeout=PROFILE_TIMEOUT_S, stdin=subprocess.DEVNULL,
                           env=None if env is None else dict(os.environ) | env)
        except subprocess.TimeoutExpired:
            return {"status": "error", "error": f"profiling ran past {PROFILE_TIMEOUT_S:.0f}s and was stopped"}
        if not report_path.is_file():
            return {"status": "error", "error": "the eval script wrote no profile report"}
        return json.loads(report_path.read_text())


@dataclass
class ProfileSetup:
    """Where collect's profiles run: one GPU gate per GPU (so parallel profiles take each GPU in turn while the
    next one starts up) and the verify step's build cache, whose builds the profiles load."""

    gates: Path
    gpus: list[str]
    cache: Any = None
    """A ``verify.batch.build_cache.BuildCache``, or None (no batch, or no torch to detect the toolchain)."""
    builds: dict[str, Future[Any]] = field(default_factory=dict)
    """Builds started ahead of the profiles (``prebuild``), by kernel key."""

    @classmethod
    def create(cls, options: CollectOptions, gates: Path) -> ProfileSetup:
        """The setup for ``options``, with gate files under ``gates``."""
        from verify.batch.workers import parse_gpus

        cache = None
        if options.batch:
            from verify.batch.build_cache import BuildCache, default_root, detect_toolchain

            try:
                cache = BuildCache(options.build_cache or default_root(), detect_toolchain(options.python))
            except RuntimeError:
                cache = None
        return cls(gates=gates, gpus=parse_gpus(options.gpus), cache=cache)

    def prebuild(self, run: RunFolder, kernels: Iterable[RunKernel], options: CollectOptions,
                 pool: ThreadPoolExecutor) -> None:
        """Build, on ``pool``'s threads, every kernel the cache lacks, in profile order.

        A collect that goes on in a fresh machine finds its reports but not its builds; without this each
        profile compiled its own kernel, two per GPU, and the GPUs waited for nvcc (65 s median a profile on
        the H100 machine, against 15 s of profiling).
        """
        if self.cache is None:
            return
        build_options = VerifyOptions(device=options.device, python=options.python)
        for kernel in kernels:
            self.builds[kernel.key] = pool.submit(self.cache.ensure, _job(run, kernel), build_options)

    def build_dir(self, kernel: RunKernel) -> Path | None:
        """The kernel's build-cache entry once ``prebuild`` has it (a hit or a new build; waits for a build under
        way); None without one (no cache, or a failed build, which the profile compiles again itself)."""
        future = self.builds.get(kernel.key)
        if future is None:
            return None
        try:
            built = future.result()
        except (CancelledError, OSError, RuntimeError):
            return None
        return built.entry if built.state in ("hit", "built", "none") else None

    def environment(self, index: int) -> dict[str, str]:
        """Variables for the ``index``-th profile: its GPU, that GPU's gate and the build's toolchain.

        Example:
            >>> ProfileSetup(Path("g"), ["0", "1"]).environment(3)["CUDA_VISIBLE_DEVICES"]
            '1'
        """
        gpu = self.gpus[index % len(self.gpus)]
        env = {"CUDA_VISIBLE_DEVICES": gpu, "KA_GPU_GATE": str(self.gates / f"gpu-{gpu}.lock")}
        return env | (self.cache.environment() if self.cache is not None else {})


def profile_attempts(run: RunFolder, kernel: RunKernel) -> int:
    """How many times collect has profiled ``kernel`` (its ``.profile.json`` counts them)."""
    path = run.result_path(kernel, "profile")
    return int(json.loads(path.read_text()).get("attempts", 1)) if path.is_file() else 0


def _missing(run: RunFolder, kernel: RunKernel, options: CollectOptions) -> list[str]:
    wanted = [kind for kind, on in (("torch", options.torch_profile), ("ncu", options.ncu)) if on]
    return wanted if options.force else [k for k in wanted if not run.result_path(kernel, k).is_file()]


def _profile_one(run: RunFolder, kernel: RunKernel, options: CollectOptions, kinds: list[str], attempts: int,
                 setup: ProfileSetup, index: int) -> list[str]:
    report = profile_code(kernel, run.tasks[kernel.task].code or "", ncu="ncu" in kinds, python=options.python,
                          build_dir=setup.build_dir(kernel), env=setup.environment(index))
    written = []
    for kind in kinds:
        value = report.get(PROFILED_FILES[kind])
        if value:
            write_atomic(run.result_path(kernel, kind), value if isinstance(value, str) else json.dumps(value, indent=1))
            written.append(kind)
    record = {k: v for k, v in report.items() if k not in PROFILED_FILES.values()}
    record.update(attempts=attempts + 1, wanted=kinds, written=written)
    write_atomic(run.result_path(kernel, "profile"), json.dumps(record, default=str, indent=1))
    return written


def _profile_pass(run: RunFolder, options: CollectOptions, pending: dict[str, RunKernel], jobs: int,
                  attempts: dict[str, int], summary: CollectSummary, progress: Progress, clock: Clock,
                  setup: ProfileSetup) -> None:
    def one(item: tuple[int, RunKernel]) -> list[str] | None:
        index, kernel = item
        if not clock.left():
            return None
        return _profile_one(run, kernel, options, _missing(run, kernel, options), attempts[kernel.key], setup, index)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for kernel, kinds in zip(pending.values(), pool.map(one, enumerate(pending.values())), strict=True):
            if kinds is not None:
                attempts[kernel.key] += 1
                summary.written.update(kinds)
                progress.advance(1)


def _profile(run: RunFolder, options: CollectOptions, summary: CollectSummary, progress: Progress,
             clock: Clock) -> None:
    """Profile in parallel, then retry one by one what is still missing.

    Parallel profiles share each GPU through its gate (``ProfileSetup``): only start-up overlaps, never two
    profilers' GPU work. A kernel whose NCU export is still missing after the parallel pass gets a second,
    serial attempt (at most MAX_PROFILE_ATTEMPTS in all).
    """
    pending: dict[str, RunKernel] = {}
    attempts: dict[str, int] = {}
    for kernel in run.kernels:
        report = run.result_path(kernel, "report")
        status = json.loads(report.read_text()).get("status") if report.is_file() else None
        attempts[kernel.key] = 0 if options.force else profile_attempts(run, kernel)
        if not _runnable(run, kernel) or status in NOT_RUNNABLE:
            summary.skipped["profile (did not compile or run)" if status else "profile (no task code)"] += 1
        elif not _missing(run, kernel, options):
            summary.skipped["profile"] += 1
        elif attempts[kernel.key] >= MAX_PROFILE_ATTEMPTS:
            summary.skipped[f"profile (no result after {MAX_PROFILE_ATTEMPTS} attempts)"] += 1
        else:
            pending[kernel.key] = kernel
    before = dict(attempts)
    progress.start("profile (torch.profiler" + (", ncu)" if options.ncu else ")"), total=len(pending))
    with tempfile.TemporaryDirectory(prefix="ka-collect-gates-") as gates:
        setup = ProfileSetup.create(options, Path(gates)) if pending else ProfileSetup(Path(gates), ["0"])
        jobs = options.profile_jobs or 2 * len(setup.gpus)
        from verify.batch.build_cache import stop_prebuilds
        from verify.batch.workers import default_compile_workers

        builders = ThreadPoolExecutor(options.compile_workers or default_compile_workers(len(setup.gpus)),
                                      thread_name_prefix="ka-build")
        try:
            setup.prebuild(run, pending.values(), options, builders)
            _profile_pass(run, options, pending, jobs, attempts, summary, progress, clock, setup)
            if jobs > 1 and options.ncu:
                retry = {key: k for key, k in pending.items()
                         if "ncu" in _missing(run, k, options) and attempts[key] < MAX_PROFILE_ATTEMPTS}
                if retry:
                    progress.start("profile, serial retry of missing NCU exports", total=len(retry))
                    _profile_pass(run, replace(options, force=False), retry, 1, attempts, summary, progress, clock,
                                  setup)
        finally:
            builders.shutdown(wait=False, cancel_futures=True)
            if setup.builds:
                stop_prebuilds()
    for kernel in pending.values():
        missing = _missing(run, kernel, replace(options, force=False))
        if missing and attempts[kernel.key] == before[kernel.key]:
            summary.skipped["profile (time limit: run again to go on)"] += 1
        elif missing:
            summary.problems.append(f"{kernel.key}: no {' or '.join(missing)} profile "
                                    f"(see {run.result_path(kernel, 'profile').relative_to(run.root)})")


def _clang_tidy_one(run: RunFolder, kernel: RunKernel) -> bool:
    from verify.profilers import kernel_cuda_source, run_clang_tidy

    source = kernel_cuda_source(kernel.code, kernel.form)
    if not source:
        return False
    write_atomic(run.result_path(kernel, "clang-tidy"), run_clang_tidy(source))
    return True


def _clang_tidy(run: RunFolder, options: CollectOptions, summary: CollectSummary, progress: Progress,
                clock: Clock) -> None:
    from verify.profilers import clang_tidy_executable

    if clang_tidy_executable() is None:
        raise FileNotFoundError("clang-tidy not found; install it with `pip install clang-tidy` or pass --no-clang-tidy")
    pending = [k for k in run.kernels if options.force or not run.result_path(k, "clang-tidy").is_file()]
    summary.skipped["clang-tidy"] += len(run.kernels) - len(pending)
    progress.start("clang-tidy", total=len(pending))
    with ThreadPoolExecutor(max_workers=options.profile_jobs or os.cpu_count() or 1) as pool:
        results = pool.map(lambda k: _clang_tidy_one(run, k) if clock.left() else None, pending)
        for kernel, ok in zip(pending, results, strict=True):
            if ok is None:
                continue
            if ok:
                summary.written["clang-tidy"] += 1
            else:
                summary.problems.append(f"{kernel.key}: no CUDA source for clang-tidy")
            progress.advance(1)


def collect(
    path: str | os.PathLike[str],
    options: CollectOptions | None = None,
    *,
    progress: Progress | None = None,
    verify: Callable[..., dict[str, int]] = verify_jobs,
) -> CollectSummary:
    """Verify and profile every kernel of the run at ``path``, writing results into it; what it did.

    ``verify`` is the batch verifier (``verify.pipeline.verify_jobs``; tests pass a fake).

    Raises:
        ingest.run_folder.RunFolderError: the run cannot be read.
        FileNotFoundError: clang-tidy is wanted but not installed.
    """
    options = options or CollectOptions()
    progress = progress or _Silent()
    started = time.perf_counter()
    run = read_run_folder(path, task=options.task, kernelbench=options.kernelbench)
    summary = CollectSummary(kernels=len(run.kernels))
    no_code = [k.key for k in run.kernels if not _runnable(run, k)]
    if no_code and options.runs_code():
        summary.problems.append(f"{len(no_code)} kernel(s) have a task without reference code and are not run, "
                                f"e.g. {no_code[0]}")
    steps = options.steps()
    clock = Clock(options.time_limit_s)
    if "verify" in steps:
        _verify(run, options, summary, progress, verify, clock)
    if "profile" in steps and clock.left():
        _profile(run, options, summary, progress, clock)
    if "clang-tidy" in steps and clock.left():
        _clang_tidy(run, options, summary, progress, clock)
    summary.stopped_early = clock.expired
    summary.seconds = time.perf_counter() - started
    return summary


def summary_lines(summary: CollectSummary) -> Iterable[str]:
    """The summary as short lines for a terminal."""
    yield f"{summary.kernels} kernels in {summary.seconds:.1f}s"
    for step, n in sorted(summary.written.items()):
        yield f"  wrote {n} {step} result(s)"
    for step, n in sorted(summary.skipped.items()):
        yield f"  skipped {n} {step} (already there; --force redoes them)" if "(" not in step else f"  skipped {n} {step}"
    if summary.statuses:
        yield "  verify statuses: " + ", ".join(f"{s} {n}" for s, n in sorted(summary.statuses.items()))
    for problem in summary.problems:
        yield f"  {problem}"
    if summary.stopped_early:
        yield "  stopped at the time limit: run the same command again to go on"


class _LineProgress:
    """Progress as plain lines on stderr (the GPU machine may lack rich)."""

    def __init__(self) -> None:
        self.done = 0
        self.total: int | None = None
        self.description = ""

    def start(self, description: str, total: int | None = None) -> None:
        self.description, self.total, self.done = description, total, 0
        print(f"{description}: {total if total is not None else '?'} to do", file=sys.stderr, flush=True)

    def advance(self, amount: int = 1) -> None:
        self.done += amount
        print(f"  {self.description}: {self.done}/{self.total}", file=sys.stderr, flush=True)


def argument_parser() -> argparse.ArgumentParser:
    """The module's own command line (the same flags as ``kernel-archive collect``)."""
    parser = argparse.ArgumentParser(prog="python -m kernel_archive.collect", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="The run folder.")
    parser.add_argument("--i-understand-this-runs-untrusted-code", dest="untrusted_ok", action="store_true",
                        help="Required unless only clang-tidy runs: the run's kernels run on this machine.")
    for flag, what in (("verify", "verification"), ("ncu", "Nsight Compute"), ("torch-profile", "torch.profiler"),
                       ("clang-tidy", "clang-tidy")):
        parser.add_argument(f"--no-{flag}", action="store_true", help=f"Skip {what}.")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--force", action="store_true", help="Redo steps whose results exist.")
    parser.add_argument("--profile-jobs", type=int, default=None,
                        help="Kernels profiled (and clang-tidied) at once. Default: two per GPU, which take the "
                             "GPU in turn (one starts up while the other is measured); clang-tidy: one per core.")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--no-compile-baseline", action="store_true", help="Skip the torch.compile baseline.")
    parser.add_argument("--no-shape-probe", action="store_true", help="Do not try kernels at other shapes.")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="Start no new kernel after this long; run again to go on.")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--no-batch", action="store_true", help="Verify one kernel after another (no build cache).")
    parser.add_argument("--gpus", help="Batch: GPUs to use, a count or a comma list of ids (default: all visible).")
    parser.add_argument("--compile-workers", type=int, help="Batch: kernels built at once.")
    parser.add_argument("--build-cache", help="Batch: the build cache folder.")
    parser.add_argument("--task", help="Reference file or folder for KernelBench / plain layouts.")
    parser.add_argument("--kernelbench", help="KernelBench checkout for KernelBench / plain layouts.")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m kernel_archive.collect PATH ...``; 0 on success, 2 on a usage error."""
    args = argument_parser().parse_args(argv)
    options = CollectOptions(verify=not args.no_verify, ncu=not args.no_ncu, torch_profile=not args.no_torch_profile,
                             clang_tidy=not args.no_clang_tidy, device=args.device, force=args.force,
                             profile_jobs=args.profile_jobs, trials=args.trials, python=args.python, task=args.task,
                             kernelbench=args.kernelbench, compile_baseline=not args.no_compile_baseline,
                             shape_probe=not args.no_shape_probe, time_limit_s=args.time_limit,
                             batch=not args.no_batch, gpus=args.gpus, compile_workers=args.compile_workers,
                             build_cache=args.build_cache)
    if options.runs_code() and not args.untrusted_ok:
        print("collect runs the kernels' code: pass --i-understand-this-runs-untrusted-code (or --no-verify "
              "--device cpu for clang-tidy only)", file=sys.stderr)
        return 2
    summary = collect(args.path, options, progress=_LineProgress())
    print("\n".join(summary_lines(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
