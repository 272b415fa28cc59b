"""ingest.limits: the input checks every adapter shares name the file, the line and the column."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.errors import IngestError
from ingest.limits import (
    MAX_CODE_BYTES,
    MAX_PROFILE_BYTES,
    check_columns,
    check_text,
    content_hash,
    decode_utf8,
    iter_csv,
    iter_jsonl,
    read_json,
)


def test_check_text_passes_text_and_none() -> None:
    assert check_text("x", "s", "f", column="c") == "x"
    assert check_text(None, "s", "f", column="c") is None


def test_check_text_refuses_oversized_code_naming_the_limit() -> None:
    with pytest.raises(IngestError) as caught:
        check_text("é" * (MAX_CODE_BYTES // 2 + 1), "demo", "k.jsonl", column="CUDA_Code", line=3)
    message = str(caught.value)
    assert "k.jsonl, line 3, column 'CUDA_Code'" in message
    assert "4 MiB limit for code fields (MAX_CODE_BYTES" in message


def test_check_text_profile_limit_is_larger() -> None:
    text = "x" * (MAX_CODE_BYTES + 1)
    assert check_text(text, "s", "f", column="NCU", limit=MAX_PROFILE_BYTES) == text


def test_check_text_refuses_non_text_and_missing_required() -> None:
    with pytest.raises(IngestError, match="expected text, got int"):
        check_text(5, "s", "f", column="c", row=2)
    with pytest.raises(IngestError, match="row 2, column 'c': value is missing"):
        check_text(None, "s", "f", column="c", row=2, required=True)


def test_decode_utf8_names_line_and_column_of_bad_byte() -> None:
    with pytest.raises(IngestError) as caught:
        decode_utf8(b"ok\nline two \xff here\n", "demo", "data.csv")
    assert caught.value.line == 2
    assert "byte 0xff at column 10" in str(caught.value)
    assert decode_utf8("\ufeffbom".encode(), "demo", "x") == "bom"


def test_iter_jsonl_yields_line_numbers_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert list(iter_jsonl(path, "demo")) == [(1, {"a": 1}), (3, {"a": 2})]


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        (b'{"a": 1}\n{"a": \n', 2, "malformed JSON"),
        (b'{"a": 1}\n[1, 2]\n', 2, "expected a JSON object, got list"),
        (b'{"a": 1}\n{"a": "\xe9"}\n', 2, "not UTF-8"),
    ],
)
def test_iter_jsonl_errors_name_the_line(tmp_path: Path, content: bytes, line: int, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(IngestError, match=message) as caught:
        list(iter_jsonl(path, "demo"))
    assert caught.value.line == line
    assert str(path) in str(caught.value)


def test_read_json_reports_line_of_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{\n  "a": 1,\n  "b": ,\n}\n')
    with pytest.raises(IngestError, match="line 3") as caught:
        read_json(path, "demo")
    assert caught.value.line == 3


def test_check_columns_names_missing_and_unknown() -> None:
    with pytest.raises(IngestError) as caught:
        check_columns(["a", "zz"], "demo", "f.parquet", required=["a", "b"], optional=["c"])
    message = str(caught.value)
    assert "missing column(s) 'b'" in message
    assert "unknown column(s) 'zz'" in message
    check_columns(["a", "b", "c"], "demo", "f", required=["a", "b"], optional=["c"])


def test_iter_csv_gives_record_start_lines_across_multiline_fields(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text('a,b\n1,"two\nlines"\n3,4\n')
    assert list(iter_csv(path, "demo")) == [(2, {"a": "1", "b": "two\nlines"}), (4, {"a": "3", "b": "4"})]


def test_iter_csv_refuses_ragged_rows(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(IngestError, match="3 fields but the header has 2") as caught:
        list(iter_csv(path, "demo"))
    assert caught.value.line == 3


def test_content_hash_of_file_and_folder(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.txt").write_text("x")
    first = content_hash(tmp_path / "d")
    (tmp_path / "d" / "x.txt").write_text("y")
    assert content_hash(tmp_path / "d") != first
    assert content_hash(tmp_path / "d" / "x.txt") == content_hash(tmp_path / "d" / "x.txt")
