"""The harness's untimed steps around a timed call, watched for the candidate's own code.

From the moment a timed call's inputs are made until its timer starts, and while its outputs are fingerprinted
after the timer stops, the harness runs only its own code, the standard library's and torch's. Code of the
candidate's that runs there works untimed: on the inputs, through a function it put in place of a torch method the
harness calls on them (``Tensor.contiguous``), a torch function or dispatch mode it entered, a finalizer on an
object the harness drops there, an audit hook or a signal handler; or on the fingerprints, answering their
operations with those of an answer it computes there. The timed call then only hands back what was computed
outside it.

``StepWatch`` watches those steps: through ``sys.monitoring`` where the interpreter has it (3.12 and newer: a
function's start, each code object judged once), else through a profile function (``sys.setprofile``). It records
every Python function that starts there on the harness's thread and is not the harness's, the interpreter's, its
standard library's or its installed packages' (torch's wherever it was installed): the candidate's own files, text
it ran with ``exec`` (``<string>``), a file it wrote anywhere else. A function's file is only its claim: code that
claims a library file counts as the library's only if it is what that file compiles to, and the file is older than
the harness's start (not one the candidate wrote or changed), and code that claims the harness's file only if it is
one of the harness's own code objects. So ``compile(text, torch.__file__, "exec")`` does not hide the candidate's
code. The watch also records a trace or profile function, or a ``sys.monitoring`` tool's callback, of the
candidate's that is installed when a window opens (such a function runs unseen), and a watch tool that was taken
from it. Each first finding is passed to ``on_found`` at once (the run child sends it to the parent), before the
candidate's code has run. The functions the watch calls are captured when the harness starts, before the candidate
is imported. (``timing.time_callable`` keeps the garbage collector off in these steps, so a collection the harness's
allocations happen to start does not run the candidate's finalizers there.)

Example:
    >>> watch = StepWatch(["/nonexistent"])
    >>> with watch:
    ...     _ = sorted([2, 1])
    >>> watch.found, watch.hooks
    ({}, [])
"""

from __future__ import annotations

import _imp
import contextlib
import functools
import importlib.util
import os
import site
import sys
import sysconfig
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_SET_PROFILE = sys.setprofile
_GET_PROFILE = sys.getprofile
_GET_TRACE = sys.gettrace
_THREAD = threading.get_ident
_STAT = os.stat
_COMPILE = compile
_CODE = types.CodeType
# Read when the harness starts: a library file written or changed after this was the candidate's doing.
_WATCH_STARTED = time.time()
_NOW = time.time
_MONITORING = getattr(sys, "monitoring", None)
_MON = {name: getattr(_MONITORING, name) for name in ("use_tool_id", "get_tool", "set_events", "get_events",
                                                      "register_callback", "restart_events", "DISABLE")} if _MONITORING else {}
_MON_EVENTS = {name: bit for name, bit in vars(_MONITORING.events).items()
               if isinstance(bit, int) and bit > 0 and bit & (bit - 1) == 0} if _MONITORING else {}
_WATCHED_EVENTS = sum(_MON_EVENTS[e] for e in ("PY_START", "PY_RESUME", "PY_THROW")) if _MONITORING else 0
_WATCH_TOOL_NAME = "kernel-archive step watch"
# First findings passed to on_found (enough to fail the check and name what ran; the rest are only counted).
_FOUND_SENT = 50
# The tool id this process claimed (None: not yet, or none was free: the profile function then).
_WATCH_TOOL: list[int | None] = [None]


def _code_of(function: Any) -> Any:
    """The code object a function, a bound method, a ``functools.partial`` or a callable object's class runs
    (None for one written in C)."""
    for _ in range(8):
        if isinstance(function, types.MethodType):
            function = function.__func__
        elif isinstance(function, functools.partial):
            function = function.func
        else:
            break
    code = getattr(function, "__code__", None) if isinstance(function, types.FunctionType) else None
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


