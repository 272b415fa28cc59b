"""Options, output and error handling shared by every command.

Text from the archive, from input files or from the user (names, paths, error messages) is printed
literally: through ``plain`` inside markup strings, ``cell`` in tables, and ``fail`` for errors, so a
kernel named ``[/bold]`` prints as such instead of breaking the output. Messages are printed with soft
wrapping (one long line, the terminal folds it), never cut mid-message into lines by rich.

Example:
    >>> with reporting_errors():
    ...     pass
    >>> plain("[/bold] kernel")
    '\\\\[/bold] kernel'
    >>> cut("x" * 500, 20)
    'xxxxxxxxxx ... [480 more characters] ... xxxxxxxxxx'
"""

from __future__ import annotations

import errno
import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

console = Console(stderr=True)
out = Console(soft_wrap=True)
DEBUG_ENV = "KERNEL_ARCHIVE_DEBUG"
"""Set to 1 to get Python tracebacks instead of one-line errors for unexpected failures."""


def debugging() -> bool:
    """Whether the user asked for tracebacks (``$KERNEL_ARCHIVE_DEBUG``)."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Archive file. Default: $KERNEL_ARCHIVE_DB, else archive.duckdb in the per-user data folder.",
        envvar="KERNEL_ARCHIVE_DB",
        show_envvar=True,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
LevelOption = Annotated[list[int] | None, typer.Option("--level", help="KernelBench level (repeatable).")]
SourceOption = Annotated[list[str] | None, typer.Option("--source", help="Source of the kernel (repeatable).")]
GpuOption = Annotated[
    list[str] | None, typer.Option("--gpu", help="GPU of the measurement, e.g. H100 (repeatable).")
]
CategoryOption = Annotated[list[str] | None, typer.Option("--category", help="Task category (repeatable).")]
TagOption = Annotated[
    list[str] | None, typer.Option("--tag", help="Strategy tag the kernel must carry (repeatable).")
]
HandWrittenOption = Annotated[
    bool, typer.Option("--hand-written", help="Exclude kernels that call ATen/cuBLAS/cuDNN/CUTLASS (the library-call tag).")
]


MAX_ECHO = 200
"""Characters of one echoed value (and of each line of an error) that are printed; the rest is cut."""
MAX_ERROR = 2_000
"""Characters of an error message printed in all: an 8 MB value in a message must not become 8 MB of output."""


def cut(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` shortened to about ``limit`` characters, keeping its start and end."""
    if len(text) <= limit:
        return text
    keep = max(limit // 2, 1)
    return f"{text[:keep]} ... [{len(text) - 2 * keep:,} more characters] ... {text[-keep:]}"


def plain(value: object) -> str:
    """``value`` as text safe to put inside a rich markup string (printed literally, brackets and all)."""
    return escape(str(value))


def cell(value: object) -> Text:
    """``value`` as a table cell printed literally (no markup, no highlighting)."""
    return Text(str(value))


def _printable(text: str) -> str:
    """``text`` with control characters and lone surrogates shown as escapes, so a terminal shows them inertly."""
    out = []
    for char in text:
        if char in "\n\t" or (char.isprintable() and not 0xD800 <= ord(char) <= 0xDFFF):
            out.append(char)
        else:
            out.append(ascii(char)[1:-1])
    return "".join(out)


def error_text(message: object) -> Text:
    """An error line: ``error:`` then ``message`` literally, cut to ``MAX_ERROR`` characters."""
    return Text.assemble(("error:", "bold red"), " ", _printable(cut(str(message), MAX_ERROR)))


def fail(message: object, code: int = 1) -> typer.Exit:
    """Print ``message`` (literally) as an error and return the Exit to raise."""
    console.print(error_text(message), highlight=False, soft_wrap=True)
    return typer.Exit(code)


def note(message: str) -> None:
    """Print a message for people on stderr (rich markup allowed; wrap user text in ``plain``)."""
    console.print(message, highlight=False, soft_wrap=True)


MAX_TABLE_WIDTH = 4_000
"""Widest a table is drawn when stdout is not a terminal."""


def show_table(table: Any) -> None:
    """Print a rich table on stdout: fitted to a terminal, at its natural width into a pipe or a file.

    Piped output (``| grep``, a log, a test) then holds every cell whole, whatever $COLUMNS says.
    """
    if out.is_terminal:
        out.print(table)
        return
    from rich.measure import Measurement

    natural = Measurement.get(out, out.options.update_width(MAX_TABLE_WIDTH), table).maximum
    wide = Console(file=out.file, width=min(max(natural, out.width), MAX_TABLE_WIDTH), soft_wrap=True)
    wide.print(table)


def say(message: str) -> None:
    """Print a message for people on stdout (rich markup allowed; wrap user text in ``plain``)."""
    out.print(message, highlight=False, soft_wrap=True)


OS_ERRORS: dict[int, str] = {
    errno.ENOSPC: "the disk is full",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EDQUOT: "the disk quota is exceeded",
}
"""errno -> what the one-line error says."""


def _os_error(error: OSError) -> str:
    reason = OS_ERRORS.get(error.errno or 0, error.strerror or str(error))
    where = f" ({error.filename})" if error.filename else ""
    return f"{reason}{where}: {error}"


DISK_MARKERS = ("No space left on device", "Read-only file system", "Permission denied", "Disk quota exceeded")
"""Texts in DuckDB's IO errors that mean the archive's place, not the archive, is the problem."""


@contextmanager
def reporting_errors(written: str = "nothing was written") -> Iterator[None]:
    """Turn the archive's expected errors into one clear line and a non-zero exit, not a traceback.

    ``written`` says what a failure leaves behind (printed after errors of the disk or of the archive).
    """
    from archive_db.connection import (
        ARCHIVE_IO_ERRORS,
        ArchiveLocked,
        ArchiveMissing,
        NotAnArchive,
        SchemaTooOld,
        is_interrupt,
    )
    from archive_db.interrupts import catching
    from archive_db.migrations import SchemaTooNew

    try:
        with catching():
            yield
    except (ArchiveLocked, ArchiveMissing, SchemaTooNew, SchemaTooOld, NotAnArchive) as error:
        raise fail(str(error)) from None
    except KeyboardInterrupt:
        raise fail(f"interrupted; {written}", 130) from None
    except RuntimeError as error:
        if not is_interrupt(error):
            raise
        raise fail(f"interrupted; {written}", 130) from None
    except OSError as error:
        raise fail(f"{_os_error(error)}; {written}") from None
    except ARCHIVE_IO_ERRORS as error:
        if not any(marker in str(error) for marker in DISK_MARKERS):
            raise
        raise fail(f"cannot write the archive: {error}; {written}") from None


class RateColumn(ProgressColumn):
    """Items per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")


class RichProgress:
    """``archive_db.progress.Progress`` shown as a rich progress bar with rate and ETA."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task: TaskID | None = None

    def start(self, description: str, total: int | None = None) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=self._progress.tasks[-1].total or 0)
        self._task = self._progress.add_task(description, total=total)

    def advance(self, amount: int = 1) -> None:
        if self._task is None:
            self.start("working")
        assert self._task is not None
        self._progress.advance(self._task, amount)


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[RichProgress]:
    """A rich progress display on stderr; quiet when ``enabled`` is False or stderr is not a terminal (a log
    or a pipe gets no progress lines, so stderr holds errors only)."""
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled or not console.is_terminal,
        transient=False,
    )
    with progress:
        yield RichProgress(progress)


def to_jsonable(value: Any) -> Any:
    """Plain JSON values from numpy / pandas / datetime values."""
    import datetime as dt

    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return to_jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    try:
        import pandas as pd

        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return str(value)


def print_json(value: Any) -> None:
    """Write ``value`` as one JSON document on stdout."""
    sys.stdout.write(json.dumps(to_jsonable(value), ensure_ascii=False) + "\n")


def frame_records(frame: Any) -> list[dict[str, Any]]:
    """A DataFrame as JSON-ready records."""
    return [to_jsonable(r) for r in frame.to_dict(orient="records")]
