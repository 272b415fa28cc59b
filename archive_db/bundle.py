"""A batch of rows for the archive's tables, as adapters and the verifier produce them.

Rows are plain dicts keyed by column name; columns a row leaves out are NULL. ``archive_db.writer``
writes a bundle with ``INSERT OR IGNORE`` semantics, so the same bundle written twice adds nothing.

Example:
    >>> b = Bundle(); b.add("kernels", kernel_id="k1", task_id="t1", source="s", name="n", form="model-new")
    >>> b.count("kernels")
    1
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Bundle:
    """Rows per table, plus how many input records they came from (for progress)."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    input_records: int = 0

    def add(self, table: str, **values: Any) -> None:
        """Append one row to ``table``."""
        self.rows[table].append(values)

    def extend(self, other: Bundle) -> None:
        """Append every row of ``other``."""
        for table, rows in other.rows.items():
            self.rows[table].extend(rows)
        self.input_records += other.input_records

    def count(self, table: str) -> int:
        """Rows held for ``table``."""
        return len(self.rows.get(table, ()))

    def __bool__(self) -> bool:
        return any(self.rows.values())