def _nested(code: Any) -> Iterator[Any]:
    """A code object and every code object compiled inside it (functions, lambdas, comprehensions, classes)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, _CODE):
            yield from _nested(const)


def _constant(value: Any) -> Any:
    """A constant as comparable data: a nested code object by its name and first line, a frozenset by its sorted
    members (its order, and so its ``repr``, follows the string hashes of the process that built it: a module's
    ``.pyc``, marshalled by another process, can list ``x in {"a", "b"}`` in another order than a compile here)."""
    if isinstance(value, _CODE):
        return value.co_name, value.co_firstlineno
    if isinstance(value, frozenset):
        return "frozenset", tuple(sorted((_constant(v) for v in value), key=repr))
    if isinstance(value, tuple):
        return "tuple", tuple(_constant(v) for v in value)
    return repr(value)


def _shape(code: Any) -> tuple[Any, ...]:
    r"""What a code object does, as comparable data: its name, first line, bytecode, names and constants.

    Example:
        >>> one = compile("def f(x):\n    return x in {1, 9}\n", "m.py", "exec").co_consts[0]
        >>> other = one.replace(co_consts=tuple(frozenset([9, 1]) if isinstance(c, frozenset) else c
        ...                                     for c in one.co_consts))
        >>> repr(one.co_consts) == repr(other.co_consts), _shape(one) == _shape(other)
        (False, True)
    """
    return code.co_name, code.co_firstlineno, code.co_code, code.co_names, tuple(_constant(c) for c in code.co_consts)


@functools.cache
def _frozen_names() -> dict[str, str]:
    """The interpreter's frozen modules by the name their code's file gives (``importlib._bootstrap`` is frozen as
    ``_frozen_importlib``)."""
    names = getattr(_imp, "_frozen_module_names", lambda: ())()
    return {(_imp.find_frozen(name) or (None, None, None))[2] or name: name for name in names}


@functools.cache
def _compiled_shapes(filename: str) -> frozenset[tuple[Any, ...]]:
    """The shapes of the code that ``filename`` compiles to, as the import system compiles it: empty where the file
    is missing, unreadable, or was written or changed (its ``st_ctime``) since the harness started.
    ``<frozen NAME>`` is the interpreter's frozen module NAME.

    Example:
        >>> any(shape[0] == "_compiled_shapes" for shape in _compiled_shapes(_compiled_shapes.__wrapped__.__code__.co_filename))
        True
    """
    try:
        if filename.startswith("<frozen ") and filename.endswith(">"):
            name = _frozen_names().get(filename[len("<frozen "):-1])
            code = _imp.get_frozen_object(name) if name else None
        else:
            # The change time, which a write sets and no one can set back (unlike the modification time). A
            # file dated after now came so (a clock set differently where it was made), not from this run.
            if _WATCH_STARTED < _STAT(filename).st_ctime <= _NOW() + 1:
                return frozenset()
            with open(filename, "rb") as source:
                code = _COMPILE(importlib.util.decode_source(source.read()), filename, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError, ImportError, UnicodeDecodeError):
        return frozenset()
    return frozenset(_shape(c) for c in _nested(code)) if code is not None else frozenset()


def _harness_code() -> frozenset[Any]:
    """Every code object the harness's own modules define: their functions (through decorators' ``__wrapped__``),
    classes' methods, static and class methods and properties, and what is compiled inside each."""
    # This module's own namespace (inlined into a script, every module's), whatever name it runs under.
    namespaces = [_describe.__globals__]
    namespaces += [vars(m) for name, m in list(sys.modules.items()) if name.startswith("verify.harness.")]
    found: set[Any] = set()

    def add(value: Any) -> None:
        for _ in range(8):
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            elif isinstance(value, property):
                for part in (value.fget, value.fset, value.fdel):
                    if part is not None:
                        add(part)
                return
            elif isinstance(value, types.FunctionType):
                found.update(_nested(value.__code__))
                value = vars(value).get("__wrapped__")
            else:
                return

    for namespace in namespaces:
        for value in list(namespace.values()):
            if isinstance(value, type) and getattr(value, "__module__", None) == namespace.get("__name__"):
                for member in vars(value).values():
                    add(member)
            else:
                add(value)
    return frozenset(found)


def _claim_tool() -> int | None:
    """A ``sys.monitoring`` tool id for the watch, claimed once a process (None: no monitoring, or none free)."""
    if _WATCH_TOOL[0] is None and _MON:
        for tool in (4, 3, 1, 0, 5, 2):
            try:
                _MON["use_tool_id"](tool, _WATCH_TOOL_NAME)
            except ValueError:
                continue
            _WATCH_TOOL[0] = tool
            break
    return _WATCH_TOOL[0]


