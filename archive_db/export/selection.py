"""Which kernels an SFT or DPO export may use: verdicts, near-duplicate collapse, split, top-k.

``select_kernels`` turns the rows of ``queries.kernel_verdicts`` into one frame with, per kernel:

- ``qualified``: may be an SFT completion or a DPO *chosen*: correct (our verifier passed it, or a
  measurement under the filter judged it correct and our verifier did not fail it), not flagged by an
  anti-hack check unless ``include_flagged``, verified when ``verified_only``, at least ``min_speedup``;
- ``negative``: may be a DPO *rejected* for being wrong: judged incorrect by every measurement that
  judged it (a kernel nobody judged is neither correct nor negative), failed by our verifier, or flagged;
- ``fingerprint`` (``dedupe.code_fingerprint``) and ``duplicate``: a kernel whose task already has a
  kernel with the same fingerprint that ranks higher (qualified first, then faster, then kernel_id);
- ``split`` (``split.split_of``) and ``rank`` (1 = fastest qualified kernel of its task).

Our verifier's latest status decides: ``passed`` verifies, ``failed`` (a correctness check failed) makes
the kernel incorrect, ``flagged`` (an anti-hack check failed or warned) flags it; a failed check under
another status (a static-only run) flags it too. Kernels of tasks without reference code cannot be
prompted and are left out (counted in ``stats``).

Example:
    >>> import pandas as pd
    >>> select_kernels(pd.DataFrame(), pd.DataFrame(), ExportRequest("sft")).frame.empty
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from archive_db.export.dedupe import code_fingerprint
from archive_db.export.options import ExportRequest
from archive_db.export.split import split_key, split_of

FLAG_STATUSES: frozenset[str] = frozenset({"flagged"})
FAIL_STATUSES: frozenset[str] = frozenset({"failed"})
PASS_STATUSES: frozenset[str] = frozenset({"passed"})


@dataclass
class Selection:
    """Kernels with their verdicts, and the tasks they belong to (indexed by task_id)."""

    frame: pd.DataFrame
    tasks: pd.DataFrame
    stats: dict[str, Any] = field(default_factory=dict)


def _status_in(status: pd.Series, values: frozenset[str]) -> pd.Series:
    return status.isin(list(values)).fillna(False).astype(bool)


def select_kernels(verdicts: pd.DataFrame, tasks: pd.DataFrame, request: ExportRequest) -> Selection:
    """Annotate ``verdicts`` (``queries.kernel_verdicts``) for an export (see the module docstring)."""
    f = request.filter
    if verdicts.empty:
        return Selection(verdicts, tasks, {"kernels_in_slice": 0})
    frame = verdicts.copy()
    tasks = tasks.set_index("task_id", drop=False)
    promptable = frame["task_id"].map(tasks["reference_code"].notna()).fillna(False).astype(bool)
    stats: dict[str, Any] = {
        "kernels_in_slice": len(frame),
        "kernels_without_reference_task": int((~promptable).sum()),
    }
    frame = frame[promptable].reset_index(drop=True)

    status = frame["verification_status"]
    frame["verified"] = _status_in(status, PASS_STATUSES)
    failed = _status_in(status, FAIL_STATUSES)
    has_failed_check = frame["failed_checks"].map(lambda checks: checks is not None and len(checks) > 0)
    frame["flagged"] = _status_in(status, FLAG_STATUSES) | (has_failed_check & ~failed)
    correct = (frame["verified"] | frame["correct"].fillna(False).astype(bool)) & ~failed
    qualified = correct & (f.include_flagged | ~frame["flagged"])
    if f.verified_only:
        qualified &= frame["verified"]
    if f.min_speedup is not None:
        qualified &= frame["best_speedup"].fillna(-np.inf) >= f.min_speedup
    frame["correct_kernel"] = correct
    frame["qualified"] = qualified
    known_incorrect = frame["correct"].map(lambda v: v is False or v is np.False_)
    frame["negative"] = failed | frame["flagged"] | (known_incorrect & ~frame["verified"])

    frame["fingerprint"] = [code_fingerprint(c, form) for c, form in zip(frame["code"], frame["form"], strict=True)]
    order = frame.sort_values(
        ["task_id", "qualified", "best_speedup", "kernel_id"],
        ascending=[True, False, False, True],
        na_position="last",
    )
    duplicate = order.duplicated(["task_id", "fingerprint"], keep="first")
    frame["duplicate"] = duplicate.reindex(frame.index)
    if request.keep_duplicates:
        frame["duplicate"] = False
    stats["near_duplicates_collapsed"] = int(frame["duplicate"].sum())

    names = frame["task_id"].map(tasks["task_name"])
    keys = {tid: split_key(name if isinstance(name, str) else None, tid)
            for tid, name in zip(frame["task_id"], names, strict=True)}
    split_by_task = {tid: split_of(key, request.test_size) for tid, key in keys.items()}
    frame["split"] = frame["task_id"].map(split_by_task)

    ranked = frame[frame["qualified"] & ~frame["duplicate"]].sort_values(
        ["task_id", "best_speedup", "kernel_id"], ascending=[True, False, True], na_position="last"
    )
    frame["rank"] = ranked.groupby("task_id").cumcount().add(1).reindex(frame.index)
    top = frame["qualified"] & ~frame["duplicate"]
    if f.top_k is not None:
        top &= frame["rank"] <= f.top_k
    frame["chosen_pool"] = top
    stats.update(
        kernels_qualified=int((frame["qualified"] & ~frame["duplicate"]).sum()),
        kernels_negative=int((frame["negative"] & ~frame["duplicate"]).sum()),
        kernels_verified=int(frame["verified"].sum()),
        kernels_flagged=int(frame["flagged"].sum()),
        kernels_failed_by_verifier=int(failed.sum()),
    )
    return Selection(frame, tasks, stats)
