"""``verify.harness.watch`` without torch: whose code a function is, and both ways of watching (harness 1.16).

The watch uses ``sys.monitoring`` where the interpreter has it (Python 3.12 and newer, as on the GPU machines) and a
profile function elsewhere; each test here runs on every way this interpreter has. This file imports nothing but the
watch, so ``./dev test`` also runs it under a Python with ``sys.monitoring`` when the machine has one (CI's own
Python is 3.11).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verify.harness import watch as watch_module
from verify.harness.watch import StepWatch

HAS_MONITORING = hasattr(sys, "monitoring")
WAYS = [pytest.param(False, id="profile"),
        pytest.param(True, id="monitoring", marks=pytest.mark.skipif(
            not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+ (./dev test runs this file under one too)"))]


def _module(folder: Path, name: str, code: str) -> Any:
    path = folder / f"{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _fresh_claims() -> Iterator[None]:
    # Files are judged once a process: a test that writes one must not see another test's verdict.
    watch_module._compiled_shapes.cache_clear()
    yield
    watch_module._compiled_shapes.cache_clear()


@pytest.mark.parametrize("monitoring", WAYS)
def test_the_candidates_functions_are_counted_and_each_is_sent_once(tmp_path: Path, monitoring: bool) -> None:
    own = _module(tmp_path, "kernel_own", "def early(x):\n    return sorted(x)\ndef steps():\n    yield 1\n    yield 2\n")
    sent: list[tuple[str, bool]] = []
    watch = StepWatch([str(tmp_path)], on_found=lambda label, hook: sent.append((label, hook)), monitoring=monitoring)
    resumed = own.steps()
    next(resumed)
    with watch:
        assert watch.through_monitoring is monitoring
        own.early([2, 1])
        own.early([3])
        next(resumed)
        sorted([3, 1])
        os.path.join("a", "b")
    own.early([1])
    assert watch.found == {"early (kernel_own.py:1)": 2, "steps (kernel_own.py:3)": 1}, watch.found
    assert sent == [("early (kernel_own.py:1)", False), ("steps (kernel_own.py:3)", False)]


@pytest.mark.parametrize("monitoring", WAYS)
def test_code_that_claims_a_library_file_is_the_candidates(monitoring: bool) -> None:
    namespace: dict[str, Any] = {}
    exec(compile("def join(a, *parts):\n    return a + '/'.join(parts)\n", os.path.__file__, "exec"), namespace)
    watch = StepWatch(["/nonexistent"], monitoring=monitoring)
    with watch:
        os.path.join("a", "b")
        namespace["join"]("a", "b")
    assert watch.found == {f"join ({os.path.basename(os.path.__file__)}:1)": 1}, watch.found


@pytest.mark.parametrize("monitoring", WAYS)
def test_code_that_claims_the_harness_file_is_the_candidates(monitoring: bool) -> None:
    namespace: dict[str, Any] = {}
    exec(compile("def _folders(paths):\n    return ()\n", watch_module.__file__, "exec"), namespace)
    watch = StepWatch(["/nonexistent"], monitoring=monitoring)
    with watch:
        watch_module._folders(["/tmp"])
        namespace["_folders"](["/tmp"])
    assert watch.found == {"_folders (watch.py:1)": 1}, watch.found


@pytest.mark.parametrize("monitoring", WAYS)
def test_a_library_file_written_after_the_harness_started_is_the_candidates(tmp_path: Path, monkeypatch,
                                                                            monitoring: bool) -> None:
    library = tmp_path / "site-packages"
    library.mkdir()
    planted = _module(library, "planted", "def helper():\n    return 1\n")
    watch = StepWatch(["/nonexistent"], (str(library),), monitoring=monitoring)
    with watch:
        planted.helper()
    assert watch.found == {"helper (planted.py:1)": 1}, watch.found
    # The controls: a library file older than the harness's start is the library's.
    older = _module(library, "older", "def helper():\n    return 2\n")
    monkeypatch.setattr(watch_module, "_WATCH_STARTED", time.time() + 1)
    watch = StepWatch(["/nonexistent"], (str(library),), monitoring=monitoring)
    with watch:
        older.helper()
    assert watch.found == {}, watch.found
    # And one dated after now (made where the clock was set differently) was not written by this run.
    dated = _module(library, "dated", "def helper():\n    return 3\n")
    changed = os.stat(library / "dated.py").st_ctime
    monkeypatch.setattr(watch_module, "_WATCH_STARTED", changed - 100)
    monkeypatch.setattr(watch_module, "_NOW", lambda: changed - 50)
    watch = StepWatch(["/nonexistent"], (str(library),), monitoring=monitoring)
    with watch:
        dated.helper()
    assert watch.found == {}, watch.found


@pytest.mark.parametrize("monitoring", WAYS)
def test_a_library_function_whose_set_constant_lists_in_another_order_is_the_librarys(
        tmp_path: Path, monkeypatch, monitoring: bool) -> None:
    """A module's ``.pyc`` is marshalled by the process that compiled it: the members of ``x in {"a", "b"}``'s frozenset
    come in that process's string-hash order, which a compile here need not repeat. Found in CI: pytest's own
    ``raises`` (``x in {"match", "expected_exception", "check"}``) was counted as the candidate's in 8 of 60 hash seeds."""
    library = tmp_path / "site-packages"
    library.mkdir()
    monkeypatch.setattr(watch_module, "_WATCH_STARTED", time.time() + 1)
    lib = _module(library, "lib", "def f(x):\n    return x in {1, 9}\n\n\ndef g(x):\n    return x in {1, 9}\n")

    def with_set(code: Any, members: list[int]) -> Any:
        return code.replace(co_consts=tuple(frozenset(members) if isinstance(c, frozenset) else c
                                            for c in code.co_consts))

    lib.f.__code__ = with_set(lib.f.__code__, [9, 1])
    lib.g.__code__ = with_set(lib.g.__code__, [9, 10])
    assert repr(lib.f.__code__.co_consts) != repr(with_set(lib.f.__code__, [1, 9]).co_consts)
    watch = StepWatch(["/nonexistent"], (str(library),), monitoring=monitoring)
    with watch:
        lib.f(1)
        lib.g(1)
    # The control: a set with other members is not what the file compiles to.
    assert watch.found == {"g (lib.py:5)": 1}, watch.found


