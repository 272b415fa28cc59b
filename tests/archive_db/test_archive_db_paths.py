"""Where the archive lives: --db, then $KERNEL_ARCHIVE_DB, then the per-user data folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from platformdirs import user_data_dir

from archive_db.paths import ENV_VAR, default_db_path, resolve_db_path


def test_default_is_in_the_per_user_data_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    path = default_db_path()
    assert path == Path(user_data_dir("kernel-archive", appauthor=False)) / "archive.duckdb"
    assert path.is_absolute()


def test_environment_variable_overrides_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env.duckdb"))
    assert default_db_path() == tmp_path / "env.duckdb"
    assert resolve_db_path(None) == tmp_path / "env.duckdb"


def test_explicit_path_overrides_both(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env.duckdb"))
    assert resolve_db_path(tmp_path / "given.duckdb") == tmp_path / "given.duckdb"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_db_path("~/a.duckdb") == tmp_path / "a.duckdb"
