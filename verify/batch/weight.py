"""Heavy kernels: the ones whose GPU work comes in pieces too long to share a GPU with light kernels' timed work.

In the shared gate (``verify.harness.gate``) a timed series waits for the GPU alone, and so for every piece of
untimed work already running. Most pieces last milliseconds; a heavy kernel's last seconds and cannot give way:
a candidate that compiles itself (``torch.compile``: its first call compiles and autotunes for 5-14 s) or a task
whose outputs run to gigabytes (each trial, reference and comparison moves them). In session 42 two such kernels
tripled every other seat's hold (``docs/verify-batch.md``). ``HEAVY_RULES`` says what makes a kernel heavy;
with the ``first`` or ``last`` policy (``--heavy``, ``KA_BATCH_HEAVY``) a batch verifies its heavy kernels before or
after every light one, at most ``HEAVY_SEATS`` of them on a GPU at once. Scheduling only: a heavy kernel gets the
same checks and report as any other (its report's ``batch.heavy`` says why it was weighed heavy).

Example:
    >>> from verify.jobs import VerifyJob
    >>> jobs = [VerifyJob(key=k, task_code="t", kernel_code=c, form="model-new") for k, c in
    ...         [("a", "x = 1"), ("b", "import torch\\nf = torch.compile(g)"), ("c", "y = 2")]]
    >>> heavy = self_tuning(jobs)
    >>> heavy, [j.key for j in heavy_order(jobs, heavy)]
    ({'b': 'self-tuning: calls torch.compile'}, ['a', 'c', 'b'])
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verify.batch.plan import task_of

if TYPE_CHECKING:
    from verify.jobs import VerifyJob

HEAVY_POLICIES: tuple[str, ...] = ("mixed", "first", "last")
"""``mixed``: heavy kernels take their place in the plan like any other. ``first``: before every light one, so the
longest verifications start at once. ``last``: after every light one. Under ``first`` and ``last`` at most
``HEAVY_SEATS`` heavy kernels run on a GPU at once."""

BATCH_HEAVY = "mixed"
"""The batch's default policy; ``KA_BATCH_HEAVY`` or ``--heavy`` overrides it. On the bench's sample of 40 (session 43,
one H200) ``last`` finished 30 kernels in 111 s against 270 s, and the 40th at 401 s against 309 s: a batch ends with
its longest verification, which ``last`` starts late. ``first`` ran slower than ``mixed`` in both pairs of passes on
one H200 (session 48: 8.68 and 8.39 kernels/min against 9.76 and 8.69): its heavy kernels run together and slow each
other."""

HEAVY_SEATS = 2
"""Heavy kernels running on one GPU at once under ``first`` and ``last``: a batch slot takes a heavy kernel only while
fewer run on its GPU (``verify.batch.workers.LocalBatch``), because heavy pieces stall each other's timed work as they
stall light kernels'. (Session 43's first version gave heavy scripts ``KA_GPU_SEATS=2`` instead, so they took only the
GPU's first two seat files, the ones light kernels take first too: level 2 task 34 waited 78 s for one.)"""

HEAVY_OUTPUT_BYTES = 512 * 2**20
"""Outputs (in the task's own dtype) from which a task is heavy. Of the CUDA-L1 H100 file's 250 tasks, 20 reach it
(the largest, level 1 task 11, 6.4 GB); in session 42 level 2 task 60 (1.0 GB) was stopped unfinished after sharing
its GPU for the whole cold pass, and level 2 task 34 (4.3 GB) ran pieces of up to 10.6 s."""

SIZING_TIMEOUT_S = 120.0
"""The sizing child's time limit over all tasks; tasks not sized by then count as light."""


@dataclass(frozen=True)
class HeavyRule:
    """One reason a kernel is heavy: its ``name`` (the reason's first word), what it looks for and why that is heavy."""

    name: str
    looks_for: str
    why: str


