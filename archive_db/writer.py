"""Writing bundles into the archive: one transaction per source, duplicate keys ignored.

``ArchiveWriter`` opens a transaction; every bundle written inside it lands, or none does. Rows whose
primary key is already present are skipped (first writer wins), except for the few columns that a later
source may fill in (``UPSERT_FILL``) and the bookkeeping timestamps of sources.

Example:
    >>> import tempfile
    >>> from archive_db.connection import connect
    >>> with tempfile.TemporaryDirectory() as folder, connect(f"{folder}/a.duckdb") as con, ArchiveWriter(con) as w:
    ...     w.write(Bundle())  # rows added per table: none
    Counter()
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from archive_db import interrupts
from archive_db.bundle import Bundle
from archive_db.gpus import gpu_family
from archive_db.summary import INPUT_TABLES, refresh_summary

# Columns a later source may fill in where the first writer left them NULL.
UPSERT_FILL: dict[str, tuple[str, ...]] = {
    "tasks": ("functional_code", "kb_version", "level", "problem_id", "name"),
    "sources": ("creator", "citation"),
    "source_origins": ("upstream",),
}
# Tables whose rows of one key merge instead of the first writer winning: value columns are filled where NULL,
# list columns gain each other's items (measurements: one kernel, source and GPU read from several files).
MERGE_FILL: dict[str, tuple[str, ...]] = {
    "measurements": ("correct", "max_diff", "error", "kernel_ms", "eager_ms", "compile_ms", "speedup_eager",
                     "speedup_compile"),
}
MERGE_UNION: dict[str, tuple[str, ...]] = {"measurements": ("origins", "flags")}
# Keys of tables declared without a primary key: bulk profile rows, whose index would cost more to build on
# every insert and commit than the anti-join on these columns costs (the writer still inserts each key once).
NATURAL_KEYS: dict[str, list[str]] = {
    "ncu_metrics": ["kernel_id", "origin", "metric"],
    "ncu_rules": ["kernel_id", "origin", "rule"],
    "torch_profile_events": ["kernel_id", "origin", "event"],
    "clang_tidy_findings": ["kernel_id", "origin", "seq"],
    "profile_raw": ["kernel_id", "origin", "kind"],
}
# Columns derived from another column of the same row when a writer leaves them out.
DERIVED: dict[str, tuple[str, Any]] = {"gpu_family": ("gpu", gpu_family)}
# Columns refreshed on every write (bookkeeping, not data). A source's identity, license and homepage are
# never among them: an ingest adds to a source, it does not relabel it (see archive_db/sources.py).
UPSERT_TOUCH: dict[str, tuple[str, ...]] = {
    "sources": ("last_ingested_at",),
    "source_origins": ("last_ingested_at",),
    "score_kinds": ("description", "unit", "higher_is_better"),
}


class _Schema:
    """Column names, types and primary keys of the live archive."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.columns: dict[str, list[tuple[str, str]]] = {}
        for table, column, dtype in con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
        ).fetchall():
            self.columns.setdefault(table, []).append((column, dtype))
        self.primary_keys: dict[str, list[str]] = {}
        for table, cols in con.execute(
            "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY'"
        ).fetchall():
            self.primary_keys[table] = list(cols)


def _arrow_type(dtype: str) -> pa.DataType:
    dtype = dtype.upper()
    if dtype.endswith("[]"):
        return pa.list_(_arrow_type(dtype[:-2]))
    return {
        "VARCHAR": pa.string(),
        "INTEGER": pa.int32(),
        "BIGINT": pa.int64(),
        "DOUBLE": pa.float64(),
        "FLOAT": pa.float32(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us"),
        "JSON": pa.string(),
        "BLOB": pa.binary(),
    }.get(dtype, pa.string())


def _cell(value: Any, dtype: str) -> Any:
    if dtype == "JSON" and value is not None and not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False, default=str)
    return value


