"""Precompiled torch headers for JIT builds, one per compiler and flag set, shared by every kernel built with them.

Each ``load_inline`` build compiles a ``main.cpp`` that starts with ``#include <torch/extension.h>``: on a 2-core
CI machine 20 of the 25 CPU-seconds of building a one-line extension, most of a build's host-compiler work. On a
host that verifies a batch with its builds cold, CPU is what bounds the rate (``docs/verify-batch.md``), so the
compile step keeps one precompiled header for each compiler and set of flags under ``KA_PCH_DIR`` (a batch sets
``~/.cache/kernel-archive/pch``), made once by the compile step of the third build with those flags
(``PCH_AFTER_BUILDS``), and points GCC at it through ``CPATH`` while ninja runs. GCC searches ``CPATH``'s folders before the ``-isystem`` ones, finds ``torch/extension.h.gch`` beside a
link to the real header, and uses it only where it is valid: the same compiler, options and macros, and the include
the file's first token. Anywhere else (nvcc's passes, a file that includes something first, other flags) it reads
the header through the link, as before. Neither the command lines nor ninja's records change, so a build made
with the header and one made without are interchangeable in the build cache.

Example:
    >>> drop_extension_name(["-DTORCH_EXTENSION_NAME=ka_x", "-fPIC", "-O3"])
    ['-fPIC', '-O3']
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from verify.harness.builds import ninja_has_work
from verify.harness.common import torch_cpp_extension

PCH_ENV = "KA_PCH_DIR"
"""Where the precompiled headers live (unset: none are made or used)."""
PCH_HEADER = ("torch", "extension.h")
PCH_BUILD_TIMEOUT_S = 600.0
PCH_AFTER_ENV = "KA_PCH_AFTER"
PCH_AFTER_BUILDS = 3
"""The build with a flag set that makes its header (``KA_PCH_AFTER`` overrides): making one costs about two builds'
CPU and 750 MiB of disk, which a run of one or two kernels would not earn back."""
_versions: dict[str, str] = {}


def drop_extension_name(flags: list[str]) -> list[str]:
    """``flags`` without ``-DTORCH_EXTENSION_NAME=...``, which names each extension and no header uses."""
    return [f for f in flags if not f.startswith("-DTORCH_EXTENSION_NAME=")]


def ninja_cxx(build_directory: str | os.PathLike[str]) -> tuple[str, list[str]] | None:
    """The C++ compiler and its flags (``cflags`` then ``post_cflags``) of a torch ``build.ninja``; None without one.

    Example:
        >>> ninja_cxx("/nonexistent-ka-build") is None
        True
    """
    try:
        text = (Path(build_directory) / "build.ninja").read_text(encoding="utf-8")
    except OSError:
        return None
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(" = ")
        if sep and name in ("cxx", "cflags", "post_cflags"):
            values[name] = value
    if "cxx" not in values or "cflags" not in values:
        return None
    try:
        flags = shlex.split(values["cflags"]) + shlex.split(values.get("post_cflags", ""))
    except ValueError:
        return None
    return values["cxx"], drop_extension_name(flags)


def _compiler_version(cxx: str) -> str | None:
    if cxx not in _versions:
        try:
            done = subprocess.run([*shlex.split(cxx), "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
        if done.returncode != 0:
            return None
        _versions[cxx] = done.stdout.strip()
    return _versions[cxx]


def _torch_header(flags: list[str]) -> Path | None:
    for i, flag in enumerate(flags[:-1]):
        if flag in ("-isystem", "-I"):
            header = Path(flags[i + 1]).joinpath(*PCH_HEADER)
            if header.is_file():
                return header
    return None


def pch_key(cxx: str, flags: list[str], header: Path) -> str | None:
    """What a precompiled header depends on, hashed: the compiler and its version, the flags, torch and its header."""
    version = _compiler_version(cxx)
    if version is None:
        return None
    try:
        import torch

        torch_version = [torch.__version__, getattr(torch.version, "git_version", None)]
    except ImportError:
        torch_version = None
    text = json.dumps([cxx, version, flags, str(header.resolve()), torch_version])
    return hashlib.sha256(text.encode()).hexdigest()


def pch_folder(build_directory: str | os.PathLike[str], root: Path, build: bool) -> Path | None:
    """The folder to put on ``CPATH`` for a build in ``build_directory``; None when there is none yet.

    With ``build`` (a compile step) the build is counted, and the one that brings its flag set's count to
    ``PCH_AFTER_BUILDS`` makes the header first, unless another process is making it (nobody waits) or it failed
    before.
    """
    found = ninja_cxx(build_directory)
    if found is None:
        return None
    cxx, flags = found
    header = _torch_header(flags)
    if header is None:
        return None
    key = pch_key(cxx, flags, header)
    if key is None:
        return None
    folder = root / key
    if (folder / PCH_HEADER[0] / (PCH_HEADER[1] + ".gch")).is_file():
        return folder
    if not build or (root / f"{key}.failed").exists():
        return None
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.builds", "a") as seen:
        seen.write(".")  # one byte a build: O_APPEND keeps concurrent counts whole
    try:
        after = int(os.environ.get(PCH_AFTER_ENV, PCH_AFTER_BUILDS))
    except ValueError:
        after = PCH_AFTER_BUILDS
    if (root / f"{key}.builds").stat().st_size < after:
        return None
    with open(root / f"{key}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None
        if (folder / PCH_HEADER[0]).is_dir():
            return folder
        for partial in root.glob(f".{key}.*"):
            # Under the lock: left by a maker that was killed, 750 MiB each.
            shutil.rmtree(partial, ignore_errors=True)
        return folder if _make_pch(folder, cxx, flags, header, root / f"{key}.failed") else None


def _make_pch(folder: Path, cxx: str, flags: list[str], header: Path, failed: Path) -> bool:
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        (partial / PCH_HEADER[0]).mkdir()
        (partial / PCH_HEADER[0] / PCH_HEADER[1]).symlink_to(header.resolve())
        output = partial / PCH_HEADER[0] / (PCH_HEADER[1] + ".gch")
        try:
            done = subprocess.run([*shlex.split(cxx), "-x", "c++-header", *flags, str(header.resolve()), "-o",
                                   str(output)], capture_output=True, text=True, timeout=PCH_BUILD_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as error:
            failed.write_text(f"{type(error).__name__}: {error}"[:4000])
            return False
        if done.returncode != 0 or not output.is_file():
            failed.write_text(done.stderr[-4000:])
            return False
        os.rename(partial, folder)
        return True
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def install_pch(build: bool = False) -> bool:
    """Give torch's ninja builds in this process the shared precompiled header (making it first, with ``build``).

    Returns whether the wrapper is in place (False without ``KA_PCH_DIR`` or torch's JIT builder).
    """
    root = os.environ.get(PCH_ENV)
    if not root:
        return False
    cpp_extension = torch_cpp_extension()
    ninja_build: Any = getattr(cpp_extension, "_run_ninja_build", None)
    if ninja_build is None:
        return False
    if getattr(ninja_build, "ka_pch", False):
        return True

    def build_with_pch(build_directory: str, verbose: bool, error_prefix: str) -> None:
        # Only a compile step with work counts its build; elsewhere ninja -n would run a second time inside the
        # GPU gate (build_off_gpu asks it first), and an existing header costs a no-op build nothing.
        folder = pch_folder(build_directory, Path(root), build and ninja_has_work(build_directory))
        if folder is None:
            return ninja_build(build_directory, verbose, error_prefix)
        before = os.environ.get("CPATH")
        os.environ["CPATH"] = str(folder) + (os.pathsep + before if before else "")
        try:
            return ninja_build(build_directory, verbose, error_prefix)
        finally:
            if before is None:
                os.environ.pop("CPATH", None)
            else:
                os.environ["CPATH"] = before

    build_with_pch.ka_pch = True  # type: ignore[attr-defined]
    cpp_extension._run_ninja_build = build_with_pch
    return True
