"""The archive the newcomer's first command builds (``kernel-archive serve --demo``), checked whatever it holds.

``kernel_archive.demo.demo_sources()`` decides from the files present: the measured showcase run plus the
verifier suite, or the verifier suite alone. Each source has its expectations below, as data; the
checks run for every source of the demo that is built, so the test follows the switch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from run_dir_fixtures import collected, own_run

from archive_db.connection import connect
from kernel_archive.demo import (
    INPUTS_SUFFIX,
    LEGACY_SOURCE,
    SHOWCASE_SOURCE,
    SUITE_SOURCE,
    build_demo,
    demo_sources,
    showcase_gaps,
)


@dataclass(frozen=True)
class Expected:
    """What a demo source must hold."""

    min_tasks: int
    min_kernels: int
    min_categories: int
    profiles: bool
    baselines: bool


EXPECTED: dict[str, Expected] = {
    SHOWCASE_SOURCE: Expected(min_tasks=14, min_kernels=80, min_categories=10, profiles=True, baselines=True),
    SUITE_SOURCE: Expected(min_tasks=5, min_kernels=26, min_categories=2, profiles=False, baselines=False),
    LEGACY_SOURCE: Expected(min_tasks=5, min_kernels=26, min_categories=2, profiles=False, baselines=False),
}
RAN = """
    SELECT v.kernel_id FROM verifications v
    JOIN verification_checks c ON c.verification_id = v.verification_id AND c.check_name = 'compiles'
    JOIN verification_checks r ON r.verification_id = v.verification_id AND r.check_name = 'runs'
    WHERE c.verdict = 'pass' AND r.verdict = 'pass'
"""
"""Kernels that compiled and ran under the verifier."""


def one(con: duckdb.DuckDBPyConnection, sql: str, source: str) -> int:
    return int(con.execute(sql, [source]).fetchall()[0][0])


@pytest.fixture(scope="module")
def first_command_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path, what = build_demo(tmp_path_factory.mktemp("demo") / "demo.duckdb", embed=False)
    assert what.startswith("built: "), what
    return path


@pytest.mark.parametrize("source", [s.name for s in demo_sources()])
def test_each_demo_source_holds_what_it_promises(first_command_archive: Path, source: str) -> None:
    expected = EXPECTED[source]
    with connect(first_command_archive, read_only=True) as con:
        tasks = one(con, "SELECT count(DISTINCT task_id) FROM kernels WHERE source = ?", source)
        kernels = one(con, "SELECT count(*) FROM kernels WHERE source = ?", source)
        categories = one(con, "SELECT count(DISTINCT t.category) FROM tasks t JOIN kernels k USING (task_id) "
                              "WHERE k.source = ?", source)
        uncategorised = one(con, "SELECT count(DISTINCT t.task_id) FROM tasks t JOIN kernels k USING (task_id) "
                                 "WHERE k.source = ? AND t.category IS NULL", source)
        verified = one(con, "SELECT count(DISTINCT v.kernel_id) FROM verifications v JOIN kernels k "
                            "USING (kernel_id) WHERE k.source = ?", source)
        assert tasks >= expected.min_tasks and kernels >= expected.min_kernels
        assert categories >= expected.min_categories and uncategorised == 0
        assert verified == kernels, "every demo kernel carries a verification report"
        if expected.baselines:
            without = one(con, "SELECT count(DISTINCT k.task_id) FROM kernels k WHERE k.source = ? AND k.task_id "
                               "NOT IN (SELECT task_id FROM baselines WHERE task_id IS NOT NULL)", source)
            assert without == 0, "every task has baselines"
        if expected.profiles:
            ran = f"SELECT kernel_id FROM kernels WHERE source = ? AND kernel_id IN ({RAN})"
            for table, extra in (("ncu_metrics", ""), ("torch_profile_events", ""),
                                 ("profile_raw", " AND kind = 'clang-tidy'")):
                missing = con.execute(f"{ran} AND kernel_id NOT IN (SELECT kernel_id FROM {table} WHERE true{extra})"
                                      + (" AND code LIKE '%__global__%'" if "clang" in extra else ""),
                                      [source]).fetchall()
                assert not missing, f"{len(missing)} {source} kernels that ran have no {table}{extra}"


def test_a_showcase_with_results_switches_the_demo(tmp_path: Path) -> None:
    showcase = collected(own_run(tmp_path / "showcase"))
    assert showcase_gaps(showcase) == []
    assert [s.name for s in demo_sources(showcase)] == [SHOWCASE_SOURCE, SUITE_SOURCE]
    path, what = build_demo(tmp_path / "demo.duckdb", embed=False, showcase=showcase)
    assert what.startswith("built: 29 kernels with 29 verification reports (showcase, verifier-suite)"), what
    with connect(path, read_only=True) as con:
        sources = dict(con.execute("SELECT source, count(*) FROM kernels GROUP BY 1").fetchall())
    assert sources == {SHOWCASE_SOURCE: 3, SUITE_SOURCE: 26}


def test_a_showcase_without_results_keeps_the_suite_alone(tmp_path: Path) -> None:
    showcase = own_run(tmp_path / "showcase", results=False)
    assert [s.name for s in demo_sources(showcase)] == [LEGACY_SOURCE]


def test_a_partly_collected_showcase_waits_and_the_build_says_what_is_missing(tmp_path: Path) -> None:
    showcase = own_run(tmp_path / "showcase")
    assert showcase_gaps(showcase) == ["relu/cheat: no ncu profile", "relu/cheat: no torch profile",
                                       "relu/inline: no verification report"]
    assert [s.name for s in demo_sources(showcase)] == [LEGACY_SOURCE]
    _, what = build_demo(tmp_path / "demo.duckdb", embed=False, showcase=showcase)
    assert what.startswith("built: 26 kernels"), what
    assert "the showcase run is not in it yet: 3 result(s) missing, e.g. relu/cheat: no ncu profile" in what


def test_new_results_rebuild_the_demo_and_unchanged_inputs_reuse_it(tmp_path: Path) -> None:
    showcase = collected(own_run(tmp_path / "showcase"))
    path, _ = build_demo(tmp_path / "demo.duckdb", embed=False, showcase=showcase)
    assert build_demo(path, embed=False, showcase=showcase) == (path, "already built")
    results = showcase / "results" / "relu"
    (results / "inline.json").write_text((results / "cheat.json").read_text())
    _, what = build_demo(path, embed=False, showcase=showcase)
    assert what.startswith("built: 29 kernels with 29 verification reports"), what
    assert path.with_name(path.name + INPUTS_SUFFIX).is_file()
