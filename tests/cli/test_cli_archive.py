"""The archive verbs through the real typer app: ingest, sources, stats, leaderboard, where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testing import run_json
from handmade_archive import MEASURED, Handmade
from platformdirs import user_data_dir
from typer.testing import CliRunner

from archive_db.paths import ENV_VAR
from kernel_archive.cli import app

LEADERBOARD_KEYS = {"rank", "kernel_id", "task_id", "level", "problem_id", "task_name", "kernel_name", "source",
                    "gpu", "speedup_eager", "speedup_compile", "measured_by", "correct", "n_kernels"}


def test_stats_json_gives_totals_and_per_source_counts(runner: CliRunner, handmade: Handmade) -> None:
    stats = run_json(runner, "stats", "--db", str(handmade.path))
    assert stats["totals"]["tasks"] == 4
    assert stats["totals"]["kernels"] == stats["totals"]["measurements"] == len(MEASURED)
    assert stats["totals"]["ncu_metrics"] == 1 and stats["totals"]["torch_profile_events"] == 2
    per = {s["source"]: s for s in stats["sources"]}
    assert (per["alpha"]["tasks"], per["alpha"]["kernels"], per["alpha"]["measurements"]) == (3, 5, 5)
    assert (per["beta"]["tasks"], per["beta"]["kernels"], per["beta"]["measurements"]) == (3, 4, 4)
    assert (per["alpha"]["ncu_profiles"], per["alpha"]["torch_profiles"], per["alpha"]["clang_tidy_reports"]) == (
        1, 1, 1)
    assert per["alpha"]["gpus"] == ["A100", "H100"]


def test_stats_table(runner: CliRunner, handmade: Handmade) -> None:
    result = runner.invoke(app, ["stats", "--db", str(handmade.path)])
    assert result.exit_code == 0, result.output
    assert "Archive totals" in result.stdout and "Per source" in result.stdout
    assert "alpha" in result.stdout and "measurements" in result.stdout


def test_sources_lists_archive_sources_and_available_adapters(runner: CliRunner, handmade: Handmade) -> None:
    rows = run_json(runner, "sources", "--db", str(handmade.path))
    assert [(r["source"], r["kernels"], r["license"]) for r in rows] == [("alpha", 5, "MIT"), ("beta", 4, "MIT")]
    table = runner.invoke(app, ["sources", "--db", str(handmade.path)])
    assert table.exit_code == 0 and "alpha" in table.stdout and "80%" in table.stdout
    available = run_json(runner, "sources", "--available")
    assert {"sakana", "cuda-l1", "cuda-l2", "kernelbench", "robust-kbench"} <= {a["name"] for a in available}
    assert all(a["license"] and a["description"] for a in available)


def test_leaderboard_json_rows(runner: CliRunner, handmade: Handmade) -> None:
    board = run_json(runner, "leaderboard", "--db", str(handmade.path))
    rows = board["rows"]
    assert [handmade.label(r["kernel_id"]) for r in rows] == ["b1", "a4", "b3"]
    assert set(rows[0]) >= LEADERBOARD_KEYS
    top = rows[0]
    assert (top["task_id"], top["level"], top["problem_id"], top["task_name"]) == (handmade.tasks["T1"], 1, 1, "1_Relu")
    assert (top["kernel_name"], top["source"], top["gpu"]) == ("b1_kernel", "beta", "A100")
    assert (top["speedup_eager"], top["speedup_compile"]) == (4.0, 0.8)
    fast = {f["p"]: (f["n_fast"], f["n_tasks"]) for f in board["fast_p"]}
    assert fast == {1.0: (3, 4), 2.0: (1, 4)}


@pytest.mark.parametrize(
    ("options", "labels"),
    [
        (["--level", "1"], ["b1", "b3"]),
        (["--level", "2", "--level", "3"], ["a4"]),
        (["--source", "alpha"], ["a1", "a4", "a3"]),
        (["--gpu", "H100"], ["a1", "b3"]),
        (["--include-incorrect"], ["b2", "a4", "b3", "b4"]),
        (["--min-speedup", "1.5"], ["b1", "a4"]),
        (["--sort", "compile"], ["a2", "a4", "b3"]),
        (["--sort", "compile", "--gpu", "A100"], ["a4", "b1"]),
        (["--search", "tanh"], ["b3"]),
        (["--limit", "1"], ["b1"]),
    ],
)
def test_leaderboard_filters(runner: CliRunner, handmade: Handmade, options: list[str], labels: list[str]) -> None:
    board = run_json(runner, "leaderboard", "--db", str(handmade.path), *options)
    assert [handmade.label(r["kernel_id"]) for r in board["rows"]] == labels


def test_leaderboard_table_and_bad_sort(runner: CliRunner, handmade: Handmade) -> None:
    narrow = runner.invoke(app, ["leaderboard", "--db", str(handmade.path)], env={"COLUMNS": "80"})
    first_narrow = next(line for line in narrow.stdout.splitlines() if line.startswith("│ 1 "))
    assert handmade.kernels["b1"] in first_narrow, "kernel ids must survive a narrow terminal whole"
    table = runner.invoke(app, ["leaderboard", "--db", str(handmade.path)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    first = next(line for line in table.stdout.splitlines() if line.startswith("│ 1 "))
    assert "1_Relu" in first and "beta" in first and "4.00x" in first and "0.80x" in first
    assert "fast_1 = 75.0% (3/4 tasks)" in table.stdout
    bad = runner.invoke(app, ["leaderboard", "--db", str(handmade.path), "--sort", "median"])
    assert bad.exit_code == 2
    assert "--sort must be 'eager' or 'compile'" in bad.stderr


def test_where_default_environment_and_option(runner: CliRunner, tmp_path: Path) -> None:
    default = runner.invoke(app, ["where"])
    assert default.exit_code == 0
    assert default.stdout.strip() == str(Path(user_data_dir("kernel-archive", appauthor=False)) / "archive.duckdb")
    env = runner.invoke(app, ["where"], env={ENV_VAR: str(tmp_path / "env.duckdb")})
    assert env.stdout.strip() == str(tmp_path / "env.duckdb")
    given = runner.invoke(app, ["where", "--db", str(tmp_path / "given.duckdb")],
                          env={ENV_VAR: str(tmp_path / "env.duckdb")})
    assert given.stdout.strip() == str(tmp_path / "given.duckdb")


def test_environment_variable_selects_the_archive(runner: CliRunner, handmade: Handmade) -> None:
    result = runner.invoke(app, ["stats", "--json"], env={ENV_VAR: str(handmade.path)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["kernels"] == len(MEASURED)


def test_reading_a_missing_archive_is_a_clear_error(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "none.duckdb"
    for verb in ("stats", "sources", "leaderboard"):
        result = runner.invoke(app, [verb, "--db", str(missing)])
        assert result.exit_code == 1
        assert f"no archive at {missing}" in " ".join(result.stderr.split())
        assert "Traceback" not in result.output
    assert not missing.exists()


def test_unknown_source_is_refused_before_anything_is_written(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "archive.duckdb"
    result = runner.invoke(app, ["ingest", "sakanna", "x.jsonl", "--db", str(db)])
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "unknown source 'sakanna'" in message
    assert "sakana" in message and "cuda-l1" in message and "kernelbench" in message
    assert not db.exists()


def test_ingest_then_stats_and_leaderboard_on_real_rows(runner: CliRunner, shared_data: Path, tmp_path: Path) -> None:
    db = tmp_path / "archive.duckdb"
    sample = shared_data / "sakana-archive" / "sample.jsonl"
    first = runner.invoke(app, ["ingest", "sakana", str(sample), "--db", str(db), "--quiet"])
    assert first.exit_code == 0, first.output + first.stderr
    assert "82 records" in first.stdout and "82 kernels" in first.stdout
    again = runner.invoke(app, ["ingest", "sakana", str(sample), "--db", str(db), "--quiet"])
    assert again.exit_code == 0 and "added nothing new" in again.stdout
    stats = run_json(runner, "stats", "--db", str(db))
    (sakana,) = stats["sources"]
    assert (sakana["source"], sakana["kernels"], sakana["measurements"]) == ("sakana", 82, 82)
    assert sakana["tasks"] == 3 and sakana["gpus"] == ["H100"]
    assert sakana["ncu_profiles"] == sakana["clang_tidy_reports"] == 62  # the correct rows carry profiles
    assert stats["totals"]["kernels"] == 82
    board = run_json(runner, "leaderboard", "--db", str(db))
    assert [r["level"] for r in board["rows"]] == [3, 2, 1]  # best: MLP 1.35x, conv 1.14x, matmul 0.22x
    assert {r["source"] for r in board["rows"]} == {"sakana"}
    assert all(set(r) >= LEADERBOARD_KEYS for r in board["rows"])
    assert board["rows"][0]["speedup_eager"] == pytest.approx(1.3511721044778824)


def test_leaderboard_over_every_real_source(runner: CliRunner, sample_archive: Path) -> None:
    board = run_json(runner, "leaderboard", "--db", str(sample_archive), "--limit", "1000", "--include-incorrect")
    sources = {r["source"] for r in board["rows"]}
    assert {"sakana", "cuda-l1", "cuda-l2"} <= sources
    for row in board["rows"]:
        assert set(row) >= LEADERBOARD_KEYS
        assert row["kernel_id"] and row["task_id"] and row["kernel_name"]
    by_gpu = run_json(runner, "leaderboard", "--db", str(sample_archive), "--gpu", "A100", "--limit", "1000")
    assert by_gpu["rows"] and {r["gpu"] for r in by_gpu["rows"]} == {"A100"}
    assert {r["source"] for r in by_gpu["rows"]} == {"cuda-l1"}  # only CUDA-L1 released A100 results


def test_sources_and_stats_tables_over_every_real_source(runner: CliRunner, sample_archive: Path) -> None:
    # kernelbench contributes tasks and baselines but no measurements: its row must still print.
    for verb in ("sources", "stats"):
        result = runner.invoke(app, [verb, "--db", str(sample_archive)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output + result.stderr
        assert "kernelbench" in result.stdout and "sakana" in result.stdout
    rows = {r["source"]: r for r in run_json(runner, "sources", "--db", str(sample_archive))}
    assert rows["kernelbench"]["measurements"] == 0 and rows["kernelbench"]["gpus"] == []
    assert rows["kernelbench"]["baselines"] > 0
