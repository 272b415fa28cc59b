"""The parent: runs the static scan, spawns the trusted and candidate children, collects, judges, reports.

Each child is this same script run with ``--role``, forked from the verification's zygote (one more copy,
``--role zygote``, that imported torch once: ``verify.harness.zygote``) or, without one, started again; it
gets a scrubbed environment (an allowlist: no tokens, no credentials), its own temporary folder as home and
cwd, a new session (so the whole process group is killed afterwards, background helpers included), a
timeout, and one end of a pipe as its result channel. The references are loaded into the parent's memory
and their files deleted before the candidate starts; the parent makes itself non-dumpable so a same-user
process cannot read its memory through /proc or ptrace.

Example:
    >>> scrubbed_environment({"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "x"}, "/tmp/h")["PATH"]
    '/bin'
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verify.harness.common import (
    HARNESS_VERSION,
    die_with_parent,
    make_non_dumpable,
    punch_hole,
    read_blobs,
    wait_until,
)
from verify.harness.frames import unpack_groups
from verify.harness.fused import FUSED_USED, warm_fused
from verify.harness.gate import GateKeeper, GpuGate, held_pieces
from verify.harness.judge import (
    TOLERANCE,
    ChildReport,
    Evidence,
    init_probe,
    judge,
    overall_status,
    properties,
    reference_is_stateful,
    shape_probe,
    trivial_gap_allowance,
)
from verify.harness.memory import MemoryLedger, MemoryPlan, TrialSize
from verify.harness.report import render_text
from verify.harness.roles import JUDGED_FILE, STATE_PROBE_BLOBS
from verify.harness.signals import new_key, send_signal
from verify.harness.static import scan_source, static_verdicts
from verify.harness.task import init_variant, shape_variant
from verify.harness.tensors import DISTRIBUTIONS
from verify.harness.zygote import ZYGOTE_FD_ENV, Zygote, ZygoteChild, ZygoteError, serve, zygote_enabled

SHAPE_PROBE_TIMEOUT_S = 60.0
# The AI CUDA Engineer Archive's Nsight Compute configuration (robust-kbench: -c 5 -s 6, these sections).
NCU_SECTIONS: tuple[str, ...] = ("Occupancy", "WarpStateStats", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis")

# Environment variables a child keeps; everything else (tokens, keys, proxies, PYTHONPATH hooks) is dropped.
ENV_ALLOWLIST: tuple[str, ...] = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CC", "CXX",
    "MAX_JOBS", "TORCH_CUDA_ARCH_LIST", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS", "PYTHONPATH", "VIRTUAL_ENV", "CCACHE_DIR", "CCACHE_MAXSIZE", "TORCH_NO_COMPILER_WRAPPER",
    "KA_PCH_DIR", "KA_PCH_AFTER",
)


def scrubbed_environment(source: dict[str, str], home: str) -> dict[str, str]:
    """The allowlisted variables of ``source``, with HOME, TMPDIR and caches pointed into ``home``."""
    env = {k: v for k, v in source.items() if k in ENV_ALLOWLIST}
    env.update(
        HOME=home, TMPDIR=home, TORCH_EXTENSIONS_DIR=str(Path(home) / "torch_extensions"),
        TRITON_CACHE_DIR=str(Path(home) / "triton"), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1", TORCHINDUCTOR_CACHE_DIR=str(Path(home) / "inductor"),
    )
    return env


def candidate_environment(source: dict[str, str], home: str, build_dir: str | None) -> dict[str, str]:
    """A candidate child's environment: scrubbed, with the kernel's builds in ``build_dir`` when given.

    Besides torch's extension builds, ``torch.compile``'s (inductor's and Triton's caches) go there: a
    candidate that compiles on its first call does so inside the GPU gate (tens of seconds), and a later
    verification of the same build then loads what it compiled. The folder is this kernel's own build entry,
    as its extension build already is, so no other kernel reads what it wrote.

    Example:
        >>> env = candidate_environment({}, "/tmp/h", "/c/e")
        >>> env["TORCH_EXTENSIONS_DIR"], env["TORCHINDUCTOR_CACHE_DIR"], env["TRITON_CACHE_DIR"]
        ('/c/e/torch_extensions', '/c/e/inductor', '/c/e/triton')
    """
    env = scrubbed_environment(source, home)
    if build_dir:
        entry = Path(build_dir).resolve()
        env.update(TORCH_EXTENSIONS_DIR=str(entry / "torch_extensions"), TORCHINDUCTOR_CACHE_DIR=str(entry / "inductor"),
                   TRITON_CACHE_DIR=str(entry / "triton"))
    return env


GROUP_GONE_S = 5.0
"""How long ``ChildProcess.wait`` waits for a killed child's process group to die before it gives the GPU back early;
past it the gate is given back only once the child's output is collected, as before harness 1.32."""


def group_gone(pgid: int, wait_s: float = GROUP_GONE_S, poll_s: float = 0.005) -> bool:
    """Whether every process of group ``pgid`` is dead (gone, or a zombie, which runs nothing) within ``wait_s``.

    A process SIGKILLed a moment ago may still be running its way out of the kernel, so this looks, not assumes.

    Example:
        >>> import os
        >>> group_gone(os.getpgrp(), wait_s=0.05)
        False
    """
    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                state, _, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
                if int(group) == pgid and state not in ("Z", "X"):
                    return True
        return False

    return wait_until(lambda: not alive(), wait_s, poll_s=poll_s)


