"""Schema versions and the forward steps between them.

A new archive gets ``schema.sql`` (always the newest version). An older archive is brought forward by
running, in order, every step whose ``from_version`` is at or above its recorded version. To change the
schema: edit ``schema.sql``, bump ``SCHEMA_VERSION``, and append the step that upgrades the old shape.

Example:
    >>> SCHEMA_VERSION >= 1
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import duckdb
import pyarrow as pa

from archive_db.keys import MEASUREMENT_IDENTITY, measurement_key
from archive_db.plausibility import flags_sql

SCHEMA_VERSION = 6


@dataclass(frozen=True)
class Migration:
    """SQL that moves an archive from ``from_version`` to ``from_version + 1``."""

    from_version: int
    sql: str
    why: str
    then: Callable[[duckdb.DuckDBPyConnection], None] | None = None
    """A step SQL cannot express (run after ``sql``, in the same transaction)."""


MEASURED_COLUMNS = ("correct", "max_diff", "error", "kernel_ms", "eager_ms", "compile_ms", "speedup_eager",
                    "speedup_compile")


def rekey_measurements(con: duckdb.DuckDBPyConnection) -> None:
    """Give older measurements their version-3 ids (``keys.measurement_key``) and merge those that meet.

    Versions 1 and 2 keyed a measurement by everything measured, so two files of one source measuring one
    kernel on one GPU made two rows; version 3 keys it by (kernel, source, GPU, timing mode, verification),
    and an ingest after the upgrade would otherwise add a second row beside each old one.
    """
    rows = con.execute(
        f"SELECT measurement_id, kernel_id, {', '.join(MEASUREMENT_IDENTITY)} FROM measurements"
    ).fetchall()
    if not rows:
        return
    rekey = pa.table({  # noqa: F841 - read by DuckDB's replacement scan below
        "old": [row[0] for row in rows],
        "new": [measurement_key(row[1], dict(zip(MEASUREMENT_IDENTITY, row[2:], strict=True))) for row in rows],
    })
    columns = [r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'measurements' "
        "ORDER BY ordinal_position").fetchall()]
    picked = ", ".join(
        "r.new AS measurement_id" if c == "measurement_id"
        else f"first(m.{c} ORDER BY m.{c} NULLS LAST) AS {c}" if c in MEASURED_COLUMNS
        else f"any_value(m.{c}) AS {c}"
        for c in columns
    )
    con.execute(f"CREATE TEMP TABLE rekeyed AS SELECT {picked} FROM measurements m "
                "JOIN rekey r ON r.old = m.measurement_id GROUP BY r.new")
    con.execute("CREATE TEMP TABLE rekeyed_scores AS SELECT DISTINCT ON (r.new, s.name) r.new AS measurement_id, "
                "s.name, s.value FROM measurement_scores s JOIN rekey r ON r.old = s.measurement_id "
                "ORDER BY r.new, s.name, s.value NULLS LAST")
    con.execute("DELETE FROM measurement_scores")
    con.execute("DELETE FROM measurements")
    con.execute("INSERT INTO measurements SELECT * FROM rekeyed")
    con.execute("INSERT INTO measurement_scores SELECT * FROM rekeyed_scores")
    con.execute("DROP TABLE rekeyed")
    con.execute("DROP TABLE rekeyed_scores")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        """CREATE TABLE IF NOT EXISTS score_kinds (
    name              VARCHAR PRIMARY KEY,       -- measurement_scores.name
    description       VARCHAR NOT NULL,
    unit              VARCHAR NOT NULL,
    higher_is_better  BOOLEAN NOT NULL
);
INSERT OR IGNORE INTO score_kinds VALUES
    ('cuda_l1.speedup_default', 'CUDA-L1: reference (eager) time / kernel time', 'x', true),
    ('cuda_l1.speedup_torch_compile_default', 'CUDA-L1: torch.compile (default) time / kernel time', 'x', true),
    ('cuda_l1.speedup_torch_compile_reduce_overhead', 'CUDA-L1: torch.compile (mode=reduce-overhead) time / kernel time', 'x', true),
    ('cuda_l1.speedup_cuda_graph', 'CUDA-L1: CUDA-graph reference time / kernel time', 'x', true),
    ('cuda_l1.speedup_cudnn', 'CUDA-L1: cuDNN-flagged reference time / kernel time', 'x', true),
    ('cuda_l1.score', 'CUDA-L1 (level-keyed release): the released speedup score', 'x', true),
    ('verify.speedup_cuda_graph', 'kernel-archive verify: CUDA-graph replay of the reference / kernel time', 'x', true),
    ('robust_kbench.cuda_api_cost', 'robust-kbench: LLM API cost of generating the kernel', 'USD', false),
    ('robust_kbench.verifier_aggregated', 'robust-kbench: aggregated LLM-verifier score', 'score', true),
    ('cuda_l2.speedup_vs_torch.matmul', 'CUDA-L2: torch.matmul time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLAS-tn', 'CUDA-L2: cuBLAS-tn time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLAS-nn', 'CUDA-L2: cuBLAS-nn time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLAS-max', 'CUDA-L2: cuBLAS-max time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLASLt-heuristic-tn', 'CUDA-L2: cuBLASLt-heuristic-tn time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLASLt-heuristic-nn', 'CUDA-L2: cuBLASLt-heuristic-nn time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLASLt-heuristic-max', 'CUDA-L2: cuBLASLt-heuristic-max time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLASLt-auto-tuning-tn', 'CUDA-L2: cuBLASLt-auto-tuning-tn time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLASLt-auto-tuning-nn', 'CUDA-L2: cuBLASLt-auto-tuning-nn time / CUDA-L2 kernel time', 'x', true),
    ('cuda_l2.speedup_vs_cuBLASLt-auto-tuning-max', 'CUDA-L2: cuBLASLt-auto-tuning-max time / CUDA-L2 kernel time', 'x', true);
