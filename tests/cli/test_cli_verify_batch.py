"""kernel-archive verify on a selection (batch: stored as each finishes, resumed, forced), reproduce, verify-import."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from handmade_archive import Handmade
from typer.testing import CliRunner

from archive_db.connection import connect
from archive_db.verify_queries import VerifySelection, kernels_by_code, reproduction_rows, verify_selection
from kernel_archive.cli import app
from verify.batch import workers
from verify.harness.common import HARNESS_VERSION
from verify.pipeline import VerifyJob
from verify.reproduce import REPRODUCTIONS, outcome, render_markdown
from verify.store import store_report

UNTRUSTED = "--i-understand-this-runs-untrusted-code"


def _report(status: str, kernel_ms: float = 0.5, eager_ms: float = 1.0, **extra: Any) -> dict[str, Any]:
    verdict = "fail" if status == "failed" else "pass"
    return {"status": status, "mode": "full", "harness_version": HARNESS_VERSION,
            "started_at": "2026-11-23T10:00:00+00:00", "environment": {"gpu": "NVIDIA H100 80GB HBM3"},
            "speed": {"kernel_ms": kernel_ms, "kernel_iqr_ms": 0.01, "eager_ms": eager_ms, "eager_iqr_ms": 0.01,
                      "kernel_wall_ms": kernel_ms * 1.01, "speedup_eager": eager_ms / kernel_ms},
            "checks": {"correctness": {"verdict": verdict, "evidence": ["max_abs 3.1" if verdict == "fail" else "ok"]}},
            **extra}


class FakeVerify:
    """Stands in for the eval script (no GPU here): a report per kernel, and a log of who ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, job: VerifyJob, options: Any, *, build: Any, env: dict[str, str],
                 stop_at: float | None = None, zygotes: Any = None, alone_because: str | None = None) -> dict[str, Any]:
        with self.lock:
            self.ran.append(job.key)
        return _report("passed")


def _statuses(path: Path) -> dict[str, int]:
    with connect(path, read_only=True) as con:
        return dict(con.execute("SELECT kernel_id, count(*) FROM verifications GROUP BY kernel_id").fetchall())


def test_selection_by_source_level_and_search(handmade: Handmade) -> None:
    with connect(handmade.path, read_only=True) as con:
        alpha = verify_selection(con, VerifySelection(sources=("alpha",)))
        level1 = verify_selection(con, VerifySelection(levels=(1,)))
        tanh = verify_selection(con, VerifySelection(search="Tanh"))
    assert {r["kernel_id"] for r in alpha} == {handmade.kernels[k] for k in ("a1", "a2", "a3", "a4", "a5")}
    assert {handmade.label(r["kernel_id"]) for r in level1} == {"a1", "a2", "b1", "b2", "a3", "b3"}
    assert {handmade.label(r["kernel_id"]) for r in tanh} == {"a3", "b3"}
    assert all(r["reference_code"] and r["code"] and r["form"] == "cuda-binding" for r in alpha)
    assert VerifySelection().is_empty() and not VerifySelection(levels=(1,)).is_empty()


