"""Running an adapter into the archive: one transaction per source, with a summary of what landed.

Example:
    >>> from ingest.adapter import IngestRequest
    >>> summary = ingest_source("/tmp/doc-runner.duckdb", "cuda-l2", IngestRequest(  # doctest: +SKIP
    ...     "cuda-l2", "../shared/data/cuda-l2"))
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass

from archive_db.bundle import Bundle
from archive_db.connection import connect
from archive_db.links import resolve_links
from archive_db.writer import ArchiveWriter, utcnow
from ingest.adapter import IngestRequest
from ingest.registry import get_adapter


@dataclass
class IngestSummary:
    """What one ingest did."""

    source: str
    adapter: str
    input_records: int
    added: Counter[str]
    seconds: float
    links: dict[str, int]

    @property
    def rows_added(self) -> int:
        """Data rows added, not counting the bookkeeping tables."""
        return sum(n for table, n in self.added.items() if table not in {"sources", "source_origins"})


def _source_row(request: IngestRequest, adapter_name: str) -> Bundle:
    adapter = get_adapter(adapter_name)
    now = utcnow()
    bundle = Bundle()
    bundle.add(
        "sources",
        name=request.source_name,
        adapter=adapter.name,
        kind=adapter.kind,
        description=adapter.description,
        homepage=adapter.homepage,
        license=adapter.license,
        first_ingested_at=now,
        last_ingested_at=now,
    )
    return bundle


def ingest_source(
    db: str | os.PathLike[str] | None, adapter_name: str, request: IngestRequest
) -> IngestSummary:
    """Read ``request`` with the adapter and write it all, or nothing, into the archive ``db``.

    Raises:
        ingest.errors.IngestError: bad input; nothing was written.
        ingest.errors.UnknownSource: no adapter of that name.
    """
    adapter = get_adapter(adapter_name)
    if request.path is None:
        request.path = adapter.default_path
    started = time.perf_counter()
    records = 0
    with connect(db) as con, ArchiveWriter(con) as writer:
        writer.write(_source_row(request, adapter_name))
        for bundle in adapter.read(request):
            records += bundle.input_records
            writer.write(bundle)
        links = resolve_links(con)
        added = Counter(writer.added)
    return IngestSummary(
        request.source_name, adapter.name, records, added, time.perf_counter() - started, links
    )
