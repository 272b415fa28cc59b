"""Opening the archive: schema on first write, read-only readers, and the lock held by another process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

from archive_db.connection import (
    ArchiveLocked,
    ArchiveMissing,
    NotAnArchive,
    connect,
    db_exists,
    open_connection,
)
from archive_db.migrations import SCHEMA_VERSION, SchemaTooNew

HOLDER = textwrap.dedent(
    """
    import sys, time
    from archive_db.connection import connect
    read_only = sys.argv[3] == "read"
    with connect(sys.argv[1], read_only=read_only) as con:
        if not read_only:
            con.execute("CREATE TABLE IF NOT EXISTS held (x INTEGER)")
        print("holding", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


@contextmanager
def writer_process(path: Path, hold_s: float, mode: str = "write") -> Iterator[subprocess.Popen[str]]:
    """Another process that opens ``path`` (for ``mode``: write or read) and holds it ``hold_s`` seconds."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(hold_s), mode], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "holding"
        yield process
    finally:
        process.kill()
        process.wait()


def test_first_write_creates_the_file_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "folder" / "archive.duckdb"
    assert not db_exists(path)
    with connect(path) as con:
        version = con.execute("SELECT max(version) FROM schema_info").fetchall()[0][0]
    assert version == SCHEMA_VERSION
    assert db_exists(path)


def test_reading_a_missing_archive_says_how_to_make_one(tmp_path: Path) -> None:
    path = tmp_path / "nothing.duckdb"
    with pytest.raises(ArchiveMissing, match="kernel-archive ingest") as caught:
        open_connection(path, read_only=True)
    assert str(path) in str(caught.value)
    assert not path.exists()


def test_read_only_connections_cannot_write(archive_path: Path) -> None:
    with connect(archive_path):
        pass
    with connect(archive_path, read_only=True) as con, pytest.raises(duckdb.Error, match="read-only"):
        con.execute("INSERT INTO kernel_tags VALUES ('k', 't', 1, 'e')")


def test_connect_closes_the_connection(archive_path: Path) -> None:
    with connect(archive_path) as con:
        pass
    with pytest.raises(duckdb.ConnectionException):
        con.execute("SELECT 1")


def test_a_writer_in_another_process_is_named_in_the_error(archive_path: Path) -> None:
    with writer_process(archive_path, 60) as holder:
        started = time.monotonic()
        with pytest.raises(ArchiveLocked) as caught:
            open_connection(archive_path, wait_s=0.5)
        waited = time.monotonic() - started
        message = str(caught.value)
        assert f"process {holder.pid}" in message
        assert "python" in message  # the holding program, as DuckDB reports it
        assert str(archive_path) in message and "cannot write to" in message and "waited 0.5s" in message
        assert waited >= 0.5
        with pytest.raises(ArchiveLocked, match=f"cannot read .*process {holder.pid}"):
            open_connection(archive_path, read_only=True, wait_s=0.2)


def test_a_long_reader_in_another_process_is_named_to_a_writer(archive_path: Path) -> None:
    with connect(archive_path):
        pass
    with writer_process(archive_path, 60, mode="read") as holder:
        with pytest.raises(ArchiveLocked, match=f"cannot write to .*process {holder.pid}") as caught:
            open_connection(archive_path, wait_s=0.3)
        assert "for writing" not in str(caught.value)
        with connect(archive_path, read_only=True) as con:  # readers share the file
            assert con.execute("SELECT count(*) FROM kernels").fetchall() == [(0,)]


def test_a_reader_waits_for_a_short_writer_to_finish(archive_path: Path) -> None:
    with writer_process(archive_path, 3.0):
        started = time.monotonic()
        with connect(archive_path, read_only=True, wait_s=30) as con:
            assert con.execute("SELECT count(*) FROM held").fetchall() == [(0,)]
        assert time.monotonic() - started > 0.2


def test_errors_that_are_not_locks_are_not_retried(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.duckdb"
    corrupt.write_bytes(bytes(8) + b"DUCK" + bytes(4096))
    started = time.monotonic()
    with pytest.raises(NotAnArchive, match="cannot open") as caught:
        open_connection(corrupt, wait_s=30)
    assert not isinstance(caught.value, ArchiveLocked)
    assert time.monotonic() - started < 5


def test_an_archive_from_a_newer_version_is_refused_and_left_closed(archive_path: Path) -> None:
    with connect(archive_path) as con:
        con.execute("INSERT INTO schema_info VALUES (?, now())", [SCHEMA_VERSION + 1])
    with pytest.raises(SchemaTooNew, match="upgrade kernel-archive"):
        open_connection(archive_path)
    with pytest.raises(SchemaTooNew, match="upgrade kernel-archive"):
        open_connection(archive_path, read_only=True)
    with duckdb.connect(str(archive_path), read_only=True) as con:  # both refusals released the file
        assert con.execute("SELECT max(version) FROM schema_info").fetchall() == [(SCHEMA_VERSION + 1,)]