def _lock_within(fd: int, wait_s: float, poll_s: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, trying for at most ``wait_s`` seconds; whether it was taken.

    Example:
        >>> import os, tempfile
        >>> fd = os.open(os.path.join(tempfile.mkdtemp(), "x.lock"), os.O_RDWR | os.O_CREAT)
        >>> _lock_within(fd, 0.0, 0.01)
        True
    """
    import fcntl

    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(poll_s)


class BaselineCache:
    """A task's baselines measured once per batch and GPU, then reused by every kernel of that task.

    ``KA_BASELINE_CACHE`` names a folder; the batch gives each GPU its own. An entry holds what the trusted
    child measured of the reference: the task screen, the reference's kernels, and the timed overhead,
    eager, compile and CUDA-graph series. It also holds the seeds of their timed inputs and of the
    reference's weights, so every kernel's own timed series runs on the same inputs and weights as the
    baselines it is compared with (the timed outputs' fingerprints must match). It is keyed by the task's
    code, the form, the harness version, the device and the timing options. None of it is secret, but a
    candidate runs as the same user and could rewrite the file to move other kernels' baselines: each entry
    carries an HMAC under ``secret`` (the batch's ``KA_BASELINE_KEY``, which no child's environment holds),
    and an entry that does not verify is measured again. The correctness references are never cached: they
    stay in this process's memory, as in a single verification.

    Example:
        >>> import os, tempfile
        >>> cache = BaselineCache(os.path.join(tempfile.mkdtemp(), "baselines"), ["task", "model-new"], secret="k")
        >>> cache.load() is None
        True
        >>> cache.store({"seed_base": 5, "template_seed": 6, "weight_seed": 7}, [{"kind": "timing", "which": "eager"}])
        >>> cache.load()["seeds"]
        {'seed_base': 5, 'template_seed': 6, 'weight_seed': 7}
    """

    WAIT_S = 600.0
    """The longest a verification waits for another one measuring the same task's baselines."""

    def __init__(self, folder: str, key_parts: list[Any], *, secret: str) -> None:
        self.key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()
        self.path = Path(folder) / f"{self.key}.json"
        self._secret = secret.encode()
        self._claim: int | None = None

    def load_or_claim(self, wait_s: float | None = None) -> dict[str, Any] | None:
        """The entry; or, when there is none, None with this verification holding the key's lock until it
        ``store``s the entry (or exits, on any failure).

        A verification that finds the key locked waits for that entry instead of measuring the same baselines
        beside it: on the H100 the four slots of two GPUs started on one task at once, and 64 of 83 kernels
        measured their task's baselines (21.6 s of GPU gate each, 8.6 s when reused). The lock comes before the
        GPU gate in every verification, so no two wait on each other. A lock held past ``wait_s`` (default
        ``WAIT_S``; a candidate could hold the file) only costs the wait: the verification then measures.
        """
        entry = self.load()
        if entry is not None:
            return entry
        fd = self._lock_file()
        if not _lock_within(fd, self.WAIT_S if wait_s is None else wait_s, 0.2):
            os.close(fd)
            return self.load()
        entry = self.load()
        if entry is not None:
            os.close(fd)
            return entry
        self._claim = fd
        return None

    def _lock_file(self) -> int:
        """The key's lock file (beside its entry), opened; its folder made first."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)

    def release(self) -> None:
        """Let verifications waiting for this key go on (they measure if no entry was stored); idempotent."""
        if self._claim is not None:
            os.close(self._claim)
            self._claim = None

    def _mac(self, payload: str) -> str:
        import hmac

        return hmac.new(self._secret, f"{self.key}\n{payload}".encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def picked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The trusted child's messages that are baselines (not references, not the environment)."""
        return [m for m in messages if m.get("kind") in ("screen", "timing")
                or (m.get("kind") == "kernels" and m.get("which") == "reference")
                or (m.get("kind") == "note" and m.get("which") in ("compile", "cuda-graph"))]

    def load(self) -> dict[str, Any] | None:
        """The entry, or None when there is none or it cannot be read."""
        import hmac

        try:
            signed = json.loads(self.path.read_text())
            if not hmac.compare_digest(str(signed["mac"]), self._mac(str(signed["payload"]))):
                return None
            entry = json.loads(signed["payload"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return entry if isinstance(entry, dict) and isinstance(entry.get("messages"), list) else None

    def store(self, seeds: dict[str, int], messages: list[dict[str, Any]]) -> None:
        """Write the entry whole (a temporary file renamed into place), first writer or last, same content."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        payload = json.dumps({"seeds": seeds, "messages": messages})
        temporary.write_text(json.dumps({"payload": payload, "mac": self._mac(payload)}))
        os.replace(temporary, self.path)
        self.release()


class OverheadCache(BaselineCache):
    """The trivial kernel's timed series, measured once per batch and GPU and reused by every task on that GPU.

    The overhead series times ``torch.zeros(1).add_(1)``: what it measures is the GPU's, the host's and the
    harness's, not the task's, yet each task's first kernel used to time its 400 calls with the GPU alone, a fifth
    of a CUDA-L1 kernel's GPU-alone time (session 26). It lives beside the task entries (``KA_BASELINE_CACHE``,
    the same HMAC under ``KA_BASELINE_KEY``), keyed by the harness version, the device and the timing options. It
    is never waited for: the first kernels on a GPU each measure it, and the series that allows the least stays
    (``judge.trivial_gap_allowance``). A larger allowance would loosen the timing check for every later kernel on
    the GPU, and a candidate's leftover process could load the host while its own trusted child measures. The run
    child's own trivial series before the candidate's import is still timed for every kernel, and the timing check
    compares the candidate with the larger of the two (``judge.wall_event_gap``).

    Example:
        >>> import os, tempfile
        >>> cache = OverheadCache(os.path.join(tempfile.mkdtemp(), "baselines"), ["1.17", "cuda"], secret="k")
        >>> cache.load() is None
        True
        >>> cache.store({}, [{"kind": "timing", "which": "overhead"}, {"kind": "timing", "which": "eager"}])
        >>> [m["which"] for m in cache.load()["messages"]]
        ['overhead']
    """

    LOCK_WAIT_S = 5.0
    """The longest a verification waits to compare its series with the entry (a candidate could hold the lock)."""

    def __init__(self, folder: str, key_parts: list[Any], *, secret: str) -> None:
        super().__init__(folder, ["trivial-kernel overhead", *key_parts], secret=secret)

    @staticmethod
    def picked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The trusted child's overhead series, the only message this entry holds."""
        return [m for m in messages if m.get("kind") == "timing" and m.get("which") == "overhead"][:1]

    def store(self, seeds: dict[str, int], messages: list[dict[str, Any]]) -> None:
        """Write the overhead series of ``messages`` unless the entry's allows less (nothing when it has none)."""
        picked = self.picked(messages)
        if not picked:
            return
        fd = self._lock_file()
        try:
            if not _lock_within(fd, self.LOCK_WAIT_S, 0.05):
                return
            entry = self.load()
            allows = trivial_gap_allowance(picked[0].get("result"))
            if entry is None or allows < trivial_gap_allowance((entry["messages"][:1] or [{}])[0].get("result")):
                super().store(seeds, picked)
        finally:
            os.close(fd)


class ChildProcess:
    """One child started now and collected later: its channel is read by a thread with receive times.

    The child gets the pipe's write end by number (``--channel FD``); the parent keeps only the read end.
    On timeout, and after a normal exit too, the child's whole process group is killed. With a ``keeper``
    (``verify.harness.gate.GateKeeper``) the reading thread answers the child's gate requests as they come.
    With a ``zygote`` the child is forked from it (``verify.harness.zygote``); if the zygote cannot, it is
    started by exec, and its report's ``started`` says why. With a ``planner`` the reading thread hands it the
    child's ``sized`` message (``TrialPlanner.handle``); like a gate request, the wait is not the child's time.
    ``on_blob(name, nbytes)`` hears of each payload kept as it arrives (``read_blobs``'s ``held``).
    """

    def __init__(self, argv: list[str], *, role: str, env: dict[str, str], cwd: str | os.PathLike[str],
                 channel: bool = True, blobs: bool = False, blob_memory: str | None = None,
                 keeper: GateKeeper | None = None, zygote: Zygote | None = None,
                 planner: Callable[[dict[str, Any]], Any] | None = None,
                 on_blob: Callable[[str, int], None] | None = None) -> None:
        self.report = ChildReport(role=role)
        self._on_blob = on_blob
        self._keeper = keeper
        self._planner = planner
        self._paused_s = 0.0
        self._pausing_since: float | None = None
        self.blobs: dict[str, Any] = {}
        self.skip_blob: Callable[[str], bool] | None = None
        self._places: dict[str, tuple[int, int]] = {}
        self._log_path = Path(cwd) / f"{role}.log"
        self._chunks: list[tuple[float, bytes]] = []
        self._probe_started: float | None = None
        self._paused_at_probe = 0.0
        self.ready_at: float | None = None
        self.overhead_ready_at: float | None = None
        read_fd, write_fd = os.pipe() if channel else (None, None)
        args = list(argv)
        fd_args: dict[int, int] = {}
        if write_fd is not None:
            args += ["--channel", str(write_fd)]
            fd_args[len(args) - 1] = write_fd
        blob_read, blob_write = os.pipe() if blobs else (None, None)
        if blob_write is not None:
            args += ["--blobs", str(blob_write)]
            fd_args[len(args) - 1] = blob_write
        # "map": the parent maps the payloads (a trusted child's references); "copy": it copies each one out
        # as its frame arrives (a candidate's outputs, which the candidate could rewrite or truncate later).
        self._copy_blobs = blob_memory == "copy"
        self._memory = (os.memfd_create("ka-blobs", os.MFD_CLOEXEC)
                        if blobs and blob_memory in ("map", "copy") and hasattr(os, "memfd_create") else None)
        if self._memory is not None:
            args += ["--blob-memory", str(self._memory)]
            fd_args[len(args) - 1] = self._memory
        self._started = time.monotonic()
        self._log = open(self._log_path, "wb")  # noqa: SIM115 - closed in wait()
        forked: ZygoteChild | None = None
        if zygote is not None:
            try:
                forked = zygote.spawn(args, env=env, cwd=cwd, log_fd=self._log.fileno(), fds=fd_args)
                self.report.started = "forked from the slot's zygote" if zygote.shared else "forked"
            except ZygoteError as error:
                self.report.started = f"exec (the zygote failed: {error})"[:500]
        self.process: subprocess.Popen[bytes] | ZygoteChild = forked or subprocess.Popen(
            args, env=env, cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            pass_fds=tuple(fd_args.values()), start_new_session=True, close_fds=True,
        )
        self._thread: threading.Thread | None = None
        self._blob_thread: threading.Thread | None = None
        if write_fd is not None and read_fd is not None:
            os.close(write_fd)
            self._thread = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
            self._thread.start()
        if blob_write is not None and blob_read is not None:
            os.close(blob_write)
            self._blob_thread = threading.Thread(target=self._read_blobs, args=(blob_read,), daemon=True)
            self._blob_thread.start()

    def _read_blobs(self, read_fd: int) -> None:
        try:
            with os.fdopen(read_fd, "rb", buffering=0) as stream:
                self.blobs = read_blobs(stream, self._memory, copy=self._copy_blobs,
                                        skip=lambda name: self.skip_blob is not None and self.skip_blob(name),
                                        places=self._places, held=self._on_blob)
        finally:
            # Mapped payloads keep the memory file open for release_blob; copied ones need it no more.
            if self._memory is not None and (self._copy_blobs or not self._places):
                self.close_memory()

    def release_blob(self, name: str) -> None:
        """Forget payload ``name`` and give a mapped one's pages back: nothing may read its tensors after this."""
        payload = self.blobs.pop(name, None)
        place = self._places.pop(name, None)
        with contextlib.suppress(BufferError, AttributeError):
            payload.close()
        if place is not None and self._memory is not None:
            punch_hole(self._memory, *place)

    def close_memory(self) -> None:
        """Close the memory file: mapped payloads stay readable, and their pages stay until they are unmapped."""
        if self._memory is not None:
            os.close(self._memory)
            self._memory = None

    def _read(self, read_fd: int) -> None:
        buffer = b""
        with os.fdopen(read_fd, "rb", buffering=0) as stream:
            while True:
                data = stream.read(65536)
                if not data:
                    break
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    self._chunks.append((time.monotonic(), line + b"\n"))
                    if self._probe_started is None and b'"mark"' in line and (b'"shape-probe"' in line
                                                                             or b'"init-probe"' in line):
                        self._probe_started = time.monotonic()
                        self._paused_at_probe = self.paused_s
                    if self.ready_at is None and b'"mark"' in line and b'"ready"' in line:
                        self.ready_at = time.monotonic()
                    if self.overhead_ready_at is None and b'"mark"' in line and b'"overhead-ready"' in line:
                        self.overhead_ready_at = time.monotonic()
                    if self._keeper is not None and b'"gate"' in line:
                        self._answer(self._keeper.handle, line)
                    if self._planner is not None and b'"sized"' in line:
                        self._answer(self._planner, line)
        if buffer:
            self._chunks.append((time.monotonic(), buffer))

    def _answer(self, handle: Callable[[dict[str, Any]], Any], line: bytes) -> None:
        from verify.harness.common import read_messages

        self._pausing_since = time.monotonic()
        try:
            for message in read_messages(line)[0]:
                handle(message)
        finally:
            self._paused_s += time.monotonic() - self._pausing_since
            self._pausing_since = None

    @property
    def paused_s(self) -> float:
        """Seconds this child has waited for its parent to answer gate requests or its ``sized`` message, the
        current wait included.

        Waiting for another verification's GPU work or memory is not this child's time: it extends the child's
        limit.
        """
        since = self._pausing_since
        return self._paused_s + (time.monotonic() - since if since is not None else 0.0)

    def freeze(self, frozen: bool) -> None:
        """Stop (or continue) the child's whole process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGSTOP if frozen else signal.SIGCONT)

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the child has sent its ``ready`` mark; False if it exited or ``timeout_s`` passed first."""
        wait_until(lambda: self.ready_at is not None or self.process.poll() is not None, timeout_s)
        return self.ready_at is not None

    def restart_clock(self) -> None:
        """Count the child's time limit (and its ``seconds``) from now."""
        self._started = time.monotonic()

    def wait(self, timeout_s: float, on_gone: Callable[[], None] | None = None) -> ChildReport:
        """Wait for the child (killing its process group at the timeout) and return what it reported.

        ``on_gone`` is called once the child's whole process group is dead (``group_gone``), before the reading
        threads finish copying out what it sent: from then on nothing of the child can run on the GPU. It is not
        called when a process of the group outlives ``GROUP_GONE_S``.
        """
        from verify.harness.common import read_messages

        report = self.report
        least = time.monotonic() + 0.1
        try:
            while True:
                now = time.monotonic()
                deadline = max(least, self._started + timeout_s + self.paused_s)
                if self._probe_started is not None:
                    # The shape probe is one call; a kernel that hangs at other shapes must not cost the
                    # whole run timeout. Waiting for the gate (a yield point) is not the probe's time.
                    deadline = min(deadline, self._probe_started + SHAPE_PROBE_TIMEOUT_S
                                   + self.paused_s - self._paused_at_probe)
                if now >= deadline:
                    raise subprocess.TimeoutExpired(self.process.args, timeout_s)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    report.returncode = self.process.wait(timeout=min(0.5, deadline - now))
                    report.exited_at = time.monotonic()
                    break
        except subprocess.TimeoutExpired:
            report.timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            if report.timed_out:
                report.returncode = self.process.wait()
            self._log.close()
        if on_gone is not None and group_gone(self.process.pid):
            on_gone()
        for thread in (self._thread, self._blob_thread):
            if thread:
                thread.join(timeout=30)
        report.seconds = time.monotonic() - self._started
        # Known for a forked child only: its zygote waits for it with wait4 (Popen keeps no resource usage).
        report.cpu_s = getattr(self.process, "cpu_s", None)
        for at, line in self._chunks:
            messages, rejects = read_messages(line)
            report.messages.extend(messages)
            report.received.extend([at] * len(messages))
            report.rejects.extend(rejects)
        report.log_tail = self._log_path.read_text(errors="replace")[-8000:]
        return report


def run_child(
    argv: list[str],
    *,
    role: str,
    env: dict[str, str],
    cwd: str | os.PathLike[str],
    timeout_s: float,
    channel: bool = True,
    zygote: Zygote | None = None,
) -> ChildReport:
    """Run one child to completion or its timeout; its messages, exit status and log tail."""
    return ChildProcess(argv, role=role, env=env, cwd=cwd, channel=channel, zygote=zygote).wait(timeout_s)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=(
            "Verify one GPU kernel against its PyTorch reference: correctness over fresh seeds and input "
            "distributions vs float64, every anti-reward-hack check, and timing against eager and "
            "torch.compile measured the same way. WARNING: this runs the kernel's code, which is untrusted; "
            "it runs in child processes with a scrubbed environment, but on your machine and as your user. "
            "Run it in a container or VM you do not mind losing."
        ),
    )
    parser.add_argument("--trials", type=int, default=5, help="correctness trials (fresh seeds; distributions cycle)")
    parser.add_argument("--json", action="store_true", help="print only the JSON report")
    parser.add_argument("--report", help="also write the JSON report to this file")
    parser.add_argument("--static-only", action="store_true", help="only the checks that need no GPU (nothing runs)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cuda (default); cpu only exercises the harness on CPU-only candidates, without timing")
    parser.add_argument("--compile-timeout", type=float, default=900.0, help="seconds for building the kernel")
    parser.add_argument("--run-timeout", type=float, default=600.0, help="seconds for the candidate's run step")
    parser.add_argument("--trusted-timeout", type=float, default=900.0, help="seconds for references and baselines")
    parser.add_argument("--target-seconds", type=float, default=1.0, help="about how long each timed series runs")
    parser.add_argument("--no-compile-baseline", action="store_true", help="skip the torch.compile baseline")
    parser.add_argument("--sanitize", action="store_true",
                        help="also run one trial under compute-sanitizer memcheck (slow; catches out-of-bounds writes)")
    parser.add_argument("--no-shape-probe", dest="shape_probe", action="store_false",
                        help="do not also run the kernel once at other input shapes (a batch-like size halved)")
    parser.add_argument("--build-dir",
                        help="build the kernel in this folder (a build-cache entry) instead of a fresh one; "
                             "an entry already built is reused by ninja without recompiling")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (printed) for inspection")
    parser.add_argument("--seed", type=int, help="fix the seeds (default: fresh random seeds every run)")
    parser.add_argument("--profile", action="store_true",
                        help="profile instead of verifying: torch.profiler events and Nsight Compute (ncu) metrics")
    parser.add_argument("--ncu-sections", default=",".join(NCU_SECTIONS),
                        help="comma-separated ncu sections (default: the archive's four)")
    parser.add_argument("--no-ncu", action="store_true", help="with --profile: skip Nsight Compute")
    parser.add_argument("--ncu-timeout", type=float, default=900.0, help="seconds for the ncu run")
    parser.add_argument("--role", choices=("trusted", "compile", "run", "profile", "zygote"), help=argparse.SUPPRESS)
    parser.add_argument("--slot", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--slot-seed", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--channel", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--blobs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--blob-memory", type=int, help=argparse.SUPPRESS)
    return parser


def _trials(n: int, rng: secrets.SystemRandom | Any) -> list[dict[str, Any]]:
    return [{"index": i, "seed": rng.randrange(1, 2**31), "distribution": DISTRIBUTIONS[i % len(DISTRIBUTIONS)]}
            for i in range(max(1, n))]


def _load_blob_list(blob: bytearray | None) -> list[Any] | None:
    """A list of tensors (None where not a tensor) a child sent as one blob; None when absent or unreadable."""
    import torch

    groups = unpack_groups(torch, blob)
    return groups.get("outputs") if groups is not None else None


def _load_references(blob: bytearray | None) -> dict[str, Any] | None:
    """The ``ref64``/``ref32`` lists the trusted child sent as one blob; None when absent or unreadable."""
    import torch

    groups = unpack_groups(torch, blob)
    if groups is None or groups.get("ref32") is None:
        return None
    return {"ref64": groups.get("ref64"), "ref32": groups["ref32"]}


def _load_state_probe(blobs: dict[str, Any]) -> dict[str, Any] | None:
    """The statefulness probe's four output lists (``first``, ``second``, ``ref_x``, ``ref_changed``), each from its
    blob (``STATE_PROBE_BLOBS``); None when one is absent or unreadable."""
    probe = {key: _load_blob_list(blobs.get(name)) for key, name in STATE_PROBE_BLOBS.items()}
    return None if any(v is None for v in probe.values()) else probe


def _load_outputs(blobs: dict[str, bytearray], report: ChildReport) -> dict[tuple[int, str], list[Any]]:
    outputs: dict[tuple[int, str], list[Any]] = {}
    for message in report.all("trial"):
        loaded = _load_blob_list(blobs.get(str(message.get("blob"))))
        if loaded is not None:
            outputs[(int(message["index"]), str(message["variant"]))] = loaded
    return outputs


def static_report(embedded: dict[str, Any]) -> dict[str, Any]:
    """The report of the static checks alone (no torch, no GPU)."""
    findings = [f.as_dict() for f in scan_source(embedded["kernel_code"], embedded["form"])]
    ev = Evidence(form=embedded["form"], kernel_code=embedded["kernel_code"], static=findings, trials=[])
    checks, _ = judge(ev)
    checks = {n: c for n, c in checks.items() if c["verdict"] != "skip" or n in static_verdicts(findings)}
    return _base_report(embedded, "static-only") | {
        "status": "static-only",
        "checks": checks,
        "static": findings,
        "properties": properties(checks, findings),
    }


def _base_report(embedded: dict[str, Any], mode: str) -> dict[str, Any]:
    meta = embedded.get("meta") or {}
    return {
        "harness_version": HARNESS_VERSION,
        "mode": mode,
        "kernel": {"id": meta.get("kernel_id"), "name": meta.get("kernel_name"), "source": meta.get("source"),
                   "form": embedded["form"]},
        "task": {"id": meta.get("task_id"), "name": meta.get("task_name"), "level": meta.get("level")},
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


HOST_GATE_ENV, HOST_GATE_MODE_ENV = "KA_HOST_GATE", "KA_HOST_GATE_MODE"
"""The batch's lock file for the whole host (``verify.batch.workers.gate_environment``), and this script's mode on it:
``shared`` (the default) beside the host's other verifications, ``exclusive`` alone on the host."""


def full_report(args: argparse.Namespace, embedded: dict[str, Any], script: str) -> dict[str, Any]:
    """Run every step and judge; the report dict.

    Behind a shared gate (``KA_GPU_GATE_MODE=shared``) a verification that ran out of GPU memory (another
    verification's untimed work held some of it), failing or losing a baseline, or whose child was killed by the
    host (``killed_by_host``), runs once more with the GPU alone, so sharing never decides a verdict; ``gate`` in
    the report says so. In a batch every verification holds the host's gate (``KA_HOST_GATE``) beside the others
    throughout; a rerun for a child the host killed (with the GPU shared or not) holds it alone, for the host's
    memory was what ran out: in
    session 33 two kernels with outputs of 660M and 1.07 billion elements computed their references at once, and
    the rerun of the one killed, with the GPU alone, was killed again beside the other's judge.
    """
    make_non_dumpable()
    gate = GpuGate.from_environment()
    host = GpuGate(os.environ.get(HOST_GATE_ENV) or None, os.environ.get(HOST_GATE_MODE_ENV) or "shared")
    try:
        host.acquire()
        report = _verify(args, embedded, script, gate)
        killed = killed_by_host(report) if gate.sharing or (host.path and host.mode != "exclusive") else None
        why = ("out of GPU memory while sharing the GPU" if gate.sharing and out_of_memory(report) else
               f"the {killed} child was killed by SIGKILL while sharing the {'GPU' if gate.sharing else 'host'}"
               if killed else None)
        if why:
            if killed and host.path and host.mode != "exclusive":
                host.release()
                host = GpuGate(host.path, "exclusive")
                host.acquire()
            report = _verify(args, embedded, script, GpuGate(gate.path, "exclusive", gate.seats))
            report["gate"] = {"mode": "exclusive", "rerun": why} | ({"host": "alone"} if host.held == "alone" else {})
        elif host.held == "alone":
            report.setdefault("gate", {})["host"] = "alone"
        return report
    finally:
        host.release()


def killed_by_host(report: dict[str, Any]) -> str | None:
    """The child that a ``SIGKILL`` the harness did not send ended, in a report that neither passed nor was flagged.

    No step of the harness kills a child with ``SIGKILL`` but at its timeout, which the report counts apart. On a
    host that a batch loads it is most often the kernel's out-of-memory killer, which picks the largest process: in
    session 31 the trusted child of CUDA-L1's level 2 task 34 (outputs of 1.07 billion elements), with another
    kernel's judge beside it. Sharing must not decide a verdict, so such a verification runs once more, alone.

    Example:
        >>> killed_by_host({"status": "error", "killed": {"trusted": 9}})
        'trusted'
        >>> killed_by_host({"status": "failed", "killed": {"run": 11}}) is None
        True
    """
    if report.get("status") in ("passed", "flagged"):
        return None
    return next((role for role, number in (report.get("killed") or {}).items() if number == signal.SIGKILL), None)


OUT_OF_MEMORY = ("CUDA out of memory", "OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED", "cudaErrorMemoryAllocation")
"""What a child's log or report says when the GPU ran out of memory."""


def out_of_memory(report: dict[str, Any]) -> bool:
    """Whether a report's verification failed, or lost a baseline, because the GPU ran out of memory.

    Example:
        >>> out_of_memory({"status": "failed", "log": "torch.OutOfMemoryError: CUDA out of memory."})
        True
        >>> out_of_memory({"status": "passed", "log": "CUDA out of memory"})
        False
        >>> out_of_memory({"status": "passed", "notes": ["CUDA-graph baseline failed: OutOfMemoryError: ..."]})
        True
    """
    if any(marker in json.dumps(report.get("notes") or [], default=str) for marker in OUT_OF_MEMORY):
        return True
    if report.get("status") in ("passed", "flagged"):
        return False
    text = json.dumps({k: report.get(k) for k in ("error", "log", "checks")}, default=str)
    return any(marker in text for marker in OUT_OF_MEMORY)


def _zygote(embedded: dict[str, Any], script: str, folder: Path) -> Zygote | None:
    """The zygote this verification's children are forked from: the batch slot's when the script inherited a
    connection to it, else its own, started now (its torch import overlaps everything after); None with
    ``KA_ZYGOTE=0``. Neither holds a seed or a secret."""
    inherited = os.environ.pop(ZYGOTE_FD_ENV, None)
    if not zygote_enabled(os.environ):
        return None
    if inherited and embedded.get("harness_digest"):
        with contextlib.suppress(OSError, ValueError):
            return Zygote.connect(int(inherited), digest=embedded["harness_digest"], embedded=embedded)
    return Zygote.start([sys.executable, script], env=scrubbed_environment(dict(os.environ), str(folder)), cwd=folder)


def _verify(args: argparse.Namespace, embedded: dict[str, Any], script: str, gate: GpuGate) -> dict[str, Any]:
    findings = [f.as_dict() for f in scan_source(embedded["kernel_code"], embedded["form"])]
    report = _base_report(embedded, "full")
    rng: Any = secrets.SystemRandom() if args.seed is None else __import__("random").Random(args.seed)
    trials = _trials(args.trials, rng)
    root = Path(tempfile.mkdtemp(prefix="ka-verify-"))
    trusted_dir, shared_dir, cand_dir, zygote_dir = root / "trusted", root / "shared", root / "candidate", root / "zygote"
    for folder in (trusted_dir, shared_dir, cand_dir, zygote_dir):
        folder.mkdir(mode=0o700)
    zygote = _zygote(embedded, script, zygote_dir)
    timing = {"enabled": args.device == "cuda", "compile": not args.no_compile_baseline,
              "seed_base": rng.randrange(1, 2**30), "template_seed": rng.randrange(1, 2**30),
              "target_s": args.target_seconds, "warmup": 3, "min_calls": 30, "max_calls": 400}
    cache_folder, cache_key = os.environ.get("KA_BASELINE_CACHE"), os.environ.get("KA_BASELINE_KEY")
    settings = {k: v for k, v in timing.items() if "seed" not in k}
    baselines = (BaselineCache(cache_folder, [embedded["task_code"], embedded.get("functional_code"), embedded["form"],
                                              HARNESS_VERSION, args.device, settings], secret=cache_key)
                 if cache_folder and cache_key else None)
    cached = baselines.load_or_claim() if baselines else None
    overhead = (OverheadCache(cache_folder, [HARNESS_VERSION, args.device, settings], secret=cache_key)
                if baselines else None)
    overhead_cached = overhead.load() if overhead and not cached else None
    if cached:
        timing.update(seed_base=int(cached["seeds"]["seed_base"]), template_seed=int(cached["seeds"]["template_seed"]))
    variant = shape_variant(embedded["task_code"]) if args.shape_probe else None
    sized = init_variant(embedded["task_code"]) if args.shape_probe else None
    job = {"device": args.device, "trials": trials, "weight_seed": rng.randrange(1, 2**31),
           "screen_seed": rng.randrange(1, 2**31), "timing": timing, "shared": str(shared_dir),
           "baselines_cached": bool(cached), "overhead_cached": bool(overhead_cached),
           "shape_variant": variant and {"code": variant.code, "name": variant.name, "old": variant.old,
                                         "new": variant.new},
           "init_variant": sized and {"code": sized.code, "name": sized.name, "old": sized.old, "new": sized.new}}
    if cached:
        # The baselines' outputs (and so their fingerprints) come from weights of this seed.
        job["weight_seed"] = int(cached["seeds"]["weight_seed"])
    ev = Evidence(form=embedded["form"], kernel_code=embedded["kernel_code"], static=findings, trials=trials)
    log: list[str] = []
    python = [sys.executable, script]
    t_start = time.monotonic()
    fused_before = dict(FUSED_USED)
    marks: list[tuple[float, str]] = MarkLog(os.environ.get(MARKS_FILE_ENV), t_start)
    # Behind a shared gate each child asks for the GPU alone around its timed work (verify.harness.gate).
    # Each child's signals carry an HMAC under its own key, which only its job file holds (verify.harness.signals).
    keys = {role: new_key() for role in ("trusted", "run")}
    keepers = {role: GateKeeper(gate, str(root / f"gate-{role}"), role, marks=marks, key=keys[role])
               if gate.sharing else None for role in ("trusted", "run")}
    report["gate"] = {"mode": gate.mode if gate.path else None} | ({"fill": gate.fill} if gate.sharing else {})
    trusted: ChildProcess | None = None
    ledger = MemoryLedger.from_environment()
    planner = (TrialPlanner(trials, ledger, root / "plan", deep_trials=job.get("deep_trials", 2), gate=gate,
                            key=keys["trusted"],
                            timeout_s=args.trusted_timeout, marks=marks)
               if len(trials) > 1 else None)
    if "torch" in sys.modules:
        # Forked from a zygote that imported torch: its main thread has already read its thread count, and only a
        # count set in that thread reaches the judge (set from another, the judge ran 16 threads: 6 s instead of
        # 0.1 s on a loaded host, session 37).
        _import_torch()
    else:
        # The parent needs torch only to read the references; importing it now overlaps the compile step.
        threading.Thread(target=_import_torch, daemon=True).start()
    try:
        # The trusted child (references, screens) and the compile child (nvcc) run at the same time; the
        # trusted child times its baselines only once the compile child is done ("go"), so nothing of the
        # candidate shares the GPU with those timings.
        trusted_job = trusted_dir / "job.json"
        go_file, gate_file = root / "go", root / "gpu-ours"
        gate_timeout = args.trusted_timeout + args.compile_timeout + args.run_timeout + 300
        trusted_job.write_text(json.dumps(job | {"work": str(trusted_dir), "go_file": str(go_file),
                                                 "go_timeout_s": args.compile_timeout + 60,
                                                 "hand_over": keepers["trusted"] is not None,
                                                 "signal_key": keys["trusted"]}
                                          | ({"gate_file": str(gate_file), "gate_timeout_s": gate_timeout}
                                             if gate.path else {})
                                          | ({"plan_file": str(planner.plan_file),
                                              "plan_timeout_s": args.trusted_timeout + gate_timeout}
                                             if planner else {})
                                          | _grants(keepers["trusted"], gate_timeout)))
        trusted = ChildProcess([*python, "--role", "trusted", "--job", str(trusted_job)], role="trusted",
                               env=scrubbed_environment(dict(os.environ), str(trusted_dir)), cwd=trusted_dir,
                               blobs=True, blob_memory="map", keeper=keepers["trusted"], zygote=zygote,
                               planner=planner.handle if planner else None,
                               on_blob=planner.arrived if planner else None)
        env = candidate_environment(dict(os.environ), str(cand_dir), args.build_dir)
        if args.build_dir:
            job["build_dir"] = str(Path(args.build_dir).resolve())
        # The run child starts now too: importing torch and creating its CUDA context (no kernels) overlap the
        # compile and the baselines. It loads the candidate and touches the GPU only once the compile is done
        # and the trusted child is gone with its references ("trusted-done").
        trusted_done, overhead_go = root / "trusted-done", root / "overhead-go"
        handed = False
        run_job = cand_dir / "run-job.json"
        run_job.write_text(json.dumps(job | {"work": str(cand_dir), "wait_file": str(trusted_done),
                                             "wait_timeout_s": args.trusted_timeout + args.compile_timeout + 60
                                             + (gate_timeout if gate.path else 0)}
                                    | _grants(keepers["run"], gate_timeout)
                                    | ({"overhead_go_file": str(overhead_go)} if keepers["run"] else {})
                                    | {"signal_key": keys["run"]}))
        runner: ChildProcess | None = ChildProcess([*python, "--role", "run", "--job", str(run_job)], role="run",
                                                   env=env, cwd=cand_dir, blobs=True, blob_memory="copy",
                                                   keeper=keepers["run"], zygote=zygote,
                                                   on_blob=planner.arrived if planner else None)
        if keepers["run"] is not None:
            keepers["run"].freeze = runner.freeze

            def hand_over() -> bool:
                # Only to a run child that waits for it (still pre-import: trusted code) and never twice.
                nonlocal handed
                if runner is None or runner.overhead_ready_at is None or handed or runner.process.poll() is not None:
                    return False
                send_signal(overhead_go, keys["run"])
                handed = True
                return True

            if keepers["trusted"] is not None:
                keepers["trusted"].hand_over = hand_over
        # Each child deletes its job file as soon as it has read it; candidate code must find none.
        wait_until(lambda: not (trusted_job.exists() or run_job.exists()), 30.0)
        compile_job = cand_dir / "compile-job.json"

        def compile_step(hide_gpu: bool) -> ChildReport:
            # The compile step runs candidate code (a model-new file's import builds it): it gets no seeds.
            compile_job.write_text(json.dumps({"device": args.device, "work": str(cand_dir),
                                               "build_dir": job.get("build_dir")}))
            return run_child([*python, "--role", "compile", "--job", str(compile_job)], role="compile",
                             env=env | ({"CUDA_VISIBLE_DEVICES": ""} if hide_gpu else {}), cwd=cand_dir,
                             timeout_s=args.compile_timeout, zygote=zygote)

        if gate.path:
            # Behind the gate the compile step first runs with the GPU hidden, before the gate, as the batch's
            # prebuild does: its process start and the library load are no GPU time. Only a candidate that
            # fails so (one that needs a GPU at import) compiles again inside the gate, as a single
            # verification would, so the verdict never depends on this.
            ev.compile = compile_step(hide_gpu=True)
            marks.append((time.monotonic(), "compiled-without-gpu" if ev.compile.ok else "compile-needs-gpu"))
            # A child that dies or hangs before it is ready is found out inside the gate, as without one.
            trusted.wait_ready(args.trusted_timeout)
            gate.acquire()
            marks.append((time.monotonic(), "gpu-gate"))
            # The children started early only to import torch; their time limits count from here.
            trusted.restart_clock()
            runner.restart_clock()
            send_signal(gate_file, keys["trusted"])
            if not ev.compile.ok:
                ev.compile = compile_step(hide_gpu=False)
        else:
            ev.compile = compile_step(hide_gpu=False)
        send_signal(go_file, keys["trusted"])
        log.append(f"compile: rc={ev.compile.returncode} {ev.compile.seconds:.1f}s\n{ev.compile.log_tail[-3000:]}")
        if not ev.compile.ok and runner is not None:
            runner.wait(0.1)
            runner = None
        ev.trusted = trusted.wait(args.trusted_timeout + args.compile_timeout)
        if gate.sharing and handed and runner is not None:
            # The run child times its trivial kernel's series on the GPU alone handed over from the trusted child's
            # baselines; its request to share again ends that hold (a tenth of a second), and only then may the
            # gate let go.
            wait_until(lambda: gate.held != "alone" or runner.process.poll() is not None, args.run_timeout)
        if gate.sharing:
            # Until the run child is released neither child has GPU work. Reading the references took 0.9-1.2 s for
            # outputs of 16.8M elements and more, and a timed series waiting for the GPU alone waited (session 36).
            gate.away()
            marks.append((time.monotonic(), "gpu-away"))
        log.append(f"trusted: rc={ev.trusted.returncode} {ev.trusted.seconds:.1f}s\n{ev.trusted.log_tail[-3000:]}")
        if not ev.trusted.ok:
            if runner is not None:
                runner.wait(0.1)
            report.update(status="error", error=f"the reference could not be computed: {ev.trusted.failure()}",
                          checks={}, static=findings, log="\n".join(log))
            return report
        reduced = planner.apply(ev, runner, shared_dir) if planner else None
        if planner and planner.error:
            log.append(planner.error)
        for trial in ev.trials:
            refs = _load_references(trusted.blobs.get(f"ref-{trial['index']}"))
            if refs is None:
                report.update(status="error", error=f"the trusted child sent no reference for trial {trial['index']}",
                              checks={}, static=findings, log="\n".join(log))
                return report
            ev.refs[trial["index"]] = refs
        if "ref-shape" in trusted.blobs:
            ev.shape_ref = _load_references(trusted.blobs["ref-shape"])
        if "ref-init" in trusted.blobs:
            ev.init_ref = _load_references(trusted.blobs["ref-init"])
        if reduced:
            reduced["references"] = sorted({int(m["index"]) for m in ev.trusted.all("reference")})
            report["trials_reduced"] = reduced
            marks.append((time.monotonic(), f"trials-reduced:{reduced['judged']}"))
        if planner and planner.plan and planner.plan.reserved_bytes:
            report["memory"] = {"reserved_bytes": planner.plan.reserved_bytes,
                                "reserved_by_others": planner.plan.reserved_by_others,
                                "waited_s": round(planner.plan.waited_s, 3)}
        # While the candidate runs: the judge's fused passes, if these outputs are large enough to use them.
        warm_fused(max((getattr(t, "numel", lambda: 0)() for refs in ev.refs.values() for t in refs["ref32"]),
                       default=0))
        for entry in (cached, overhead_cached):
            if entry:
                now = time.monotonic()
                ev.trusted.messages.extend(entry["messages"])
                ev.trusted.received.extend([now] * len(entry["messages"]))
        if not cached and baselines and ev.trusted.first("done"):
            baselines.store({"seed_base": timing["seed_base"], "template_seed": timing["template_seed"],
                             "weight_seed": job["weight_seed"]},
                            BaselineCache.picked(ev.trusted.messages))
            if overhead and not overhead_cached:
                overhead.store({}, ev.trusted.messages)
        if baselines:
            baselines.release()
            report["baselines"] = {"from": "cache" if cached else "measured", "key": baselines.key[:16],
                                   "overhead": "task" if cached else "cache" if overhead_cached else "measured"}
        shutil.rmtree(trusted_dir, ignore_errors=True)
        for path in shared_dir.iterdir():
            path.chmod(0o444)
        if runner is not None and gate.sharing:
            gate.shared()
            marks.append((time.monotonic(), "gpu-back"))
        stateful = reference_is_stateful(ev)
        send_signal(trusted_done, keys["run"], json.dumps({"stateful": stateful}))
        if runner is not None:

            def let_go() -> None:
                # The run child's processes are dead, so its GPU work is over; copying out its last outputs
                # (seconds for gigabytes: level 2 task 34's 7-8 s) is CPU work another kernel need not wait for.
                gate.release()
                marks.append((time.monotonic(), "run-gone"))

            ev.run = runner.wait(args.run_timeout + (time.monotonic() - t_start),
                                 on_gone=None if args.sanitize else let_go)
            log.append(f"run: rc={ev.run.returncode} {ev.run.seconds:.1f}s\n{ev.run.log_tail[-3000:]}")
            marks.append((time.monotonic(), "run-collected"))
            if args.sanitize and ev.run.ok:
                sanitize_job = cand_dir / "sanitize-job.json"
                sanitize_job.write_text(json.dumps(job | {"work": str(cand_dir), "trials": trials[:1], "light": True,
                                                          "deep_trials": 0, "stateful": stateful}))
                ev.sanitizer = ChildProcess(
                    ["compute-sanitizer", "--tool", "memcheck", "--print-limit", "20", *python, "--role", "run",
                     "--job", str(sanitize_job)],
                    # Without the caching allocator every tensor is its own cudaMalloc, so memcheck sees a
                    # write past any tensor's end, not only past the allocator's 2 MiB segments.
                    role="sanitize", env=env | {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, cwd=cand_dir,
                    blobs=True).wait(args.run_timeout * 4)
                log.append(f"sanitize: rc={ev.sanitizer.returncode}\n{ev.sanitizer.log_tail[-3000:]}")
            # Every child that ran on the GPU is gone: reading the outputs (seconds for large ones) is CPU work.
            gate.release()
            ev.outputs = _load_outputs(runner.blobs, ev.run)
            ev.shape_out = _load_blob_list(runner.blobs.get("out-shape"))
            ev.init_out = _load_blob_list(runner.blobs.get("out-init"))
            ev.state_probe = _load_state_probe(runner.blobs)
            if reduced:
                # The run child's own word, shown for what it sent; the parent kept only the judged trials' outputs.
                reduced["outputs_sent"] = sorted({m["index"] for m in ev.run.all("trial")
                                                  if type(m.get("index")) is int and m.get("blob")})
        gate.release()
        ledger.settle(0)
        marks.append((time.monotonic(), "evidence-loaded"))
        checks, speed = judge(ev)
        probe_right, probe_evidence = shape_probe(ev)
        init_right, init_evidence = init_probe(ev)
        marks.append((time.monotonic(), "judged"))
        env_message = ev.trusted.first("env") or {}
        call = ev.run.first("call") if ev.run else None
        report.update(
            status=overall_status(checks),
            environment=env_message.get("environment"),
            flags=env_message.get("flags"),
            tolerance={k: v for k, v in TOLERANCE.items()},
            trials=ev.trial_stats,
            checks=checks,
            speed=speed,
            timings={
                "candidate": _summary(ev.run, "candidate"),
                "overhead-pre-import": _summary(ev.run, "overhead-pre-import"),
                **{w: _summary(ev.trusted, w) for w in ("eager", "compile", "cuda-graph", "overhead")},
            },
            kernels={"candidate": (ev.run.first("kernels", which="candidate") or {}).get("kernels") if ev.run else None,
                     "reference": (ev.trusted.first("kernels", which="reference") or {}).get("kernels")},
            call=call,
            screen=ev.trusted.first("screen"),
            reference_float64={k: v for k, v in (ev.trusted.first("float64") or {}).items() if k != "kind"} or None,
            static=findings,
            properties=properties(checks, findings, False if False in (probe_right, init_right) else probe_right),
            shape_probe={"right": probe_right, "evidence": probe_evidence},
            init_probe={"right": init_right, "evidence": init_evidence},
            notes=[m.get("message") for m in ev.trusted.all("note")]
            + ([reduced["why"]] if reduced else []),
            judge_fused={name: FUSED_USED[name] - fused_before[name] for name in FUSED_USED},
            judge_reused=ev.judgements.reused,
            judge_threads=_judge_threads(),
            harness_seconds=time.monotonic() - t_start,
            step_seconds={r.role: r.seconds for r in (ev.trusted, ev.compile, ev.run, ev.sanitizer) if r},
            children={r.role: r.started for r in (ev.trusted, ev.compile, ev.run, ev.sanitizer) if r},
            cpu_s={"parent": round(time.process_time(), 3), "zygote": zygote.cpu_s() if zygote else None,
                   **{r.role: r.cpu_s for r in (ev.trusted, ev.compile, ev.run, ev.sanitizer) if r}},
            timeline=timeline(t_start, [r for r in (ev.trusted, ev.compile, ev.run, ev.sanitizer) if r], marks),
            timeline_origin=t_start,
            log="\n".join(log)[-20000:],
        )
        if gate.sharing:
            report["gate"]["pieces"] = {child.role: gate_pieces(keepers[child.role], child, t_start)
                                        for child in (ev.trusted, ev.run) if child and keepers.get(child.role)}
        return report
    finally:
        gate.release()
        ledger.release()
        if trusted is not None:
            trusted.close_memory()
        if zygote is not None:
            zygote.close()
        if baselines:
            # On a failure too: the out-of-memory rerun in this process must not wait for its own claim.
            baselines.release()
        report["finished_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        killed = {r.role: -r.returncode for r in (ev.trusted, ev.compile, ev.run, ev.sanitizer)
                  if r and not r.timed_out and r.returncode is not None and r.returncode < 0}
        if killed:
            report["killed"] = killed
        if args.keep:
            report["work_dir"] = str(root)
        else:
            shutil.rmtree(root, ignore_errors=True)


EVIDENCE_BLOBS: tuple[str, ...] = ("ref-", "out-", "state-probe-")
"""Name prefixes of the payloads a memory plan counts: references, outputs, the statefulness probe's outputs."""


class TrialPlanner:
    """The parent's answer to the trusted child's ``sized`` message: the trials it computes references for, and whose
    outputs are judged (``verify.harness.memory``), written to ``plan_file``.

    The trusted child sends ``sized`` after the first trial's reference and waits for the file, so the references of
    trials the host's memory cannot hold are never computed. While the plan waits for room in the batch's ledger the
    verification lets go of its shared GPU gate (nothing of it runs on the GPU). Whatever goes wrong, the file is
    written: on an error every trial is judged, as before plans existed.

    Example:
        >>> import tempfile
        >>> plan_file = Path(tempfile.mkdtemp()) / "plan"
        >>> trials = [{"index": i} for i in range(3)]
        >>> ledger = MemoryLedger(None, available=lambda: 7_000)
        >>> planner = TrialPlanner(trials, ledger, plan_file, deep_trials=2, gate=GpuGate(None), timeout_s=1)
        >>> planner.handle({"kind": "sized", "ref_bytes": 1200, "out_bytes": 400, "probe_ref_bytes": 0,
        ...                 "probe_out_bytes": 0}).judged
        2
        >>> json.loads(plan_file.read_text())
        {'judged': [0, 1]}
    """

    def __init__(self, trials: list[dict[str, Any]], ledger: MemoryLedger, plan_file: Path, *, deep_trials: int,
                 gate: GpuGate, timeout_s: float, marks: list[tuple[float, str]] | None = None,
                 key: str | None = None) -> None:
        self.trials = trials
        self.key = key
        self.ledger = ledger
        self.plan_file = plan_file
        self.deep_trials = deep_trials
        self.gate = gate
        self.timeout_s = timeout_s
        self.marks = marks if marks is not None else []
        self.plan: MemoryPlan | None = None
        self.error: str | None = None
        self.held_bytes = 0
        self.arrived_bytes = 0
        self._planned = False
        self._arriving = threading.Lock()

    def handle(self, message: dict[str, Any]) -> MemoryPlan | None:
        """Plan on a ``sized`` message (once), write ``plan_file``, and return the plan (None on an error)."""
        if message.get("kind") != "sized" or self._planned:
            return None
        self._planned = True
        judged = [t["index"] for t in self.trials]
        try:
            ref_bytes, out_bytes, probe_ref_bytes, probe_out_bytes = (
                int(message[k]) for k in ("ref_bytes", "out_bytes", "probe_ref_bytes", "probe_out_bytes"))
            if min(ref_bytes, out_bytes, probe_ref_bytes, probe_out_bytes) < 0:
                raise ValueError("a negative size")
            sizes = [TrialSize(ref_bytes=ref_bytes, out_bytes=out_bytes, calls=3 if t["index"] < self.deep_trials else 1)
                     for t in self.trials]
            # The statefulness probe's four outputs, one payload in transit, and the shape and init probes'
            # outputs; their references are in already, as the first trial's are.
            extra = 5 * out_bytes + probe_ref_bytes + probe_out_bytes
            self.held_bytes = ref_bytes + probe_ref_bytes
            self.plan = self.ledger.plan(sizes, extra, held_bytes=self.held_bytes, timeout_s=self.timeout_s,
                                         on_wait=self._waiting)
            judged = judged[:self.plan.judged]
            self.arrived("", 0)
        except Exception as error:
            self.error = f"the memory plan failed ({type(error).__name__}: {error}); every trial is judged"[:300]
        send_signal(self.plan_file, self.key, json.dumps({"judged": judged}))
        if self.plan is not None:
            self.marks.append((time.monotonic(), f"memory-planned:{self.plan.judged}"))
        return self.plan

    def arrived(self, name: str, nbytes: int) -> None:
        """Count a reference or output payload of ``nbytes`` now in the parent's memory (both children's reading
        threads call it), and settle the reservation to what is still to come.

        The host's free memory counts a payload from the moment it is in memory, and the other verifications read
        that figure beside this reservation's: settled only once all the evidence was in, the outputs on their way
        counted twice (session 45: level 2 task 60 judged on one trial of five beside level 2 task 34). The bytes
        held when the plan was made (the first trial's and the probes' references) are in the plan already.
        """
        with self._arriving:
            if name.startswith(EVIDENCE_BLOBS):
                self.arrived_bytes += nbytes
            if self.plan is not None and self.plan.reserved_bytes:
                self.ledger.settle(self.plan.reserved_bytes - max(0, self.arrived_bytes - self.held_bytes))

    def _waiting(self, waiting: bool) -> None:
        self.marks.append((time.monotonic(), "memory-wait" if waiting else "memory-room"))
        if waiting:
            self.gate.away()
        elif self.gate.sharing:
            self.gate.shared()

    def apply(self, ev: Evidence, runner: ChildProcess | None, shared: Path) -> dict[str, Any] | None:
        """Keep only the judged trials in ``ev`` and tell the run child (``JUDGED_FILE``) and ``runner``'s reader
        which outputs to send and keep; the report's ``trials_reduced``, or None when every trial is judged."""
        if self.plan is None or self.plan.judged >= len(ev.trials):
            return None
        indices = [t["index"] for t in ev.trials]
        kept = set(indices[:self.plan.judged])
        (shared / JUDGED_FILE).write_text(json.dumps(sorted(kept)))
        if runner is not None:
            runner.skip_blob = lambda name: name.startswith("out-") and name[4:name.rfind("-")].isdigit() \
                and int(name[4:name.rfind("-")]) not in kept
        ev.trials = [t for t in ev.trials if t["index"] in kept]
        return self.plan.reduced(indices)


def _grants(keeper: GateKeeper | None, timeout_s: float = 3600.0) -> dict[str, Any]:
    """What a child's job needs to ask ``keeper`` for the GPU alone (nothing without a shared gate)."""
    return {"gate_grants": keeper.grants, "gate_timeout_s": timeout_s} if keeper else {}


JUDGE_THREADS = 1


def _import_torch() -> None:
    with contextlib.suppress(Exception):
        import torch

        # The judge runs beside nvcc jobs and other verifications: with a full OpenMP team per process the
        # spin-waiting threads made judging 30-60x slower (0.5 s alone, 20-30 s beside two others on an H100 host).
        # One thread: the judge works in cache-sized chunks (tensors.JUDGE_CHUNK), where a second thread's
        # barrier on every elementwise op cost more than it gave (33.5M elements: 1.1 s on one thread, 29.7 s on
        # two on a loaded 2-core host).
        torch.set_num_threads(int(os.environ.get("KA_JUDGE_THREADS", JUDGE_THREADS)))


def _judge_threads() -> int | None:
    """The CPU threads the judge's torch operations ran on (``JUDGE_THREADS`` unless ``KA_JUDGE_THREADS`` says)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


MARKS_FILE_ENV = "KA_MARKS_FILE"
"""A file the parent appends each of its timeline marks to as it passes it (``MarkLog``); a batch sets it, so a script
it stops at its time limit still says how far it got (``verify.runner.BatchStopped.marks``)."""


class MarkLog(list[tuple[float, str]]):
    """The parent's timeline marks; with a ``path`` each is also appended to that file as it is made, as seconds
    since ``origin``, a tab and the mark, after a first line that gives ``origin`` itself (the host's monotonic
    clock, as a report's ``timeline_origin``: a stopped script's marks then share one time line with the reports).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "marks.tsv")
        >>> marks = MarkLog(path, 10.0)
        >>> marks.append((12.5, "gpu-gate"))
        >>> marks, open(path).read()
        ([(12.5, 'gpu-gate')], '10.000000\\torigin\\n2.500\\tgpu-gate\\n')
    """

    def __init__(self, path: str | None, origin: float) -> None:
        super().__init__()
        self.path = path
        self.origin = origin
        if path:
            with contextlib.suppress(OSError), open(path, "a") as out:
                out.write(f"{origin:.6f}\t{ORIGIN_MARK}\n")

    def append(self, mark: tuple[float, str]) -> None:
        """Keep ``mark`` (``(time.monotonic(), name)``) and write it to the file."""
        super().append(mark)
        if self.path:
            with contextlib.suppress(OSError), open(self.path, "a") as out:
                out.write(f"{mark[0] - self.origin:.3f}\t{mark[1]}\n")


ORIGIN_MARK = "origin"
"""The name of a marks file's first line, whose number is the parent's start on the host's monotonic clock."""


def read_mark_log(path: str | os.PathLike[str]) -> tuple[float | None, list[tuple[float, str]]]:
    """What a ``MarkLog`` wrote: the parent's start on the host's monotonic clock (its ``origin`` line) and its marks
    (None and none when there is no file; a line cut short is left out).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "marks.tsv")
        >>> _ = open(path, "w").write("7.000000\\torigin\\n1.250\\tgpu-gate\\n3.5")
        >>> read_mark_log(path), read_mark_log(path + ".none")
        ((7.0, [(1.25, 'gpu-gate')]), (None, []))
    """
    origin: float | None = None
    marks: list[tuple[float, str]] = []
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            at, _, name = line.partition("\t")
            with contextlib.suppress(ValueError):
                if name == ORIGIN_MARK:
                    origin = float(at)
                elif name:
                    marks.append((float(at), name))
    return origin, marks


GATE_PIECE_STARTS: dict[str, str] = {"trusted": "gpu-ours", "run": "released"}
"""The mark from which a child holds its verification's shared gate (the parent took it for it)."""


def gate_pieces(keeper: GateKeeper, child: ChildReport, origin: float = 0.0) -> list[list[Any]]:
    """The child's pieces of work under the shared gate (``verify.harness.gate.held_pieces``), from its first moment
    on the GPU (``GATE_PIECE_STARTS``) to its exit, in time order, named by its messages, each starting ``start``
    seconds after ``origin`` (the report's ``timeline_origin``).

    Example:
        >>> keeper = GateKeeper(GpuGate(None), "grant", "run")
        >>> keeper.answers = [(11.0, 11.0, "yield")]
        >>> child = ChildReport(role="run", messages=[{"kind": "mark", "phase": "released"}, {"kind": "call"},
        ...                     {"kind": "gate", "which": "yield"}, {"kind": "done"}],
        ...                     received=[10.0, 10.5, 11.0, 12.0], exited_at=12.5)
        >>> gate_pieces(keeper, child, origin=9.0)
        [[1.0, 1.0, 'mark:released .. call'], [2.0, 1.5, 'done']]
    """
    events = [(at, _event_name(message)) for message, at in zip(child.messages, child.received, strict=False)
              if message.get("kind") != "gate"]
    start = next((at for at, name in events if name == f"mark:{GATE_PIECE_STARTS.get(child.role)}"), None)
    return held_pieces(keeper.answers, events, start=start, end=child.exited_at, origin=origin)


def _event_name(message: dict[str, Any]) -> str:
    detail = message.get("phase") or message.get("which")
    kind = str(message.get("kind"))
    return f"{kind}:{detail}" if detail else kind


def timeline(t_start: float, children: list[ChildReport],
             marks: list[tuple[float, str]] | None = None) -> list[list[Any]]:
    """When each child message arrived, each child exited and the parent passed each mark, sorted.

    Each event is ``[seconds since start, role, event]``; the parent's own marks have role ``parent``. A child's
    yield points (``gate:yield``) are left out: dozens a kernel, and the parent's ``gate:<role>:yield`` marks
    say when one let another verification go first.

    Example:
        >>> child = ChildReport(role="run", messages=[{"kind": "mark", "phase": "warmed"}], received=[12.5],
        ...                     exited_at=13.0)
        >>> timeline(10.0, [child], [(13.5, "judged")])
        [[2.5, 'run', 'mark:warmed'], [3.0, 'run', 'exit'], [3.5, 'parent', 'judged']]
    """
    events: list[list[Any]] = [[round(at - t_start, 3), "parent", name] for at, name in marks or []]
    for child in children:
        for message, at in zip(child.messages, child.received, strict=False):
            if message.get("kind") == "gate" and message.get("which") == "yield":
                continue
            events.append([round(at - t_start, 3), child.role, _event_name(message)])
        if child.exited_at is not None:
            events.append([round(child.exited_at - t_start, 3), child.role, "exit"])
    return sorted(events, key=lambda e: e[0])


def profile_report(args: argparse.Namespace, embedded: dict[str, Any], script: str) -> dict[str, Any]:
    """Compile, then profile the candidate with torch.profiler and (unless --no-ncu) Nsight Compute.

    Behind a GPU gate (``KA_GPU_GATE``, as in a batch) the compile step runs first with the GPU hidden, and
    both profiling children start Python, import torch and wait before touching CUDA, so only their GPU work
    holds the gate: a collect profiling two kernels at once starts one while the other is measured, and no
    two profiles (nor a profile and a verification's timing) ever share the GPU.
    """
    from verify.harness.static import kernel_names

    report = _base_report(embedded, "profile")
    root = Path(tempfile.mkdtemp(prefix="ka-profile-"))
    env = candidate_environment(dict(os.environ), str(root), args.build_dir)
    python = [sys.executable, script]
    job: dict[str, Any] = {"device": "cuda", "weight_seed": 1234, "work": str(root), "warmup": 2, "calls": 5}
    if args.build_dir:
        job["build_dir"] = str(Path(args.build_dir).resolve())
    gate = GpuGate(os.environ.get("KA_GPU_GATE"))
    marks: list[tuple[float, str]] = [(time.monotonic(), "start")]
    children: list[ChildProcess] = []
    try:
        compile_job = root / "compile-job.json"

        def compile_step(hide_gpu: bool) -> ChildReport:
            compile_job.write_text(json.dumps(job))
            return run_child([*python, "--role", "compile", "--job", str(compile_job)], role="compile",
                             env=env | ({"CUDA_VISIBLE_DEVICES": ""} if hide_gpu else {}), cwd=root,
                             timeout_s=args.compile_timeout)

        compiled = compile_step(hide_gpu=bool(gate.path))
        marks.append((time.monotonic(), "compiled"))
        wait_s = args.compile_timeout + 2 * args.run_timeout + args.ncu_timeout + 600
        torch_go, ncu_go = root / "go-torch", root / "go-ncu"
        torch_job, ncu_job, csv_path = root / "profile-job.json", root / "ncu-job.json", root / "ncu.csv"
        profile_key = new_key()
        torch_job.write_text(json.dumps(job | {"gate_file": str(torch_go), "gate_timeout_s": wait_s,
                                               "signal_key": profile_key}))
        torch_child = ChildProcess([*python, "--role", "profile", "--job", str(torch_job)], role="profile",
                                   env=env, cwd=root)
        children.append(torch_child)
        ncu_child: ChildProcess | None = None
        if not args.no_ncu and shutil.which("ncu") is None:
            report["ncu_error"] = "ncu (Nsight Compute) is not on PATH; pass --no-ncu to profile with torch.profiler only"
        elif not args.no_ncu:
            ncu_job.write_text(json.dumps(job | {"torch_profile": False, "calls": 11, "gate_file": str(ncu_go),
                                                 "gate_timeout_s": wait_s, "signal_key": profile_key}))
            names = kernel_names(embedded["kernel_code"])
            command = ["ncu", "--csv", "--page", "details", "-c", "5", "-s", "6", "--log-file", str(csv_path)]
            for section in [s.strip() for s in args.ncu_sections.split(",") if s.strip()]:
                command += ["--section", section]
            if names:
                command += ["-k", "regex:" + "|".join(names)]
            report["ncu_command"] = " ".join(command)
            ncu_child = ChildProcess([*command, *python, "--role", "profile", "--job", str(ncu_job)], role="ncu",
                                     env=env, cwd=root, channel=False)
            children.append(ncu_child)
        gate.acquire()
        marks.append((time.monotonic(), "gpu-gate"))
        if not compiled.ok and gate.path:
            compiled = compile_step(hide_gpu=False)
        if not compiled.ok:
            report.update(status="error", error=compiled.failure())
            return report
        torch_child.restart_clock()
        send_signal(torch_go, profile_key)
        torch_run = torch_child.wait(args.run_timeout)
        marks.append((time.monotonic(), "torch-profiled"))
        events = (torch_run.first("torch-profile") or {}).get("events")
        report["torch_profile"] = events
        if not torch_run.ok:
            report["torch_profile_error"] = torch_run.failure()
        if ncu_child is not None:
            ncu_child.restart_clock()
            send_signal(ncu_go, profile_key)
            ncu_run = ncu_child.wait(args.ncu_timeout)
            marks.append((time.monotonic(), "ncu-profiled"))
            report["ncu_csv"] = csv_path.read_text(errors="replace") if csv_path.is_file() else None
            if ncu_run.returncode != 0 or not report["ncu_csv"]:
                report["ncu_error"] = ncu_run.failure()
        report["status"] = "profiled" if events or report.get("ncu_csv") else "error"
        report["log"] = "\n".join(r.log_tail[-3000:] for r in (compiled, torch_run))
        return report
    finally:
        gate.release()
        for child in children:
            if child.report.returncode is None:
                child.wait(0.1)
        report["timeline"] = [{"at_s": round(at - marks[0][0], 3), "phase": phase} for at, phase in marks[1:]]
        report["finished_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        shutil.rmtree(root, ignore_errors=True)


def _summary(report: ChildReport | None, which: str) -> dict[str, Any] | None:
    message = report.first("timing", which=which) if report else None
    if not message:
        return None
    result = message["result"]
    return {"calls": result["calls"], "event_ms": result["event"], "wall_ms": result["wall"], "loop_s": result["loop_s"],
            **({"host_ms": result["host"]} if "host" in result else {}),
            **({"untimed_ms": {part: summary["median"] for part, summary in result["untimed"].items()}}
               if "untimed" in result else {}),
            **({"compile_s": result["compile_s"]} if "compile_s" in result else {})}


def main(argv: list[str] | None, embedded: dict[str, Any], script: str) -> int:
    """The script's entry point: a child role, or the parent (static-only or full)."""
    args = _parser().parse_args(argv)
    if os.environ.get("KA_DIE_WITH_PARENT") and not args.role:
        # Started by a batch: a killed batch must take its scripts (and so their children) with it.
        die_with_parent()
    if args.role == "zygote":
        # A kernel's request runs that kernel's script: a parent forked for it starts its children as that script.
        return serve(args.channel, lambda rest, kernel: main(rest, embedded, script) if kernel is None
                     else main(rest, kernel, os.path.abspath(sys.argv[0])),
                     slot=args.slot, digest=embedded.get("harness_digest"), seed=args.slot_seed)
    if args.role:
        from verify.harness.roles import child_main

        return child_main(args.role, args.job, args.channel, embedded, args.blobs, args.blob_memory)
    if args.static_only:
        report = static_report(embedded)
    elif args.profile:
        report = profile_report(args, embedded, script)
    else:
        report = full_report(args, embedded, script)
    text = json.dumps(report, default=str, allow_nan=False) if _finite(report) else json.dumps(
        _scrub(report), default=str)
    if args.report:
        Path(args.report).write_text(text)
    if not args.json:
        print(render_text(report))
        print()
    print(text)
    return {"passed": 0, "static-only": 0, "profiled": 0, "flagged": 1, "failed": 2}.get(report.get("status", ""), 3)


def _finite(value: Any) -> bool:
    try:
        json.dumps(value, default=str, allow_nan=False)
        return True
    except ValueError:
        return False


def _scrub(value: Any) -> Any:
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value
