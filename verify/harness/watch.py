"""The harness's untimed steps around a timed call, watched for the candidate's own code.

From the moment a timed call's inputs are made until its timer starts, and while its outputs are fingerprinted
after the timer stops, the harness runs only its own code, the standard library's and torch's. Code of the
candidate's that runs there works untimed: on the inputs, through a function it put in place of a torch method the
harness calls on them (``Tensor.contiguous``), a torch function or dispatch mode it entered, a finalizer on an
object the harness drops there, an audit hook or a signal handler; or on the fingerprints, answering their
operations with those of an answer it computes there. The timed call then only hands back what was computed
outside it.

``StepWatch`` is a profile function (``sys.setprofile``) over those steps. It records every Python function that
starts there from a file that is neither the harness's nor the interpreter's, its standard library's or its
installed packages' (torch's wherever it was installed): the candidate's own files, text it ran with ``exec``
(``<string>``), a file it wrote anywhere else. It also records a trace or profile function of the candidate's
already installed when a window opens: one runs with profiling off, so it would not be seen. The functions the watch
calls are captured when the harness starts, before the candidate is imported. (``timing.time_callable`` keeps the
garbage collector off in these steps, so a collection the harness's allocations happen to start does not run the
candidate's finalizers there.)

Example:
    >>> watch = StepWatch(["/nonexistent"])
    >>> with watch:
    ...     _ = sorted([2, 1])
    >>> watch.found, watch.hooks
    ({}, [])
"""

from __future__ import annotations

import contextlib
import os
import site
import sys
import sysconfig
from pathlib import Path
from typing import Any

_SET_PROFILE = sys.setprofile
_GET_PROFILE = sys.getprofile
_GET_TRACE = sys.gettrace


def _code_of(function: Any) -> Any:
    """The code object a function, or a callable object's class, runs (None for one written in C)."""
    code = getattr(function, "__code__", None)
    return code if code is not None else getattr(vars(type(function)).get("__call__"), "__code__", None)


def _label(name: str, code: Any) -> str:
    """``name (file:line)``, the way the evidence names a function."""
    return f"{name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _describe(function: Any) -> str:
    code = _code_of(function)
    name = getattr(function, "__qualname__", None) or type(function).__qualname__
    return _label(name, code) if code else str(name)


def _folders(paths: list[str]) -> tuple[str, ...]:
    return tuple(sorted({os.path.join(p, "") for p in paths if p} | {os.path.join(os.path.realpath(p), "") for p in paths if p}))