@pytest.mark.parametrize("monitoring", WAYS)
def test_an_import_inside_a_window_runs_only_the_interpreters_code(monitoring: bool) -> None:
    sys.modules.pop("colorsys", None)
    watch = StepWatch(["/nonexistent"], monitoring=monitoring)
    with watch:
        importlib.import_module("colorsys").rgb_to_hsv(0.2, 0.4, 0.4)
    assert watch.found == {} and watch.hooks == [], (watch.found, watch.hooks)
    assert watch_module._frozen_names().get("importlib._bootstrap") == "_frozen_importlib"


@pytest.mark.parametrize("monitoring", WAYS)
def test_an_exception_thrown_into_a_generator_is_watched_where_it_lands(tmp_path: Path, monitoring: bool) -> None:
    own = _module(tmp_path, "kernel_gen", "def steps():\n    try:\n        yield 1\n    except KeyError:\n        yield 2\n")
    watch = StepWatch([str(tmp_path)], monitoring=monitoring)
    library, mine = os.walk(str(tmp_path)), own.steps()
    next(library)
    next(mine)
    with watch:
        with pytest.raises(KeyError):
            library.throw(KeyError)
        assert mine.throw(KeyError) == 2
    assert watch.found == {"steps (kernel_gen.py:1)": 1}, watch.found


@pytest.mark.parametrize("monitoring", WAYS)
def test_a_profile_function_wrapped_in_a_partial_is_named(tmp_path: Path, monitoring: bool) -> None:
    own = _module(tmp_path, "kernel_hook", "def spy(tag, frame, event, arg):\n    pass\n")
    sent: list[tuple[str, bool]] = []
    watch = StepWatch([str(tmp_path)], on_found=lambda label, hook: sent.append((label, hook)), monitoring=monitoring)
    sys.setprofile(functools.partial(own.spy, "x"))
    try:
        with watch:
            pass
    finally:
        sys.setprofile(None)
    assert watch.hooks == ["profile partial (kernel_hook.py:1)"] and sent == [(watch.hooks[0], True)], watch.hooks


@pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+")
def test_a_monitoring_tool_of_the_candidates_is_named(tmp_path: Path) -> None:
    own = _module(tmp_path, "kernel_tool", "seen = []\ndef spy(code, offset):\n    seen.append(code)\n")
    monitoring = sys.monitoring
    watch = StepWatch([str(tmp_path)])
    tool = next(t for t in range(6) if monitoring.get_tool(t) is None)
    monitoring.use_tool_id(tool, "spy")
    try:
        monitoring.register_callback(tool, monitoring.events.PY_START, own.spy)
        with watch:
            sorted([2, 1])
    finally:
        monitoring.register_callback(tool, monitoring.events.PY_START, None)
        monitoring.free_tool_id(tool)
    assert watch.hooks == ["sys.monitoring 'spy' PY_START spy (kernel_tool.py:2)"], watch.hooks


@pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+")
def test_a_watch_whose_tool_was_taken_says_so_and_watches_with_a_profile_function(tmp_path: Path) -> None:
    own = _module(tmp_path, "kernel_taker", "def early():\n    return 1\n")
    watch = StepWatch([str(tmp_path)])
    assert watch.tool is not None
    sys.monitoring.free_tool_id(watch.tool)
    try:
        with watch:
            assert not watch.through_monitoring
            own.early()
    finally:
        sys.monitoring.use_tool_id(watch.tool, watch_module._WATCH_TOOL_NAME)
    assert watch.hooks == [f"sys.monitoring tool {watch.tool} taken from the watch by None"], watch.hooks
    assert watch.found == {"early (kernel_taker.py:1)": 1}, watch.found


@pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+")
def test_code_on_another_thread_is_not_counted_and_stays_watched(tmp_path: Path) -> None:
    # As with a profile function, which sees only its own thread: other threads are the background-threads check's.
    own = _module(tmp_path, "kernel_thread", "def early():\n    return 1\n")
    watch = StepWatch([str(tmp_path)])
    with watch:
        worker = threading.Thread(target=own.early)
        worker.start()
        worker.join()
        assert watch.found == {}, watch.found
        own.early()
    assert watch.found == {"early (kernel_thread.py:1)": 1}, watch.found



@pytest.mark.parametrize("monitoring", WAYS)
def test_a_held_series_counts_the_candidates_code_only_inside_its_windows(tmp_path: Path, monkeypatch,
                                                                          monitoring: bool) -> None:
    """Held (a timed series), the events stay on between windows: the timed calls run without the interpreter
    instrumenting every function again around them, and still only the windows count."""
    own = _module(tmp_path, "kernel_held", "def forward(x):\n    return x\ndef early(x):\n    return sorted(x)\n")
    switched: list[int] = []
    if watch_module._MON:
        set_events = watch_module._MON["set_events"]
        monkeypatch.setitem(watch_module._MON, "set_events", lambda tool, events: (switched.append(events),
                                                                                   set_events(tool, events))[1])
    watch = StepWatch([str(tmp_path)], monitoring=monitoring)
    with watch.holding():
        for _ in range(5):
            with watch:
                own.early([2, 1])
            own.forward(1)
            with watch:
                sorted([3, 1])
    assert watch.found == {"early (kernel_held.py:3)": 5}, watch.found
    assert watch.hooks == [], watch.hooks
    # Through sys.monitoring: on once for the series, off at its end (not twice a window).
    assert switched == ([watch_module._WATCHED_EVENTS, 0] if monitoring else []), switched


@pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+")
def test_a_held_watch_names_and_sets_back_what_the_candidate_changed_between_windows(tmp_path: Path) -> None:
    own = _module(tmp_path, "kernel_blind", "def quiet(*args):\n    return None\ndef early():\n    return 1\n")
    watch = StepWatch([str(tmp_path)])
    monitoring = sys.monitoring
    with watch.holding():
        with watch:
            pass
        # The candidate's timed call switches the watch's events off and puts its own callback in.
        monitoring.set_events(watch.tool, 0)
        monitoring.register_callback(watch.tool, monitoring.events.PY_START, own.quiet)
        with watch:
            own.early()
    assert watch.found == {"early (kernel_blind.py:3)": 1}, watch.found
    assert watch.hooks == ["sys.monitoring watch PY_START callback replaced by quiet (kernel_blind.py:1)",
                           "sys.monitoring watch events changed to 0"], watch.hooks


@pytest.mark.skipif(not HAS_MONITORING, reason="sys.monitoring needs Python 3.12+")
def test_nothing_of_the_watch_runs_between_held_windows(tmp_path: Path, monkeypatch) -> None:
    """Between windows (the timed call) the events stay set but no callback is registered: neither the candidate's
    functions nor judging a library function (compiling the file it claims, milliseconds) run the watch's code."""
    library = tmp_path / "site-packages"
    library.mkdir()
    monkeypatch.setattr(watch_module, "_WATCH_STARTED", time.time() + 1)
    lib = _module(library, "lib_first", "def helper():\n    return 1\n")
    own = _module(tmp_path, "kernel_between", "def forward():\n    return 1\n")
    watch = StepWatch([str(tmp_path / "kernel_between.py")], (str(library),))
    judged: list[tuple[str, bool]] = []
    real = watch.is_own_code
    monkeypatch.setattr(watch, "is_own_code", lambda code: (judged.append((code.co_name, watch._open)), real(code))[1])
    with watch.holding():
        with watch:
            pass
        judged.clear()
        for _ in range(3):
            lib.helper()
            own.forward()
        assert judged == [], judged
        with watch:
            lib.helper()
        assert judged == [("helper", True)], judged
        own.forward()
    assert watch.found == {} and watch.hooks == [], (watch.found, watch.hooks)