HEAVY_RULES: tuple[HeavyRule, ...] = (
    HeavyRule("self-tuning", "a call of torch.compile, or torch._inductor / torch._dynamo settings, in the candidate",
              "the first call compiles and autotunes on the GPU for seconds (level 2 task 49: 13.6 s cold, 4.9 s with "
              "Inductor's cache warm; level 2 tasks 34 and 85 stopped unfinished in session 42)"),
    HeavyRule("large-output", f"reference outputs of {HEAVY_OUTPUT_BYTES // 2**20} MiB or more, sized on the meta "
                              "device (verify/harness/sizing.py)",
              "every reference, trial and comparison moves the outputs (level 2 task 34: 4.3 GB, pieces up to 10.6 s)"),
)
"""The rules ``weigh`` applies, in order; a kernel's first matching rule is its reason."""


def policy(value: str | None = None) -> str:
    """The heavy policy: ``value``, else ``KA_BATCH_HEAVY``, else ``BATCH_HEAVY``.

    Example:
        >>> policy("last")
        'last'
    """
    chosen = value or os.environ.get("KA_BATCH_HEAVY") or BATCH_HEAVY
    if chosen not in HEAVY_POLICIES:
        raise ValueError(f"the heavy policy (--heavy or KA_BATCH_HEAVY) must be one of {', '.join(HEAVY_POLICIES)}, "
                         f"not {chosen!r}")
    return chosen


