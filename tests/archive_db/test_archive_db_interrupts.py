"""``archive_db.interrupts``: a Ctrl+C that a database call swallowed still stops the commit."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from archive_db import interrupts
from archive_db.connection import connect
from archive_db.writer import ArchiveWriter


@pytest.fixture
def ctrl_c_default() -> Iterator[None]:
    """SIGINT with Python's own handler (the tests may run in the background, where it is ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_swallowed_ctrl_c_is_remembered_and_raised_at_the_check(ctrl_c_default: None) -> None:
    with interrupts.catching():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
        except KeyboardInterrupt:
            pass  # as a database call that turns the interrupt into something else, or drops it
        assert interrupts.requested()
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()
    assert not interrupts.requested(), "leaving the block forgets the request"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the previous handler is back"


def test_an_ignored_sigint_stays_ignored() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts.catching():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            interrupts._requested.set()
        assert not interrupts.requested(), "a request never outlives the block"
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_writer_rolls_back_instead_of_committing_after_a_swallowed_ctrl_c(tmp_path: Path, ctrl_c_default: None) -> None:
    db = tmp_path / "a.duckdb"
    with connect(db) as con:
        con.execute("CREATE TABLE scratch (x INTEGER)")
        with interrupts.catching(), pytest.raises(KeyboardInterrupt), ArchiveWriter(con):
            con.execute("INSERT INTO scratch VALUES (1)")
            interrupts._requested.set()  # the handler ran inside a query that then finished normally
        assert con.execute("SELECT count(*) FROM scratch").fetchone()[0] == 0
        with interrupts.catching(), ArchiveWriter(con):
            con.execute("INSERT INTO scratch VALUES (2)")
        assert con.execute("SELECT count(*) FROM scratch").fetchone()[0] == 1, "no Ctrl+C: it commits"
