"""Verify verbs: verify (one kernel or a batch), eval-script, profile."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from kernel_archive.cli.common import (
    CategoryOption,
    DbOption,
    HandWrittenOption,
    LevelOption,
    SourceOption,
    TagOption,
    console,
    fail,
    note,
    out,
    plain,
    print_json,
    reporting_errors,
)
from verify.batch.weight import BATCH_HEAVY, HEAVY_OUTPUT_BYTES, HEAVY_POLICIES, HEAVY_SEATS

Heavy = StrEnum("Heavy", {name: name for name in HEAVY_POLICIES})

if TYPE_CHECKING:
    from archive_db.verify_queries import VerifySelection
    from verify.runner import VerifyOptions

UNTRUSTED = (
    "[bold yellow]WARNING:[/] this runs the kernel's code, which is untrusted (LLM-generated, from a public "
    "release). It runs in child processes with a scrubbed environment and its own temporary folder, but on "
    "your machine and as your user: run it in a container or VM you do not mind losing."
)
UNTRUSTED_HELP = UNTRUSTED.replace("[bold yellow]WARNING:[/]", "**WARNING:**")

VERIFY_HELP = f"""Re-run a kernel on this machine's GPU with a harness built to catch reward hacks.

Checks correctness over fresh seeds and input distributions against a float64 reference, gives every
check of the threat list its own verdict with evidence (stale memory, launch errors, aliasing, input
mutation, hard-coding, library calls, fallbacks, lower precision, side streams, threads, caching, timer
patching, flag flipping, launch-bound speedups, out-of-bounds writes, ...), and times the kernel against
PyTorch eager, torch.compile and a CUDA graph measured the same way. It also runs the kernel once at
other input shapes and records a kernel that is right only at the task's shapes as `shape-specialised`
(a property, not a failure). The result is stored in the archive
(`verifications`, `verification_checks`, and a `measurements` row with source 'verify').

{UNTRUSTED_HELP}

Examples:

  kernel-archive verify 3f9a0c1d2e4b5a67

  kernel-archive verify 3f9a0c1d2e4b5a67 --static-only      (no GPU needed; nothing runs)

  kernel-archive verify 3f9a0c1d2e4b5a67 --trials 8 --json

  kernel-archive verify --source cuda-l1 --limit 20 --i-understand-this-runs-untrusted-code

Batches (any selection: --source, --task, --level, --category, --tag, --hand-written, --search, --all)
run as a pipeline: kernels whose code builds or loads native code are built on every CPU core into a shared
build cache (KA_PREBUILD_ALL=1 prebuilds every kernel; the others are imported by their own verification), verified several at a
time on each GPU (--slots-per-gpu: default 9 where the host has 16 cores a GPU, else 3; at most KA_GPU_SEATS
of them, default 6 or 3, on the GPU at once, any others starting up or judging meanwhile; their untimed work
overlaps; every timed series has the GPU to itself; KA_GPU_GATE_MODE=exclusive gives each verification the GPU
alone throughout; each slot forks its scripts' children from one zygote that imported torch once,
KA_SLOT_ZYGOTE=0 for one per script; KA_PCH=1 shares precompiled torch headers between builds, measured
slower on an H200; a verification whose child the host killed runs again alone on the host), stored as each
finishes, and skipped when already verified by this harness version (so an interrupted batch resumes; --force
verifies again). --ray ADDRESS runs the same on a Ray cluster. A task whose outputs would not fit in the host's
memory for every trial (KA_MEMORY_AVAILABLE overrides what the host reports) is judged on its first trials, whose
references alone are computed, and its report's trials_reduced says so; in a batch, a verification whose evidence
reaches 4 GiB (KA_MEMORY_LEDGER_FROM, bytes) reserves it in the host's memory ledger and waits for room while not
even its first trial fits beside the others' reservations.
See docs/verify-batch.md.

  kernel-archive verify --source cuda-l1 --gpus 2 --i-understand-this-runs-untrusted-code

  kernel-archive verify --all --ray auto --i-understand-this-runs-untrusted-code

