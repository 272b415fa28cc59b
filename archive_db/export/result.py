"""What building an export yields: tables per config and split, the counts behind them, the sources.

Example:
    >>> import pyarrow as pa
    >>> r = ExportResult("sft", {"default": {"train": pa.table({"x": [1]})}})
    >>> r.num_rows()
    1
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

MESSAGE_COLUMNS: frozenset[str] = frozenset({"prompt", "completion", "chosen", "rejected"})


def _messages_text(messages: Any) -> str:
    if messages is None:
        return ""
    return "\n\n".join(f"[{m['role']}] {m['content']}" for m in messages)


@dataclass
class ExportResult:
    """Tables keyed by config then split, plus the statistics the dataset card reports."""

    kind: str
    tables: dict[str, dict[str, pa.Table]]
    stats: dict[str, Any] = field(default_factory=dict)
    source_licenses: dict[str, str | None] = field(default_factory=dict)
    source_info: dict[str, dict[str, Any]] = field(default_factory=dict)

    def num_rows(self, config: str | None = None, split: str | None = None) -> int:
        """Rows in total, or in one config and/or split."""
        return sum(t.num_rows for c, s, t in self.iter_tables() if config in (None, c) and split in (None, s))

    def iter_tables(self) -> Iterator[tuple[str, str, pa.Table]]:
        """(config, split, table) for every non-empty table, in a stable order."""
        for config in sorted(self.tables):
            for split in sorted(self.tables[config], key=lambda s: (s != "train", s)):
                table = self.tables[config][split]
                if table.num_rows:
                    yield config, split, table

    def preview(self, n: int = 20) -> Any:
        """The first ``n`` rows of the first non-empty table as a DataFrame, messages flattened to text."""
        import pandas as pd

        for config, split, table in self.iter_tables():
            frame = table.slice(0, n).to_pandas()
            for column in frame.columns:
                if column in MESSAGE_COLUMNS:
                    frame[column] = frame[column].map(_messages_text)
                elif frame[column].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str)).any():
                    frame[column] = frame[column].map(lambda v: f"{len(v)} items" if v is not None else None)
            return frame.assign(config=config, split=split)
        return pd.DataFrame()

    def dataset_dict(self, config: str | None = None) -> Any:
        """One config as an in-memory ``datasets.DatasetDict`` (default: the only or first config).

        Example: ``build_export(con, ExportRequest("sft")).dataset_dict().save_to_disk("sft")``, then
        ``datasets.load_from_disk("sft")``.
        """
        from datasets import Dataset, DatasetDict
        from datasets.table import InMemoryTable

        if config is None:
            config = sorted(self.tables)[0] if self.tables else "default"
        if config not in self.tables:
            raise KeyError(f"no config {config!r} in this export; it has {', '.join(sorted(self.tables)) or 'none'}")
        return DatasetDict({split: Dataset(InMemoryTable(table)) for split, table in self.tables[config].items()
                            if table.num_rows})

    def split_counts(self) -> dict[str, dict[str, int]]:
        """Rows per config and split."""
        return {c: {s: t.num_rows for s, t in splits.items()} for c, splits in self.tables.items()}
