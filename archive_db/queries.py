"""Named queries: every read the CLI, the explorer and export make goes through one of these.

All take an open connection and typed arguments; every value reaches SQL as a bound parameter.

Example:
    >>> from archive_db.connection import connect
    >>> with connect("doc-queries.duckdb") as con:
    ...     leaderboard(con, LeaderboardFilter(levels=(1,))).empty
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import duckdb

if TYPE_CHECKING:
    import pandas as pd  # imported where frames are made: importing a writer (ingest) then costs 0.2 s less

SortKey = Literal["eager", "compile"]
SPEEDUP_COLUMNS: dict[str, str] = {"eager": "speedup_eager", "compile": "speedup_compile"}
LIBRARY_TAG = "library-call"
VERIFIER_REJECTS: tuple[str, ...] = ("failed", "flagged")
VERDICTS: tuple[str, ...] = ("unverified", "passed", "flagged", "failed")
"""What the latest run of our verifier says of a kernel: ``failed`` and ``flagged`` are the rejected ones
(``VERIFIER_REJECTS``); a static-only run, a run that errored, or none at all leave it ``unverified``."""

LATEST_VERDICTS = """
    SELECT l.kernel_id,
           CASE WHEN l.status IN ('passed', 'flagged', 'failed') THEN l.status ELSE 'unverified' END AS verdict,
           string_agg(c.check_name, ', ' ORDER BY c.check_name) FILTER (WHERE c.verdict = 'fail')
               AS failing_checks
    FROM (SELECT kernel_id, verification_id, status FROM verifications
          QUALIFY row_number() OVER (PARTITION BY kernel_id ORDER BY started_at DESC, verification_id) = 1) l
    LEFT JOIN verification_checks c ON c.verification_id = l.verification_id
    GROUP BY l.kernel_id, l.status
"""
"""One row per verified kernel: its ``verdict`` (see ``VERDICTS``) and the checks its latest run failed
(comma-separated, NULL when none); join it as a subquery and ``coalesce(verdict, 'unverified')``."""


def verdict_of(status: str | None) -> str:
    """The verdict a verification ``status`` gives (the Python twin of ``LATEST_VERDICTS``).

    Example:
        >>> verdict_of("flagged"), verdict_of("static-only"), verdict_of(None)
        ('flagged', 'unverified', 'unverified')
    """
    return status if status in VERDICTS else "unverified"


@dataclass(frozen=True)
class LeaderboardFilter:
    """Which measurements count, and how the best per task is chosen.

    Empty tuples mean "no restriction". ``correct_only`` keeps only measurements the measurer judged
    correct; ``min_speedup`` applies to the chosen speedup of each task's best kernel.
    ``trust_verifier`` drops every measurement of a kernel whose latest run of our own verifier
    (``kernel-archive verify``) failed it or flagged it as a reward hack, whatever its source claimed.
    """

    levels: tuple[int, ...] = ()
    sources: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    measured_by: tuple[str, ...] = ()
    correct_only: bool = True
    hand_written_only: bool = False
    trust_verifier: bool = True
    timing_modes: tuple[str, ...] = ()
    min_speedup: float | None = None
    search: str | None = None
    include_flagged: bool = False
    """Also rank measurements marked surprising (``measurements.flags``, archive_db/plausibility.py)."""
    sort_by: SortKey = "eager"
    limit: int | None = 500
    offset: int = 0

    def __post_init__(self) -> None:
        if self.sort_by not in SPEEDUP_COLUMNS:
            raise ValueError(f"sort_by must be one of {sorted(SPEEDUP_COLUMNS)}, not {self.sort_by!r}")


@dataclass
class _Where:
    clauses: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)

    def add(self, clause: str, *params: Any) -> None:
        self.clauses.append(clause)
        self.params.extend(params)

    def sql(self) -> str:
        return " AND ".join(self.clauses) if self.clauses else "TRUE"


def like_literal(text: str) -> str:
    """``text`` with LIKE's wildcards escaped (by a backslash), so a search for ``%`` or ``_`` means them.

    Example:
        >>> like_literal("50%_off")
        '50\\\\%\\\\_off'
    """
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def measurement_filter(f: LeaderboardFilter, *, with_correct: bool) -> _Where:
    """The WHERE clause (over ``measurements m``, ``kernels k``, ``tasks t``) and parameters of ``f``.

    Shared by every query that slices the archive the leaderboard's way, so a filter means one thing.
    """
    where = _Where()
    if f.levels:
        where.add("list_contains(?, t.level)", list(f.levels))
    if f.sources:
        where.add("list_contains(?, k.source)", list(f.sources))
    if f.measured_by:
        where.add("list_contains(?, m.source)", list(f.measured_by))
    if f.gpus:
        where.add("list_contains(?, m.gpu)", list(f.gpus))
    if f.categories:
        where.add("list_contains(?, t.category)", list(f.categories))
    if f.timing_modes:
        where.add("list_contains(?, m.timing_mode)", list(f.timing_modes))
    if f.trust_verifier:
        where.add(
            "k.kernel_id NOT IN (SELECT kernel_id FROM verifications "
            "QUALIFY row_number() OVER (PARTITION BY kernel_id ORDER BY started_at DESC) = 1 "
            "AND list_contains(?, status))",
            list(VERIFIER_REJECTS),
        )
    for tag in f.tags:
        where.add("EXISTS (SELECT 1 FROM kernel_tags g WHERE g.kernel_id = k.kernel_id AND g.tag = ?)", tag)
    if f.hand_written_only:
        where.add(
            "NOT EXISTS (SELECT 1 FROM kernel_tags g WHERE g.kernel_id = k.kernel_id AND g.tag = ?)",
            LIBRARY_TAG,
        )
    if f.search:
        pattern = f"%{like_literal(f.search.strip())}%"
        where.add("(t.name ILIKE ? ESCAPE '\\' OR k.name ILIKE ? ESCAPE '\\' OR k.kernel_id = ? OR t.task_id = ?)",
                  pattern, pattern, f.search.strip(), f.search.strip())
    if not f.include_flagged:
        where.add("coalesce(len(m.flags), 0) = 0")
    if with_correct and f.correct_only:
        where.add("m.correct")
    return where


_CANDIDATES = """
    SELECT m.measurement_id, m.kernel_id, k.task_id, m.gpu, m.correct, m.source AS measured_by,
           m.speedup_eager, m.speedup_compile, m.kernel_ms, m.eager_ms, m.compile_ms,
           k.source, k.name AS kernel_name, m.{speedup} AS speedup
    FROM measurements m
    JOIN kernels k ON k.kernel_id = m.kernel_id
    JOIN tasks t ON t.task_id = k.task_id
    WHERE {where}
