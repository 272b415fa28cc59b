"""Running an adapter into the archive: one transaction per source, with a summary of what landed.

Example:
    >>> from ingest.adapter import IngestRequest, KernelDerivation
    >>> summary = ingest_source("doc-runner.duckdb", "cuda-l2", IngestRequest(  # doctest: +SKIP
    ...     "cuda-l2", "../shared/data/cuda-l2"))
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from archive_db.bundle import Bundle
from archive_db.connection import connect
from archive_db.links import resolve_links
from archive_db.queries import profiled_kernels, profiled_origins
from archive_db.records import add_source
from archive_db.scores import add_score_kinds
from archive_db.settings import set_memory_limit, threads
from archive_db.sources import SourceIdentity, identity_conflict, source_identity
from archive_db.transaction import Connection
from archive_db.writer import ArchiveWriter
from ingest.adapter import IngestRequest, KernelDerivation
from ingest.errors import SourceConflict
from ingest.gc_pause import gc_paused
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
    post_write: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def rows_added(self) -> int:
        """Data rows added, not counting the bookkeeping tables."""
        return sum(n for table, n in self.added.items() if table not in {"sources", "source_origins", "score_kinds"})


def _source_row(request: IngestRequest, adapter_name: str) -> Bundle:
    adapter = get_adapter(adapter_name)
    bundle = Bundle()
    add_source(bundle, request.source_name, adapter=adapter.name, kind=adapter.kind,
               description=adapter.description, homepage=adapter.homepage, license=adapter.license,
               creator=adapter.creator or None, citation=adapter.citation or None)
    add_score_kinds(bundle, adapter.scores)
    return bundle


def check_source_identity(con: Connection, request: IngestRequest, adapter_name: str) -> None:
    """Refuse to ingest under a source name the archive holds with another adapter, kind or license.

    Raises:
        ingest.errors.SourceConflict: naming both identities.
    """
    existing = source_identity(con, request.source_name)
    if existing is None:
        return
    adapter = get_adapter(adapter_name)
    difference = identity_conflict(existing, SourceIdentity(adapter.name, adapter.kind, adapter.license))
    if difference is not None:
        raise SourceConflict(request.source_name, difference)


def upstream_of(origin: str, request: IngestRequest) -> str | None:
    """The upstream of one origin: ``--upstream`` itself, or for a file inside an ingested folder, with its path.

    Example:
        >>> from pathlib import Path
        >>> Path("cuda-l1/codes").mkdir(parents=True)
        >>> upstream_of(str(Path("cuda-l1/codes/l40.json").resolve()), IngestRequest("cuda-l1", "cuda-l1",
        ...             upstream="deepreinforce-ai/CUDA-L1@51e8356/optimized_cuda_code"))
        'deepreinforce-ai/CUDA-L1@51e8356/optimized_cuda_code/codes/l40.json'
    """
    if not request.upstream:
        return None
    root = request.local_path
    if root is not None and root.is_dir():
        try:
            relative = os.path.relpath(origin, root.resolve())
        except ValueError:
            return request.upstream
        if relative != "." and not relative.startswith(".."):
            return f"{request.upstream.rstrip('/')}/{relative}"
    return request.upstream


PostWrite = Callable[[Connection], dict[str, int]]

INGEST_MEMORY_LIMIT = "768MB"
"""DuckDB's memory while ingesting: one source is one transaction, whose uncommitted rows DuckDB keeps in
memory (about 490 MB before the commit for the 30,615-row benchmark ingest: the kernels' code and the
clang-tidy text fill no row group, so they are not written out early); past the limit it spills them to a
temporary file beside the archive. At 448 MB it spilled 30 MB and read it back, about 1 s of the ingest's wall
time and its commit 0.3 s longer; at 768 MB nothing spills and the peak RSS is 960-970 MiB (2026-11-28)."""

LOAD_THREADS = 1
"""DuckDB threads while bundles are written: each insert is one batch of rows, where a second thread costs
more in hand-offs than it saves (a quarter more CPU for the inserts), and an adapter's parser workers hold
the other cores. The links, hooks and commit (whose checkpoint compresses in parallel) get them all back."""


class _ProfileLookup:
    """``IngestRequest.known_profiles`` for one ingest: each origin's profiled kernels read once, when first asked.

    An origin with no profile before the ingest (a first ingest) costs nothing; otherwise one scan per
    profile table replaces one per batch of rows.
    """

    def __init__(self, con: Connection) -> None:
        self.con = con
        self.profiled = profiled_origins(con)
        self.kinds: dict[str, dict[str, set[str]]] = {}

    def __call__(self, origin: str, kernel_ids: Sequence[str]) -> set[tuple[str, str]]:
        if origin not in self.profiled:
            return set()
        if origin not in self.kinds:
            self.kinds[origin] = profiled_kernels(self.con, origin)
        have = self.kinds[origin]
        return {(kernel_id, kind) for kernel_id in kernel_ids for kind in have.get(kernel_id, ())}


def ingest_source(
    db: str | os.PathLike[str] | None,
    adapter_name: str,
    request: IngestRequest,
    post_write: Sequence[tuple[str, PostWrite]] = (),
    derivation: KernelDerivation | None = None,
) -> IngestSummary:
    """Read ``request`` with the adapter and write it all, or nothing, into the archive ``db``.

    ``post_write`` hooks (name, function) run inside the same transaction after the rows land, e.g. the
    task taxonomy and strategy tags from ``embeddings``; the CLI wires them, so ingest imports neither.
    ``derivation`` lets an adapter compute some of those hooks' rows while it reads (in its parser workers);
    the hooks then find them done.

    Raises:
        ingest.errors.IngestError: bad input; nothing was written.
        ingest.errors.UnknownSource: no adapter of that name.
        ingest.errors.SourceConflict: the source name is taken by another adapter, kind or license.
        ingest.adapter.BadOption: an option the adapter does not declare, or a bad value.
    """
    adapter = get_adapter(adapter_name)
    if request.path is None:
        request.path = adapter.default_path
    request.options = adapter.parse_options(request.options)
    started = time.perf_counter()
    records = 0
    with gc_paused(), connect(db) as con, threads(con, LOAD_THREADS) as all_threads, ArchiveWriter(con) as writer:
        set_memory_limit(con, INGEST_MEMORY_LIMIT)
        check_source_identity(con, request, adapter_name)
        request.known_profiles = _ProfileLookup(con)
        if derivation is not None:
            request.derivation, request.derived = derivation, partial(derivation.done, con)
        # The source row goes in with the adapter's first bundle, not before it starts: the first Arrow insert
        # imports pandas (DuckDB's scan checks for frames), 0.3 s better spent after any parser workers start.
        source_row: Bundle | None = _source_row(request, adapter_name)
        for bundle in adapter.read(request):
            if source_row is not None:
                writer.write(source_row)
                source_row = None
            records += bundle.input_records
            for row in bundle.rows.get("source_origins", ()):
                row.setdefault("upstream", upstream_of(row["origin"], request))
            writer.write(bundle)
        if source_row is not None:
            writer.write(source_row)
        all_threads()
        links = resolve_links(con)
        hooks = {name: hook(con) for name, hook in post_write}
        added = Counter(writer.added)
    return IngestSummary(
        request.source_name, adapter.name, records, added, time.perf_counter() - started, links, hooks
    )
