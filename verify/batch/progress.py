"""The live display of a batch (done, failed, flagged, kernels per minute, ETA) and its summary table.

Example:
    >>> stats = BatchStats(total=1, started=0.0)
    >>> stats.record({"status": "passed"}, build_state="hit", now=60.0)
    >>> [c.header for c in summary_table(stats).columns]
    ['figure', 'value']
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
)
from rich.table import Table
from rich.text import Text

from verify.batch.stats import BatchStats, duration
from verify.harness.timing import HOST_BOUND_BUSY

BUILD_ROWS: tuple[tuple[str, str], ...] = (
    ("hit", "builds hit"), ("built", "builds built"), ("failed", "builds failed"),
    ("none", "nothing to build"),
)
"""The summary's rows for the build states (``verify.batch.build_cache.BuildResult``), in order."""


class _StatsColumn(ProgressColumn):
    def __init__(self, stats: BatchStats) -> None:
        super().__init__()
        self.stats = stats

    def render(self, task: Task) -> Text:
        return Text(self.stats.line(), style="progress.data.speed")


class BatchProgress:
    """The live display: a bar with done/total, then counts, kernels per minute and ETA.

    Example:
        >>> with BatchProgress(2, console=Console(quiet=True)) as shown:
        ...     shown.update({"status": "passed"})
        >>> shown.stats.done
        1
    """

    def __init__(self, total: int, *, console: Console | None = None, enabled: bool = True,
                 description: str = "verifying") -> None:
        self.stats = BatchStats(total=total)
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  _StatsColumn(self.stats), console=console or Console(stderr=True),
                                  disable=not enabled, transient=False)
        self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> BatchProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.refresh()
        self._progress.stop()

    def update(self, report: dict[str, Any], *, build_state: str | None = None, prebuild_s: float = 0.0) -> None:
        """Count a finished kernel and redraw."""
        self.stats.record(report, build_state=build_state, prebuild_s=prebuild_s)
        self._progress.advance(self._task)


def summary_table(stats: BatchStats) -> Table:
    """The end-of-batch table: statuses, throughput, build cache use and where the time went."""
    table = Table(title="verification batch", show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for status in ("passed", "flagged", "failed", "error", *sorted(set(stats.statuses) - {
            "passed", "flagged", "failed", "error"})):
        if stats.statuses[status]:
            table.add_row(status, str(stats.statuses[status]))
    end = stats.finished_at if stats.finished_at is not None else time.monotonic()
    table.add_row("kernels", f"{stats.done} of {stats.total}")
    table.add_row("kernels per minute", f"{stats.per_minute(end):.2f}")
    table.add_row("wall time", duration(end - stats.started))
    for state, label in BUILD_ROWS:
        if stats.builds[state]:
            table.add_row(label, str(stats.builds[state]))
    for phase, share in stats.shares().items():
        table.add_row(f"share {phase}", f"{100 * share:.1f}%")
    if stats.timed:
        # Their speedups measure Python and launches as much as the kernel, and move with the host's load.
        table.add_row("timed calls mostly host time", f"{stats.host_bound} of {stats.timed} (GPU busy < "
                      f"{HOST_BOUND_BUSY:.0%})")
    return table
