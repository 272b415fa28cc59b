"""The archive store: DuckDB schema and migrations, connections, writes, named queries and export.

``archive_db`` imports none of the other packages: ingest, embeddings, verify and the explorer all
depend on it, never the reverse.
"""

from archive_db.bundle import Bundle
from archive_db.connection import ArchiveLocked, ArchiveMissing, connect, open_connection
from archive_db.paths import default_db_path, resolve_db_path

__all__ = [
    "ArchiveLocked",
    "ArchiveMissing",
    "Bundle",
    "connect",
    "default_db_path",
    "open_connection",
    "resolve_db_path",
]
