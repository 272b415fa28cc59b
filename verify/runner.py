"""Running the eval script for the CLI: one kernel or a batch, each result stored in the archive.

The CLI renders the same script ``kernel-archive eval-script`` writes, runs it with a Python that has
torch (``--python``, default the current one), reads the JSON report it writes, and stores it. The
script is the parent; its children run the candidate. Running archive code is running untrusted code.

Example:
    >>> VerifyOptions().trials
    5
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify.script import VERIFIABLE_FORMS, render_eval_script, write_script


@dataclass
class VerifyOptions:
    """How to run the script: trials, static-only, interpreter, timeouts and extra checks."""

    trials: int = 5
    static_only: bool = False
    python: str = field(default_factory=lambda: sys.executable)
    device: str = "cuda"
    sanitize: bool = False
    compile_baseline: bool = True
    shape_probe: bool = True
    target_seconds: float = 1.0
    compile_timeout: float = 900.0
    run_timeout: float = 600.0
    seed: int | None = None

    def arguments(self) -> list[str]:
        """The script's command-line arguments for these options."""
        args = ["--trials", str(self.trials), "--device", self.device, "--target-seconds", str(self.target_seconds),
                "--compile-timeout", str(self.compile_timeout), "--run-timeout", str(self.run_timeout)]
        if self.static_only:
            args.append("--static-only")
        if self.sanitize:
            args.append("--sanitize")
        if not self.compile_baseline:
            args.append("--no-compile-baseline")
        if not self.shape_probe:
            args.append("--no-shape-probe")
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        return args

    def timeout(self) -> float:
        """An outer limit on the whole script (every child step plus margin)."""
        if self.static_only:
            return 120.0
        return 900.0 + self.compile_timeout + self.run_timeout * (5 if self.sanitize else 1) + 300.0


class VerifyError(RuntimeError):
    """The script could not produce a report (interpreter missing, script crashed, no JSON)."""


class ScriptKilled(VerifyError):
    """The eval script was killed by a signal before it wrote a report (on a host a batch loads, most often the
    kernel's out-of-memory killer; ``signal`` is its number)."""

    def __init__(self, message: str, signal: int) -> None:
        super().__init__(message)
        self.signal = signal


class BatchStopped(RuntimeError):
    """The script was stopped at its batch's hard time limit (``stop_at``): no verdict, and no error either;
    a resumed batch verifies the kernel again. ``marks`` are the parent's timeline marks it had passed (seconds
    since its start, name): how far it got; ``origin`` is that start on the host's monotonic clock (None when the
    parent had not started)."""

    def __init__(self, message: str, marks: list[tuple[float, str]] | None = None,
                 origin: float | None = None) -> None:
        super().__init__(message)
        self.marks = marks or []
        self.origin = origin


ScriptStart = Callable[[list[str], dict[str, str], float], "tuple[int, str] | None"]
"""Another way to run an eval script's command: ``start(command, env, timeout_s)`` gives its exit code and the end
of its output, or None where it cannot (the script then runs as a subprocess), and raises
``subprocess.TimeoutExpired``, the script stopped, past ``timeout_s``. A batch slot forks the script's parent from
its zygote so (``verify.batch.zygotes``)."""


def run_script(script: Path, options: VerifyOptions, *, build_dir: str | os.PathLike[str] | None = None,
               env: dict[str, str] | None = None, stop_at: float | None = None,
               pass_fds: tuple[int, ...] = (), start: ScriptStart | None = None) -> dict[str, Any]:
    """Run an eval script and return its JSON report.

    ``build_dir``: a build-cache entry the kernel is built in (reused when already built); ``env``: variables
    set for the script on top of this process's (e.g. ``CUDA_VISIBLE_DEVICES`` of one GPU); ``stop_at``: a
    ``time.time()`` at which a batch stops the script whatever it is doing; ``pass_fds``: descriptors the
    script inherits (a batch slot's zygote connection, ``verify.batch.zygotes``); ``start``: runs the script
    instead of a subprocess where it can (the report's ``parent_started`` says whether it did).

    Raises:
        VerifyError: no report came back; the message carries the script's last output (``ScriptKilled``: a
            signal ended the script).
        BatchStopped: ``stop_at`` came first.
    """
    from verify.harness.parent import MARKS_FILE_ENV, read_mark_log

    timeout = options.timeout()
    if stop_at is not None:
        remaining = stop_at - time.time()
        if remaining <= 0:
            raise BatchStopped("the batch's time limit had passed before the eval script started")
        timeout = min(timeout, remaining)
    with tempfile.TemporaryDirectory(prefix="ka-verify-report-") as folder:
        report_path = Path(folder) / "report.json"
        marks_path = Path(folder) / "marks.tsv"
        if stop_at is not None:
            env = (env or {}) | {MARKS_FILE_ENV: str(marks_path)}
        command = [options.python, str(script), "--json", "--report", str(report_path), *options.arguments()]
        if build_dir is not None:
            command += ["--build-dir", str(build_dir)]
        try:
            started = start(command, {**os.environ, **(env or {})}, timeout) if start is not None else None
            forked = started is not None
            if started is None:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, pass_fds=pass_fds,
                                      stdin=subprocess.DEVNULL, env={**os.environ, **env} if env else None)
                started = done.returncode, done.stderr or done.stdout or ""
        except FileNotFoundError as error:
            raise VerifyError(f"cannot run {options.python!r}: {error}; pass --python PATH to a Python with torch") from None
        except subprocess.TimeoutExpired:
            if timeout < options.timeout():
                origin, marks = read_mark_log(marks_path)
                raise BatchStopped(f"stopped at the batch's time limit after {timeout:.0f}s", marks, origin) from None
            raise VerifyError(f"the eval script ran past {options.timeout():.0f}s and was stopped") from None
        if not report_path.is_file():
            code, output = started
            message = f"the eval script exited with code {code} and wrote no report:\n{output[-2000:]}"
            if code < 0:
                raise ScriptKilled(message, -code)
            raise VerifyError(message)
        report = json.loads(report_path.read_text())
        if start is not None:
            report["parent_started"] = "forked from the slot's zygote" if forked else "exec"
        return report


