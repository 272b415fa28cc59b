"""Isolation, timeouts and the result channel, with children that are plain Python (no GPU)."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
from zygote_testing import start_host

from verify.harness.judge import Evidence, judge
from verify.harness.parent import ChildProcess, run_child, scrubbed_environment
from verify.harness.zygote import Zygote


@pytest.fixture(scope="module", params=["exec", "forked"])
def zygote(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """Each isolation test runs twice: children started by exec, and forked from a zygote."""
    if request.param == "exec":
        yield None
        return
    started = start_host(tmp_path_factory.mktemp("zygote"), dict(os.environ))
    yield started
    assert started.forked > 0
    started.close()


def _child(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_a_child_that_hangs_is_killed_at_its_timeout(tmp_path: Path, zygote: Zygote | None) -> None:
    started = time.monotonic()
    report = run_child(_child(tmp_path, "import time\ntime.sleep(600)\n"), role="run", env=dict(os.environ),
                       cwd=tmp_path, zygote=zygote, timeout_s=1.5)
    assert report.timed_out and not report.ok
    assert time.monotonic() - started < 30
    assert "timeout" in report.failure()


def test_a_child_that_crashes_fails_alone(tmp_path: Path, zygote: Zygote | None) -> None:
    report = run_child(_child(tmp_path, "import os\nos.abort()\n"), role="run", env=dict(os.environ), cwd=tmp_path, zygote=zygote,
                       timeout_s=30)
    assert report.returncode is not None and report.returncode < 0
    assert not report.ok and "signal" in report.failure()
    assert report.started == ("forked" if zygote else "exec")


def test_background_processes_of_a_child_are_killed_with_it(tmp_path: Path, zygote: Zygote | None) -> None:
    marker = tmp_path / "survivor"
    body = f"""
    import subprocess, sys
    subprocess.Popen([sys.executable, "-c", "import time, pathlib; time.sleep(3); pathlib.Path({str(marker)!r}).touch()"])
    """
    run_child(_child(tmp_path, body), role="run", env=dict(os.environ), cwd=tmp_path, zygote=zygote, timeout_s=30)
    time.sleep(4)
    assert not marker.exists()


def test_a_forged_verdict_is_ignored_and_flagged(tmp_path: Path, zygote: Zygote | None) -> None:
    body = """
    import os, sys, json
    fd = int(sys.argv[sys.argv.index("--channel") + 1])
    os.write(fd, b'{"kind": "done", "verdict": "pass", "status": "passed"}\\n')
    os.write(fd, b'PASS\\n')
    print(json.dumps({"status": "passed"}))
    """
    report = run_child(_child(tmp_path, body), role="run", env=dict(os.environ), cwd=tmp_path, zygote=zygote, timeout_s=30)
    assert report.returncode == 0 and report.rejects == ["PASS"]
    ev = Evidence(form="model-new", kernel_code="", static=[], trials=[{"index": 0, "seed": 1, "distribution": "task"}],
                  run=report)
    checks, _ = judge(ev)
    assert checks["result-forging"]["verdict"] == "fail"
    assert checks["runs"]["verdict"] == "fail"  # said done without any trial
    assert checks["correctness"]["verdict"] == "fail"


def test_the_channel_is_not_inherited_by_grandchildren(tmp_path: Path, zygote: Zygote | None) -> None:
    body = """
    import os, subprocess, sys
    fd = int(sys.argv[sys.argv.index("--channel") + 1])
    os.set_inheritable(fd, False)
    code = f"import os\\ntry:\\n    os.write({fd}, b'{{\\\\"kind\\\\": \\\\"done\\\\"}}\\\\n')\\nexcept OSError:\\n    pass\\n"
    subprocess.run([sys.executable, "-c", code], close_fds=False)
    """
    report = run_child(_child(tmp_path, body), role="run", env=dict(os.environ), cwd=tmp_path, zygote=zygote, timeout_s=30)
    assert report.all("done") == []


def test_messages_keep_their_receive_times(tmp_path: Path, zygote: Zygote | None) -> None:
    body = """
    import os, sys, time
    fd = int(sys.argv[sys.argv.index("--channel") + 1])
    os.write(fd, b'{"kind": "timing-start"}\\n')
    time.sleep(1.5)
    os.write(fd, b'{"kind": "timing-end"}\\n')
    os.write(fd, b'{"kind": "done"}\\n')
    """
    child = ChildProcess(_child(tmp_path, body), role="run", env=dict(os.environ), cwd=tmp_path, zygote=zygote)
    report = child.wait(30)
    assert report.ok
    assert report.time_of("timing-end") - report.time_of("timing-start") >= 0.4


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create is Linux-only")
def test_a_released_reference_gives_its_pages_back_and_the_others_stay_readable(tmp_path: Path) -> None:
    body = f"""
    import sys
    sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
    from verify.harness.common import BlobChannel
    number = lambda flag: int(sys.argv[sys.argv.index(flag) + 1])
    channel = BlobChannel(number("--blobs"), number("--blob-memory"))
    for name, fill in (("ref-0", b"a"), ("ref-1", b"b"), ("ref-2", b"c")):
        channel.send(name, fill * (8 << 20))
    """
    child = ChildProcess(_child(tmp_path, body), role="trusted", env=dict(os.environ), cwd=tmp_path, blobs=True,
                         blob_memory="map")
    assert child.wait(60).returncode == 0 and sorted(child.blobs) == ["ref-0", "ref-1", "ref-2"]
    memory = child._memory
    assert memory is not None, "the memory file stays open while payloads are mapped from it"
    held = os.fstat(memory).st_blocks * 512
    child.release_blob("ref-1")
    child.release_blob("ref-9")  # one never sent: nothing to do
    assert held - os.fstat(memory).st_blocks * 512 >= 8 << 20
    assert sorted(child.blobs) == ["ref-0", "ref-2"]
    child.close_memory()
    assert child._memory is None
    assert bytes(child.blobs["ref-0"][:3]) == b"aaa" and bytes(child.blobs["ref-2"][-3:]) == b"ccc"


def test_wait_ready_returns_at_the_ready_mark_and_not_for_a_child_that_exits_or_stays_silent(tmp_path: Path, zygote: Zygote | None) -> None:
    ready = """
    import os, sys, time
    fd = int(sys.argv[sys.argv.index("--channel") + 1])
    os.write(fd, b'{"kind": "env"}\\n')
    time.sleep(0.4)
    os.write(fd, b'{"kind": "mark", "phase": "ready"}\\n')
    time.sleep(60)
    """
    # Timed from before the start: a forked child can be sleeping before ChildProcess returns.
    started = time.monotonic()
    child = ChildProcess(_child(tmp_path, ready), role="trusted", env=dict(os.environ), cwd=tmp_path, zygote=zygote)
    assert child.wait_ready(30) and 0.4 <= time.monotonic() - started < 20
    assert child.wait(0.1).time_of("mark") is not None
    (tmp_path / "gone").mkdir()
    gone = ChildProcess(_child(tmp_path / "gone", "import sys\nsys.exit(3)\n"), role="trusted", env=dict(os.environ),
                        cwd=tmp_path / "gone", zygote=zygote)
    started = time.monotonic()
    assert not gone.wait_ready(60) and time.monotonic() - started < 20
    assert gone.wait(5).returncode == 3
    (tmp_path / "silent").mkdir()
    silent = ChildProcess(_child(tmp_path / "silent", "import time\ntime.sleep(60)\n"), role="trusted",
                          env=dict(os.environ), cwd=tmp_path / "silent", zygote=zygote)
    started = time.monotonic()
    assert not silent.wait_ready(0.5) and 0.5 <= time.monotonic() - started < 20
    silent.wait(0.1)


def test_the_environment_is_scrubbed(tmp_path: Path, zygote: Zygote | None) -> None:
    env = scrubbed_environment({"PATH": os.environ["PATH"], "AWS_SECRET_ACCESS_KEY": "s3cr3t", "HF_TOKEN": "hf_x",
                                "GITHUB_TOKEN": "ghp"}, str(tmp_path))
    assert "AWS_SECRET_ACCESS_KEY" not in env and "HF_TOKEN" not in env and "GITHUB_TOKEN" not in env
    assert env["HOME"] == str(tmp_path) and env["TMPDIR"] == str(tmp_path)
    body = """
    import json, os, sys
    fd = int(sys.argv[sys.argv.index("--channel") + 1])
    os.write(fd, (json.dumps({"kind": "env", "keys": sorted(os.environ)}) + "\\n").encode())
    os.write(fd, b'{"kind": "done"}\\n')
    """
    report = run_child(_child(tmp_path, body), role="run", env=env, cwd=tmp_path, zygote=zygote, timeout_s=30)
    keys = report.first("env")["keys"]
    assert not any("SECRET" in k or "TOKEN" in k for k in keys)


def test_a_child_that_hangs_after_the_shape_probe_mark_is_cut_short(tmp_path: Path, zygote: Zygote | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.harness import parent

    monkeypatch.setattr(parent, "SHAPE_PROBE_TIMEOUT_S", 1.0)
    script = tmp_path / "child.py"
    script.write_text(
        "import os, sys, time\n"
        "fd = int(sys.argv[sys.argv.index('--channel') + 1])\n"
        "os.write(fd, b'{\"kind\": \"kernels\", \"which\": \"candidate\"}\\n{\"kind\": \"mark\", \"phase\": \"shape-probe\"}\\n')\n"
        "time.sleep(60)\n")
    started = time.monotonic()
    child = parent.ChildProcess([sys.executable, str(script)], role="run", env=dict(os.environ), cwd=tmp_path, zygote=zygote)
    report = child.wait(120.0)
    assert time.monotonic() - started < 10
    assert report.timed_out and report.died_in_shape_probe and report.ok


def test_on_gone_is_called_once_the_childs_whole_process_group_is_dead(tmp_path: Path) -> None:
    # The batch gives the GPU back at this point (harness 1.32): a process of the child's left running (here a
    # grandchild that outlives it) could still put work on the GPU, so it must be dead first.
    from verify.harness import parent

    script = tmp_path / "child.py"
    script.write_text(
        "import os, subprocess, sys\n"
        "fd = int(sys.argv[sys.argv.index('--channel') + 1])\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open('grandchild.pid', 'w').write(str(grandchild.pid))\n"
        "os.write(fd, b'{\"kind\": \"done\"}\\n')\n")
    child = parent.ChildProcess([sys.executable, str(script)], role="run", env=dict(os.environ), cwd=tmp_path)
    seen: list[tuple[int | None, str]] = []

    def on_gone() -> None:
        stat = Path(f"/proc/{(tmp_path / 'grandchild.pid').read_text()}/stat")
        # A killed grandchild is a zombie until init reaps it, or gone; SIGKILL alone leaves it running a moment.
        seen.append((child.process.poll(), stat.read_text().split()[2] if stat.exists() else "gone"))

    started = time.monotonic()
    report = child.wait(30.0, on_gone=on_gone)
    assert time.monotonic() - started < 20
    assert report.returncode == 0 and report.first("done") is not None
    assert len(seen) == 1 and seen[0][0] == 0 and seen[0][1] in ("Z", "X", "gone"), seen


class _SlowGrant:
    """A gate keeper that grants each request after ``seconds``, as one waiting for another kernel's timing."""

    def __init__(self, grants: Path, seconds: float) -> None:
        self.grants, self.seconds = grants, seconds

    def handle(self, message: dict) -> str:
        time.sleep(self.seconds)
        Path(f"{self.grants}-{message['n']}").touch()
        return "yield"