def _library_roots() -> list[str]:
    """Where the interpreter, its standard library and installed packages live."""
    paths = sysconfig.get_paths()
    roots = [paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    roots += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    with contextlib.suppress(AttributeError):
        roots += [*site.getsitepackages(), site.getusersitepackages()]
    # A prefix of "/" would make every file the interpreter's.
    return [r for r in roots if r and os.path.realpath(r) != os.sep]


# Read when the harness starts: the candidate could move sys.prefix, or a module's __file__, once it runs.
_LIBRARY_ROOTS = _library_roots()
_HARNESS_FILE = _describe.__code__.co_filename
# Imported as a package (not inlined into one script), the harness is every module in this folder.
_HARNESS_FOLDER = os.path.dirname(_HARNESS_FILE) if os.path.basename(os.path.dirname(_HARNESS_FILE)) == "harness" else ""


class StepWatch:
    """A context manager over one window of the harness's steps; what of the candidate's ran there accumulates.

    ``own`` are the candidate's folders; ``known`` more folders of library code, read before the candidate was
    imported (torch's package folder: an editable build of torch lives outside the interpreter's folders, and its
    Python runs in the window, ``torch.cuda.synchronize``). ``found`` maps each function (``qualname (file:line)``)
    to the number of times it started inside a window; ``hooks`` names the candidate's own trace and profile
    functions that were installed when a window opened.
    """

    def __init__(self, own: list[str], known: tuple[str, ...] = ()) -> None:
        self.own = _folders(own)
        self.known = _folders([*_LIBRARY_ROOTS, _HARNESS_FOLDER, *known])
        self.found: dict[str, int] = {}
        self.hooks: list[str] = []
        self._previous: Any = None

    def is_own(self, filename: str) -> bool:
        """Whether code from ``filename`` is the candidate's: in its folders, or outside the harness's file and the
        interpreter's libraries (``<frozen ...>`` modules are the interpreter's; ``<string>`` is ``exec``'d text).

        Example:
            >>> watch = StepWatch(["/tmp/work"])
            >>> watch.is_own("/tmp/work/kernel.py"), watch.is_own("<string>"), watch.is_own("/tmp/elsewhere.py")
            (True, True, True)
            >>> watch.is_own(os.__file__), watch.is_own("<frozen os>"), watch.is_own(StepWatch.is_own.__code__.co_filename)
            (False, False, False)
        """
        if filename.startswith(self.own):
            return True
        if filename.startswith("<"):
            return not filename.startswith("<frozen ")
        return filename != _HARNESS_FILE and not filename.startswith(self.known)

    def __enter__(self) -> StepWatch:
        self._previous = _GET_PROFILE()
        for kind, hook in (("profile", self._previous), ("trace", _GET_TRACE())):
            code = _code_of(hook) if hook is not None else None
            if code is not None and self.is_own(code.co_filename) and f"{kind} {_describe(hook)}" not in self.hooks:
                self.hooks.append(f"{kind} {_describe(hook)}")
        _SET_PROFILE(self._event)
        return self

    def __exit__(self, *exc: object) -> None:
        _SET_PROFILE(self._previous)

    def _event(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if self.is_own(code.co_filename):
            key = _label(getattr(code, "co_qualname", code.co_name), code)
            self.found[key] = self.found.get(key, 0) + 1

    def evidence(self) -> dict[str, Any]:
        """What the windows saw, for the timing message (``{}`` when nothing)."""
        return {k: v for k, v in (("foreign_code", dict(self.found)), ("hooks", list(self.hooks))) if v}


def aten_kernels(torch: Any) -> dict[str, str]:
    """Each aten operator's dispatcher table (``torch._C._dispatch_dump``): which kernel each dispatch key runs and
    where it was registered. About 0.1 s for torch's 3,000-odd aten operators.

    Empty when this torch has no way to list them (the check then says it did not run).

    Example:
        >>> import torch
        >>> "CPU: registered at" in aten_kernels(torch)["aten::mul.Tensor"]
        True
    """
    dump, names = (getattr(torch._C, f, None) for f in ("_dispatch_dump", "_dispatch_get_all_op_names"))
    if dump is None or names is None:
        return {}
    return {name: dump(name) for name in names() if name.startswith("aten::")}


def _registered_at(line: str) -> str:
    where = line.split("registered at ", 1)[1] if "registered at " in line else ""
    return where.split(" :: ", 1)[0].rsplit(":", 1)[0]


def replaced_kernels(before: dict[str, str], after: dict[str, str], torch_folder: str) -> list[str]:
    """Kernels for aten operators registered between two ``aten_kernels`` tables from files torch's were not:
    ``"aten::op: KEY: registered at FILE:LINE"``, one a line.

    A candidate that replaces the kernel torch runs for an operator (``TORCH_LIBRARY_IMPL(aten, CUDA, m)`` in its
    extension, or ``torch.library.Library("aten", "IMPL")`` in Python) changes what every caller computes: the
    harness's own input preparation, fingerprints and comparisons in the candidate's process among them. torch's own
    later registrations come from its package folder, from a file its first table already names, or from the folder
    its C++ was built in (the common folder of the first table's C++ files).

    Example:
        >>> before = {"aten::mul.Tensor": "CPU: registered at /build/RegisterCPU.cpp:12 :: (Tensor _0) -> Tensor _0"}
        >>> after = {"aten::mul.Tensor": "CPU: registered at /tmp/ext/main.cpp:7 :: (Tensor _0) -> Tensor _0\\n"
        ...                              "CPU (inactive): registered at /build/RegisterCPU.cpp:12 :: (Tensor _0) -> Tensor _0"}
        >>> replaced_kernels(before, after, "/site-packages/torch")
        ['aten::mul.Tensor: CPU: registered at /tmp/ext/main.cpp:7']
    """
    torch_files = {_registered_at(line) for table in before.values() for line in table.splitlines()}
    folders = [torch_folder]
    built = [f for f in torch_files if f.startswith(os.sep) and f.endswith((".cpp", ".cu", ".h"))]
    if built and len(Path(root := os.path.commonpath(built)).parts) > 2:
        # Where torch's C++ was built: a library torch loads later (dlopen on first use) registers from there too.
        folders.append(root)
    prefixes = _folders(folders)
    found = []
    for name, table in after.items():
        old = set(before.get(name, "").splitlines())
        for line in table.splitlines():
            where = _registered_at(line)
            if line in old or not where or where in torch_files or where.startswith(prefixes) or "(inactive)" in line:
                continue
            found.append(f"{name}: {line.split(' :: ', 1)[0]}")
    return found
