"""Per-connection DuckDB settings producers ask for, by name.

Example:
    >>> from archive_db.connection import connect
    >>> with connect("doc-settings.duckdb") as con:
    ...     set_memory_limit(con, "512MB")
    ...     con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    '488.2 MiB'
    >>> with connect("doc-settings.duckdb") as con:
    ...     before = con.execute("SELECT current_setting('threads')").fetchone()[0]
    ...     with threads(con, 1) as restore:
    ...         during = con.execute("SELECT current_setting('threads')").fetchone()[0]
    ...         restore()
    ...         after = con.execute("SELECT current_setting('threads')").fetchone()[0]
    ...     during, after == before
    (1, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from archive_db.transaction import Connection


def set_memory_limit(con: Connection, limit: str) -> None:
    """Cap DuckDB's memory on ``con`` (e.g. ``"768MB"``); past it, DuckDB spills to a temporary file."""
    con.execute(f"SET memory_limit = '{limit}'")


@contextmanager
def threads(con: Connection, n: int) -> Iterator[Callable[[], None]]:
    """Run DuckDB with ``n`` threads until the block ends or it calls the function it is given, then with as
    many as before (the setting is the database's: every connection to that file in this process shares it)."""
    before = int(con.execute("SELECT current_setting('threads')").fetchone()[0])  # type: ignore[index]
    con.execute(f"SET threads = {int(n)}")
    restored = False

    def restore() -> None:
        nonlocal restored
        if not restored:
            con.execute(f"SET threads = {before}")
            restored = True

    try:
        yield restore
    except BaseException:
        with suppress(Exception):  # an aborted transaction refuses SET until rolled back: keep the first error
            restore()
        raise
    restore()
