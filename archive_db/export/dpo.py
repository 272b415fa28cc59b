"""The DPO export: ``prompt`` / ``chosen`` / ``rejected`` pairs of kernels for the same task.

Rows follow TRL's *conversational preference* format with an explicit prompt: ``prompt`` is the task
as system + user messages, ``chosen`` and ``rejected`` each hold one assistant message. Pairs are drawn
per task as ``options.PairingPolicy`` says:

- *faster*: both correct (and the rejected one not flagged), same form, measured on the same GPU, chosen speedup >= rejected speedup *
  (1 + min_margin); the chosen kernel comes from the task's chosen pool (qualified, top-k);
- *incorrect*: a chosen-pool kernel against a kernel of the same form that is incorrect at the source,
  failed by our verifier or flagged by an anti-hack check.

Candidates are de-duplicated by (chosen, rejected) and drawn without replacement with a generator
seeded by (seed, task_id), so an export is reproducible and one task's draw does not depend on others.

Example:
    >>> DPO_SCHEMA.names[:3]
    ['prompt', 'chosen', 'rejected']
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from archive_db.export.options import ExportRequest, PairingPolicy
from archive_db.export.prompts import completion_message, prompt_messages
from archive_db.export.result import ExportResult
from archive_db.export.selection import Selection
from archive_db.export.sft import MESSAGES, as_int, as_str
from archive_db.export.split import SPLITS

DPO_SCHEMA = pa.schema(
    [
        ("prompt", MESSAGES),
        ("chosen", MESSAGES),
        ("rejected", MESSAGES),
        ("task_id", pa.string()),
        ("level", pa.int32()),
        ("problem_id", pa.int32()),
        ("task_name", pa.string()),
        ("category", pa.string()),
        ("form", pa.string()),
        ("pair_kind", pa.string()),
        ("gpu", pa.string()),
        ("speedup_baseline", pa.string()),
        ("chosen_kernel_id", pa.string()),
        ("rejected_kernel_id", pa.string()),
        ("chosen_speedup", pa.float64()),
        ("rejected_speedup", pa.float64()),
        ("chosen_source", pa.string()),
        ("rejected_source", pa.string()),
        ("licenses", pa.list_(pa.string())),
        ("rejected_reason", pa.string()),
    ]
)


def _rng(seed: int, task_id: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def _faster_candidates(kernels: pd.DataFrame, margin: float) -> list[tuple[int, int, str, float, float]]:
    """(chosen row, rejected row, gpu, chosen speedup, rejected speedup) over every form and GPU."""
    per_gpu: dict[tuple[str, str], list[tuple[int, float, bool]]] = {}
    usable = kernels["correct_kernel"] & (kernels["qualified"] | ~kernels["flagged"])
    for idx, form, speedups, pool, ok in zip(
        kernels.index, kernels["form"], kernels["gpu_speedups"], kernels["chosen_pool"], usable, strict=True
    ):
        if not ok or not isinstance(speedups, list | np.ndarray):
            continue
        for entry in speedups:
            if entry["speedup"] is not None:
                per_gpu.setdefault((form, entry["gpu"]), []).append((idx, float(entry["speedup"]), bool(pool)))
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, int, str, float, float]] = []
    for (_, gpu), entries in sorted(per_gpu.items()):
        if len(entries) < 2:
            continue
        idx = np.array([e[0] for e in entries])
        speed = np.array([e[1] for e in entries])
        pool = np.array([e[2] for e in entries])
        ok = (speed[:, None] >= speed[None, :] * (1.0 + margin)) & (speed[:, None] > speed[None, :])
        ok &= pool[:, None]
        for i, j in zip(*np.nonzero(ok), strict=True):
            pair = (int(idx[i]), int(idx[j]))
            if pair not in seen:
                seen.add(pair)
                out.append((pair[0], pair[1], gpu, float(speed[i]), float(speed[j])))
    return out


def _incorrect_candidates(kernels: pd.DataFrame) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for _, group in kernels.groupby("form", sort=True):
        chosen = group.index[group["chosen_pool"].to_numpy()]
        rejected = group.index[group["negative"].to_numpy() & ~group["qualified"].to_numpy()]
        out.extend((int(c), int(r)) for c in chosen for r in rejected)
    return out


def _draw(n_candidates: int, n: int, rng: np.random.Generator) -> list[int]:
    if n <= 0 or n_candidates == 0:
        return []
    return sorted(rng.choice(n_candidates, size=min(n, n_candidates), replace=False).tolist())


def pair_task(kernels: pd.DataFrame, policy: PairingPolicy, task_id: str) -> list[dict[str, Any]]:
    """The pairs drawn for one task's kernels (rows of a selection frame, duplicates removed)."""
    faster = _faster_candidates(kernels, policy.min_margin)
    incorrect = _incorrect_candidates(kernels)
    n_incorrect = min(len(incorrect), round(policy.max_pairs_per_task * policy.incorrect_share))
    n_faster = min(len(faster), policy.max_pairs_per_task - n_incorrect)
    n_incorrect = min(len(incorrect), policy.max_pairs_per_task - n_faster)
    rng = _rng(policy.seed, task_id)
    pairs: list[dict[str, Any]] = []
    for i in _draw(len(faster), n_faster, rng):
        c, r, gpu, cs, rs = faster[i]
        pairs.append({"chosen": c, "rejected": r, "pair_kind": "faster", "gpu": gpu or None,
                      "chosen_speedup": cs, "rejected_speedup": rs, "rejected_reason": "slower"})
    for i in _draw(len(incorrect), n_incorrect, rng):
        c, r = incorrect[i]
        row = kernels.loc[r]
        reason = ("failed-verification" if row["verification_status"] == "failed"
                  else "flagged" if row["flagged"] else "incorrect")
        best = kernels.loc[c, "best_speedup"]
        pairs.append({"chosen": c, "rejected": r, "pair_kind": "incorrect", "gpu": None,
                      "chosen_speedup": None if best != best else float(best), "rejected_speedup": None,
                      "rejected_reason": reason})
    return pairs


