"""profiles.store: parsed profiles become rows of the archive's profile tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from archive_db.bundle import Bundle
from archive_db.connection import connect
from archive_db.writer import ArchiveWriter
from profiles import NcuMetric, NcuProfile, NcuRule, TorchEvent, parse_clang_tidy
from profiles.store import add_profiles

CLANG = "k.cu:1:2: warning: w [c]\n    1 | x\n      | ^\nk.cu:3:4: note: n"


def _bundle() -> Bundle:
    bundle = Bundle()
    add_profiles(
        bundle, "k1", "demo",
        ncu=NcuProfile((NcuMetric("SM Busy", "%", 42.7, 0.0, 5),), (NcuRule("HighPipeUtilization", "WRN", "d"),)),
        torch=(TorchEvent("aten::mm", 10.0, 7.5, 1.0, 7.5, 0, 1024, 0, 1024, 3),),
        clang_tidy=parse_clang_tidy(CLANG),
        raw={"ncu": "{...}", "torch": None, "clang-tidy": CLANG},
    )
    return bundle


def test_rows_per_table() -> None:
    bundle = _bundle()
    counts = {t: bundle.count(t) for t in ("ncu_metrics", "ncu_rules", "torch_profile_events",
                                           "clang_tidy_findings", "profile_raw")}
    assert counts == {"ncu_metrics": 1, "ncu_rules": 1, "torch_profile_events": 1, "clang_tidy_findings": 2,
                      "profile_raw": 2}
    assert [r["seq"] for r in bundle.rows["clang_tidy_findings"]] == [0, 1]


def test_rows_fit_the_schema_and_land_once(archive_path: Path) -> None:
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        first = writer.write(_bundle())
        second = writer.write(_bundle())
    assert first["ncu_metrics"] == 1 and first["clang_tidy_findings"] == 2
    assert sum(second.values()) == 0
    con = duckdb.connect(str(archive_path), read_only=True)
    assert con.execute("SELECT metric, unit, value, variance, n FROM ncu_metrics").fetchall() == [
        ("SM Busy", "%", 42.7, 0.0, 5)]
    assert con.execute("SELECT event, device_time_total_us, device_memory_usage, calls FROM torch_profile_events"
                       ).fetchall() == [("aten::mm", 7.5, 1024, 3)]
    assert con.execute("SELECT seq, file, line, col, severity, check_name FROM clang_tidy_findings ORDER BY seq"
                       ).fetchall() == [(0, "k.cu", 1, 2, "warning", "c"), (1, "k.cu", 3, 4, "note", None)]
    con.close()


def test_unknown_raw_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown raw profile kind"):
        add_profiles(Bundle(), "k", "o", raw={"nsys": "x"})


def test_columnar_profiles_hold_the_rows_add_profiles_writes() -> None:
    from profiles import parse_clang_tidy
    from profiles.columnar import ProfileColumns
    from profiles.ncu import NcuMetric, NcuProfile, NcuRule
    from profiles.torch_profile import TorchEvent

    profiles = {
        "ncu": NcuProfile((NcuMetric("dram", "%", 1.5, 0.1, 5), NcuMetric("sm", None, None, None, None)),
                          (NcuRule("Occupancy", "OPT", "low"),)),
        "torch": [TorchEvent("aten::mm", 1.0, 2.0, 0.5, 1.5, 10, 20, 5, 15, 3), TorchEvent("cudaLaunch")],
        "clang_tidy": parse_clang_tidy("k.cu:1:2: warning: w [c]\nk.cu:3:4: error: e [d]"),
        "raw": {"ncu": "x", "clang-tidy": None},
    }
    bundle = Bundle()
    add_profiles(bundle, "k1", "o", **profiles)
    add_profiles(bundle, "k2", "o", clang_tidy=profiles["clang_tidy"])
    columns = ProfileColumns()
    columns.add("k1", "o", **profiles)
    columns.add("k2", "o", clang_tidy=profiles["clang_tidy"])
    tables = columns.tables()
    assert set(tables) == {t for t, rows in bundle.rows.items() if rows}
    for table, arrow in tables.items():
        assert arrow.to_pylist() == [{c: row.get(c) for c in arrow.column_names} for row in bundle.rows[table]], table


def test_columnar_profiles_from_bulk_rows_equal_those_from_parsed_profiles() -> None:
    from profiles import parse_torch_profile
    from profiles.clang_tidy import clang_tidy_rows
    from profiles.columnar import ProfileColumns
    from profiles.torch_profile import torch_rows

    tidy = "k.cu:1:2: warning: w [c]\n  1 | x\nk.cu:3:4: error: e [d]\nerror: alone"
    torch = ("{'aten::mm': {'cpu_time_total': 1.5, 'device_time_total': 2.0, 'self_cpu_time_total': 0.5, "
             "'self_device_time_total': 1.5, 'cpu_memory_usage': 10, 'device_memory_usage': 20, "
             "'self_cpu_memory_usage': 5, 'self_device_memory_usage': 15}, 'cudaLaunch': {'count': 3}}")
    parsed, bulk = ProfileColumns(), ProfileColumns()
    for kernel in ("k1", "k2"):
        parsed.add(kernel, "o", clang_tidy=parse_clang_tidy(tidy), torch=parse_torch_profile(torch))
        bulk.add(kernel, "o", clang_tidy_rows=clang_tidy_rows(tidy), torch_rows=torch_rows(torch))
    bulk.add("k3", "o", clang_tidy_rows=[], torch_rows=[])
    expected, got = parsed.tables(), bulk.tables()
    assert set(got) == set(expected) == {"clang_tidy_findings", "torch_profile_events"}
    for table in expected:
        assert got[table].equals(expected[table]), table
    assert got["clang_tidy_findings"].num_rows == 6 and got["torch_profile_events"].num_rows == 4


def test_raw_table_from_arrow_equals_the_raw_rows_of_profile_columns() -> None:
    import pyarrow as pa

    from profiles.columnar import ProfileColumns, raw_table

    texts = ["k.cu:1:2: warning: w [c]", "x \u2028 \U0001f600"]
    columns = ProfileColumns()
    for kernel, text in zip(("k1", "k2"), texts, strict=True):
        columns.add(kernel, "o", raw={"clang-tidy": text})
    expected = columns.tables()["profile_raw"]
    for array in (pa.array(texts, pa.string()), pa.chunked_array([pa.array(texts, pa.large_string())])):
        got = raw_table(["k1", "k2"], "o", "clang-tidy", array)
        assert got.column_names == expected.column_names
        assert got.to_pylist() == expected.to_pylist()
    with pytest.raises(ValueError, match="unknown raw profile kind"):
        raw_table(["k1"], "o", "nsys", pa.array(["x"]))
    with pytest.raises(ValueError, match="1 texts for 2 kernels"):
        raw_table(["k1", "k2"], "o", "clang-tidy", pa.array(["x"]))
