"""Files a kernel page offers for download: the kernel source and a standalone eval script.

The eval script comes from ``verify.script.render_eval_script`` (the same generator ``kernel-archive
verify`` runs), called only when the user clicks the button: rendering embeds the whole harness and takes
a few hundred milliseconds, too long for every page load. This module is the one place that calls it.

Example:
    >>> source_file_name({"name": "conv/../../x y", "form": "cuda-binding"})
    'conv_x_y.cu'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archive_db.queries import KernelDetail

SOURCE_SUFFIX: dict[str, str] = {"cuda-binding": ".cu", "cuda-source": ".cu", "model-new": ".py"}


@dataclass(frozen=True)
class Download:
    """A file to offer: its name, and its text or a function that makes it on demand."""

    file_name: str
    data: str | Callable[[], str]


def safe_stem(name: str) -> str:
    """``name`` reduced to characters safe in a file name (at most 80)."""
    return re.sub(r"[^0-9A-Za-z_-]+", "_", name).strip("_")[:80] or "kernel"


def source_file_name(kernel: dict[str, Any]) -> str:
    """The download name of a kernel's source, with the suffix of its form."""
    return safe_stem(str(kernel["name"])) + SOURCE_SUFFIX.get(str(kernel["form"]), ".txt")


def eval_script(detail: KernelDetail) -> Download | str:
    """The kernel's standalone eval script (made on demand), or the reason it has none.

    The reasons mirror what ``verify.script.render_script`` refuses, checked here without rendering.
    """
    from verify.script import VERIFIABLE_FORMS, render_eval_script

    kernel, task = detail.kernel, detail.task
    if kernel.get("form") not in VERIFIABLE_FORMS:
        return f"kernels of form {kernel.get('form')!r} cannot be verified (only {', '.join(VERIFIABLE_FORMS)})"
    if not kernel.get("code"):
        return "the source released this kernel's timings, not its code"
    if not task.get("reference_code"):
        return "the source named this task without releasing its reference code"
    return Download(f"eval_{safe_stem(str(kernel['kernel_id']))}.py", lambda: render_eval_script(detail))
