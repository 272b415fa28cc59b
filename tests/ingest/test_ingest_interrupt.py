"""An ingest's parser workers die with it, and Ctrl+C ends it with one line, exit 130 and nothing written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PDEATHSIG is Linux's")

# The CLI with the parser pool used for any input size, so a small file exercises the workers.
CLI_WITH_POOL = (
    "import ingest.adapters.sakana as s; s.POOL_MIN_ROWS = 1; s.BATCH_ROWS = 64\n"
    "from kernel_archive.cli import main; main()\n"
)


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def survivors_after(workers: list[int], timeout: float = 10) -> list[int]:
    """The workers still alive once ``timeout`` has passed (or none, as soon as all are gone).

    The kernel's SIGKILL for a dead parent (PDEATHSIG) is sent as the parent exits, but a worker leaves
    /proc only once it is scheduled to die: on a loaded machine that can come after the parent's ``wait``.
    """
    deadline = time.monotonic() + timeout
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [w for w in workers if alive(w)]


@pytest.fixture
def big_jsonl(shared_data: Path, tmp_path: Path) -> Path:
    """The real sample rows, 30 times over (about 2,500 rows): a few seconds of ingest."""
    lines = (shared_data / "sakana-archive" / "sample.jsonl").read_text().splitlines()
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(lines * 30) + "\n")
    return path


def as_in_a_terminal() -> None:
    """SIGINT as a terminal's foreground job gets it: the tests may run as a background job, whose children
    start with SIGINT ignored (and a process started so keeps ignoring it, as it should)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_ingest(path: Path, db: Path, log: Path) -> subprocess.Popen[str]:
    """The ingest CLI in a subprocess writing its stderr to ``log`` (a file: orphaned workers would hold a pipe)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    with open(log, "w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-c", CLI_WITH_POOL, "ingest", "sakana", str(path), "--db", str(db), "-q"],
            stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=env, cwd=REPO, start_new_session=True,
            preexec_fn=as_in_a_terminal,
        )


def wait_for_workers(process: subprocess.Popen[str], n: int = 2, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = children_of(process.pid)
        if len(workers) >= n:
            return workers
        if process.poll() is not None:
            pytest.fail(f"the ingest ended before its workers started (exit {process.returncode})")
        time.sleep(0.02)
    pytest.fail("the parser workers never started")


@pytest.fixture
def ingest_process(big_jsonl: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, Path]]:
    db, log = tmp_path / "a.duckdb", tmp_path / "stderr.txt"
    process = start_ingest(big_jsonl, db, log)
    workers: list[int] = []
    try:
        yield process, db, log
    finally:
        workers = children_of(process.pid)
        if process.poll() is None:
            process.kill()
        process.wait()
        for worker in workers:  # only if the test failed: a worker that outlived its parent
            if alive(worker):
                os.kill(worker, signal.SIGKILL)


def test_workers_die_when_the_ingest_is_killed(ingest_process) -> None:
    process, _, _ = ingest_process
    workers = wait_for_workers(process)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    survivors = survivors_after(workers)
    for worker in survivors:
        os.kill(worker, signal.SIGKILL)
    assert not survivors, f"workers {survivors} outlived their killed parent"


def test_ctrl_c_says_nothing_was_written_and_exits_130(ingest_process) -> None:
    process, db, log = ingest_process
    workers = wait_for_workers(process)
    os.killpg(process.pid, signal.SIGINT)  # as Ctrl+C in a terminal: the whole process group
    process.wait(timeout=60)
    stderr = log.read_text()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == ["error: interrupted; nothing was written"]
    assert not survivors_after(workers), "parser workers outlived the interrupted ingest"
    check = subprocess.run(
        [sys.executable, "-m", "kernel_archive", "stats", "--db", str(db), "--json"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, timeout=120,
    )
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["totals"]["kernels"] == 0