def build_dpo(selection: Selection, request: ExportRequest) -> ExportResult:
    """DPO pairs from ``selection`` (``selection.select_kernels``), split by task."""
    frame = selection.frame
    rows: dict[str, list[dict[str, object]]] = {split: [] for split in SPLITS}
    sources: set[str] = set()
    kinds = {"faster": 0, "incorrect": 0}
    if not frame.empty:
        usable = frame[~frame["duplicate"]]
        tasks = selection.tasks
        for task_id, kernels in usable.groupby("task_id", sort=True):
            pairs = pair_task(kernels, request.pairing, str(task_id))
            if not pairs:
                continue
            task = tasks.loc[task_id]
            prompts: dict[str, list[dict[str, str]]] = {}
            for pair in pairs:
                chosen, rejected = kernels.loc[pair["chosen"]], kernels.loc[pair["rejected"]]
                form = chosen["form"]
                if form not in prompts:
                    prompts[form] = prompt_messages(task["reference_code"], as_str(task["functional_code"]), form)
                sources.update((chosen["source"], rejected["source"]))
                kinds[pair["pair_kind"]] += 1
                rows[chosen["split"]].append(
                    {
                        "prompt": prompts[form],
                        "chosen": completion_message(chosen["code"], form),
                        "rejected": completion_message(rejected["code"], form),
                        "task_id": str(task_id),
                        "level": as_int(task["level"]),
                        "problem_id": as_int(task["problem_id"]),
                        "task_name": as_str(task["task_name"]),
                        "category": as_str(task["category"]),
                        "form": form,
                        "pair_kind": pair["pair_kind"],
                        "gpu": pair["gpu"],
                        "speedup_baseline": request.filter.sort_by,
                        "chosen_kernel_id": chosen["kernel_id"],
                        "rejected_kernel_id": rejected["kernel_id"],
                        "chosen_speedup": pair["chosen_speedup"],
                        "rejected_speedup": pair["rejected_speedup"],
                        "chosen_source": chosen["source"],
                        "rejected_source": rejected["source"],
                        "licenses": sorted({as_str(chosen["license"]) or "unknown",
                                            as_str(rejected["license"]) or "unknown"}),
                        "rejected_reason": pair["rejected_reason"],
                    }
                )
    tables = {"default": {split: pa.Table.from_pylist(r, schema=DPO_SCHEMA) for split, r in rows.items()}}
    stats = dict(selection.stats)
    stats["rows"] = {split: len(r) for split, r in rows.items()}
    stats["tasks"] = {split: len({row["task_id"] for row in r}) for split, r in rows.items()}
    stats["pairs_by_kind"] = kinds
    return ExportResult("dpo", tables, stats, source_licenses={s: None for s in sorted(sources)})