"""


def leaderboard(con: duckdb.DuckDBPyConnection, f: LeaderboardFilter | None = None) -> pd.DataFrame:
    """The best kernel per task under ``f``, fastest first (equal speedups: highest measurement_id wins).

    Columns: rank, kernel_id, task_id, level, problem_id, task_name, category, kernel_name, source,
    measured_by, gpu, correct, speedup_eager, speedup_compile, kernel_ms, eager_ms, compile_ms,
    n_kernels (kernels of the task that passed the filter), measurement_id, verdict (``VERDICTS``) and
    failing_checks of the winning kernel.
    """
    f = f or LeaderboardFilter()
    speedup = SPEEDUP_COLUMNS[f.sort_by]
    params: list[Any] = []
    if _summary_answers(con, f):
        return _leaderboard_from_summary(con, f)
    where = measurement_filter(f, with_correct=True)
    params.extend(where.params)
    having = ""
    if f.min_speedup is not None:
        having = "HAVING max(speedup) >= ?"
        params.append(float(f.min_speedup))
    # Pick each task's winner over slim candidate rows, then fetch the winners' columns by key: carrying
    # every column through the million-row join, or count(DISTINCT), costs twice as much at 1M kernels.
    picked = f"""
        c AS (
            SELECT m.measurement_id, m.kernel_id, k.task_id, m.{speedup} AS speedup
            FROM measurements m
            JOIN kernels k ON k.kernel_id = m.kernel_id
            JOIN tasks t ON t.task_id = k.task_id
            WHERE {where.sql()}
        ),
        chosen AS (
            SELECT task_id, arg_max(measurement_id, (coalesce(speedup, -1), measurement_id)) AS measurement_id
            FROM c GROUP BY task_id {having}
        ),
        counts AS (
            SELECT task_id, count(*) AS n_kernels FROM (SELECT DISTINCT task_id, kernel_id FROM c)
            GROUP BY task_id
        ),
        best AS (SELECT chosen.task_id, chosen.measurement_id, counts.n_kernels
                 FROM chosen JOIN counts ON counts.task_id = chosen.task_id)"""
    limit = ""
    if f.limit is not None:
        limit = "LIMIT ? OFFSET ?"
        params.extend([int(f.limit), int(f.offset)])
    sql = f"""
        WITH {picked}
        SELECT row_number() OVER (ORDER BY m.{speedup} DESC NULLS LAST, t.level, t.problem_id, m.kernel_id)
                   AS rank,
               m.kernel_id, best.task_id, t.level, t.problem_id, t.name AS task_name, t.category,
               k.name AS kernel_name, k.source, m.source AS measured_by, m.gpu, m.correct,
               m.speedup_eager, m.speedup_compile, m.kernel_ms, m.eager_ms, m.compile_ms,
               best.n_kernels, m.measurement_id, coalesce(vd.verdict, 'unverified') AS verdict,
               vd.failing_checks
        FROM best
        JOIN measurements m ON m.measurement_id = best.measurement_id
        JOIN kernels k ON k.kernel_id = m.kernel_id
        JOIN tasks t ON t.task_id = best.task_id
        LEFT JOIN ({LATEST_VERDICTS}) vd ON vd.kernel_id = m.kernel_id
        ORDER BY rank
        {limit}
    """
    return con.execute(sql, params).df()


VERIFICATION_RUNS = """
    SELECT *, gpu_ms / NULLIF(kernel_ms_median, 0) AS gpu_busy
    FROM (SELECT * EXCLUDE (report, log),
                 NULLIF(list_sum(TRY_CAST(json_extract(report, '$.kernels.candidate[*].device_us') AS DOUBLE[])), 0)
                     / 1000 AS gpu_ms
          FROM verifications WHERE kernel_id = ?)
    ORDER BY started_at DESC
