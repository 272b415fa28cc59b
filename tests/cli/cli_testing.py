"""Helpers for the CLI tests (a uniquely named module, importable from every test here)."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from kernel_archive.cli import app


def run_json(runner: CliRunner, *args: str) -> Any:
    """Run a verb with ``--json``, require success, and return its last output line parsed."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