def test_waiting_for_the_gate_inside_the_shape_probe_does_not_count_against_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.harness import parent

    monkeypatch.setattr(parent, "SHAPE_PROBE_TIMEOUT_S", 1.0)
    grants = tmp_path / "grant"
    script = tmp_path / "child.py"
    # The probe's own work is 0.3 s; its yield point waits 2.5 s for the gate, longer than the probe's limit.
    script.write_text(
        "import os, sys, time\n"
        "fd = int(sys.argv[sys.argv.index('--channel') + 1])\n"
        "os.write(fd, b'{\"kind\": \"mark\", \"phase\": \"shape-probe\"}\\n')\n"
        "os.write(fd, b'{\"kind\": \"gate\", \"which\": \"yield\", \"n\": 1}\\n')\n"
        f"while not os.path.exists({str(grants)!r} + '-1'):\n"
        "    time.sleep(0.01)\n"
        "time.sleep(0.3)\n"
        "os.write(fd, b'{\"kind\": \"done\"}\\n')\n")
    child = parent.ChildProcess([sys.executable, str(script)], role="run", env=dict(os.environ), cwd=tmp_path,
                                keeper=_SlowGrant(grants, 2.5))  # type: ignore[arg-type]
    report = child.wait(120.0)
    assert not report.timed_out and report.returncode == 0 and report.first("done") is not None


