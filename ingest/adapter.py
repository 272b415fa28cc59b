"""What a source adapter is: metadata, options and score kinds declared as data, and a reader.

An adapter module in ``ingest/adapters/`` defines one module-level ``ADAPTER``. Its ``read`` yields
``archive_db.Bundle`` objects; the runner (``ingest.runner``) writes them all in one transaction, so a
bad row anywhere rolls the whole source back. Its ``options`` are what ``kernel-archive ingest SOURCE
PATH -o KEY=VALUE`` accepts; its ``scores`` are the named scores it writes (stored in ``score_kinds``).

Example:
    >>> from ingest.registry import get_adapter
    >>> get_adapter("cuda-l1").license
    'MIT'
    >>> Option("kb_version", str, "KernelBench version").parse("v0.1", "kernelbench")
    'v0.1'
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archive_db.bundle import Bundle
from archive_db.progress import NullProgress, Progress
from archive_db.scores import ScoreKind

if TYPE_CHECKING:
    import pyarrow as pa

    from archive_db.transaction import Connection

KernelCode = tuple[str, str | None, str]
"""(kernel id, code, form) of one kernel."""


@dataclass(frozen=True)
class KernelDerivation:
    """Rows a post-write hook would compute from each new kernel's code, computed instead while an adapter
    reads (in its parser workers, where it has them), e.g. strategy tags: after the rows land they would
    take the ingest's main process a third of its time, and hold every kernel's code at once.

    ``rows(kernels)`` returns Arrow tables by archive table; it must be a module-level function, since it
    is sent to worker processes. ``rows([])`` must be cheap and harmless: an adapter may call it in each worker
    before the first batch, to load what the function needs (strategy rules: 0.2 s) while the batch is read.
    ``done(con, kernel_ids)`` names those of the kernels that already hold such rows: the hook would not compute
    theirs again, so neither does the adapter. The hook still runs after the ingest and finds the rest done.
    """

    rows: Callable[[Sequence[KernelCode]], dict[str, pa.Table]]
    done: Callable[[Connection, Sequence[str]], set[str]]


@dataclass
class IngestRequest:
    """What the user asked for: where to read, and the overrides given on the command line."""

    source_name: str
    path: str | None = None
    gpu: str | None = None
    progress: Progress = field(default_factory=NullProgress)
    options: dict[str, Any] = field(default_factory=dict)
    """Parsed adapter options (see ``Adapter.parse_options``); the adapter's defaults fill the rest."""
    upstream: str | None = None
    """Where a local copy came from (hub id or ``owner/repo@commit/path``), recorded for attribution."""
    known_profiles: Callable[[str, Sequence[str]], set[tuple[str, str]]] | None = None
    """Set by the runner: ``known_profiles(origin, kernel_ids)`` -> the (kernel id, kind) pairs whose profile
    of that kind (ncu, torch, clang-tidy) from ``origin`` the archive already holds, so an adapter need not
    parse it again."""
    derivation: KernelDerivation | None = None
    """Rows to derive from each new kernel while reading (``KernelDerivation``); adapters without
    worker processes may ignore it, the post-write hook then computes them."""
    derived: Callable[[Sequence[str]], set[str]] | None = None
    """Set by the runner with ``derivation``: ``derived(kernel_ids)`` -> those whose derived rows the archive
    already holds (``derivation.done`` on the ingest's connection)."""

    @property
    def local_path(self) -> Path | None:
        """``path`` as a Path when it names something on disk, else None (e.g. a hub id)."""
        if self.path is None:
            return None
        candidate = Path(self.path).expanduser()
        return candidate if candidate.exists() else None


class BadOption(ValueError):
    """An ``-o KEY=VALUE`` the adapter does not declare, or a value of the wrong type."""


@dataclass(frozen=True)
class Option:
    """One option an adapter accepts: ``-o NAME=VALUE`` on the command line."""

    name: str
    type: type = str
    help: str = ""
    default: Any = None

    def parse(self, text: str, source: str) -> Any:
        """``text`` as this option's type (a value that is not text is taken as given); raises ``BadOption``."""
        if not isinstance(text, str):
            return text
        if self.type is bool:
            lowered = text.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise BadOption(f"{source}: option {self.name} wants true or false, not {text!r}")
        try:
            return self.type(text)
        except ValueError:
            raise BadOption(f"{source}: option {self.name} wants {self.type.__name__}, not {text!r}") from None


@dataclass(frozen=True)
class Adapter:
    """A registered source: its metadata, options, score kinds and reader."""

    name: str
    kind: str
    description: str
    license: str
    homepage: str
    read: Callable[[IngestRequest], Iterator[Bundle]]
    default_path: str | None = None
    path_help: str = ""
    creator: str = ""
    """Who made the data, as a dataset card credits them."""
    citation: str = ""
    """BibTeX to cite it."""
    options: tuple[Option, ...] = ()
    scores: tuple[ScoreKind, ...] = ()

    def parse_options(self, given: Mapping[str, str]) -> dict[str, Any]:
        """``KEY=VALUE`` texts as typed option values, defaults filled in.

        Raises:
            BadOption: a key the adapter does not declare, or a value that does not parse.
        """
        declared = {option.name: option for option in self.options}
        unknown = sorted(set(given) - set(declared))
        if unknown:
            known = ", ".join(declared) or "none"
            raise BadOption(f"{self.name} has no option {', '.join(unknown)} (its options: {known})")
        return {name: option.parse(given[name], self.name) if name in given else option.default
                for name, option in declared.items()}