def _torch_path(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def calls_torch_compile(code: str) -> str | None:
    """What in ``code`` makes PyTorch compile it at run time (``torch.compile``, Inductor or Dynamo settings), or None.

    Comments and strings do not count: the code is parsed, not searched.

    Example:
        >>> calls_torch_compile("import torch\\n# torch.compile(m)\\ns = 'torch.compile'"), calls_torch_compile(
        ...     "import torch._inductor.config as c\\n")
        (None, 'imports torch._inductor.config')
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name == "torch.compile":
                    return "imports torch.compile"
                if name.startswith(("torch._inductor", "torch._dynamo")):
                    return f"imports {name}"
        elif isinstance(node, ast.Attribute) and (path := _torch_path(node)):
            if path == "torch.compile":
                return "calls torch.compile"
            if path.startswith(("torch._inductor", "torch._dynamo")):
                return f"uses {'.'.join(path.split('.')[:2])}"
    return None


def self_tuning(jobs: Collection[VerifyJob]) -> dict[str, str]:
    """The jobs whose candidate compiles itself, keyed to their reason (``self-tuning: ...``)."""
    found = {job.key: calls_torch_compile(job.kernel_code) for job in jobs}
    return {key: f"self-tuning: {what}" for key, what in found.items() if what}


def task_output_bytes(jobs: Collection[VerifyJob], python: str = sys.executable, *,
                      timeout_s: float = SIZING_TIMEOUT_S,
                      on_error: Callable[[str, str], None] | None = None) -> dict[str, int]:
    """Each task's output bytes (``task_of``), sized in one child process running ``verify/harness/sizing.py``.

    A task the child could not size is left out (``on_error(task, why)`` hears of it), and so is every task once
    ``timeout_s`` has passed or when the child cannot start: a task not sized counts as light.
    """
    tasks: dict[str, str] = {}
    for job in jobs:
        tasks.setdefault(task_of(job), job.task_code)
    if not tasks:
        return {}
    # Here, not at the top: the CLI imports this module for --heavy's help, and the harness's parent takes 0.15 s.
    from verify.harness.parent import scrubbed_environment

    script = Path(__file__).resolve().parent.parent / "harness" / "sizing.py"
    lines = "".join(json.dumps({"task": key, "code": code}) + "\n" for key, code in tasks.items())
    home = tempfile.TemporaryDirectory(prefix="ka-sizing-")
    # The trusted child's environment (allowlisted, a home of its own), without a GPU: task code sees no tokens.
    env = scrubbed_environment(dict(os.environ), home.name) | {"CUDA_VISIBLE_DEVICES": ""}
    try:
        done = subprocess.run([python, str(script)], input=lines, capture_output=True, text=True, env=env,
                              cwd=home.name, timeout=timeout_s, check=False)
        out = done.stdout
        if done.returncode != 0 and on_error is not None:
            on_error("*", f"the sizing child exited with {done.returncode}: {done.stderr.strip()[-300:]}")
    except subprocess.TimeoutExpired as stopped:
        out = stopped.stdout.decode() if isinstance(stopped.stdout, bytes) else (stopped.stdout or "")
        if on_error is not None:
            on_error("*", f"the sizing child ran past {timeout_s:g} s")
    except OSError as error:
        if on_error is not None:
            on_error("*", f"the sizing child did not start: {error}")
        return {}
    finally:
        home.cleanup()
    sizes: dict[str, int] = {}
    for line in out.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "output_bytes" in row:
            sizes[row["task"]] = int(row["output_bytes"])
        elif on_error is not None:
            on_error(str(row.get("task")), str(row.get("error")))
    return sizes


def weigh(jobs: Collection[VerifyJob], python: str = sys.executable, *,
          sizes: Mapping[str, int] | None = None) -> dict[str, str]:
    """The heavy jobs among ``jobs``, keyed to their reason (``HEAVY_RULES``, first match).

    ``sizes`` (task key to output bytes) defaults to ``task_output_bytes(jobs, python)``.

    Example:
        >>> from verify.jobs import VerifyJob
        >>> jobs = [VerifyJob(key="k", task_code="t", kernel_code="", form="model-new", task_key="T")]
        >>> weigh(jobs, sizes={"T": 2**30})
        {'k': 'large-output: 1.07 GB of outputs'}
    """
    heavy = self_tuning(jobs)
    sizes = task_output_bytes(jobs, python) if sizes is None else sizes
    for job in jobs:
        size = sizes.get(task_of(job))
        if job.key not in heavy and size is not None and size >= HEAVY_OUTPUT_BYTES:
            heavy[job.key] = f"large-output: {size / 1e9:.2f} GB of outputs"
    return heavy


def heavy_order(jobs: list[VerifyJob], heavy: Collection[str], *, where: str = "last",
                first: Collection[str] = ()) -> list[VerifyJob]:
    """``jobs`` with those keyed in ``first`` at the front, then the ``heavy`` ones (not in ``first``) before the
    others (``where="first"``) or after them (``"last"``), each group in its own order.

    Example:
        >>> from verify.jobs import VerifyJob
        >>> jobs = [VerifyJob(key=k, task_code="t", kernel_code=k, form="model-new") for k in "abcd"]
        >>> [j.key for j in heavy_order(jobs, {"a", "c"}, first={"c"})], [j.key for j in heavy_order(jobs, {"d"},
        ...                                                                                           where="first")]
        (['c', 'b', 'd', 'a'], ['d', 'a', 'b', 'c'])
    """
    if where not in ("first", "last"):
        raise ValueError(f"heavy kernels go first or last, not {where!r}")
    heavy_rank = 1 if where == "first" else 3
    return sorted(jobs, key=lambda job: 0 if job.key in first else heavy_rank if job.key in heavy else 2)


def weigh_for_batch(jobs: list[VerifyJob], python: str, chosen: str | None = None,
                    log: Callable[[str], None] | None = None) -> dict[str, str]:
    """The heavy jobs a batch should put first or last under ``policy(chosen)`` (none under ``mixed``), logging a
    summary."""
    chosen = policy(chosen)
    if chosen == "mixed":
        return {}
    t0 = time.monotonic()
    errors: list[str] = []
    sizes = task_output_bytes(jobs, python, on_error=lambda task, why: errors.append(f"{task}: {why}"))
    heavy = weigh(jobs, python, sizes=sizes)
    if log is not None:
        log(f"weighed {len(jobs)} kernels in {time.monotonic() - t0:.1f} s: {len(heavy)} heavy, verified {chosen}"
            + (f"; {len(errors)} tasks not sized ({errors[0]}{', ...' if len(errors) > 1 else ''})" if errors else ""))
    return heavy