def verify_code(
    task_code: str,
    kernel_code: str,
    form: str,
    options: VerifyOptions | None = None,
    *,
    functional_code: str | None = None,
    meta: dict[str, Any] | None = None,
    build_dir: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    stop_at: float | None = None,
    pass_fds: tuple[int, ...] = (),
    fork: Callable[..., tuple[int, str] | None] | None = None,
) -> dict[str, Any]:
    """Verify code that is not in an archive (a kernel you just generated); returns the report.

    ``build_dir``, ``env``, ``stop_at`` and ``pass_fds`` are passed to ``run_script`` (the batch pipeline's
    build cache, GPU, hard time limit and slot zygote), and ``fork`` too, given the script's ``embedded`` (a
    ``ScriptStart`` once it has it: ``verify.batch.zygotes.SlotZygotes.for_script``).

    Example:
        >>> # verify_code(open("task.py").read(), open("kernel.cu").read(), "cuda-binding")
    """
    from verify.script import embedded_values, render_script

    text = render_script(task_code=task_code, functional_code=functional_code, kernel_code=kernel_code, form=form,
                         meta=meta or {})
    start = None if fork is None else functools.partial(fork, embedded=embedded_values(
        task_code=task_code, functional_code=functional_code, kernel_code=kernel_code, form=form, meta=meta))
    with tempfile.TemporaryDirectory(prefix="ka-verify-script-") as folder:
        script = write_script(text, Path(folder) / "eval_kernel.py")
        return run_script(script, options or VerifyOptions(), build_dir=build_dir, env=env, stop_at=stop_at,
                          pass_fds=pass_fds, start=start)


def load_detail(db: str | os.PathLike[str] | None, kernel_id: str) -> Any:
    """The kernel's ``KernelDetail`` through a short read-only connection.

    Raises:
        KeyError: no such kernel.
    """
    from archive_db.connection import connect
    from archive_db.queries import kernel_detail

    with connect(db, read_only=True) as con:
        detail = kernel_detail(con, kernel_id)
    if detail is None:
        raise KeyError(f"no kernel {kernel_id!r} in the archive; find ids with `kernel-archive leaderboard --json`")
    return detail


def verify_kernel(
    db: str | os.PathLike[str] | None,
    kernel_id: str,
    options: VerifyOptions,
    *,
    store: bool = True,
) -> dict[str, Any]:
    """Render, run and (unless ``store`` is False) store the verification of one kernel; returns the report."""
    from verify.store import store_report

    detail = load_detail(db, kernel_id)
    text = render_eval_script(detail)
    with tempfile.TemporaryDirectory(prefix="ka-verify-script-") as folder:
        script = write_script(text, Path(folder) / f"eval_{kernel_id}.py")
        report = run_script(script, options)
    if store:
        report["verification_id"] = store_report(db, report, kernel_id)
    return report


def select_kernels(
    db: str | os.PathLike[str] | None,
    *,
    task: str | None = None,
    source: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Verifiable kernels (code, a verifiable form, a task with reference code) of a task or a source."""
    from archive_db.connection import connect
    from archive_db.queries import verifiable_kernels

    with connect(db, read_only=True) as con:
        return verifiable_kernels(con, VERIFIABLE_FORMS, task=task, source=source, limit=limit)
