"""Ctrl+C ends a command with one line and exit 130, wherever it lands (see also tests/ingest/test_ingest_interrupt.py)."""

from __future__ import annotations

import pytest
import typer

from kernel_archive.cli.common import reporting_errors


def test_ctrl_c_during_a_query_is_an_interrupt_too(capsys: pytest.CaptureFixture[str]) -> None:
    """A SIGINT that lands while DuckDB runs a query reaches Python as DuckDB's RuntimeError('Query
    interrupted'), not KeyboardInterrupt: the CLI reports it as the interrupt it is (it printed "unexpected
    RuntimeError" and exited 1); other RuntimeErrors pass through."""
    with pytest.raises(typer.Exit) as ended, reporting_errors():
        raise RuntimeError("Query interrupted")
    assert ended.value.exit_code == 130
    assert "interrupted; nothing was written" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="other"), reporting_errors():
        raise RuntimeError("other")
