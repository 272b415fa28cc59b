"""A content hash of every table of an archive, to show that a change to the writer stored the same values.

Each table's rows are hashed one by one (every column except timestamps, which record when an ingest ran)
and the sorted row hashes are hashed again, so row order and storage layout (compression, row groups) do
not count; only the values do. Two archives built from the same input by two versions of the code print
the same lines when they hold the same rows.

    python scripts/table_hashes.py archive.duckdb                   # one line per table: rows, hash
    python scripts/table_hashes.py before.duckdb after.duckdb       # both, then "same" or the tables that differ

Example:
    >>> import duckdb
    >>> con = duckdb.connect()
    >>> _ = con.execute("CREATE TABLE t (a INTEGER, at TIMESTAMP); INSERT INTO t VALUES (2, now()), (1, NULL)")
    >>> table_hashes(con)["t"][0]
    2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

SKIPPED_TYPES = ("TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "DATE", "TIME")
"""Column types left out: when an ingest ran, not what it stored."""


def table_hashes(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, str]]:
    """Table name -> (rows, md5 of its sorted row hashes), for every table of the main schema."""
    columns: dict[str, list[str]] = {}
    for table, column, dtype in con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall():
        columns.setdefault(table, [])
        if dtype not in SKIPPED_TYPES:
            columns[table].append(f'"{column}"')
    out: dict[str, tuple[int, str]] = {}
    for table, kept in columns.items():
        row = f"row({', '.join(kept)})::VARCHAR" if kept else "''"
        rows, digest = con.execute(
            f'SELECT count(*), md5(coalesce(string_agg(h, \',\' ORDER BY h), \'\')) '
            f'FROM (SELECT md5({row}) AS h FROM "{table}")'
        ).fetchone()
        out[table] = (int(rows), str(digest))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archives", nargs="+", type=Path, help="One archive, or two to compare.")
    args = parser.parse_args(argv)
    if len(args.archives) > 2:
        parser.error("give one archive, or two to compare")
    hashes = []
    for path in args.archives:
        with duckdb.connect(str(path), read_only=True) as con:
            hashes.append(table_hashes(con))
        print(f"# {path}")
        for table, (rows, digest) in sorted(hashes[-1].items()):
            print(f"{table:28} {rows:>10,} {digest}")
    if len(hashes) == 2:
        differ = sorted(t for t in set(hashes[0]) | set(hashes[1]) if hashes[0].get(t) != hashes[1].get(t))
        print("same: every table holds the same rows" if not differ else f"DIFFERENT: {', '.join(differ)}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
