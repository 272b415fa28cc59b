"""bench/gate_replay.py: a pass read from its --out folder, replayed under every policy, with its JSON keys; what it
cannot read or replay is named; the docs name every policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "verify"))

from replay_testing import shared_report  # noqa: E402

from verify.batch.replay import ORDERS, POLICIES  # noqa: E402

BENCH = REPO / "bench" / "gate_replay.py"


def write_pass(folder: Path, reports: list[tuple[str, dict]], summary: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reports-cold.jsonl").write_text("".join(json.dumps({"key": k, "report": r}) + "\n" for k, r in reports))
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_the_benchmark_replays_a_pass_under_every_policy(tmp_path):
    first = shared_report()
    second = shared_report() | {"timeline_origin": 103.0}
    out = write_pass(tmp_path / "out", [("a", first), ("b", second)], {"slots_per_gpu": 2, "gpu_seats": 1})
    done = bench(str(out), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])["inputs"][0]
    assert (result["kernels"], result["replayable"], result["slots"], result["seats"]) == (2, True, 2, 1)
    assert set(result["replays"]) == set(POLICIES)
    assert result["longest_chain"] == ["a", 15.9]
    one_seat = result["replays"]["writer-first"]
    assert one_seat["finished"] == 2 and one_seat["pass_s"] == pytest.approx(2.0 + 2 * 9.9 + 4.0, abs=0.01)
    assert result["writer_first_error"] == pytest.approx(one_seat["pass_s"] / result["measured"]["pass_s"] - 1,
                                                         abs=1e-3)
    assert "writer-first" in done.stdout and "the longest kernel's own chain: a" in done.stdout


def test_the_benchmark_replays_the_kernels_in_another_order(tmp_path):
    short = shared_report() | {"harness_seconds": 12.0, "timeline_origin": 100.0}
    long = shared_report() | {"timeline_origin": 103.0}
    out = write_pass(tmp_path / "out", [("short", short), ("long", long)], {"slots_per_gpu": 1, "gpu_seats": 1})
    as_run, first = (json.loads(bench(str(out), "--json", *extra).stdout.strip().splitlines()[-1])["inputs"][0]
                     for extra in ((), ("--order", "longest-first")))
    assert (as_run["order"], first["order"]) == ("as-run", "longest-first")
    assert as_run["writer_first_error"] is not None and first["writer_first_error"] is None
    assert first["replays"]["writer-first"]["pass_s"] == pytest.approx(as_run["replays"]["writer-first"]["pass_s"])
    assert bench(str(out), "--order", "random").returncode == 2


def test_the_benchmark_names_what_it_cannot_replay(tmp_path):
    old = shared_report()
    old["gate"]["pieces"] = {"run": [[1.5, "trial"]]}
    out = write_pass(tmp_path / "out", [("old", old)])
    done = bench(str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert "not replayable" in done.stdout
    assert json.loads(done.stdout.strip().splitlines()[-1])["inputs"][0]["replays"] == {}
    missing = bench(str(tmp_path / "nowhere"))
    assert missing.returncode != 0 and "nowhere" in missing.stderr and "does not exist" in missing.stderr
    (out / "reports-cold.jsonl").write_text("{not json\n")
    broken = bench(str(out))
    assert broken.returncode != 0 and "reports-cold.jsonl:1 is not JSON" in broken.stderr
    assert bench(str(out), "--policies", "fifo").returncode == 2


def test_the_docs_name_every_policy():
    docs = (REPO / "docs" / "verify-batch.md").read_text()
    assert "bench/gate_replay.py" in docs
    for name in (*POLICIES, *ORDERS):
        assert f"`{name}`" in docs, name
