"""A CLI runner that ignores the developer's own $KERNEL_ARCHIVE_DB."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from archive_db.paths import ENV_VAR


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv(ENV_VAR, raising=False)
    return CliRunner()
