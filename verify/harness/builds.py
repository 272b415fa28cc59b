"""Builds that failed once fail at once: a memo of torch extension builds the compiler rejected.

A kernel whose own CUDA code does not compile (several of CUDA-L1's do, and catch the error to fall back to
PyTorch) is built again by every process that loads it: the prebuild, the script's compile step, the run
child inside the GPU gate and the profile. On the H100 that was 13-39 s of the gate for 8 of 36 CUDA-L1
kernels. The failure is a property of the build's sources, flags and toolchain, so the first one is recorded
under a hash of ``build.ninja`` and of every source file it names, and a later build of exactly that raises
the same ``RuntimeError`` at once. A build that was killed (a signal, out of memory, a full disk) is never
recorded: only an error the compiler printed. The memo lives beside ``TORCH_EXTENSIONS_DIR``, so in a batch
it belongs to the kernel's own build-cache entry and in a single verification to its temporary folder.

Example:
    >>> looks_like_compiler_error("error: identifier 'x' is undefined")
    True
    >>> looks_like_compiler_error("ninja: build stopped: interrupted by user. Killed")
    False
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verify.harness.common import stream_capturing, torch_cpp_extension
from verify.harness.gate import off_gpu

MEMO_FOLDER = "failed-builds"
"""The memo's folder, beside the candidate's ``TORCH_EXTENSIONS_DIR``."""

SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".cu", ".cuh", ".h", ".hpp")

_COMPILER_ERROR = re.compile(r"\berror\b\s*:|: error\b|undefined reference to|ld returned \d+ exit status")
_KILLED = re.compile(
    r"\bKilled\b|\bTerminated\b|out of memory|No space left|interrupted|signal \d+", re.IGNORECASE
)


def looks_like_compiler_error(message: str) -> bool:
    """Whether a failed build's output holds a compiler's or linker's diagnostic and no sign of a kill.

    torch's own prefix ("Error building extension") is not a diagnostic: a compiler killed for memory
    leaves only that and ninja's "subcommand failed", and is built again next time.
    """
    return bool(_COMPILER_ERROR.search(message)) and not _KILLED.search(message)


def ninja_key(build_directory: str | Path) -> str | None:
    """A hash of ``build.ninja`` and of every source file its ``build`` lines name (None without the file).

    The extension's name counts with its digits left out (``name_shape``): a kernel that puts its process id or
    the time in the name builds the same sources under another name, and folder, in each process that loads it.

    Example:
        >>> ninja_key("/nonexistent") is None
        True
    """
    folder = Path(build_directory)
    try:
        text = (folder / "build.ninja").read_bytes()
    except OSError:
        return None
    shape = name_shape(text)
    digest = hashlib.sha256(shape(text))
    for line in text.decode("utf-8", "replace").splitlines():
        if not line.startswith("build ") or ": " not in line:
            continue
        for token in _NINJA_TOKEN.findall(line.split(": ", 1)[1])[1:]:
            path = Path(_NINJA_ESCAPE.sub(r"\1", token))
            path = path if path.is_absolute() else folder / path
            if path.suffix in SOURCE_SUFFIXES and path.is_file():
                digest.update(b"\0" + shape(token.encode()) + b"\0" + path.read_bytes())
    return digest.hexdigest()


_EXTENSION_NAME = re.compile(rb"-DTORCH_EXTENSION_NAME=(\S+)")


def name_shape(ninja: bytes) -> Callable[[bytes], bytes]:
    """What ``ninja_key`` hashes of a text from this ``build.ninja``: the extension's name (torch's
    ``-DTORCH_EXTENSION_NAME=``) written as its shape, its runs of digits as one mark, between NUL bytes that no
    ninja file holds. Digits cannot turn a name that compiles into one that does not (level 1 task 96 of
    CUDA-L1 names its extension ``huber_loss_cuda_{os.getpid()}``, and its CUDA code fails to compile: 10-13 s
    in each of three processes on the H100 host, session 57); a name with other characters changed is another build.

    Example:
        >>> shape = name_shape(b"cuda_cflags = -DTORCH_EXTENSION_NAME=ext_605 -O3")
        >>> shape(b"/x/ext_605/cuda.cu") == name_shape(b"-DTORCH_EXTENSION_NAME=ext_798")(b"/x/ext_798/cuda.cu")
        True
    """
    found = _EXTENSION_NAME.search(ninja)
    if found is None or not re.search(rb"\d", found.group(1)):
        return lambda text: text
    name, mark = found.group(1), b"\0" + re.sub(rb"\d+", b"#", found.group(1)) + b"\0"
    return lambda text: text.replace(name, mark)


_NINJA_TOKEN = re.compile(r"(?:\$.|[^\s$])+")
"""A path in a ninja ``build`` line: spaces, colons and dollars inside it are escaped with ``$`` (torch writes a
source under a folder with a space as ``/a$ b/k.cu``)."""
_NINJA_ESCAPE = re.compile(r"\$(.)")


def memo_folder() -> Path | None:
    """Where this process's failed builds are recorded: beside ``TORCH_EXTENSIONS_DIR`` (None when unset)."""
    extensions = os.environ.get("TORCH_EXTENSIONS_DIR")
    return Path(extensions).parent / MEMO_FOLDER if extensions else None