The same check runs anywhere with `kernel-archive eval-script KERNEL_ID -o eval.py; python eval.py`.
Exit status: 0 passed, 1 flagged, 2 failed, 3 error (single kernel).
"""


def verify(
    kernel_id: Annotated[str | None, typer.Argument(help="The kernel to verify (omit for a batch).")] = None,
    db: DbOption = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Batch: kernels of this task id (repeatable).")] = None,
    source: SourceOption = None,
    level: LevelOption = None,
    category: CategoryOption = None,
    tag: TagOption = None,
    hand_written: HandWrittenOption = False,
    search: Annotated[str | None, typer.Option("--search", help="Batch: task or kernel name contains this.")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Batch: every verifiable kernel in the archive.")] = False,
    limit: Annotated[int | None, typer.Option("--limit", help="Batch: at most this many kernels.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Batch: verify again kernels this harness version already verified.")] = False,
    gpus: Annotated[str | None, typer.Option("--gpus", help="Batch: GPUs to use, a count or ids (0,2); default every visible one.")] = None,
    compile_workers: Annotated[
        int | None, typer.Option("--compile-workers", min=1,
                                 help="Batch: builds at once (default: one per core left after the GPU seats).")] = None,
    slots_per_gpu: Annotated[
        int | None, typer.Option("--slots-per-gpu", min=1,
                                 help="Batch: eval scripts running at once per GPU, at most KA_GPU_SEATS of them "
                                      "on the GPU (default 9 where the host has 16 cores a GPU, else 3; "
                                      "3 under Ray).")] = None,
    build_cache: Annotated[
        str | None, typer.Option("--build-cache", help="Batch: build cache folder (default ~/.cache/kernel-archive/builds).")
    ] = None,
    no_build_cache: Annotated[bool, typer.Option("--no-build-cache", help="Batch: build inside each run, no cache.")] = False,
    arch: Annotated[str | None, typer.Option("--arch", help="Batch: GPU architectures to build for, e.g. 9.0 (default: this host's GPUs).")] = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray", help="Batch: run on this Ray cluster (ADDRESS, or 'local' to start one here).")
    ] = None,
    heavy: Annotated[
        Heavy | None, typer.Option("--heavy",
                                 help="Batch: where heavy kernels go (candidates that call torch.compile, tasks with "
                                      f"{HEAVY_OUTPUT_BYTES // 2**20} MiB of outputs or more): 'first' or 'last', "
                                      f"before or after the light ones, {HEAVY_SEATS} at a time on a GPU; 'mixed' "
                                      f"keeps them in place (default: KA_BATCH_HEAVY, else {BATCH_HEAVY}). 'last' "
                                      "gives most results sooner and the last one later; 'first' ran slower than "
                                      "'mixed' on one H200 (docs/verify-batch.md). Verdicts are the same either way.")
    ] = None,
    trials: Annotated[int, typer.Option("--trials", min=1, help="Correctness trials (fresh seeds).")] = 5,
    static_only: Annotated[bool, typer.Option("--static-only", help="Only the checks that need no GPU.")] = False,
    untrusted_ok: Annotated[
        bool,
        typer.Option("--i-understand-this-runs-untrusted-code",
                     help="Required for batch runs: you accept running many untrusted kernels on this machine."),
    ] = False,
    python: Annotated[str | None, typer.Option("--python", help="Python with CUDA torch to run the script.")] = None,
    sanitize: Annotated[bool, typer.Option("--sanitize", help="Also run compute-sanitizer memcheck (slow).")] = False,
    no_compile_baseline: Annotated[
        bool, typer.Option("--no-compile-baseline", help="Skip the torch.compile baseline (faster).")] = False,
    no_shape_probe: Annotated[
        bool, typer.Option("--no-shape-probe", help="Do not try the kernel at other input shapes.")] = False,
    store: Annotated[bool, typer.Option("--store/--no-store", help="Store results in the archive.")] = True,
    json_output: Annotated[bool, typer.Option("--json", help="Print the JSON report(s).")] = False,
) -> None:
    from archive_db.verify_queries import VerifySelection
    from verify.harness.report import render_text
    from verify.runner import VerifyError, VerifyOptions, verify_kernel

    selection = VerifySelection(tasks=tuple(task or ()), sources=tuple(source or ()), levels=tuple(level or ()),
                                categories=tuple(category or ()), tags=tuple(tag or ()),
                                hand_written_only=hand_written, search=search, limit=limit)
    if kernel_id is not None and not (selection.is_empty() and not everything):
        raise fail("give either KERNEL_ID, or a selection (--task, --source, --level, ..., --all) for a batch", 2)
    if kernel_id is None and selection.is_empty() and not everything:
        raise fail("give a KERNEL_ID, or a batch selection: --task, --source, --level, --category, --tag, "
                   "--hand-written, --search, or --all for every verifiable kernel", 2)
    options = VerifyOptions(trials=trials, static_only=static_only, sanitize=sanitize,
                            compile_baseline=not no_compile_baseline, shape_probe=not no_shape_probe)
    if python:
        options.python = python
    with reporting_errors():
        if kernel_id is not None:
            if not static_only:
                note(UNTRUSTED)
            try:
                report = verify_kernel(db, kernel_id, options, store=store)
            except (KeyError, ValueError, VerifyError) as error:
                raise fail(str(error).strip("'\"")) from None
            if json_output:
                print_json(report)
            else:
                out.print(render_text(report), markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit({"passed": 0, "static-only": 0, "flagged": 1, "failed": 2}.get(report.get("status"), 3))
        if not static_only and not untrusted_ok:
            raise fail("a batch run executes many untrusted kernels; add --i-understand-this-runs-untrusted-code "
                       "(or use --static-only, which runs nothing)", 2)
        _verify_batch(db, selection, options, force=force, gpus=gpus, compile_workers=compile_workers,
                      slots_per_gpu=slots_per_gpu,
                      build_cache=False if no_build_cache else build_cache, arch=arch, ray_address=ray_address,
                      store=store, json_output=json_output, heavy=heavy.value if heavy else None)


def _verify_batch(db: str | None, selection: VerifySelection, options: VerifyOptions, *, force: bool, gpus: str | None,
                  compile_workers: int | None, slots_per_gpu: int | None, build_cache: str | bool | None,
                  arch: str | None,
                  ray_address: str | None, store: bool, json_output: bool, heavy: str | None = None) -> None:
    from verify.batch.archive import archive_jobs, archive_storer, done_keys
    from verify.batch.progress import BatchProgress, summary_table
    from verify.pipeline import VerifyJob, verify_jobs

    jobs = archive_jobs(db, selection)
    if not jobs:
        raise fail("no verifiable kernels in this selection (need code, form cuda-binding or model-new, and a task "
                   "with reference code); list kernels with `kernel-archive leaderboard --json`")
    done = set() if force or not store else done_keys(db)
    todo = [j for j in jobs if j.key not in done]
    if not options.static_only:
        console.print(UNTRUSTED)
    console.print(f"{len(jobs)} kernels selected, {len(jobs) - len(todo)} already verified by this harness version "
                  f"(--force verifies them again), {len(todo)} to go")
    storer = archive_storer(db) if store else None
    results: list[dict[str, object]] = []

    def on_result(job: VerifyJob, report: dict[str, object]) -> None:
        if storer is not None:
            storer(job, report)
        row = {"kernel_id": job.key, "name": job.meta.get("kernel_name"), "status": report.get("status"),
               "verification_id": report.get("verification_id")}
        results.append(row | {"report": report} if json_output else row)

    batch = not options.static_only
    with BatchProgress(len(todo), console=console, enabled=not json_output) as progress:
        verify_jobs(todo, options, on_result, done=done, force=force, progress=progress,
                    gpus=gpus if batch else None, compile_workers=compile_workers if batch else None,
                    slots_per_gpu=slots_per_gpu if batch else None,
                    build_cache=(build_cache if build_cache is not None else True) if batch else None,
                    ray=ray_address if batch else None, arch=arch, heavy=heavy,
                    log=None if json_output else lambda line: console.print(line, markup=False, highlight=False))
    if json_output:
        print_json(results)
        return
    for row in results:
        out.print(f"{row['status']:<12} {row['kernel_id']}  {row['name']}", markup=False, highlight=False)
    out.print(", ".join(f"{n} {s}" for s, n in sorted(progress.stats.statuses.items())), markup=False)
    console.print(summary_table(progress.stats))


EVAL_HELP = f"""Write the standalone eval script of a kernel: task, kernel and harness in one Python file.