""",
        "score kinds become data in the archive, declared by each adapter; a version-1 archive gets the kinds "
        "its sources declared in code then",
    ),
    Migration(
        2,
        """
        ALTER TABLE measurements ADD COLUMN IF NOT EXISTS gpu_family VARCHAR;
        ALTER TABLE measurements ADD COLUMN IF NOT EXISTS origins VARCHAR[];
        UPDATE measurements SET gpu_family = gpu;
        ALTER TABLE baselines ADD COLUMN IF NOT EXISTS gpu_family VARCHAR;
        ALTER TABLE baselines ADD COLUMN IF NOT EXISTS run VARCHAR;
        UPDATE baselines SET gpu_family = gpu;
        ALTER TABLE sources ADD COLUMN IF NOT EXISTS creator VARCHAR;
        ALTER TABLE sources ADD COLUMN IF NOT EXISTS citation VARCHAR;
        ALTER TABLE source_origins ADD COLUMN IF NOT EXISTS upstream VARCHAR;
        """,
        "exact GPU devices with their family (versions 1-2 stored only the family, so it is both), the inputs "
        "a merged measurement came from, named runs of a baseline variant, and attribution (creator, "
        "citation, upstream of a local copy); measurements re-keyed by what names them, so files merge",
        rekey_measurements,
    ),
    Migration(
        3,
        """
        CREATE TABLE ncu_metrics_v2 (kernel_id VARCHAR NOT NULL, origin VARCHAR NOT NULL, metric VARCHAR NOT NULL, unit VARCHAR, value DOUBLE, variance DOUBLE, n INTEGER);
        INSERT INTO ncu_metrics_v2 SELECT * FROM ncu_metrics;
        DROP TABLE ncu_metrics;
        ALTER TABLE ncu_metrics_v2 RENAME TO ncu_metrics;
        CREATE TABLE ncu_rules_v2 (kernel_id VARCHAR NOT NULL, origin VARCHAR NOT NULL, rule VARCHAR NOT NULL, type VARCHAR, description VARCHAR);
        INSERT INTO ncu_rules_v2 SELECT * FROM ncu_rules;
        DROP TABLE ncu_rules;
        ALTER TABLE ncu_rules_v2 RENAME TO ncu_rules;
        CREATE TABLE torch_profile_events_v2 (kernel_id VARCHAR NOT NULL, origin VARCHAR NOT NULL, event VARCHAR NOT NULL, cpu_time_total_us DOUBLE, device_time_total_us DOUBLE, self_cpu_time_total_us DOUBLE, self_device_time_total_us DOUBLE, cpu_memory_usage BIGINT, device_memory_usage BIGINT, self_cpu_memory_usage BIGINT, self_device_memory_usage BIGINT, calls BIGINT);
        INSERT INTO torch_profile_events_v2 SELECT * FROM torch_profile_events;
        DROP TABLE torch_profile_events;
        ALTER TABLE torch_profile_events_v2 RENAME TO torch_profile_events;
        CREATE TABLE clang_tidy_findings_v2 (kernel_id VARCHAR NOT NULL, origin VARCHAR NOT NULL, seq INTEGER NOT NULL, file VARCHAR, line INTEGER, col INTEGER, severity VARCHAR, check_name VARCHAR, message VARCHAR);
        INSERT INTO clang_tidy_findings_v2 SELECT * FROM clang_tidy_findings;
        DROP TABLE clang_tidy_findings;
        ALTER TABLE clang_tidy_findings_v2 RENAME TO clang_tidy_findings;
        CREATE TABLE profile_raw_v2 (kernel_id VARCHAR NOT NULL, origin VARCHAR NOT NULL, kind VARCHAR NOT NULL, raw VARCHAR NOT NULL USING COMPRESSION zstd);
        INSERT INTO profile_raw_v2 SELECT * FROM profile_raw;
        DROP TABLE profile_raw;
        ALTER TABLE profile_raw_v2 RENAME TO profile_raw;
        """,
        "profile tables without a primary-key index (the writer keeps their keys unique): faster bulk ingest",
    ),
    Migration(
        4,
        """
        CREATE TABLE IF NOT EXISTS task_summary (task_id VARCHAR NOT NULL, sort_by VARCHAR NOT NULL,
            measurement_id VARCHAR NOT NULL, best_speedup DOUBLE, n_kernels BIGINT NOT NULL,
            kernel_id VARCHAR NOT NULL, kernel_name VARCHAR, source VARCHAR, measured_by VARCHAR, gpu VARCHAR,
            correct BOOLEAN, speedup_eager DOUBLE, speedup_compile DOUBLE, kernel_ms DOUBLE, eager_ms DOUBLE,
            compile_ms DOUBLE, PRIMARY KEY (task_id, sort_by));
        CREATE TABLE IF NOT EXISTS summary_state (name VARCHAR PRIMARY KEY, counts BIGINT[] NOT NULL);
        """,
        "the leaderboard's default view kept at write time (archive_db/summary.py); empty until the next write, "
        "the full query answers until then",
    ),
    Migration(
        5,
        "ALTER TABLE measurements ADD COLUMN IF NOT EXISTS flags VARCHAR[];\n"
        f"UPDATE measurements SET flags = {flags_sql()};",
        "measurements.flags: surprising but possible values are marked (archive_db/plausibility.py), so the "
        "leaderboard can leave them out",
    ),
)


class SchemaTooNew(RuntimeError):
    """The archive was written by a newer kernel-archive than this one."""


def schema_sql() -> str:
    """The text of the current schema."""
    return resources.files("archive_db").joinpath("schema.sql").read_text(encoding="utf-8")


def current_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The archive's recorded schema version, or None for an empty file."""
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_info'"
    ).fetchall()
    if not exists or not exists[0][0]:
        return None
    rows = con.execute("SELECT max(version) FROM schema_info").fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def ensure_schema(con: duckdb.DuckDBPyConnection, path: str = "") -> int:
    """Create or upgrade the schema; returns the version now in force."""
    version = current_version(con)
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path or 'the archive'} has schema version {version}, newer than this kernel-archive "
            f"understands ({SCHEMA_VERSION}); upgrade kernel-archive"
        )
    if version == SCHEMA_VERSION:
        return version
    con.execute("BEGIN TRANSACTION")
    try:
        if version is None:
            con.execute(schema_sql())
        else:
            for step in MIGRATIONS:
                if step.from_version >= version:
                    con.execute(step.sql)
                    if step.then is not None:
                        step.then(con)
        con.execute("INSERT INTO schema_info VALUES (?, now())", [SCHEMA_VERSION])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION
