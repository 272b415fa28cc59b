"""Every docstring example in the benchmarks runs and prints what it says (``tests/test_doctests.py`` covers the
packages; the benches are scripts, loaded here as modules)."""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from scripts_testing import load_script  # noqa: E402

SCRIPTS = sorted(path.name for path in (REPO / "bench").glob("*.py") if ">>>" in path.read_text())


def test_some_benches_have_examples() -> None:
    assert "verify_batch.py" in SCRIPTS, SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_bench_docstring_examples(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = load_script(f"bench/{name}", f"bench_doctest_{name[:-3]}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"bench/{name}: {result.failed} of {result.attempted} examples failed"