It needs only torch and a CUDA toolchain, runs the same checks as `kernel-archive verify` and prints the
same report (text, then one JSON line). `python FILE --help` lists its options.

{UNTRUSTED_HELP}

Example:

  kernel-archive eval-script 3f9a0c1d2e4b5a67 -o eval_matmul.py && python eval_matmul.py
"""


def eval_script(
    kernel_id: Annotated[str, typer.Argument(help="The kernel.")],
    output: Annotated[str, typer.Option("-o", "--output", help="Where to write the script.")],
    db: DbOption = None,
) -> None:
    from verify.runner import load_detail
    from verify.script import render_eval_script, write_script

    with reporting_errors():
        try:
            text = render_eval_script(load_detail(db, kernel_id))
        except (KeyError, ValueError) as error:
            raise fail(str(error).strip("'\"")) from None
    path = write_script(text, output)
    out.print(f"wrote {path} ({len(text.splitlines())} lines); run: python {path}", markup=False, highlight=False,
              soft_wrap=True)


PROFILE_HELP = f"""Profile a kernel: Nsight Compute, torch.profiler events and clang-tidy, stored in the archive.

NCU uses the archive's configuration (sections Occupancy, WarpStateStats, MemoryWorkloadAnalysis,
ComputeWorkloadAnalysis; -c 5 -s 6; --csv --page details) unless --ncu-sections says otherwise. clang-tidy
runs on this machine (no GPU needed). Profiles are parsed by the same parsers as ingest and stored with
origin 'profile:RUN_ID'. NCU locks clocks to base: its durations are not comparable with event timings.

{UNTRUSTED_HELP}