"""
"""A kernel's verifications, newest first, with the GPU's own time per call (``gpu_ms``: the candidate's kernels
in the report's profiled call) and ``gpu_busy``, its share of the reported kernel time (``verify.harness.timing``)."""

SUMMARY_INPUTS: tuple[str, ...] = ("measurements", "kernels", "tasks", "verifications")
"""Tables whose rows decide the default leaderboard; a write to any of them refreshes the summary."""
SUMMARY_STATE = "leaderboard"


def summary_fingerprint(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Row counts of ``SUMMARY_INPUTS`` (DuckDB answers these from table statistics, without a scan)."""
    row = con.execute(
        "SELECT " + ", ".join(f"(SELECT count(*) FROM {table})" for table in SUMMARY_INPUTS)
    ).fetchall()[0]
    return [int(n) for n in row]


def summary_is_fresh(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``task_summary`` (``archive_db.summary``) was computed from the archive as it is now."""
    row = con.execute("SELECT max(counts) FROM summary_state WHERE name = ?", [SUMMARY_STATE]).fetchall()
    return bool(row and row[0][0] is not None and list(row[0][0]) == summary_fingerprint(con))


def _leaderboard_from_summary(con: duckdb.DuckDBPyConnection, f: LeaderboardFilter) -> pd.DataFrame:
    """``leaderboard`` for the default filter, read from ``task_summary`` (the same rows and columns)."""
    speedup = SPEEDUP_COLUMNS[f.sort_by]
    params: list[Any] = [f.sort_by]
    having = ""
    if f.min_speedup is not None:
        having = "AND s.best_speedup >= ?"
        params.append(float(f.min_speedup))
    limit = ""
    if f.limit is not None:
        limit = "LIMIT ? OFFSET ?"
        params.extend([int(f.limit), int(f.offset)])
    return con.execute(
        f"""
        SELECT row_number() OVER (ORDER BY s.{speedup} DESC NULLS LAST, t.level, t.problem_id, s.kernel_id)
                   AS rank,
               s.kernel_id, s.task_id, t.level, t.problem_id, t.name AS task_name, t.category,
               s.kernel_name, s.source, s.measured_by, s.gpu, s.correct,
               s.speedup_eager, s.speedup_compile, s.kernel_ms, s.eager_ms, s.compile_ms,
               s.n_kernels, s.measurement_id, coalesce(vd.verdict, 'unverified') AS verdict,
               vd.failing_checks
        FROM task_summary s
        JOIN tasks t ON t.task_id = s.task_id
        LEFT JOIN ({LATEST_VERDICTS}) vd ON vd.kernel_id = s.kernel_id
        WHERE s.sort_by = ? {having}
        ORDER BY rank
        {limit}
        """,
        params,
    ).df()


def _summary_answers(con: duckdb.DuckDBPyConnection, f: LeaderboardFilter) -> bool:
    """Whether ``f`` is the default filter (up to sort, ``min_speedup``, limit, offset) and the summary is fresh."""
    default = replace(LeaderboardFilter(), sort_by=f.sort_by, min_speedup=f.min_speedup, limit=f.limit,
                      offset=f.offset)
    return f == default and summary_is_fresh(con)


def leaderboard_size(con: duckdb.DuckDBPyConnection, f: LeaderboardFilter | None = None) -> int:
    """How many rows ``leaderboard`` returns for ``f`` without its limit: the tasks with a kernel passing it."""
    f = f or LeaderboardFilter()
    speedup = SPEEDUP_COLUMNS[f.sort_by]
    if _summary_answers(con, f):
        floor = "" if f.min_speedup is None else "AND best_speedup >= ?"
        extra = [] if f.min_speedup is None else [float(f.min_speedup)]
        return int(con.execute(f"SELECT count(*) FROM task_summary WHERE sort_by = ? {floor}",
                               [f.sort_by, *extra]).fetchall()[0][0])
    where = measurement_filter(f, with_correct=True)
    params = list(where.params)
    having = ""
    if f.min_speedup is not None:
        having = f"HAVING max(m.{speedup}) >= ?"
        params.append(float(f.min_speedup))
    sql = f"""
        SELECT count(*) FROM (
            SELECT k.task_id FROM measurements m
            JOIN kernels k ON k.kernel_id = m.kernel_id JOIN tasks t ON t.task_id = k.task_id
            WHERE {where.sql()} GROUP BY k.task_id {having})
    """
    return int(con.execute(sql, params).fetchall()[0][0])


def fast_p(
    con: duckdb.DuckDBPyConnection, p: float, f: LeaderboardFilter | None = None
) -> dict[str, float | int]:
    """KernelBench's fast_p: the share of tasks with a correct kernel more than ``p`` times faster.

    The denominator is every task with at least one measurement under ``f`` (correct or not), so
    tasks where every attempt failed count against the score, as in KernelBench.
    """
    f = f or LeaderboardFilter()
    speedup = SPEEDUP_COLUMNS[f.sort_by]
    where = measurement_filter(f, with_correct=False)
    row = con.execute(
        f"""
        WITH c AS ({_CANDIDATES.format(speedup=speedup, where=where.sql())})
        SELECT count(DISTINCT task_id) AS n_tasks,
               count(DISTINCT task_id) FILTER (WHERE correct AND speedup > ?) AS n_fast
        FROM c
        """,
        [*where.params, float(p)],
    ).fetchall()[0]
    n_tasks, n_fast = int(row[0]), int(row[1])
    return {"p": p, "n_tasks": n_tasks, "n_fast": n_fast, "fast_p": (n_fast / n_tasks) if n_tasks else 0.0}


def leaderboard_summary(con: duckdb.DuckDBPyConnection, f: LeaderboardFilter | None = None) -> dict[str, Any]:
    """Headline numbers for a filter: tasks covered, kernels, share correct, fast_1, fast_2, median."""
    f = f or LeaderboardFilter()
    speedup = SPEEDUP_COLUMNS[f.sort_by]
    where = measurement_filter(f, with_correct=False)
    row = con.execute(
        f"""
        WITH c AS ({_CANDIDATES.format(speedup=speedup, where=where.sql())}),
        per_task AS (SELECT task_id, max(speedup) FILTER (WHERE correct) AS best FROM c GROUP BY task_id)
        SELECT (SELECT count(*) FROM per_task),
               (SELECT count(DISTINCT kernel_id) FROM c),
               (SELECT avg(CASE WHEN correct THEN 1.0 ELSE 0.0 END) FROM c),
               (SELECT count(*) FILTER (WHERE best > 1.0) FROM per_task),
               (SELECT count(*) FILTER (WHERE best > 2.0) FROM per_task),
               (SELECT median(best) FROM per_task WHERE best IS NOT NULL)
        """,
        where.params,
    ).fetchall()[0]
    n_tasks = int(row[0])
    return {
        "tasks": n_tasks,
        "kernels": int(row[1]),
        "share_correct": float(row[2]) if row[2] is not None else None,
        "fast_1": (row[3] / n_tasks) if n_tasks else 0.0,
        "fast_2": (row[4] / n_tasks) if n_tasks else 0.0,
        "median_best_speedup": float(row[5]) if row[5] is not None else None,
    }


def compare_groups(
    con: duckdb.DuckDBPyConnection,
    group_by: Literal["source", "generator", "experiment", "measured_by"] = "source",
    f: LeaderboardFilter | None = None,
    only: Sequence[str] = (),
) -> pd.DataFrame:
    """Rank sources (or generators, experiments) against each other on the tasks they all attempted.

    Each group's best correct speedup per task is compared only over tasks every group has a
    measurement for, so a group is not rewarded for attempting easy tasks others skipped. ``only``
    restricts the comparison to these groups (say, a pair that ``group_overlap`` found).
    """
    column = {"source": "k.source", "generator": "k.generator", "experiment": "k.experiment",
              "measured_by": "m.source"}[group_by]
    f = f or LeaderboardFilter()
    speedup = SPEEDUP_COLUMNS[f.sort_by]
    where = measurement_filter(replace(f, correct_only=False), with_correct=False)
    if only:
        where.add(f"list_contains(?, {column})", [str(g) for g in only])
    return con.execute(
        f"""
        WITH c AS (
            SELECT {column} AS grp, k.task_id, m.correct, m.{speedup} AS speedup
            FROM measurements m JOIN kernels k ON k.kernel_id = m.kernel_id
            JOIN tasks t ON t.task_id = k.task_id
            WHERE {where.sql()} AND {column} IS NOT NULL
        ),
        per AS (
            SELECT grp, task_id, bool_or(correct) AS any_correct,
                   max(speedup) FILTER (WHERE correct) AS best, count(*) AS attempts
            FROM c GROUP BY grp, task_id
        ),
        shared AS (
            SELECT task_id FROM per GROUP BY task_id
            HAVING count(DISTINCT grp) = (SELECT count(DISTINCT grp) FROM per)
        )
        SELECT grp AS "{group_by}",
               count(*) AS shared_tasks,
               avg(CASE WHEN any_correct THEN 1.0 ELSE 0.0 END) AS share_tasks_solved,
               avg(CASE WHEN best > 1.0 THEN 1.0 ELSE 0.0 END) AS fast_1,
               median(best) AS median_best_speedup,
               exp(avg(ln(best)) FILTER (WHERE best > 0)) AS geomean_best_speedup,
               sum(attempts) AS measurements
        FROM per WHERE task_id IN (SELECT task_id FROM shared)
        GROUP BY grp ORDER BY fast_1 DESC, median_best_speedup DESC NULLS LAST
        """,
        where.params,
    ).df()


def _one(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> dict[str, Any] | None:
    frame = con.execute(sql, list(params)).df()
    if frame.empty:
        return None
    return {k: (None if _is_na(v) else v) for k, v in frame.iloc[0].to_dict().items()}


def _is_na(value: Any) -> bool:
    import pandas as pd

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


@dataclass
class TaskDetail:
    """Everything known about one task."""

    task: dict[str, Any]
    aliases: pd.DataFrame
    kernels: pd.DataFrame
    baselines: pd.DataFrame
    reference_variants: pd.DataFrame


def task_detail(con: duckdb.DuckDBPyConnection, task_id: str) -> TaskDetail | None:
    """The task, how each source names it, its kernels with every measurement, and its baselines.

    A kernel measured alike in two release files of a source (CUDA-L1's JSON Lines and level-keyed files
    give the same speedup) is one row; ``release_file`` names the files its measurement was merged from
    (``measurements.origins``; empty for our verifier's runs).
    """
    task = _one(con, "SELECT * FROM tasks WHERE task_id = ?", [task_id])
    if task is None:
        return None
    aliases = con.execute("SELECT * FROM task_aliases WHERE task_id = ? ORDER BY source", [task_id]).df()
    kernels = con.execute(
        f"""
        WITH rows AS (
            SELECT k.kernel_id, k.name AS kernel_name, k.source, k.form, k.generator, k.experiment,
                   k.lineage, k.lineage_step, m.measurement_id, m.source AS measured_by, m.gpu,
                   m.timing_mode, m.correct, m.max_diff, m.kernel_ms, m.eager_ms, m.compile_ms,
                   m.speedup_eager, m.speedup_compile, m.error,
                   coalesce(vd.verdict, 'unverified') AS verdict, vd.failing_checks,
                   list_transform(coalesce(m.origins, []::VARCHAR[]), lambda x: regexp_extract(x, '[^/]+$'))
                       AS release_file
            FROM kernels k LEFT JOIN measurements m ON m.kernel_id = k.kernel_id
            LEFT JOIN ({LATEST_VERDICTS}) vd ON vd.kernel_id = k.kernel_id
            WHERE k.task_id = ?
        )
        SELECT * REPLACE (array_to_string(list_sort(list_distinct(flatten(list(release_file) OVER same))), ', ')
                          AS release_file)
        FROM rows
        WINDOW same AS (PARTITION BY kernel_id, measured_by, gpu, timing_mode, correct, speedup_eager)
        QUALIFY row_number() OVER (PARTITION BY kernel_id, measured_by, gpu, timing_mode, correct, speedup_eager
                                   ORDER BY (speedup_compile IS NULL), measurement_id) = 1
        ORDER BY correct DESC NULLS LAST, speedup_eager DESC NULLS LAST, kernel_name, measurement_id
        """,
        [task_id],
    ).df()
    baselines = con.execute(
        "SELECT * FROM baselines WHERE task_id = ? ORDER BY gpu, variant, source", [task_id]
    ).df()
    variants = con.execute(
        "SELECT source, variant, code FROM reference_variants WHERE task_id = ? ORDER BY source, variant",
        [task_id],
    ).df()
    return TaskDetail(task, aliases, kernels, baselines, variants)


@dataclass
class KernelDetail:
    """Everything known about one kernel."""

    kernel: dict[str, Any]
    task: dict[str, Any]
    measurements: pd.DataFrame
    scores: pd.DataFrame
    ncu_metrics: pd.DataFrame
    ncu_rules: pd.DataFrame
    torch_events: pd.DataFrame
    clang_tidy: pd.DataFrame
    raw_profiles: pd.DataFrame
    tags: pd.DataFrame
    neighbours: pd.DataFrame
    verifications: pd.DataFrame
    verification_checks: pd.DataFrame
    lineage: pd.DataFrame


def kernel_detail(con: duckdb.DuckDBPyConnection, kernel_id: str) -> KernelDetail | None:
    """The kernel with its task, measurements, profiles, tags, neighbours and verifications."""
    import pandas as pd

    kernel = _one(con, "SELECT * FROM kernels WHERE kernel_id = ?", [kernel_id])
    if kernel is None:
        return None
    task = _one(con, "SELECT * FROM tasks WHERE task_id = ?", [kernel["task_id"]]) or {}

    def frame(sql: str, *params: Any) -> pd.DataFrame:
        return con.execute(sql, list(params)).df()

    return KernelDetail(
        kernel=kernel,
        task=task,
        measurements=frame(
            "SELECT * FROM measurements WHERE kernel_id = ? ORDER BY source, gpu, timing_mode", kernel_id
        ),
        scores=frame(
            """SELECT s.measurement_id, m.source AS measured_by, m.gpu, m.timing_mode, s.name, s.value,
                      coalesce(k.description, s.name) AS meaning, k.unit, k.higher_is_better
               FROM measurement_scores s JOIN measurements m USING (measurement_id)
               LEFT JOIN score_kinds k ON k.name = s.name
               WHERE m.kernel_id = ? ORDER BY s.name""",
            kernel_id,
        ),
        ncu_metrics=frame(
            "SELECT origin, metric, unit, value, variance, n FROM ncu_metrics WHERE kernel_id = ? "
            "ORDER BY origin, metric",
            kernel_id,
        ),
        ncu_rules=frame(
            "SELECT origin, rule, type, description FROM ncu_rules WHERE kernel_id = ? ORDER BY origin, rule",
            kernel_id,
        ),
        torch_events=frame(
            "SELECT * EXCLUDE (kernel_id) FROM torch_profile_events WHERE kernel_id = ? "
            "ORDER BY origin, device_time_total_us DESC NULLS LAST",
            kernel_id,
        ),
        clang_tidy=frame(
            "SELECT origin, seq, file, line, col, severity, check_name, message FROM clang_tidy_findings "
            "WHERE kernel_id = ? ORDER BY origin, seq",
            kernel_id,
        ),
        raw_profiles=frame("SELECT origin, kind, raw FROM profile_raw WHERE kernel_id = ?", kernel_id),
        tags=frame("SELECT tag, line, evidence FROM kernel_tags WHERE kernel_id = ? ORDER BY tag, line",
                   kernel_id),
        neighbours=frame(
            """SELECT n.model, n.rank, n.neighbour_id AS kernel_id, k.name AS kernel_name, k.source,
                      t.name AS task_name, n.distance
               FROM neighbours n JOIN kernels k ON k.kernel_id = n.neighbour_id
               JOIN tasks t ON t.task_id = k.task_id
               WHERE n.kernel_id = ? ORDER BY n.model, n.rank""",
            kernel_id,
        ),
        verifications=frame(VERIFICATION_RUNS, kernel_id),
        verification_checks=frame(
            """SELECT c.* FROM verification_checks c JOIN verifications v USING (verification_id)
               WHERE v.kernel_id = ? ORDER BY v.started_at DESC, c.check_name""",
            kernel_id,
        ),
        lineage=frame(
            """SELECT kernel_id, name, lineage_step, experiment FROM kernels
               WHERE source = ? AND task_id = ? AND lineage = ? AND experiment IS NOT DISTINCT FROM ?
               ORDER BY lineage_step, name""",
            kernel["source"], kernel["task_id"], kernel.get("lineage"), kernel.get("experiment"),
        ) if kernel.get("lineage") else pd.DataFrame(),
    )


def source_stats(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per source: tasks, kernels, measurements, share correct, GPUs, profiles, license and origins."""
    return con.execute(
        """
        WITH k AS (SELECT source, count(*) AS kernels, count(DISTINCT task_id) AS tasks
                   FROM kernels GROUP BY source),
        m AS (SELECT k.source, count(*) AS measurements,
                     avg(CASE WHEN m.correct THEN 1.0 ELSE 0.0 END) AS share_correct,
                     list(DISTINCT m.gpu ORDER BY m.gpu) FILTER (WHERE m.gpu IS NOT NULL) AS gpus
              FROM measurements m JOIN kernels k USING (kernel_id) GROUP BY k.source),
        ncu AS (SELECT origin AS source, count(DISTINCT kernel_id) AS ncu_profiles FROM ncu_metrics
                GROUP BY origin),
        tp AS (SELECT origin AS source, count(DISTINCT kernel_id) AS torch_profiles
               FROM torch_profile_events GROUP BY origin),
        ct AS (SELECT origin AS source, count(DISTINCT kernel_id) AS clang_tidy_reports
               FROM profile_raw WHERE kind = 'clang-tidy' GROUP BY origin),
        b AS (SELECT source, count(*) AS baselines FROM baselines GROUP BY source),
        o AS (SELECT source, list(DISTINCT origin ORDER BY origin) AS origins FROM source_origins
              GROUP BY source)
        SELECT s.name AS source, s.adapter, s.kind, s.license, s.homepage,
               coalesce(k.tasks, 0) AS tasks, coalesce(k.kernels, 0) AS kernels,
               coalesce(m.measurements, 0) AS measurements, m.share_correct,
               coalesce(m.gpus, []::VARCHAR[]) AS gpus,
               coalesce(ncu.ncu_profiles, 0) AS ncu_profiles,
               coalesce(tp.torch_profiles, 0) AS torch_profiles,
               coalesce(ct.clang_tidy_reports, 0) AS clang_tidy_reports,
               coalesce(b.baselines, 0) AS baselines, coalesce(o.origins, []::VARCHAR[]) AS origins,
               s.first_ingested_at, s.last_ingested_at
        FROM sources s
        LEFT JOIN k ON k.source = s.name LEFT JOIN m ON m.source = s.name
        LEFT JOIN ncu ON ncu.source = s.name LEFT JOIN tp ON tp.source = s.name
        LEFT JOIN ct ON ct.source = s.name LEFT JOIN b ON b.source = s.name
        LEFT JOIN o ON o.source = s.name
        ORDER BY s.name
        """
    ).df()


TOTAL_TABLES: tuple[str, ...] = (
    "sources", "tasks", "kernels", "measurements", "measurement_scores", "baselines", "ncu_metrics",
    "ncu_rules", "torch_profile_events", "clang_tidy_findings", "kernel_tags", "embeddings",
    "projections", "neighbours", "verifications",
)


def totals(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Row counts of the main tables."""
    union = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in TOTAL_TABLES)
    return {name: int(n) for name, n in con.execute(union).fetchall()}


def distinct_values(con: duckdb.DuckDBPyConnection, what: str) -> list[Any]:
    """The distinct values of a filterable field: level, source, gpu, category, tag, measured_by."""
    sql = {
        "level": "SELECT DISTINCT level FROM tasks WHERE level IS NOT NULL ORDER BY 1",
        "source": "SELECT name FROM sources ORDER BY 1",
        "gpu": "SELECT DISTINCT gpu FROM measurements WHERE gpu IS NOT NULL ORDER BY 1",
        "category": "SELECT DISTINCT category FROM tasks WHERE category IS NOT NULL ORDER BY 1",
        "tag": "SELECT DISTINCT tag FROM kernel_tags ORDER BY 1",
        "measured_by": "SELECT DISTINCT source FROM measurements ORDER BY 1",
    }.get(what)
    if sql is None:
        raise ValueError(f"no distinct-values query for {what!r}")
    return [row[0] for row in con.execute(sql).fetchall()]


def profiled_origins(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The origins of every profile in the archive (read once before an ingest, for ``known_profiles``)."""
    rows = con.execute(
        "SELECT DISTINCT origin FROM ncu_metrics UNION SELECT DISTINCT origin FROM ncu_rules "
        "UNION SELECT DISTINCT origin FROM torch_profile_events UNION SELECT DISTINCT origin FROM profile_raw"
    ).fetchall()
    return {origin for (origin,) in rows}


def profiled_kernels(con: duckdb.DuckDBPyConnection, origin: str) -> dict[str, set[str]]:
    """Kernel id -> the kinds (ncu, torch, clang-tidy) of its profiles from ``origin``, in one scan per table.

    The profile tables carry no key index, so an ingest asks this once per origin rather than asking
    ``known_profiles`` once per batch.
    """
    rows = con.execute(
        """
        SELECT DISTINCT kernel_id, 'ncu' FROM ncu_metrics WHERE origin = ?
        UNION SELECT DISTINCT kernel_id, 'ncu' FROM ncu_rules WHERE origin = ?
        UNION SELECT DISTINCT kernel_id, 'torch' FROM torch_profile_events WHERE origin = ?
        UNION SELECT kernel_id, kind FROM profile_raw WHERE origin = ?
        """,
        [origin, origin, origin, origin],
    ).fetchall()
    kinds: dict[str, set[str]] = {}
    for kernel_id, kind in rows:
        kinds.setdefault(kernel_id, set()).add(kind)
    return kinds


def verifiable_kernels(
    con: duckdb.DuckDBPyConnection,
    forms: Sequence[str],
    *,
    task: str | None = None,
    source: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Kernels with code in one of ``forms`` whose task has reference code, of a task or a source."""
    where, params = ["k.code IS NOT NULL", "t.reference_code IS NOT NULL",
                     f"k.form IN ({', '.join('?' for _ in forms)})"], list(forms)
    if task:
        where.append("k.task_id = ?")
        params.append(task)
    if source:
        where.append("k.source = ?")
        params.append(source)
    sql = (f"SELECT k.kernel_id, k.name, k.source, t.name AS task_name FROM kernels k JOIN tasks t USING (task_id) "
           f"WHERE {' AND '.join(where)} ORDER BY t.level, t.problem_id, k.name, k.kernel_id")
    if limit:
        sql += f" LIMIT {int(limit)}"
    rows = con.execute(sql, params).fetchall()
    return [dict(zip(("kernel_id", "name", "source", "task_name"), row, strict=True)) for row in rows]