PYTORCH_ONLY_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_a_profile_without_a_gpu_or_ncu_ends_with_a_report_and_no_child_left(tmp_path: Path) -> None:
    # The profile's children start before the GPU gate and wait for it; whatever fails, the parent must still
    # write a report and take its children down (the gate, the GPU and ncu are all missing here).
    import json
    import subprocess

    from verify.script import render_script, write_script

    if os.environ.get("CUDA_VISIBLE_DEVICES") is None and Path("/dev/nvidia0").exists():
        pytest.skip("a GPU is present: this checks the failure path")
    script = write_script(render_script(task_code=PYTORCH_ONLY_TASK, functional_code=None,
                                        kernel_code=PYTORCH_ONLY_TASK + "\nModelNew = Model\n", form="model-new",
                                        meta={"kernel_name": "relu", "task_name": "relu"}), tmp_path / "eval.py")
    report_path = tmp_path / "report.json"
    env = dict(os.environ, KA_GPU_GATE=str(tmp_path / "gpu.lock"), PATH=os.defpath)
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script), "--profile", "--json", "--report", str(report_path),
                           "--run-timeout", "120"], capture_output=True, text=True, env=env, timeout=300)
    report = json.loads(report_path.read_text())
    assert report["status"] == "error" and done.returncode != 0
    assert "ncu" in report["ncu_error"] and report["torch_profile_error"]
    assert [t["phase"] for t in report["timeline"]][:2] == ["compiled", "gpu-gate"]
    assert time.monotonic() - started < 200, "the children waiting at the gate were not left to time out"