class StepWatch:
    """A context manager over one window of the harness's steps; what of the candidate's ran there accumulates.

    ``own`` are the candidate's folders; ``known`` more folders of library code, read before the candidate was
    imported (torch's package folder: an editable build of torch lives outside the interpreter's folders, and its
    Python runs in the window, ``torch.cuda.synchronize``). ``found`` maps each function (``qualname (file:line)``)
    to the number of times it started inside a window; ``hooks`` names the candidate's own trace and profile
    functions and ``sys.monitoring`` callbacks that were installed when a window opened. ``on_found(label, hook)``
    is called with each function (``hook`` False) or hook (True) the first time it is found. Make the watch before
    the candidate is imported: it takes its ``sys.monitoring`` tool id then (``monitoring=False``: the profile
    function always).
    """

    def __init__(self, own: list[str], known: tuple[str, ...] = (), on_found: Callable[[str, bool], Any] | None = None,
                 monitoring: bool = True) -> None:
        self.own = _folders(own)
        self.known = _folders([*_LIBRARY_ROOTS, _HARNESS_FOLDER, *known])
        self.harness = _harness_code()
        self.found: dict[str, int] = {}
        self.hooks: list[str] = []
        self.on_found = on_found
        self.tool = _claim_tool() if monitoring else None
        self._verdicts: dict[int, tuple[Any, str | None]] = {}
        self._thread = _THREAD()
        self._previous: Any = None
        self._mode = ""
        self._open = False
        self._held = False

    def is_own(self, filename: str) -> bool:
        """Whether code from ``filename`` is the candidate's by its file alone: in its folders, or outside the
        harness's file and the interpreter's libraries (``<frozen ...>`` modules are the interpreter's; ``<string>``
        is ``exec``'d text). ``is_own_code`` also checks that code claiming a library file is that file's.

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

    def is_own_code(self, code: Any) -> bool:
        """Whether ``code`` is the candidate's: by its file, or because it is not what the library or harness file
        it claims compiles to.

        Example:
            >>> watch = StepWatch(["/tmp/work"])
            >>> watch.is_own_code(os.path.join.__code__), watch.is_own_code(StepWatch.is_own_code.__code__)
            (False, False)
            >>> watch.is_own_code(compile("def join(): pass", os.path.__file__, "exec"))
            True
        """
        filename = code.co_filename
        if self.is_own(filename):
            return True
        if filename == _HARNESS_FILE or (_HARNESS_FOLDER and filename.startswith(os.path.join(_HARNESS_FOLDER, ""))):
            return code not in self.harness
        return _shape(code) not in _compiled_shapes(filename)

    def _judged(self, code: Any) -> str | None:
        """The label of ``code`` if it is the candidate's, else None; judged once a code object."""
        seen = self._verdicts.get(id(code))
        if seen is None:
            # The code object is kept, so its id is not reused by another while the verdict stands.
            seen = self._verdicts[id(code)] = (code, _label(getattr(code, "co_qualname", code.co_name), code)
                                               if self.is_own_code(code) else None)
        return seen[1]

    def _record(self, label: str) -> None:
        count = self.found.get(label, 0)
        self.found[label] = count + 1
        if not count and self.on_found is not None and len(self.found) <= _FOUND_SENT:
            self.on_found(label, False)

    def _hook(self, text: str) -> None:
        if text not in self.hooks:
            self.hooks.append(text)
            if self.on_found is not None:
                self.on_found(text, True)

    def _check_hooks(self) -> None:
        for kind, hook in (("profile", self._previous), ("trace", _GET_TRACE())):
            code = _code_of(hook) if hook is not None else None
            if code is not None and self.is_own_code(code):
                self._hook(f"{kind} {_describe(hook)}")
        if not _MON:
            return
        for tool in range(6):
            name = _MON["get_tool"](tool)
            if tool == self.tool:
                if name != _WATCH_TOOL_NAME:
                    self._hook(f"sys.monitoring tool {tool} taken from the watch by {name!r}")
                continue
            if name is None:
                continue
            for event, bit in _MON_EVENTS.items():
                callback = _MON["register_callback"](tool, bit, None)
                _MON["register_callback"](tool, bit, callback)
                code = _code_of(callback) if callback is not None else None
                if code is not None and self.is_own_code(code):
                    self._hook(f"sys.monitoring {name!r} {event} {_describe(callback)}")

    @property
    def through_monitoring(self) -> bool:
        """Whether the open (or last) window watched through ``sys.monitoring`` (else through a profile function)."""
        return self._mode in ("held", "monitoring")

    @contextlib.contextmanager
    def holding(self) -> Iterator[StepWatch]:
        """Keep the watch's ``sys.monitoring`` events on for a whole timed series; its windows then only open and close.

        Switching events on and off makes the interpreter instrument again every function that runs next, the timed
        call's included. Held, the events stay set and only the callbacks come and go: a window registers them, and
        closing it registers none, so nothing of the watch's runs in the timed call and no function is instrumented
        again. Each window checks that the watch's callbacks and events are as it left them (a callback or events the
        candidate put there are a finding, and set back). With the profile function (no ``sys.monitoring``, or its
        tool taken) this does nothing: windows switch it as before.

        Example:
            >>> watch = StepWatch(["/nonexistent"])
            >>> with watch.holding():
            ...     for _ in range(3):
            ...         with watch:
            ...             _ = sorted([2, 1])
            >>> watch.found, watch.hooks
            ({}, [])
        """
        if self._held or not self._tool_is_ours():
            yield self
            return
        self._arm(callbacks=False)
        self._held = True
        try:
            yield self
        finally:
            self._held = self._open = False
            if self._tool_is_ours():
                _MON["set_events"](self.tool, 0)

    def _tool_is_ours(self) -> bool:
        return self.tool is not None and _MON["get_tool"](self.tool) == _WATCH_TOOL_NAME

    def _arm(self, callbacks: bool = True) -> None:
        if _LAST_WATCH[0] is not self:
            # Another watch's verdicts switched events off where this one may judge otherwise.
            _MON["restart_events"]()
            _LAST_WATCH[0] = self
        for event, callback in self._callbacks():
            _MON["register_callback"](self.tool, _MON_EVENTS[event], callback if callbacks else None)
        _MON["set_events"](self.tool, _WATCHED_EVENTS)

    def _callbacks(self) -> tuple[tuple[str, Any], ...]:
        return (("PY_START", self._started), ("PY_RESUME", self._started), ("PY_THROW", self._thrown))

    def _rearm(self) -> None:
        """Inside a held series: the watch's callbacks back in (none between windows) and its events as it set them;
        what the candidate put there is named and set back."""
        for event, callback in self._callbacks():
            previous = _MON["register_callback"](self.tool, _MON_EVENTS[event], callback)
            if previous is not None and previous != callback:
                self._hook(f"sys.monitoring watch {event} callback replaced by {_describe(previous)}")
        events = _MON["get_events"](self.tool)
        if events != _WATCHED_EVENTS:
            self._hook(f"sys.monitoring watch events changed to {events}")
            _MON["set_events"](self.tool, _WATCHED_EVENTS)

    def __enter__(self) -> StepWatch:
        self._previous = _GET_PROFILE()
        self._check_hooks()
        if self._held and self._tool_is_ours():
            self._rearm()
            self._mode = "held"
        elif self._tool_is_ours():
            self._arm()
            self._mode = "monitoring"
        else:
            _SET_PROFILE(self._event)
            self._mode = "profile"
        self._open = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._open = False
        if self._mode == "profile":
            _SET_PROFILE(self._previous)
        elif not self._tool_is_ours():
            return
        elif self._mode == "held":
            # The events stay on; with no callback the interpreter calls nothing for them in the timed call.
            for event, _ in self._callbacks():
                _MON["register_callback"](self.tool, _MON_EVENTS[event], None)
        else:
            _MON["set_events"](self.tool, 0)

    def _watched(self, code: Any) -> str | None:
        """Count ``code`` if it is the candidate's and runs on the harness's thread inside a window; its label (None:
        not its)."""
        label = self._judged(code)
        if label is not None and self._open and _THREAD() == self._thread:
            self._record(label)
        return label

    def _started(self, code: Any, *_: Any) -> Any:
        return _MON["DISABLE"] if self._watched(code) is None else None

    def _thrown(self, code: Any, *_: Any) -> None:
        # An exception thrown into a generator: an event the interpreter cannot switch off at one place.
        self._watched(code)

    def _event(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self._watched(frame.f_code)

    def evidence(self) -> dict[str, Any]:
        """What the windows saw, for the timing message (``{}`` when nothing)."""
        return {k: v for k, v in (("foreign_code", dict(self.found)), ("hooks", list(self.hooks))) if v}


# The watch that last set this process's monitoring events (DISABLE is per code location, not per watch).
_LAST_WATCH: list[StepWatch | None] = [None]


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
