"""Filling the archive's derived columns: task categories and operators, kernel strategy tags.

``annotate(con)`` is the post-write hook that ``kernel-archive ingest`` runs inside its transaction: it
categorises the tasks that have no category yet and tags the kernels that have no tags yet, set-wise
(one query out, one bulk write back), so re-running it adds nothing. ``redo=True`` recomputes all of it,
after the rules in ``taxonomy_rules.toml`` / ``strategy_rules.toml`` change.

Example:
    >>> from archive_db.connection import connect
    >>> with connect("doc-annotate.duckdb") as con:
    ...     annotate(con)
    {'tasks_categorised': 0, 'kernels_tagged': 0, 'tags_added': 0}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from archive_db.annotations import add_tags, delete_tags, kernels_to_tag, set_categories, tasks_to_categorise
from archive_db.transaction import Connection
from embeddings.strategies import tag_kernels
from embeddings.taxonomy import describe_task, load_taxonomy


def categorise_tasks(con: Connection, redo: bool = False) -> int:
    """Set ``category`` and ``operators`` of tasks with reference code (only NULL ones unless ``redo``)."""
    rows = tasks_to_categorise(con, redo)
    if not rows:
        return 0
    taxonomy = load_taxonomy()
    ids, categories, operators = [], [], []
    for task_id, level, code in rows:
        facts = describe_task(code, level, taxonomy)
        ids.append(task_id)
        categories.append(facts.category)
        operators.append(facts.operators)
    staged = pa.table(
        {
            "task_id": pa.array(ids, pa.string()),
            "category": pa.array(categories, pa.string()),
            "operators": pa.array(operators, pa.list_(pa.string())),
        }
    )
    set_categories(con, staged)
    return sum(1 for c in categories if c is not None)


TAG_COLUMNS = {"kernel_id": pa.string(), "tag": pa.string(), "line": pa.int32(), "evidence": pa.string()}
"""The ``kernel_tags`` columns and their Arrow types."""


def tag_rows(kernels: Sequence[tuple[str, str | None, str]]) -> dict[str, pa.Table]:
    """The ``kernel_tags`` rows of ``kernels`` (kernel_id, code, form), as one Arrow table by table name.

    The ingest computes them with this in its parser workers (``ingest.adapter.KernelDerivation``), per batch
    of new kernels; ``tag_archive`` with it for the kernels left untagged.

    Example:
        >>> tag_rows([("k1", "__global__ void f(float* __restrict__ x) {}", "cuda-binding")])["kernel_tags"].to_pylist()
        [{'kernel_id': 'k1', 'tag': 'restrict', 'line': 1, 'evidence': '__global__ void f(float* __restrict__ x) {}'}]
    """
    columns: dict[str, list[Any]] = {name: [] for name in TAG_COLUMNS}
    for kernel_id, found in tag_kernels(kernels).items():
        for tag in found:
            columns["kernel_id"].append(kernel_id)
            columns["tag"].append(tag.tag)
            columns["line"].append(tag.line)
            columns["evidence"].append(tag.evidence)
    return {"kernel_tags": pa.table({name: pa.array(columns[name], kind) for name, kind in TAG_COLUMNS.items()})}


def tag_archive(con: Connection, redo: bool = False) -> tuple[int, int]:
    """Tag kernels that have code and no tags yet (all of them if ``redo``); returns (kernels, tags) added."""
    if redo:
        delete_tags(con)
    rows = kernels_to_tag(con)
    if not rows:
        return 0, 0
    staged = tag_rows(rows)["kernel_tags"]
    if staged.num_rows:
        add_tags(con, staged)
    return pc.count_distinct(staged["kernel_id"]).as_py(), staged.num_rows


def annotate(con: Connection, redo: bool = False) -> dict[str, int]:
    """Categorise tasks and tag kernels that lack them; returns counts of what was added.

    Runs inside the caller's transaction (the ingest hook) and is idempotent.
    """
    tasks = categorise_tasks(con, redo)
    kernels, tags = tag_archive(con, redo)
    return {"tasks_categorised": tasks, "kernels_tagged": kernels, "tags_added": tags}
