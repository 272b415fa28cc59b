"""The zygote: children forked from one process that imported torch, as isolated as exec'd ones."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from zygote_testing import DIGEST, KERNEL, TASK, host_script, start_host, with_repo

from verify.batch.zygotes import SlotZygote
from verify.harness.judge import ChildReport
from verify.harness.parent import ChildProcess, scrubbed_environment
from verify.harness.zygote import Zygote, ZygoteError, zygote_enabled

# What a child can see of its process: descriptors, session, folder, environment, threads.
FACTS = """
import ctypes, json, os, sys
facts = {"fds": {}, "argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ), "sid": os.getsid(0),
         "pid": os.getpid(), "stdin": os.readlink("/proc/self/fd/0"), "threads": len(os.listdir("/proc/self/task")),
         "numpy": "numpy" in sys.modules, "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)}
for fd in os.listdir("/proc/self/fd"):
    try:
        facts["fds"][fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
channel = int(sys.argv[sys.argv.index("--channel") + 1])
os.write(channel, (json.dumps({"kind": "facts", **facts}) + "\\n").encode())
print("to the log")
"""


def _environment(home: Path) -> dict[str, str]:
    return with_repo(scrubbed_environment(dict(os.environ), str(home)))


@pytest.fixture(scope="module", params=["own", "slot"])
def zygote(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A verification's own zygote, or its connection to a batch slot's (``verify.batch.zygotes``)."""
    folder = tmp_path_factory.mktemp("zygote")
    if request.param == "own":
        started = start_host(folder, scrubbed_environment(dict(os.environ), str(folder)))
        yield started
        started.close()
        return
    slot = SlotZygote(sys.executable, with_repo(dict(os.environ)), script=host_script(folder))
    connection = slot.connection()
    assert connection is not None
    connected = Zygote.connect(connection.detach(), digest=DIGEST, embedded={"kernel_code": "pass"})
    yield connected
    connected.close()
    slot.close()


def _script(folder: Path, body: str) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "child.py").write_text(textwrap.dedent(body))
    return [sys.executable, str(folder / "child.py")]


def _facts(folder: Path, zygote: Zygote | None) -> tuple[dict, str]:
    env = _environment(folder) | {"KA_PROBE": str(folder)}
    child = ChildProcess(_script(folder, FACTS), role="run", env=env, cwd=folder, blobs=True, blob_memory="copy",
                         zygote=zygote)
    report = child.wait(60)
    assert report.returncode == 0, report.log_tail
    assert report.started == (_forked(zygote) if zygote else "exec")
    return report.first("facts") or {}, report.log_tail


def _forked(zygote: Zygote) -> str:
    return "forked from the slot's zygote" if zygote.shared else "forked"


def _both_ways(folder: Path, zygote: Zygote, body: str) -> tuple[ChildReport, ChildReport]:
    """``body`` run as a child forked from ``zygote``, then as one started by exec."""
    def run(name: str, with_zygote: Zygote | None) -> ChildReport:
        return ChildProcess(_script(folder / name, body), role="run", env=_environment(folder), cwd=folder / name,
                            zygote=with_zygote).wait(60)

    return run("forked", zygote), run("exec", None)


def _kinds(fds: dict[str, str]) -> list[str]:
    """What each descriptor is (socket, pipe, memfd, file), without numbers or paths."""
    return sorted("memfd" if "memfd:" in t else t.split(":")[0] if not t.startswith("/") else "file" for t in fds.values())


def test_a_forked_child_sees_what_an_execd_one_sees(tmp_path: Path, zygote: Zygote) -> None:
    forked, log = _facts(tmp_path / "forked", zygote)
    execd, _ = _facts(tmp_path / "exec", None)
    assert forked["env"] == _environment(tmp_path / "forked") | {"KA_PROBE": str(tmp_path / "forked")}
    assert forked["cwd"] == str(tmp_path / "forked")
    assert forked["sid"] == forked["pid"], "a new session, so the whole group is killed afterwards"
    assert forked["stdin"] == "/dev/null" and "to the log" in log
    assert forked["fds"]["1"].endswith("run.log") and forked["fds"]["2"].endswith("run.log")
    # The channel, blob pipe and blob memory are there under the numbers its arguments name ...
    named = [forked["argv"][i + 1] for i, a in enumerate(forked["argv"]) if a in ("--channel", "--blobs", "--blob-memory")]
    assert len(named) == 3 and all(n in forked["fds"] for n in named)
    # ... and nothing else of the zygote's: no socket to ask it for more children, no other pipe.
    assert not [t for t in forked["fds"].values() if t.startswith("socket:")]
    assert _kinds(forked["fds"]) == _kinds(execd["fds"]), (forked["fds"], execd["fds"])
    if forked["numpy"] and execd["numpy"]:
        assert forked["threads"] == execd["threads"], "numpy's BLAS threads, lost in the fork, are started again"
    assert forked["dumpable"] == execd["dumpable"] == 1, "an undumpable zygote's child is made dumpable again"


@pytest.mark.parametrize(("body", "code"), [
    ("import sys\nsys.exit(3)\n", 3),
    ("raise ValueError('broken child')\n", 1),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", -signal.SIGKILL),
    ("pass\n", 0),
])
def test_exit_codes_come_back_as_from_exec(tmp_path: Path, zygote: Zygote, body: str, code: int) -> None:
    forked, execd = _both_ways(tmp_path, zygote, body)
    assert forked.started == _forked(zygote)
    assert forked.returncode == execd.returncode == code
    if code == 1:
        assert "ValueError: broken child" in forked.log_tail


def test_a_forked_childs_cpu_seconds_come_back(tmp_path: Path, zygote: Zygote) -> None:
    body = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass\n"
    forked, execd = _both_ways(tmp_path, zygote, body)
    assert forked.cpu_s is not None and 0.3 <= forked.cpu_s < 30
    assert execd.cpu_s is None
    # A slot's zygote serves other scripts too: its CPU is not this verification's.
    assert zygote.cpu_s() is None if zygote.shared else zygote.cpu_s() > 0


def test_a_zygote_that_cannot_start_leaves_the_children_to_exec(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise SystemExit('no torch here')\n")
    broken = Zygote.start([sys.executable, str(tmp_path / "broken.py")], env=_environment(tmp_path), cwd=tmp_path)
    try:
        with pytest.raises(ZygoteError, match="no torch here"):
            broken.spawn([sys.executable, "-c", "pass"], env={}, cwd=tmp_path, log_fd=1)
        report = ChildProcess(_script(tmp_path / "child", "print('ran')\n"), role="run", env=_environment(tmp_path),
                              cwd=tmp_path / "child", zygote=broken).wait(60)
    finally:
        broken.close()
    assert report.returncode == 0 and "ran" in report.log_tail
    assert report.started.startswith("exec (the zygote failed")


def test_forked_children_die_with_their_zygote(tmp_path: Path) -> None:
    own = start_host(tmp_path, scrubbed_environment(dict(os.environ), str(tmp_path)))
    child = ChildProcess(_script(tmp_path / "child", "import time\ntime.sleep(600)\n"), role="run",
                         env=_environment(tmp_path), cwd=tmp_path / "child", zygote=own)
    pid = child.process.pid
    assert child.report.started == "forked" and child.process.poll() is None
    os.kill(own.process.pid, signal.SIGKILL)
    started = time.monotonic()
    assert child.process.wait(30) == -signal.SIGKILL and time.monotonic() - started < 30
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    own.close()


def test_the_switch() -> None:
    assert zygote_enabled({}) and zygote_enabled({"KA_ZYGOTE": "1"}) and not zygote_enabled({"KA_ZYGOTE": "0"})


@pytest.mark.slow
def test_the_eval_script_forks_its_children_and_keeps_every_verdict(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.runner import VerifyOptions, verify_code

    kernel = KERNEL.replace("PROBE", repr(str(tmp_path)))
    reports = {}
    for switch in ("1", "0"):
        monkeypatch.setenv("KA_ZYGOTE", switch)
        reports[switch] = verify_code(TASK, kernel, "model-new", VerifyOptions(trials=2, device="cpu",
                                                                               target_seconds=0.05))
    forked, execd = reports["1"], reports["0"]
    assert forked["children"] == {"trusted": "forked", "compile": "forked", "run": "forked"}
    assert execd["children"] == {"trusted": "exec", "compile": "exec", "run": "exec"}
    assert forked["cpu_s"]["zygote"] > 0.5 and all(forked["cpu_s"][r] > 0 for r in ("parent", "trusted", "compile", "run"))
    assert execd["cpu_s"]["zygote"] is None and execd["cpu_s"]["run"] is None and execd["cpu_s"]["parent"] > 0.5
    assert forked["status"] == execd["status"]
    assert {k: v["verdict"] for k, v in forked["checks"].items()} == {k: v["verdict"] for k, v in execd["checks"].items()}
    assert forked["checks"]["background-threads"]["evidence"] == execd["checks"]["background-threads"]["evidence"]
    seen = [json.loads(p.read_text()) for p in tmp_path.glob("fds-*.json")]
    assert len(seen) >= 4, "the compile and run children of both verifications imported the kernel"
    assert not [t for fds in seen for t in fds.values() if t.startswith("socket:")]


JUDGE = """
import ctypes, json, os
fd = int(os.environ["KA_TEST_FD"])
print(json.dumps({"dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), "fd": os.readlink(f"/proc/self/fd/{fd}")}))
"""


@pytest.mark.parametrize("judge", [True, False])
def test_a_judge_stays_undumpable_and_finds_a_descriptor_by_its_variable(tmp_path: Path, zygote: Zygote,
                                                                         judge: bool) -> None:
    read, write = os.pipe()
    log = tmp_path / "judge.log"
    try:
        with open(log, "wb") as out:
            child = zygote.spawn(_script(tmp_path, JUDGE), env=_environment(tmp_path), cwd=tmp_path,
                                 log_fd=out.fileno(), fd_env={"KA_TEST_FD": write}, judge=judge)
        assert child.wait(60) == 0, log.read_text()
    finally:
        os.close(read)
        os.close(write)
    facts = json.loads(log.read_text().strip().splitlines()[-1])
    # A script's parent (or a slot's zygote) is never dumpable: no same-user ptrace between fork and its main.
    assert facts["dumpable"] == (0 if judge else 1)
    assert facts["fd"].startswith("pipe:")
