"""Opening the archive: one writer at a time, readers through short-lived read-only connections.

DuckDB lets one process hold a file for writing, or several hold it read-only, never both. So readers
(the explorer) open, query and close at once, and both sides retry briefly when the other holds the
file; a writer that still cannot get the lock gets a message naming the process that holds it.

Example:
    >>> with connect("doc.duckdb") as con:
    ...     con.execute("SELECT count(*) FROM kernels").fetchone()
    (0,)
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from archive_db.identity import (
    CONNECTION_CONFIG,
    NotAnArchive,
    check_archive_file,
    check_archive_tables,
    is_empty_file,
)
from archive_db.migrations import SCHEMA_VERSION, SchemaTooNew, current_version, ensure_schema
from archive_db.paths import resolve_db_path

__all__ = ["ARCHIVE_IO_ERRORS", "UNREADABLE", "ArchiveLocked", "ArchiveMissing", "NotAnArchive", "SchemaTooOld", "connect",
           "db_exists", "is_interrupt", "open_connection"]

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock", "database is locked")


class ArchiveLocked(RuntimeError):
    """Another process holds the archive file."""


class SchemaTooOld(RuntimeError):
    """A read-only open of an archive written by an older kernel-archive that could not be upgraded."""


class ArchiveMissing(FileNotFoundError):
    """A reader asked for an archive file that does not exist."""


UNREADABLE: tuple[type[Exception], ...] = (duckdb.CatalogException, duckdb.SerializationException, duckdb.IOException)
"""What reading a file that is not an archive this version knows (or a damaged one) raises."""
ARCHIVE_IO_ERRORS: tuple[type[Exception], ...] = (duckdb.IOException,)
"""What DuckDB raises when the archive's disk fails it (full, read-only, no permission), for callers that
must not import duckdb themselves."""


def is_interrupt(error: BaseException) -> bool:
    """Whether ``error`` is DuckDB's for a query stopped by Ctrl+C: a SIGINT that arrives while a query runs
    reaches Python as ``RuntimeError('Query interrupted')``, not as KeyboardInterrupt.

    Example:
        >>> is_interrupt(RuntimeError("Query interrupted")), is_interrupt(RuntimeError("other"))
        (True, False)
    """
    interrupt = getattr(duckdb, "InterruptException", None)
    return (interrupt is not None and isinstance(error, interrupt)) or (
        isinstance(error, RuntimeError) and str(error) == "Query interrupted")


def _is_lock_error(error: Exception) -> bool:
    return any(marker in str(error) for marker in _LOCK_MARKERS)


def _holder(error: Exception) -> str:
    match = re.search(r"held in (.+?) \(PID (\d+)\)", str(error))
    if match:
        return f"process {match.group(2)} ({match.group(1)})"
    return "another process"


def open_connection(
    db: str | os.PathLike[str] | None = None,
    *,
    read_only: bool = False,
    wait_s: float = 10.0,
) -> duckdb.DuckDBPyConnection:
    """Open the archive, creating and migrating it for writers; retries while another process holds it.

    Raises:
        ArchiveLocked: the lock was still held after ``wait_s`` seconds.
        ArchiveMissing: a read-only open of a file that does not exist.
        NotAnArchive: the path is a folder, a file of another format or program, or not writable
            (``archive_db.identity``); nothing was written to it.
    """
    path = resolve_db_path(db)
    check_archive_file(path, read_only=read_only)
    if read_only and (not path.exists() or is_empty_file(path)):
        raise ArchiveMissing(f"no archive at {path}; create one with `kernel-archive ingest`")
    if not read_only and is_empty_file(path):
        path.unlink()
    deadline = time.monotonic() + wait_s
    delay = 0.02
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=dict(CONNECTION_CONFIG))
            break
        except duckdb.Error as error:
            if not _is_lock_error(error):
                raise NotAnArchive(f"cannot open {path} as an archive: {error}") from None
            if time.monotonic() >= deadline:
                mode = "read" if read_only else "write to"
                raise ArchiveLocked(
                    f"cannot {mode} {path}: {_holder(error)} holds it open "
                    f"(waited {wait_s:g}s). Wait for it to finish, or stop it."
                ) from error
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    try:
        check_archive_tables(con, path)
        if not read_only:
            ensure_schema(con, str(path))
        elif current_version(con) is None:
            raise ArchiveMissing(f"{path} holds no archive yet; create one with `kernel-archive ingest`")
        elif (version := current_version(con)) != SCHEMA_VERSION:
            con.close()
            return _upgraded_for_reading(path, version, wait_s)
    except BaseException:
        con.close()
        raise
    return con


def _upgraded_for_reading(path: Path, version: int, wait_s: float) -> duckdb.DuckDBPyConnection:
    """A read-only connection to an archive of another schema version, after upgrading it once.

    Readers (the explorer, ``leaderboard``) would otherwise meet tables an older version never had; an
    archive that cannot be upgraded here (read-only place, a writer holding it) is refused by name.
    """
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(f"{path} has schema version {version}, newer than this kernel-archive understands "
                           f"({SCHEMA_VERSION}); upgrade kernel-archive")
    try:
        open_connection(path, wait_s=wait_s).close()
    except (ArchiveLocked, NotAnArchive, duckdb.Error) as error:
        raise SchemaTooOld(f"{path} has schema version {version} and this kernel-archive reads version "
                           f"{SCHEMA_VERSION}; it could not be upgraded now ({error}). Run any writing command "
                           "on it (e.g. `kernel-archive analyse --db PATH`) once it is free.") from error
    return open_connection(path, read_only=True, wait_s=wait_s)


@contextmanager
def connect(
    db: str | os.PathLike[str] | None = None, *, read_only: bool = False, wait_s: float = 10.0
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Context manager around :func:`open_connection` that always closes the connection."""
    con = open_connection(db, read_only=read_only, wait_s=wait_s)
    try:
        yield con
    finally:
        con.close()


def db_exists(db: str | os.PathLike[str] | None = None) -> bool:
    """Whether the archive file exists."""
    return Path(resolve_db_path(db)).exists()