def install_build_memo(folder: Path | None = None) -> bool:
    """Wrap torch's ninja build so a build that failed with a compiler error before fails again at once.

    Returns whether the wrapper is in place (False without a memo folder or without torch's JIT builder).
    """
    folder = folder or memo_folder()
    if folder is None:
        return False
    cpp_extension = torch_cpp_extension()
    build = getattr(cpp_extension, "_run_ninja_build", None)
    if build is None or getattr(build, "ka_memo", False):
        return build is not None

    def memo_build(build_directory: str, verbose: bool, error_prefix: str) -> None:
        key = ninja_key(build_directory)
        record = folder / f"{key}.json" if key else None
        if record is not None and record.is_file():
            try:
                message = json.loads(record.read_text(encoding="utf-8"))["message"]
            except (OSError, ValueError, KeyError, TypeError):
                message = None
            if isinstance(message, str):
                raise RuntimeError(
                    f"{message}\n[kernel-archive: this build (the same sources and flags; the extension name digits "
                    "aside) failed before with a compiler error; it is not run again]"
                )
        try:
            build(build_directory, verbose, error_prefix)
        except RuntimeError as error:
            if record is not None and looks_like_compiler_error(str(error)):
                _write_record(record, str(error))
            raise

    memo_build.ka_memo = True  # type: ignore[attr-defined]
    cpp_extension._run_ninja_build = memo_build
    return True


CCACHE_ENV = "CCACHE_DIR"
"""Set by a batch's build cache where ccache is found (``verify.batch.build_cache.Toolchain``): ``install_ccache``
does nothing without it, so a single verification builds exactly as torch would."""


CCACHE_BUILD_SETTINGS = {"CCACHE_NOHASHDIR": "1"}
"""ccache settings for every build ``install_ccache`` wraps, besides its folder as the base. ccache 4.14 takes nvcc's
``-gencode=arch=...`` (torch passes one for each architecture) for ``-g`` and then hashes the working directory, so
the same kernel built in another folder missed the cache on the H100 host (session 57: level 1 task 24's second build,
44 s); no build here asks for debug information, whose paths are all the working directory would change."""


