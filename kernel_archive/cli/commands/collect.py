"""``kernel-archive collect``: verify and profile a run folder on this machine's GPU (kernel_archive.collect)."""

from __future__ import annotations

from typing import Annotated

import typer

from kernel_archive.cli.commands.verify import UNTRUSTED, UNTRUSTED_HELP
from kernel_archive.cli.common import console, fail, out, progress_bar

COLLECT_HELP = f"""Verify and profile every kernel of a run folder here, writing the results into the folder.

For each kernel it writes `results/<task>/<kernel>.json` (the `kernel-archive verify` report, through the
batch verification pipeline), `.torch.json` and `.ncu.csv` (torch.profiler key averages and
`ncu --csv --page details`), and `.clang-tidy.txt`. Steps whose file exists are skipped, so an
interrupted collect resumes (`--force` redoes them). It needs torch, nvcc and ncu but no DuckDB: profile
a run on a GPU machine, then `kernel-archive ingest run-dir PATH` anywhere. The folder layouts are in
docs/run-folders.md (your own, KernelBench's `runs/<run>`, or a plain folder of kernel files).

{UNTRUSTED_HELP}

Examples:

  kernel-archive collect runs/my-run --i-understand-this-runs-untrusted-code

  kernel-archive collect runs/my-run --no-verify --device cpu        (clang-tidy only; runs no kernel code)

  kernel-archive collect runs/my-run --time-limit 540 --i-understand-this-runs-untrusted-code   (resume later)

  kernel-archive collect KernelBench/runs/test --kernelbench KernelBench --no-ncu --i-understand-this-runs-untrusted-code

On a machine without typer and rich: `python -m kernel_archive.collect PATH ...` takes the same flags.
"""


def collect(
    path: Annotated[str, typer.Argument(help="The run folder.")],
    untrusted_ok: Annotated[bool, typer.Option(
        "--i-understand-this-runs-untrusted-code",
        help="Required unless only clang-tidy runs: you accept running the run's kernels on this machine.")] = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip verification.")] = False,
    no_ncu: Annotated[bool, typer.Option("--no-ncu", help="Skip Nsight Compute.")] = False,
    no_torch_profile: Annotated[bool, typer.Option("--no-torch-profile", help="Skip torch.profiler.")] = False,
    no_clang_tidy: Annotated[bool, typer.Option("--no-clang-tidy", help="Skip clang-tidy.")] = False,
    device: Annotated[str, typer.Option(
        "--device", help="cuda, or cpu for a clang-tidy-only run on a machine without a GPU.")] = "cuda",
    force: Annotated[bool, typer.Option("--force", help="Redo steps whose results exist.")] = False,
    profile_jobs: Annotated[int | None, typer.Option(
        "--profile-jobs", min=1, help="Kernels profiled (and clang-tidied) at once. Default: two per GPU, which "
        "take the GPU in turn (one starts up while the other is measured); clang-tidy: one per core.")] = None,
    trials: Annotated[int, typer.Option("--trials", min=1, help="Correctness trials per kernel.")] = 5,
    no_compile_baseline: Annotated[
        bool, typer.Option("--no-compile-baseline", help="Skip the torch.compile baseline (faster).")] = False,
    no_shape_probe: Annotated[
        bool, typer.Option("--no-shape-probe", help="Do not try the kernels at other input shapes.")] = False,
    time_limit: Annotated[float | None, typer.Option(
        "--time-limit", metavar="SECONDS", help="Start no new kernel after this long; run again to go on.")] = None,
    python: Annotated[str | None, typer.Option("--python", help="Python with CUDA torch to run the scripts.")] = None,
    no_batch: Annotated[bool, typer.Option(
        "--no-batch", help="Verify one kernel after another instead of through the batch pipeline.")] = False,
    gpus: Annotated[str | None, typer.Option(
        "--gpus", help="Batch: GPUs to use, a count or a comma list of ids (default: all visible).")] = None,
    compile_workers: Annotated[int | None, typer.Option(
        "--compile-workers", min=1, help="Batch: kernels built at once.")] = None,
    build_cache: Annotated[str | None, typer.Option("--build-cache", help="Batch: the build cache folder.")] = None,
    task: Annotated[str | None, typer.Option(
        "--task", help="KernelBench / plain layouts: a reference file, or a folder matched by name.")] = None,
    kernelbench: Annotated[str | None, typer.Option(
        "--kernelbench", help="KernelBench / plain layouts: a KernelBench checkout to match tasks in.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    from ingest.run_folder import RunFolderError
    from kernel_archive.collect import CollectOptions, summary_lines
    from kernel_archive.collect import collect as run_collect

    if device not in ("cuda", "cpu"):
        raise fail(f"--device {device!r}: expected cuda or cpu", 2)
    options = CollectOptions(verify=not no_verify, ncu=not no_ncu, torch_profile=not no_torch_profile,
                             clang_tidy=not no_clang_tidy, device=device, force=force, profile_jobs=profile_jobs,
                             trials=trials, task=task, kernelbench=kernelbench,
                             compile_baseline=not no_compile_baseline, shape_probe=not no_shape_probe,
                             time_limit_s=time_limit, batch=not no_batch, gpus=gpus,
                             compile_workers=compile_workers, build_cache=build_cache)
    if python:
        options.python = python
    if options.runs_code():
        if not untrusted_ok:
            raise fail("collect runs the kernels' code: pass --i-understand-this-runs-untrusted-code "
                       "(or --no-verify --device cpu for clang-tidy only)", 2)
        console.print(UNTRUSTED)
    # Not reporting_errors(): it imports archive_db, and collect runs where DuckDB is not installed.
    with progress_bar(enabled=not quiet) as bar:
        try:
            summary = run_collect(path, options, progress=bar)
        except (RunFolderError, FileNotFoundError) as error:
            raise fail(str(error)) from None
    out.print("\n".join(summary_lines(summary)), highlight=False)


def register(app: typer.Typer) -> None:
    app.command(help=COLLECT_HELP)(collect)
