"""Task categories and kernel strategy tags: the named reads and writes ``embeddings.annotate`` uses.

Example:
    >>> from archive_db.connection import connect
    >>> with connect("doc-annotations.duckdb") as con:
    ...     tasks_to_categorise(con), kernels_to_tag(con)
    ([], [])
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from archive_db.transaction import Connection, staged


def tasks_to_categorise(con: Connection, redo: bool = False) -> list[tuple[str, int | None, str]]:
    """(task id, level, reference code) of tasks with reference code and no category (all of them if ``redo``)."""
    where = "reference_code IS NOT NULL" + ("" if redo else " AND category IS NULL")
    return con.execute(f"SELECT task_id, level, reference_code FROM tasks WHERE {where}").fetchall()


def set_categories(con: Connection, categories: pa.Table) -> None:
    """Set ``category`` and ``operators`` of the tasks in ``categories`` (task_id, category, operators)."""
    with staged(con, "_staged_categories", categories):
        con.execute(
            "UPDATE tasks SET category = s.category, operators = s.operators "
            "FROM _staged_categories s WHERE tasks.task_id = s.task_id"
        ).fetchall()


def delete_tags(con: Connection) -> None:
    """Drop every kernel's strategy tags."""
    con.execute("DELETE FROM kernel_tags").fetchall()


def kernels_to_tag(con: Connection) -> list[tuple[str, str, str]]:
    """(kernel id, code, form) of kernels with code and no tags yet."""
    return con.execute(
        "SELECT k.kernel_id, k.code, k.form FROM kernels k WHERE k.code IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM kernel_tags g WHERE g.kernel_id = k.kernel_id)"
    ).fetchall()


def tagged_kernels(con: Connection, kernel_ids: Sequence[str]) -> set[str]:
    """Those of ``kernel_ids`` that have strategy tags."""
    rows = con.execute(
        "SELECT DISTINCT kernel_id FROM kernel_tags WHERE kernel_id IN (SELECT unnest(?::VARCHAR[]))", [list(kernel_ids)]
    ).fetchall()
    return {kernel_id for (kernel_id,) in rows}


def add_tags(con: Connection, tags: pa.Table) -> None:
    """Add ``kernel_tags`` rows (kernel_id, tag, line, evidence), keeping ones already there."""
    with staged(con, "_staged_tags", tags):
        con.execute("INSERT OR IGNORE INTO kernel_tags SELECT * FROM _staged_tags").fetchall()
