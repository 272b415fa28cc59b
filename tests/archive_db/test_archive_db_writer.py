"""ArchiveWriter: idempotent writes, one transaction per writer, fill-in of columns a later source knows."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from archive_db.bundle import Bundle
from archive_db.connection import connect
from archive_db.records import add_kernel, add_measurement, add_origin, add_task
from archive_db.writer import ArchiveWriter, utcnow

REFERENCE = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def sample_bundle(source: str = "demo") -> Bundle:
    bundle = Bundle()
    now = utcnow()
    bundle.add("sources", name=source, adapter=source, kind="release", first_ingested_at=now, last_ingested_at=now)
    task = add_task(bundle, source, REFERENCE, level=1, problem_id=9, name="9_Double")
    for i in range(3):
        kernel = add_kernel(bundle, source, task, f"k{i}", "model-new", f"class ModelNew: pass  # {i}",
                            attributes={"thought": f"idea {i}", "settings": {"temperature": 1.0}})
        add_measurement(bundle, source, kernel, scores={"demo.x": float(i)}, gpu="NVIDIA H100 80GB HBM3",
                        correct=True, speedup_eager=1.0 + i)
    add_origin(bundle, source, "/data/demo.jsonl", "abc123", n_rows=3, gpu="h100")
    return bundle


def counts(path: Path) -> dict[str, int]:
    tables = ("sources", "source_origins", "tasks", "task_aliases", "kernels", "measurements", "measurement_scores")
    with connect(path, read_only=True) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables}


def test_second_write_of_the_same_facts_adds_nothing(archive_path: Path) -> None:
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        first = writer.write(sample_bundle())
    assert first == {"sources": 1, "source_origins": 1, "tasks": 1, "task_aliases": 1, "kernels": 3,
                     "measurements": 3, "measurement_scores": 3}
    before = counts(archive_path)
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        second = writer.write(sample_bundle())
    assert sum(second.values()) == 0
    assert counts(archive_path) == before


def test_duplicate_keys_inside_one_bundle_land_once(archive_path: Path) -> None:
    bundle = sample_bundle()
    bundle.extend(sample_bundle())
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        added = writer.write(bundle)
    assert added["kernels"] == 3 and added["tasks"] == 1
    assert writer.added == added


def test_an_exception_rolls_back_everything_written_in_the_transaction(archive_path: Path) -> None:
    with pytest.raises(RuntimeError, match="bad row later"), connect(archive_path) as con, \
            ArchiveWriter(con) as writer:
        writer.write(sample_bundle())
        raise RuntimeError("bad row later in the source")
    assert sum(counts(archive_path).values()) == 0


def test_a_failing_table_rolls_back_the_tables_written_before_it(archive_path: Path) -> None:
    bundle = sample_bundle()
    bundle.add("kernels", kernel_id="broken", task_id="t", source="demo", name=None, form="model-new")
    with pytest.raises(duckdb.ConstraintException), connect(archive_path) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)
    assert sum(counts(archive_path).values()) == 0


def test_unknown_tables_and_columns_are_named(archive_path: Path) -> None:
    bundle = Bundle()
    bundle.add("kernelz", kernel_id="x")
    with pytest.raises(KeyError, match="kernelz"), connect(archive_path) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)
    bundle = Bundle()
    bundle.add("kernels", kernel_id="x", task_id="t", source="s", name="n", form="f", colour="red")
    with pytest.raises(KeyError, match="colour"), connect(archive_path) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)


def test_later_sources_fill_only_what_the_first_left_empty(archive_path: Path) -> None:
    first, second = Bundle(), Bundle()
    task = add_task(first, "one", REFERENCE, name="9_Double")
    add_task(second, "two", "# same problem, other layout\n" + REFERENCE, level=1, problem_id=9,
             name="Double", functional_code="def module_fn(x): return x * 2", kb_version="v0")
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        writer.write(first)
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        added = writer.write(second)
    assert added["tasks"] == 0 and added["task_aliases"] == 1
    with connect(archive_path, read_only=True) as con:
        row = con.execute(
            "SELECT name, level, problem_id, functional_code, kb_version, first_source, reference_code "
            "FROM tasks WHERE task_id = ?", [task]
        ).fetchall()[0]
    assert row[:6] == ("9_Double", 1, 9, "def module_fn(x): return x * 2", "v0", "one")
    assert row[6] == REFERENCE  # the first writer's text stays


def test_source_bookkeeping_is_refreshed_but_first_ingest_time_and_license_kept(archive_path: Path) -> None:
    early = dt.datetime(2025, 1, 1)
    bundle = Bundle()
    bundle.add("sources", name="demo", adapter="demo", kind="release", license="MIT",
               first_ingested_at=early, last_ingested_at=early)
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)
    later = sample_bundle()
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        writer.write(later)
    with connect(archive_path, read_only=True) as con:
        first, last, license_ = con.execute(
            "SELECT first_ingested_at, last_ingested_at, license FROM sources WHERE name = 'demo'"
        ).fetchall()[0]
    assert first == early and last > early
    assert license_ == "MIT"  # a later write never relabels a source (archive_db/sources.py)


def test_json_and_list_columns_round_trip(archive_path: Path) -> None:
    bundle = sample_bundle()
    task_id = bundle.rows["tasks"][0]["task_id"]
    bundle.rows["tasks"][0]["operators"] = ["aten::mul"]
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)
    with connect(archive_path, read_only=True) as con:
        attributes = con.execute("SELECT attributes FROM kernels WHERE name = 'k1'").fetchall()[0][0]
        operators = con.execute("SELECT operators FROM tasks WHERE task_id = ?", [task_id]).fetchall()[0][0]
        gpu = con.execute("SELECT DISTINCT gpu FROM measurements").fetchall()
    assert json.loads(attributes) == {"thought": "idea 1", "settings": {"temperature": 1.0}}
    assert operators == ["aten::mul"]
    assert gpu == [("H100 SXM",)]


def test_an_empty_bundle_writes_nothing(archive_path: Path) -> None:
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        assert writer.write(Bundle()) == {}
    assert not Bundle()


def _ncu_block(kernels: list[str], metrics: tuple[str, ...] = ("a", "b")) -> pa.Table:
    return pa.table({"kernel_id": [k for k in kernels for _ in metrics], "origin": ["o"] * (len(kernels) * len(metrics)),
                     "metric": [m for _ in kernels for m in metrics],
                     "value": [1.0] * (len(kernels) * len(metrics))})


@pytest.mark.parametrize("filled_before", [False, True])
def test_keys_repeated_across_writes_of_one_transaction_land_once(archive_path: Path, filled_before: bool) -> None:
    """Keyless (profile) tables: a key written earlier in the same writer, or before it, is not written again;
    with the table empty at first the writer remembers its keys, otherwise it asks the table."""
    if filled_before:
        with connect(archive_path) as con, ArchiveWriter(con) as writer:
            first = Bundle()
            first.add_arrow("ncu_metrics", _ncu_block(["k0"]))
            writer.write(first)
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        for kernels in (["k1", "k2"], ["k2", "k3"], ["k0", "k3", "k3"]):
            bundle = Bundle()
            bundle.add_arrow("ncu_metrics", _ncu_block(kernels))
            writer.write(bundle)
    with connect(archive_path, read_only=True) as con:
        rows = con.execute("SELECT kernel_id, metric, count(*) FROM ncu_metrics GROUP BY ALL ORDER BY ALL").fetchall()
    assert rows == [(k, m, 1) for k in ("k0", "k1", "k2", "k3") for m in ("a", "b")]
    assert writer.added["ncu_metrics"] == (6 if filled_before else 8)


@pytest.mark.parametrize("filled_before", [False, True])
def test_measurements_of_one_key_in_two_writes_of_one_transaction_merge(archive_path: Path, filled_before: bool) -> None:
    """The writer remembers the measurement ids it wrote to a table that was empty at first (else it asks the
    table): a later write of the same id merges into that row, it does not add a second."""
    def bundle(origin: str, **fields: float | None) -> Bundle:
        b = Bundle()
        task = add_task(b, "demo", REFERENCE, level=1, problem_id=9, name="9_Double")
        kernel = add_kernel(b, "demo", task, "k", "model-new", "class ModelNew: pass")
        add_measurement(b, "demo", kernel, origin=origin, gpu="H100", correct=True, **fields)
        return b

    if filled_before:
        with connect(archive_path) as con, ArchiveWriter(con) as writer:
            writer.write(bundle("before.jsonl", kernel_ms=None))
    with connect(archive_path) as con, ArchiveWriter(con) as writer:
        writer.write(bundle("first.jsonl", kernel_ms=None))
        writer.write(bundle("second.jsonl", kernel_ms=0.5, speedup_eager=2.0))
    with connect(archive_path, read_only=True) as con:
        rows = con.execute("SELECT origins, kernel_ms, speedup_eager FROM measurements").fetchall()
    origins = ["before.jsonl"] * filled_before + ["first.jsonl", "second.jsonl"]
    assert rows == [(origins, 0.5, 2.0)]
    assert writer.added["measurements"] == (0 if filled_before else 1)