def test_batch_stores_each_result_resumes_and_forces(runner: CliRunner, handmade: Handmade,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeVerify()
    monkeypatch.setattr(workers, "verify_one", fake)
    db = str(handmade.path)
    base = ["verify", "--db", db, "--source", "alpha", "--level", "1", UNTRUSTED, "--gpus", "2", "--no-build-cache"]
    first = runner.invoke(app, [*base, "--json"])
    assert first.exit_code == 0, first.output
    assert sorted(r["kernel_id"] for r in json.loads(first.stdout.strip().splitlines()[-1])) == sorted(
        handmade.kernels[k] for k in ("a1", "a2", "a3"))
    assert _statuses(handmade.path) == {handmade.kernels[k]: 1 for k in ("a1", "a2", "a3")}
    again = runner.invoke(app, base)
    assert again.exit_code == 0 and "3 already verified" in again.output and len(fake.ran) == 3
    forced = runner.invoke(app, [*base, "--force", "--search", "Relu"])
    assert forced.exit_code == 0 and len(fake.ran) == 5
    assert _statuses(handmade.path)[handmade.kernels["a1"]] == 2


def test_slots_per_gpu_reaches_the_batch_and_its_help_names_the_default(runner: CliRunner, handmade: Handmade,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "verify_one", FakeVerify())
    seen: list[tuple[int, int]] = []
    original = workers.LocalBatch.__init__

    def recording(self: workers.LocalBatch, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        seen.append((self.slots, self.compile_workers))

    monkeypatch.setattr(workers.LocalBatch, "__init__", recording)
    base = ["verify", "--db", str(handmade.path), "--source", "alpha", "--level", "1", UNTRUSTED, "--gpus", "1",
            "--no-build-cache", "--force"]
    assert runner.invoke(app, [*base, "--slots-per-gpu", "1", "--compile-workers", "2"]).exit_code == 0
    assert runner.invoke(app, base).exit_code == 0
    shape = workers.batch_shape(1)
    assert seen == [(1, 2), (shape.slots, workers.default_compile_workers(1, min(shape.slots, shape.seats)))]
    assert runner.invoke(app, [*base, "--slots-per-gpu", "0"]).exit_code == 2
    help_text = " ".join(runner.invoke(app, ["verify", "--help"]).output.replace("│", " ").split())
    big, small = workers.BATCH_SHAPES
    assert (f"at most KA_GPU_SEATS of them on the GPU (default {big.slots} where the host has {big.cores_per_gpu} "
            f"cores a GPU, else {small.slots}; {workers.SLOTS_PER_GPU} under Ray)") in help_text
    assert (f"--slots-per-gpu: default {big.slots} where the host has {big.cores_per_gpu} cores a GPU, else "
            f"{small.slots}; at most KA_GPU_SEATS of them, default {big.seats} or {small.seats}, on the GPU at once"
            ) in help_text


def test_a_batch_needs_a_selection_and_consent(runner: CliRunner, handmade: Handmade) -> None:
    nothing = runner.invoke(app, ["verify", "--db", str(handmade.path)])
    assert nothing.exit_code == 2 and "--all" in nothing.output
    no_consent = runner.invoke(app, ["verify", "--db", str(handmade.path), "--all"])
    assert no_consent.exit_code == 2 and UNTRUSTED in no_consent.output
    both = runner.invoke(app, ["verify", "abc", "--db", str(handmade.path), "--level", "1"])
    assert both.exit_code == 2


def _claims_archive(handmade: Handmade) -> None:
    """Reports for alpha's H100 kernels: a1 claims 2.5x, a2 1.5x, a3 0.9x (handmade measurements)."""
    db = handmade.path
    store_report(db, _report("passed", kernel_ms=0.45), handmade.kernels["a1"])          # 2.22x vs 2.5x: within
    store_report(db, _report("flagged", kernel_ms=1.0, properties=["library-call"],
                             checks={"correctness": {"verdict": "pass"}, "not-a-kernel": {"verdict": "warn"}}),
                 handmade.kernels["a2"])                                                 # 1.0x vs 1.5x: short
    store_report(db, _report("failed"), handmade.kernels["a3"])


def test_reproduction_rows_join_claims_with_the_latest_verification(handmade: Handmade) -> None:
    _claims_archive(handmade)
    with connect(handmade.path, read_only=True) as con:
        rows = {handmade.label(r["kernel_id"]): r for r in reproduction_rows(con, "alpha", "H100")}
    assert set(rows) == {"a1", "a2", "a3", "a4", "a5"}
    assert rows["a1"]["claimed_speedup"] == 2.5 and rows["a1"]["status"] == "passed"
    assert rows["a4"]["claimed_speedup"] is None and rows["a4"]["status"] is None  # its claim is on an A100
    assert [outcome(rows[k]) for k in ("a1", "a2", "a3", "a4")] == [
        "reproduces", "falls-short", "fails-correctness", "not-verified"]


def test_reproduce_writes_markdown_backed_by_verification_ids(runner: CliRunner, handmade: Handmade,
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _claims_archive(handmade)
    monkeypatch.setitem(REPRODUCTIONS, "alpha-h100", REPRODUCTIONS["cuda-l1-h100"].__class__(
        "alpha-h100", "alpha", "H100", "Alpha re-checked", "alpha's speedup"))
    target = tmp_path / "docs" / "alpha.md"
    result = runner.invoke(app, ["reproduce", "alpha-h100", "--db", str(handmade.path), "-o", str(target)])
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert "kernel-archive reproduce alpha-h100" in text
    assert "**1** reproduce within 20%" in text and "**1** pass correctness but run more than 20% slower" in text
    assert "**1** fail a correctness-type check" in text and "**2** have no verification" in text
    assert "library-call (1)" in text
    with connect(handmade.path, read_only=True) as con:
        ids = [r[0] for r in con.execute("SELECT verification_id FROM verifications").fetchall()]
    assert all(vid in text for vid in ids)
    assert runner.invoke(app, ["reproduce", "nope", "--db", str(handmade.path)]).exit_code == 1


def test_render_markdown_with_no_verification_claims_nothing() -> None:
    rows = [{"kernel_id": "k", "kernel_name": "n", "level": 1, "problem_id": 1, "task_name": "t",
             "claimed_speedup": 3.0, "status": None, "report": None, "verification_id": None, "gpu": None}]
    text = render_markdown(REPRODUCTIONS["cuda-l1-h100"], rows, "cmd")
    assert "0 verified" in text and "**1** have no verification" in text and "reproduce within" not in text


def test_render_markdown_counts_the_kernels_whose_timed_call_is_mostly_the_hosts() -> None:
    def row(name: str, claimed: float, kernel_ms: float, device_us: float | None) -> dict:
        report = {"speed": {"kernel_ms": kernel_ms, "eager_ms": 1.0}, "checks": {"correctness": {"verdict": "pass"}},
                  "kernels": {"candidate": [{"device_us": device_us}] if device_us else []}}
        return {"kernel_id": name, "kernel_name": name, "level": 2, "problem_id": 1, "task_name": "t",
                "claimed_speedup": claimed, "status": "flagged", "report": report, "verification_id": f"v-{name}",
                "gpu": "H100"}

    rows = [row("busy", 1.0, 1.0, 950.0), row("host", 3.0, 0.5, 40.0), row("host2", 1.0, 0.25, 50.0),
            row("unlisted", 1.0, 1.0, None)]
    text = render_markdown(REPRODUCTIONS["cuda-l1-h100"], rows, "cmd")
    assert ("- **2** of the 3 with a kernel listing keep the GPU busy less than 50% of their timed call" in text
            and "(1 reproduces, 1 falls-short)" in text)
    assert "| 1.00x (1.00-1.00) | 95% | flagged |" in text and "| 2.00x (2.00-2.00) | 8% | flagged |" in text
    assert "| 1.00x (1.00-1.00) | - | flagged |" in text


def test_verify_import_stores_reports_by_code_hash(runner: CliRunner, handmade: Handmade, tmp_path: Path) -> None:
    code = "// kernel a1\n__global__ void k() {}"
    with connect(handmade.path, read_only=True) as con:
        digest = hashlib.sha256(code.encode()).hexdigest()
        assert kernels_by_code(con, "alpha", [digest]) == {digest: handmade.kernels["a1"]}
    lines = [{"code_sha256": digest, "report": _report("passed")}, {"code_sha256": "0" * 64, "report": _report("passed")}]
    reports = tmp_path / "reports.jsonl"
    reports.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = runner.invoke(app, ["verify-import", str(reports), "--source", "alpha", "--db", str(handmade.path)])
    assert result.exit_code == 0 and "stored 1 reports; 1 matched no kernel" in result.output
    assert _statuses(handmade.path) == {handmade.kernels["a1"]: 1}