class ArchiveWriter:
    """A transaction over the archive into which bundles are written.

    Use as a context manager: leaving it normally commits, leaving it with an exception rolls back.
    ``added`` counts the rows each table really gained.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.added: Counter[str] = Counter()
        self._schema = _Schema(con)
        self._touched: set[str] = set()
        self._scanned: set[str] = set()
        self._written_keys: dict[str, set[Any]] = {}
        """First-key values this writer put in each table that was empty when it first touched it (see
        ``_may_clash``); tables that held rows are not in it."""

    def __enter__(self) -> ArchiveWriter:
        self.con.execute("BEGIN TRANSACTION")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                if self._touched & set(INPUT_TABLES):
                    refresh_summary(self.con)
                # A Ctrl+C that a query swallowed must still stop the commit.
                interrupts.check()
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")
        else:
            self.con.execute("ROLLBACK")

    def write(self, bundle: Bundle) -> Counter[str]:
        """Insert every row of ``bundle``; returns the rows added per table."""
        added: Counter[str] = Counter()
        for table in bundle.tables():
            self._touched.add(table)
            added[table] += self._write_table(table, bundle.rows.get(table, []), bundle.arrow.get(table, []))
        self.added.update(added)
        return added

    def _staging(self, table: str, rows: list[dict[str, Any]], blocks: list[pa.Table]) -> pa.Table:
        """The rows of ``table`` (dicts and Arrow blocks) as one Arrow table in the archive's column types."""
        if table not in self._schema.columns:
            raise KeyError(f"no table {table!r} in the archive schema")
        columns = self._schema.columns[table]
        known = {name for name, _ in columns}
        schema = pa.schema([(name, _arrow_type(dtype)) for name, dtype in columns])
        for row in rows:
            unknown = set(row) - known
            if unknown:
                raise KeyError(f"table {table!r} has no column(s) {sorted(unknown)}")
        for column, (basis, derive) in DERIVED.items():
            if column in known and basis in known:
                for row in rows:
                    if row.get(column) is None:
                        row[column] = derive(row.get(basis))
        parts = []
        if rows:
            parts.append(pa.Table.from_arrays([
                pa.array(
                    [_cell(row.get(name), dtype) for row in rows] if dtype == "JSON" else [row.get(name) for row in rows],
                    type=_arrow_type(dtype),
                )
                for name, dtype in columns
            ], schema=schema))
        for block in blocks:
            unknown = set(block.column_names) - known
            if unknown:
                raise KeyError(f"table {table!r} has no column(s) {sorted(unknown)}")
            parts.append(pa.Table.from_arrays([
                block.column(field.name).cast(field.type) if field.name in block.column_names
                else pa.nulls(block.num_rows, field.type)
                for field in schema
            ], schema=schema))
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    def _write_table(self, table: str, rows: list[dict[str, Any]], blocks: Sequence[pa.Table] = ()) -> int:
        # Read by DuckDB's replacement scan of this local name, not register(): a registered Arrow
        # table stays alive until the transaction ends, so one large ingest would hold every batch.
        arrow_staging = self._staging(table, rows, list(blocks))
        columns = self._schema.columns[table]
        keys = self._schema.primary_keys.get(table) or NATURAL_KEYS.get(table, [])
        names = ", ".join(name for name, _ in columns)
        if keys and table in MERGE_FILL:
            if not self._may_clash(table, keys[0], arrow_staging):
                inserted = self._insert_if_unique(table, names, keys, arrow_staging)
                if inserted is not None:
                    return inserted  # no staged key repeats or is in the table already: the insert was the merge
                return self._merge(table, columns, keys, arrow_staging)
            if self._needs_merge(table, keys, arrow_staging):
                return self._merge(table, columns, keys, arrow_staging)
            inserted = self.con.execute(f"INSERT INTO {table} ({names}) SELECT * FROM arrow_staging").fetchall()
            return int(inserted[0][0]) if inserted else 0
        fill = UPSERT_FILL.get(table, ())
        touch = UPSERT_TOUCH.get(table, ())
        if keys and not (fill or touch) and not self._may_clash(table, keys[0], arrow_staging):
            inserted = self._insert_if_unique(table, names, keys, arrow_staging)
            if inserted is not None:
                return inserted
            distinct = self.con.execute(
                f"INSERT INTO {table} ({names}) SELECT DISTINCT ON ({', '.join(keys)}) * FROM arrow_staging"
            ).fetchall()
            return int(distinct[0][0]) if distinct else 0
        select = "SELECT * FROM arrow_staging"
        if keys and not self._keys_unique(keys, arrow_staging):
            select = f"SELECT DISTINCT ON ({', '.join(keys)}) * FROM arrow_staging"
        if keys and (fill or touch):
            before = self._count(table)
            sets = [f"{c} = coalesce({table}.{c}, excluded.{c})" for c in fill]
            sets += [f"{c} = excluded.{c}" for c in touch]
            self.con.execute(
                f"INSERT INTO {table} ({names}) {select} "
                f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {', '.join(sets)}"
            ).fetchall()
            return self._count(table) - before
        if keys:
            # Some staged key's first column is in the table already. An anti-join and a plain INSERT:
            # INSERT OR IGNORE checks each row for a conflict on a slower path, which made it a third of the
            # whole ingest's insert time.
            match = " AND ".join(f"t.{k} = s.{k}" for k in keys)
            inserted = self.con.execute(
                f"INSERT INTO {table} ({names}) SELECT * FROM ({select}) s "
                f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {match})"
            ).fetchall()
        else:
            inserted = self.con.execute(f"INSERT INTO {table} ({names}) {select}").fetchall()
        del arrow_staging
        return int(inserted[0][0]) if inserted else 0

    def _insert_if_unique(self, table: str, names: str, keys: list[str], arrow_staging: pa.Table) -> int | None:
        """Insert the staged rows if no two share a key, checking in the same statement; the rows inserted, or
        None (and nothing inserted) when some key repeats.

        One statement instead of a check and an insert: each statement costs the ingest one to three
        milliseconds besides its rows, about a thousand times over.
        """
        if arrow_staging.num_rows == 0:
            return 0
        inserted = self.con.execute(
            f"INSERT INTO {table} ({names}) SELECT * FROM arrow_staging "
            f"WHERE (SELECT count(DISTINCT hash({', '.join(keys)})) FROM arrow_staging) = {arrow_staging.num_rows}"
        ).fetchall()
        count = int(inserted[0][0]) if inserted else 0
        return count if count == arrow_staging.num_rows else None

    def _keys_unique(self, keys: list[str], arrow_staging: pa.Table) -> bool:
        """Whether no two staged rows share a key: then they are inserted as they are, since DISTINCT ON
        over every column costs up to six times the insert (the kernels' code is copied through a hash table).

        Counts distinct hashes of the key, not keys (half the time: no strings in the hash table): as many
        hashes as rows proves the keys distinct; a collision only sends the batch through DISTINCT ON.
        """
        row = self.con.execute(f"SELECT count(DISTINCT hash({', '.join(keys)})) FROM arrow_staging").fetchall()
        return int(row[0][0]) == arrow_staging.num_rows

    def _may_clash(self, table: str, first_key: str, arrow_staging: pa.Table) -> bool:
        """Whether any staged row's first key column is in ``table`` already (else no key can clash).

        A table that was empty when this writer first touched it can only hold the keys this writer put
        there, which it remembers, so it is not scanned at all. Otherwise a semi-join on the one column
        decides: a few milliseconds, where the anti-join on the whole key, over a profile table of half a
        million rows, costs about four times a plain insert.
        """
        written = self._written_keys.get(table)
        if written is None and table not in self._scanned:
            self._scanned.add(table)
            if self._count(table) == 0:
                written = self._written_keys[table] = set()
        if written is not None:
            staged_keys = pc.unique(arrow_staging[first_key]).to_pylist()
            clash = not written.isdisjoint(staged_keys)
            written.update(staged_keys)
            return clash
        row = self.con.execute(
            f"SELECT EXISTS (SELECT 1 FROM {table} WHERE {first_key} IN (SELECT {first_key} FROM arrow_staging))"
        ).fetchall()
        return bool(row[0][0])

    def _needs_merge(self, table: str, keys: list[str], arrow_staging: pa.Table) -> bool:
        """Whether some staged key repeats, or is already in ``table`` (else a plain insert is the merge)."""
        key_list = ", ".join(keys)
        match = " AND ".join(f"t.{k} = s.{k}" for k in keys)
        row = self.con.execute(
            f"SELECT (SELECT count(*) FROM (SELECT DISTINCT {key_list} FROM arrow_staging)) < "
            f"(SELECT count(*) FROM arrow_staging) "
            f"OR EXISTS (SELECT 1 FROM arrow_staging s JOIN {table} t ON {match})"
        ).fetchall()
        return bool(row[0][0])

    def _merge(self, table: str, columns: list[tuple[str, str]], keys: list[str], arrow_staging: pa.Table) -> int:
        """Rows of one key become one: existing rows are filled and extended first, then new keys inserted."""
        fill, union = MERGE_FILL[table], MERGE_UNION.get(table, ())

        def merged(name: str) -> str:
            if name in union:
                return f"list_sort(list_distinct(flatten(list({name}) FILTER (WHERE {name} IS NOT NULL)))) AS {name}"
            if name in keys:
                return name
            return f"first({name} ORDER BY {name} NULLS LAST) AS {name}"

        staged = f"SELECT {', '.join(merged(n) for n, _ in columns)} FROM arrow_staging GROUP BY {', '.join(keys)}"
        match = " AND ".join(f"{table}.{k} = s.{k}" for k in keys)
        sets = [f"{c} = coalesce({table}.{c}, s.{c})" for c in fill]
        sets += [f"{c} = list_sort(list_distinct(list_concat(coalesce({table}.{c}, []), coalesce(s.{c}, []))))"
                 for c in union]
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE merge_staging AS {staged}").fetchall()
        self.con.execute(f"UPDATE {table} SET {', '.join(sets)} FROM merge_staging s WHERE {match}").fetchall()
        names = ", ".join(name for name, _ in columns)
        anti = " AND ".join(f"t.{k} = s.{k}" for k in keys)
        inserted = self.con.execute(
            f"INSERT INTO {table} ({names}) SELECT {names} FROM merge_staging s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {anti})"
        ).fetchall()
        self.con.execute("DROP TABLE merge_staging").fetchall()
        return int(inserted[0][0]) if inserted else 0

    def _count(self, table: str) -> int:
        return int(self.con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])


def utcnow() -> dt.datetime:
    """Now, in UTC without tzinfo (DuckDB TIMESTAMP)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)
