"""The raw export: every kernel and measurement of the slice, with its task, profiles and provenance.

One row per (kernel, measurement); kernels never measured get one row with empty measurement columns.
Profiles are lists of structs (``ncu_metrics``, ``ncu_rules``, ``torch_events``,
``clang_tidy_findings``), as are ``scores`` and ``tags``; nothing is a Python repr string. Each row
carries its source's license, homepage and origins (local paths reduced to file names,
``provenance.public_origin``). Raw keeps near-duplicates (``code_fingerprint``
says which rows share normalised code) and is split by task like SFT and DPO, one config per source or
per level (``level_1`` ..., ``level_none`` for tasks without a level).

Example:
    >>> config_name("level", None, 2)
    'level_2'
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from archive_db.export.dedupe import code_fingerprint
from archive_db.export.options import ExportRequest
from archive_db.export.provenance import public_origins
from archive_db.export.result import ExportResult
from archive_db.export.split import SPLITS, split_key, split_of


def config_name(config_by: str, source: str | None, level: int | None) -> str:
    """The config a row belongs to: its source name, or ``level_<n>``."""
    if config_by == "level":
        return f"level_{level}" if level is not None else "level_none"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", source or "unknown")


def build_raw(table: pa.Table, request: ExportRequest) -> ExportResult:
    """Raw tables per config and split from ``queries.raw_rows``."""
    task_ids = table.column("task_id").to_pylist()
    names = table.column("task_name").to_pylist()
    split_by_task: dict[str, str] = {}
    for tid, name in zip(task_ids, names, strict=True):
        if tid not in split_by_task:
            split_by_task[tid] = split_of(split_key(name, tid), request.test_size)
    codes = table.column("code").to_pylist()
    forms = table.column("form").to_pylist()
    cache: dict[tuple[str, str], str] = {}
    fingerprints: list[str | None] = []
    for code, form in zip(codes, forms, strict=True):
        if code is None:
            fingerprints.append(None)
            continue
        key = (code, form)
        if key not in cache:
            cache[key] = code_fingerprint(code, form)
        fingerprints.append(cache[key])
    table = table.append_column("code_fingerprint", pa.array(fingerprints, pa.string()))
    origins_at = table.schema.get_field_index("source_origins")
    origins = [public_origins(o) for o in table.column(origins_at).to_pylist()]
    table = table.set_column(origins_at, "source_origins", pa.array(origins, pa.list_(pa.string())))
    configs = [
        config_name(request.config_by, s, lv)
        for s, lv in zip(table.column("source").to_pylist(), table.column("level").to_pylist(), strict=True)
    ]
    splits = [split_by_task[t] for t in task_ids]
    config_arr, split_arr = pa.array(configs), pa.array(splits)
    tables: dict[str, dict[str, pa.Table]] = {}
    for config in sorted(set(configs)):
        in_config = pc.equal(config_arr, config)
        tables[config] = {
            split: table.filter(pc.and_(in_config, pc.equal(split_arr, split))) for split in SPLITS
        }
    sources = sorted({s for s in table.column("source").to_pylist() if s})
    stats = {
        "rows": {split: sum(1 for s in splits if s == split) for split in SPLITS},
        "tasks": {split: len({t for t, s in split_by_task.items() if s == split}) for split in SPLITS},
        "kernels": len(set(table.column("kernel_id").to_pylist())),
        "rows_correct": int(pc.sum(pc.fill_null(table.column("correct"), False).cast(pa.int64())).as_py() or 0),
        "kernels_verified": len({k for k, v in zip(table.column("kernel_id").to_pylist(),
                                                   table.column("verification_status").to_pylist(), strict=True)
                                 if v == "passed"}),
        "kernels_flagged": len({k for k, fc in zip(table.column("kernel_id").to_pylist(),
                                                   table.column("failed_checks").to_pylist(), strict=True)
                                if fc}),
        "distinct_code_fingerprints": len({f for f in fingerprints if f}),
    }
    return ExportResult("raw", tables, stats, source_licenses={s: None for s in sources})
