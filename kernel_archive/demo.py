"""The built-in demo archive: the showcase run and the verifier's own suite, ingested, tagged and embedded.

``./dev run`` (``kernel-archive serve --demo``) opens it; it is built on first use in the per-user data
folder (``demo.duckdb`` beside the default archive) and then reused until its inputs change. A build
writes a temporary file and renames it into place, so an interrupted build leaves nothing half-written.

What goes in is decided by the files present (:func:`demo_sources`):

- when the showcase run folder (``kernel_archive/showcase``: KernelBench-style tasks and this project's
  kernels, see docs/run-folders.md) holds measured results for every kernel (``results/`` written by
  ``kernel-archive collect`` on a GPU: a report each, and NCU and torch.profiler exports for each kernel that
  ran; :func:`showcase_gaps`), it is ingested through the ``run-dir`` adapter as source ``showcase``, and the
  verifier's adversarial test kernels (the ``demo`` adapter) beside it as source ``verifier-suite``;
- otherwise the demo is the verifier's suite alone, as source ``demo``.

Example:
    >>> demo_db_path().name
    'demo.duckdb'
    >>> [s.name for s in demo_sources(showcase=None)]
    ['demo']
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from archive_db.paths import user_data_folder

SHOWCASE = Path(__file__).resolve().with_name("showcase")
SHOWCASE_SOURCE = "showcase"
SUITE_SOURCE = "verifier-suite"
LEGACY_SOURCE = "demo"
INPUTS_SUFFIX = ".inputs"
"""Beside the demo archive, a file holding the fingerprint of what it was built from."""


@dataclass(frozen=True)
class DemoSource:
    """One source of the demo archive: the adapter, the source name it is recorded under, and its path."""

    adapter: str
    name: str
    path: str | None = None


def demo_db_path() -> Path:
    """Where the demo archive lives: ``demo.duckdb`` in the per-user data folder."""
    return user_data_folder() / "demo.duckdb"


PROFILE_KINDS = ("ncu", "torch")
"""The profiles every showcase kernel that compiled and ran must carry before the demo shows the showcase."""


def showcase_gaps(showcase: Path) -> list[str]:
    """What the showcase's results still lack: kernels without a verification report, and kernels that compiled
    and ran without an NCU or torch.profiler export. [] when ``kernel-archive collect`` has finished it.

    A partly collected run (a GPU call that ran out of time) is kept in the folder, so the next ``collect``
    goes on from it, but the demo waits for the whole: its tests promise profiles on every kernel that ran.
    """
    import json

    from ingest.run_folder import read_run_folder

    run = read_run_folder(showcase)
    gaps = []
    for kernel in run.kernels:
        report = run.result_path(kernel, "report")
        if not report.is_file():
            gaps.append(f"{kernel.key}: no verification report")
            continue
        checks = json.loads(report.read_text(encoding="utf-8")).get("checks") or {}
        if all((checks.get(name) or {}).get("verdict") == "pass" for name in ("compiles", "runs")):
            gaps += [f"{kernel.key}: no {kind} profile" for kind in PROFILE_KINDS
                     if not run.result_path(kernel, kind).is_file()]
    return gaps


def _has_reports(showcase: Path) -> bool:
    results = showcase / "results"
    return results.is_dir() and any(results.glob("*/*.json"))


def showcase_has_results(showcase: Path) -> bool:
    """Whether the showcase run folder holds measured results for every kernel (see :func:`showcase_gaps`)."""
    return _has_reports(showcase) and not showcase_gaps(showcase)


def demo_sources(showcase: Path | None = SHOWCASE) -> list[DemoSource]:
    """The sources of the demo: the measured showcase plus the verifier suite, else the suite alone."""
    if showcase is not None and showcase_has_results(showcase):
        return [DemoSource("run-dir", SHOWCASE_SOURCE, str(showcase)), DemoSource("demo", SUITE_SOURCE)]
    return [DemoSource("demo", LEGACY_SOURCE)]


def inputs_fingerprint(sources: list[DemoSource]) -> str:
    """A hash of the sources and of every file they read (names and sizes), to know when to rebuild."""
    from ingest.adapters.demo import DATA

    digest = hashlib.sha256()
    for source in sources:
        digest.update(f"{source.adapter}\0{source.name}\0".encode())
        root = Path(source.path) if source.path else DATA
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for file in files:
            digest.update(f"{file.relative_to(root.parent).as_posix()}\0{file.stat().st_size}\0".encode())
    return digest.hexdigest()[:16]


def build_demo(
    path: str | os.PathLike[str] | None = None,
    *,
    embed: bool = True,
    rebuild: bool = False,
    showcase: Path | None = SHOWCASE,
) -> tuple[Path, str]:
    """Build the demo archive at ``path`` (default :func:`demo_db_path`) unless it is built from the same
    inputs already; (path, what happened).

    ``embed``: also compute code embeddings, related kernels and the map (needs the ``embed`` extra; without
    it the archive is built and the map page says how to add them). ``showcase``: the run folder to use
    (None: the verifier suite alone).
    """
    from kernel_archive.workflows import build_demo_archive

    target = Path(path) if path else demo_db_path()
    sources = demo_sources(showcase)
    fingerprint = inputs_fingerprint(sources)
    marker = target.with_name(target.name + INPUTS_SUFFIX)
    built_from = marker.read_text().strip() if marker.exists() else None
    # An archive without the marker was built before markers existed (the default path, rebuilt once) or
    # is a file the user named with --db (kept: it may not be a demo at all).
    if target.exists() and not rebuild and (built_from == fingerprint or (built_from is None and path is not None)):
        return target, "already built"
    target.parent.mkdir(parents=True, exist_ok=True)
    note = build_demo_archive(target, embed=embed, sources=[(s.adapter, s.name, s.path) for s in sources])
    marker.write_text(fingerprint + "\n")
    if showcase is not None and sources[0].name == LEGACY_SOURCE and _has_reports(showcase):
        gaps = showcase_gaps(showcase)
        note += (f"; the showcase run is not in it yet: {len(gaps)} result(s) missing, e.g. {gaps[0]} "
                 "(`kernel-archive collect` on a GPU machine fills them)")
    return target, f"built: {note}"
