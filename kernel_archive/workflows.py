"""The project's end-to-end steps, wired in one place: ingest then annotate, and the demo archive build.

The CLI, ``kernel_archive.demo``, the benches and the tests all call these, so "what an ingest does"
has one definition (nothing imports the CLI to find it).

Example:
    >>> from ingest.adapter import IngestRequest
    >>> summary = ingest_and_annotate("workflows.duckdb", "demo", IngestRequest("demo"))
    >>> summary.added["kernels"] > 0, sorted(summary.post_write)
    (True, ['annotate'])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ingest.adapter import IngestRequest, KernelDerivation
from ingest.runner import IngestSummary, ingest_source


def post_write_hooks() -> list[tuple[str, Callable[[Any], dict[str, int]]]]:
    """The hooks every ingest runs inside its transaction: task categories and strategy tags."""
    from embeddings.annotate import annotate

    return [("annotate", annotate)]


def kernel_derivation() -> KernelDerivation:
    """The hooks' per-kernel rows an adapter may compute while it reads: strategy tags."""
    from archive_db.annotations import tagged_kernels
    from embeddings.annotate import tag_rows

    return KernelDerivation(tag_rows, tagged_kernels)


def ingest_and_annotate(db: str | os.PathLike[str] | None, adapter_name: str, request: IngestRequest) -> IngestSummary:
    """Ingest ``request`` with the adapter ``adapter_name`` into ``db``, categorising tasks and tagging
    kernels in the same transaction (all of it, or nothing)."""
    return ingest_source(db, adapter_name, request, post_write=post_write_hooks(), derivation=kernel_derivation())


DemoSources = Sequence[tuple[str, str, str | None]]
"""(adapter, source name, path or None) of each source of a demo archive, in ingest order."""


def build_demo_archive(target: Path, *, embed: bool = True, sources: DemoSources = (("demo", "demo", None),)) -> str:
    """Ingest (and annotate) ``sources`` (default: the ``demo`` source) into ``target`` through a temporary
    file renamed into place, then embed it when ``embed``; a one-line note of what was built."""
    partial = target.with_name(target.name + ".building")
    partial.unlink(missing_ok=True)
    kernels = verifications = 0
    try:
        for adapter, name, path in sources:
            summary = ingest_and_annotate(partial, adapter, IngestRequest(name, path))
            kernels += summary.added.get("kernels", 0)
            verifications += summary.added.get("verifications", 0)
        note = f"{kernels} kernels with {verifications} verification reports"
        if len(sources) > 1:
            note += f" ({', '.join(name for _, name, _ in sources)})"
        if embed:
            note += "; " + _embed(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return note


def _embed(path: Path) -> str:
    try:
        from archive_db.connection import connect
        from embeddings.encoder import EncoderSpec, ModelNotFound
        from embeddings.pipeline import embed_archive
    except ImportError as error:
        return f"no embeddings ({error.name} is not installed: pip install 'kernel-archive[embed]')"
    try:
        with connect(path) as con:
            report = embed_archive(con, EncoderSpec.resolve(None, "cpu"), seed=0)
    except ModelNotFound as error:
        return f"no embeddings ({error})"
    return f"{report.encoded} kernels embedded, map fitted"
