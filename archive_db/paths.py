"""Where the archive file lives by default.

The default is ``archive.duckdb`` in the per-user data folder (``platformdirs.user_data_dir``, e.g.
``~/.local/share/kernel-archive`` on Linux). ``$KERNEL_ARCHIVE_DB`` overrides it, and every command's
``--db`` overrides both.

Example:
    >>> import os; os.environ["KERNEL_ARCHIVE_DB"] = "/tmp/x.duckdb"; str(default_db_path())
    '/tmp/x.duckdb'
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "KERNEL_ARCHIVE_DB"


def user_data_folder() -> Path:
    """The per-user data folder that holds the default archive and the demo archive."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("kernel-archive", appauthor=False))


def default_db_path() -> Path:
    """The archive file used when no ``--db`` is given."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override).expanduser()
    return user_data_folder() / "archive.duckdb"


def resolve_db_path(db: str | os.PathLike[str] | None) -> Path:
    """``db`` if given, else the default."""
    return Path(db).expanduser() if db else default_db_path()