def install_ccache(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Put ccache in front of nvcc and key its objects on what is built, not where.

    Recent torch (2.13 here) wraps the host compiler and nvcc in ccache when it is on ``PATH``; older versions wrap
    nvcc only through ``PYTORCH_NVCC``, which this sets (unless the user did) to ccache and torch's own nvcc. Each build then runs
    with ``CCACHE_BASEDIR`` at its build folder: torch names every source by its absolute path, so a kernel built
    again in another folder (a ``build_directory`` of its own beside its working folder, a process id in its
    extension's name) missed ccache's cache until its paths were made relative to the folder, and the folder itself
    left out of the hash (``CCACHE_BUILD_SETTINGS``). Returns whether
    ccache is in use (``CCACHE_DIR`` set, ``ccache`` on ``PATH``, torch's builder present).

    Example:
        >>> install_ccache({})
        False
    """
    ccache = shutil.which("ccache", path=environ.get("PATH")) if environ.get(CCACHE_ENV) else None
    cpp_extension = torch_cpp_extension() if ccache else None
    build = getattr(cpp_extension, "_run_ninja_build", None)
    if ccache is None or build is None:
        return False
    if not environ.get("PYTORCH_NVCC") and getattr(cpp_extension, "CUDA_HOME", None):
        environ["PYTORCH_NVCC"] = shlex.join([ccache, os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")])
    if getattr(build, "ka_ccache", False):
        return True

    def build_from_its_folder(build_directory: str, verbose: bool, error_prefix: str) -> None:
        settings = {"CCACHE_BASEDIR": os.path.abspath(build_directory), **CCACHE_BUILD_SETTINGS}
        before = {name: environ.get(name) for name in settings}
        environ.update(settings)
        try:
            return build(build_directory, verbose, error_prefix)
        finally:
            for name, value in before.items():
                if value is None:
                    environ.pop(name, None)
                else:
                    environ[name] = value

    build_from_its_folder.ka_ccache = True  # type: ignore[attr-defined]
    cpp_extension._run_ninja_build = build_from_its_folder
    return True


def ninja_has_work(build_directory: str) -> bool:
    """Whether ninja would compile anything in ``build_directory`` (True when it cannot tell).

    Example:
        >>> ninja_has_work("/nonexistent-ka-build")
        True
    """
    try:
        done = subprocess.run(["ninja", "-n", "-C", build_directory], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return True
    return done.returncode != 0 or "no work to do" not in done.stdout


def build_off_gpu(job: dict[str, Any], channel: Any, sync: Callable[[], None]) -> bool:
    """Hold nothing of a shared GPU gate while torch's JIT builder compiles (``verify.harness.gate.off_gpu``).

    CUDA-L1 kernels that call ``load_inline`` in their first ``forward`` compiled for 27-34 s of a 31-37 s GPU
    gate in a batch of 50 on an H200, with the GPU idle. A build ninja has nothing to do for keeps the hold, and so does
    a build inside a CUDA graph's capture (``stream_capturing``): the synchronize before letting go would end it.
    Returns whether the wrapper is in place (only behind a shared gate, with torch's builder present).
    """
    if not job.get("gate_grants"):
        return False
    cpp_extension = torch_cpp_extension()
    build = getattr(cpp_extension, "_run_ninja_build", None)
    if build is None:
        return False

    def build_without_gpu(build_directory: str, verbose: bool, error_prefix: str) -> None:
        if stream_capturing() or not ninja_has_work(build_directory):
            return build(build_directory, verbose, error_prefix)
        with off_gpu(job, channel, sync):
            return build(build_directory, verbose, error_prefix)

    cpp_extension._run_ninja_build = build_without_gpu
    return True


def _write_record(record: Path, message: str) -> None:
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        partial = record.with_name(f".{record.name}.{os.getpid()}")
        partial.write_text(json.dumps({"message": message[-20000:]}), encoding="utf-8")
        os.replace(partial, record)
    except OSError:
        pass


def construct_for_build(module: Any, init_inputs: list[Any], pretend_gpu: bool = False) -> str:
    """Construct ``module.ModelNew(*init_inputs)`` once so builds it starts in ``__init__`` land in the cache.

    25 of 142 CUDA-L1 kernels on the H100 compiled in their constructor, inside the GPU gate (873 s of its
    3,103 s), 22 of them only ``if torch.cuda.is_available()``. The compile step constructs the model before
    the gate with the GPU hidden and, with ``pretend_gpu``, ``torch.cuda.is_available()`` answering True for
    the constructor's sake. A constructor that then touches the GPU fails here, which is fine: what it built
    before failing stays built. Returns what happened, for the log.

    Example:
        >>> class Module:
        ...     class ModelNew:
        ...         def __init__(self, n):
        ...             import torch
        ...             self.saw_gpu = torch.cuda.is_available()
        >>> construct_for_build(Module, [3])
        'constructed'
    """
    import torch

    real = torch.cuda.is_available
    if pretend_gpu:
        torch.cuda.is_available = lambda: True
    try:
        module.ModelNew(*init_inputs)
    except Exception as error:  # noqa: BLE001 - candidate code; any failure only means less was warmed
        return f"{type(error).__name__}: {error}"[:300]
    finally:
        torch.cuda.is_available = real
    return "constructed"