Examples:

  kernel-archive profile 3f9a0c1d2e4b5a67

  kernel-archive profile 3f9a0c1d2e4b5a67 --no-ncu --no-torch      (clang-tidy only, works without a GPU)

  kernel-archive profile 3f9a0c1d2e4b5a67 --ncu-sections SpeedOfLight,Occupancy
"""


def profile(
    kernel_id: Annotated[str, typer.Argument(help="The kernel.")],
    db: DbOption = None,
    ncu_sections: Annotated[str | None, typer.Option("--ncu-sections", help="Comma-separated NCU sections.")] = None,
    no_ncu: Annotated[bool, typer.Option("--no-ncu", help="Skip Nsight Compute.")] = False,
    no_torch: Annotated[bool, typer.Option("--no-torch", help="Skip torch.profiler.")] = False,
    no_clang_tidy: Annotated[bool, typer.Option("--no-clang-tidy", help="Skip clang-tidy.")] = False,
    python: Annotated[str | None, typer.Option("--python", help="Python with CUDA torch to run the script.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    import sys

    from verify.profilers import profile_kernel

    with reporting_errors():
        try:
            result = profile_kernel(
                db, kernel_id, python=python or sys.executable, ncu=not no_ncu, torch_profile=not no_torch,
                clang_tidy=not no_clang_tidy,
                ncu_sections=[s.strip() for s in ncu_sections.split(",")] if ncu_sections else None,
            )
        except (KeyError, ValueError, FileNotFoundError) as error:
            raise fail(str(error).strip("'\"")) from None
    if json_output:
        print_json(result.__dict__)
        return
    out.print(f"origin {result.origin}: {result.ncu_metrics} NCU metrics"
              f"{' (' + result.ncu_kernel[:60] + ')' if result.ncu_kernel else ''}, {result.torch_events} torch events, "
              f"{result.clang_tidy_findings} clang-tidy findings", markup=False, highlight=False, soft_wrap=True)
    for error in result.errors:
        note(f"[yellow]note:[/] {plain(error)}")


REPRODUCE_HELP = """Write a reproduction report: a release's claimed speedups beside our stored verifications.

Every figure comes from the archive's `verifications` rows (run `kernel-archive verify --source ...` or
`kernel-archive verify-import` first); kernels not verified yet are listed as such. Known reports:
cuda-l1-h100 (CUDA-L1's H100 table). See docs/reproductions/README.md.

Example:

  kernel-archive reproduce cuda-l1-h100 -o docs/reproductions/cuda-l1-h100.md
"""


def reproduce(
    name: Annotated[str, typer.Argument(help="Which reproduction, e.g. cuda-l1-h100.")],
    output: Annotated[str | None, typer.Option("-o", "--output", help="Write the markdown here (default: print).")] = None,
    db: DbOption = None,
) -> None:
    from pathlib import Path

    from verify.reproduce import reproduce as render

    with reporting_errors():
        try:
            text = render(db, name)
        except KeyError as error:
            raise fail(str(error).strip("'\"")) from None
    if output is None:
        out.print(text, markup=False, highlight=False)
        return
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(text)
    console.print(f"wrote {output}")


IMPORT_HELP = """Store verification reports written elsewhere (bench/verify_batch.py on a GPU machine) in the archive.

Each line of FILE is {"code_sha256", "report", ...}; the report is stored for the kernel of --source whose
code has that sha256 (lines matching no kernel are counted and skipped).

Example:

  kernel-archive verify-import out/reports-cold.jsonl --source cuda-l1
"""


def verify_import(
    file: Annotated[str, typer.Argument(help="JSON Lines of reports (bench/verify_batch.py's reports-*.jsonl).")],
    source: Annotated[str, typer.Option("--source", help="The source whose kernels the reports verify.")],
    db: DbOption = None,
) -> None:
    import json
    from pathlib import Path

    from archive_db.connection import connect
    from archive_db.verify_queries import kernels_by_code
    from verify.store import store_report

    with reporting_errors():
        lines = [json.loads(line) for line in Path(file).read_text().splitlines() if line.strip()]
        with connect(db, read_only=True) as con:
            ids = kernels_by_code(con, source, [str(line.get("code_sha256")) for line in lines])
        stored = 0
        for line in lines:
            kernel_id = ids.get(str(line.get("code_sha256")))
            if kernel_id is not None:
                store_report(db, line["report"], kernel_id, recorded=True)
                stored += 1
    console.print(f"stored {stored} reports; {len(lines) - stored} matched no kernel of source {source!r}")


def register(app: typer.Typer) -> None:
    """Add verify, eval-script, profile, reproduce and verify-import."""
    app.command("verify", help=VERIFY_HELP)(verify)
    app.command("reproduce", help=REPRODUCE_HELP)(reproduce)
    app.command("verify-import", help=IMPORT_HELP)(verify_import)
    app.command("eval-script", help=EVAL_HELP)(eval_script)
    app.command("profile", help=PROFILE_HELP)(profile)
