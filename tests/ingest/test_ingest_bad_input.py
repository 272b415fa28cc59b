"""Bad input (issue 2, item 6): a clear error naming the file and the row or line, and nothing written.

Every bad file is built in tmp_path from the real archive rows. Each test ingests into an archive that
already holds a source, and checks that every table is unchanged after the failed ingest.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ingest.adapters.sakana as sakana
from ingest.adapter import IngestRequest
from ingest.errors import IngestError
from ingest.runner import ingest_source

RESULTS_CSV = "robust-kbench/highlighted-results.csv"


@pytest.fixture(scope="module")
def base_archive(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    db = tmp_path_factory.mktemp("bad-input") / "base.duckdb"
    ingest_source(db, "robust-kbench", IngestRequest("robust-kbench", str(shared_data / RESULTS_CSV)))
    return db


@pytest.fixture
def archive(base_archive: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "archive.duckdb"
    shutil.copyfile(base_archive, copy)
    return copy


csv.field_size_limit(1 << 26)


@pytest.fixture(scope="module")
def rows(shared_data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (shared_data / "sakana-archive" / "sample.jsonl").open()]


def snapshot(db: Path) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in tables}


def assert_refused(db: Path, path: Path, *fragments: str, adapter: str = "sakana") -> IngestError:
    before = snapshot(db)
    with pytest.raises(IngestError) as caught:
        ingest_source(db, adapter, IngestRequest(adapter, str(path)))
    message = str(caught.value)
    assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert snapshot(db) == before
    assert before["kernels"] == 12
    return caught.value


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_malformed_json_line(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", rows[:10])
    lines = path.read_text().splitlines()
    lines[4] = lines[4][: len(lines[4]) // 2]
    path.write_text("\n".join(lines) + "\n")
    error = assert_refused(archive, path, "line 5", "malformed JSON")
    assert error.line == 5


def test_missing_column_in_jsonl(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    broken = [dict(row) for row in rows[:6]]
    del broken[2]["Max_Diff"]
    assert_refused(archive, write_jsonl(tmp_path / "missing.jsonl", broken), "line 3", "missing column(s) 'Max_Diff'")


def test_missing_column_in_parquet(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    table = pa.Table.from_pylist(rows).drop_columns(["Correct"])
    pq.write_table(table, tmp_path / "missing.parquet")
    assert_refused(archive, tmp_path / "missing.parquet", "missing column(s) 'Correct'")


def test_extra_column_in_parquet(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    table = pa.Table.from_pylist(rows).append_column("Model", pa.array(["gpt"] * len(rows)))
    pq.write_table(table, tmp_path / "extra.parquet")
    assert_refused(archive, tmp_path / "extra.parquet", "unknown column(s) 'Model'")


def test_extra_column_in_jsonl(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    extra = [dict(row) for row in rows[:3]]
    extra[1]["Surprise"] = 1
    assert_refused(archive, write_jsonl(tmp_path / "extra.jsonl", extra), "line 2", "unknown column(s) 'Surprise'")


def test_truncated_parquet(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    whole = tmp_path / "whole.parquet"
    pq.write_table(pa.Table.from_pylist(rows), whole)
    data = whole.read_bytes()
    (tmp_path / "truncated.parquet").write_bytes(data[: len(data) // 2])
    assert_refused(archive, tmp_path / "truncated.parquet", "not a readable parquet file (truncated or corrupt?)")


def test_corrupt_parquet_page_names_the_row(
    archive: Path, rows: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sakana, "BATCH_ROWS", 20)
    path = tmp_path / "corrupt.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=20)
    start = pq.ParquetFile(path).metadata.row_group(2).column(9).data_page_offset  # CUDA_Code, rows 41..60
    data = bytearray(path.read_bytes())
    data[start : start + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    assert_refused(archive, path, "row 41", "parquet data unreadable")


def test_non_utf8_text(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "latin1.jsonl", rows[:8])
    lines = path.read_bytes().split(b"\n")
    lines[6] = lines[6].replace(b"#include", b"#include \xe9", 1)
    path.write_bytes(b"\n".join(lines))
    error = assert_refused(archive, path, "line 7", "not UTF-8 text: byte 0xe9")
    assert error.line == 7


def test_non_utf8_csv(archive: Path, shared_data: Path, tmp_path: Path) -> None:
    data = (shared_data / RESULTS_CSV).read_bytes()
    at = data.index(b"layernorm_fused_vectorized")
    path = tmp_path / "results.csv"
    path.write_bytes(data[:at] + b"\xff" + data[at:])
    line = data[:at].count(b"\n") + 1
    assert_refused(archive, path, f"line {line}", "not UTF-8", adapter="robust-kbench")


@pytest.mark.parametrize("pool", [False, True], ids=["inline", "worker-pool"])
def test_profile_that_is_not_a_literal_runs_nothing(
    archive: Path, rows: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pool: bool
) -> None:
    marker = tmp_path / "PWNED"
    evil = [dict(row) for row in rows[:6]]
    evil[3]["NCU_Profile"] = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    if pool:
        monkeypatch.setattr(sakana, "POOL_MIN_ROWS", 0)
        path = tmp_path / "evil.parquet"
        pq.write_table(pa.Table.from_pylist(evil), path)
        where = "row 4"
    else:
        path = write_jsonl(tmp_path / "evil.jsonl", evil)
        where = "line 4"
    error = assert_refused(archive, path, where, "column 'NCU_Profile'", "not a Python literal")
    assert error.column == "NCU_Profile"
    assert not marker.exists()


def test_profile_of_the_wrong_shape(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    odd = [dict(row) for row in rows[:3]]
    odd[0]["Clang_Tidy"] = "{'stdout': 3, 'stderr': '', 'errored': False}"
    assert_refused(archive, write_jsonl(tmp_path / "odd.jsonl", odd), "line 1", "column 'Clang_Tidy'",
                   "stdout and stderr must be text")


def test_fifty_megabyte_code_field(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    huge = [dict(row) for row in rows[:3]]
    huge[1]["CUDA_Code"] = "// padding\n" * (50 * 1024 * 1024 // 11)
    error = assert_refused(archive, write_jsonl(tmp_path / "huge.jsonl", huge), "line 2", "column 'CUDA_Code'",
                           "over the 4 MiB limit for code fields")
    assert error.column == "CUDA_Code"


def test_bad_number(archive: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    bad = [dict(row) for row in rows[:3]]
    bad[2]["CUDA_Runtime"] = "fast"
    assert_refused(archive, write_jsonl(tmp_path / "num.jsonl", bad), "line 3", "column 'CUDA_Runtime'",
                   "expected a number")


def test_csv_missing_column(archive: Path, shared_data: Path, tmp_path: Path) -> None:
    with open(shared_data / RESULTS_CSV, newline="") as handle:
        records = list(csv.DictReader(handle))
    path = tmp_path / "results.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, [c for c in records[0] if c != "Verifier Aggregated"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
    assert_refused(archive, path, "line 1", "missing column(s) 'Verifier Aggregated'", adapter="robust-kbench")


def test_unknown_source_name_lists_the_known_adapters(tmp_path: Path) -> None:
    db = tmp_path / "never.duckdb"
    cli = Path(sys.executable).parent / "kernel-archive"
    command = [str(cli)] if cli.exists() else [sys.executable, "-m", "kernel_archive"]
    result = subprocess.run([*command, "ingest", "nosuch", "--db", str(db)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "unknown source 'nosuch'" in output
    for name in ("cuda-l1", "cuda-l2", "kernelbench", "robust-kbench", "sakana"):
        assert name in output
    assert not db.exists()
