"""torch.compile's own compiling holds nothing of a shared GPU gate: Dynamo traces and Inductor writes code on the CPU.

A candidate that calls ``torch.compile`` compiles in its first call, and again at the shape and init probes' other
sizes; the trusted child compiles the reference for its ``torch.compile`` baseline. On the H100 (session 57) three
of the bench's 40 CUDA-L1 kernels (level 2 tasks 34, 49 and 85) held their seat 2-7 s a piece doing so, and every
timed series waiting for the GPU alone waited for them: replayed with those pieces off the GPU, the pass went from
16.0 to 20.0 kernels a minute. Dynamo brackets each frame's compile with its compile callbacks
(``torch._dynamo.callback``); between them the child holds nothing (``verify.harness.gate.off_gpu``), as during a
JIT build of torch's extensions.

Autotuning inside a compile (``mode="max-autotune"``'s choices, ``pad_mm``'s padding test) times kernels on the GPU:
its entry points (``AUTOTUNE_ENTRY_POINTS``) share the GPU again for the rest of that compile
(``verify.harness.gate.back_on_gpu``). What stays uncovered: an autotuning process of Inductor's own
(``autotune_in_subproc``) and the few random fills Inductor makes for its padding test before it times it; a
candidate's thread could already run work while its child builds (``docs/verify.md``, "A hostile neighbour"). A
compile in another thread than the one that installed the callbacks, and a compile with the GPU alone (a timed
series), keep what the child holds; at most ``COMPILE_AWAYS`` compiles a child let go, so the gate's request limit
(``GATE_REQUESTS``) stays far.

Example:
    >>> install_compile_off_gpu({}, channel=None, sync=lambda: None)
    False
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from verify.harness.common import stream_capturing
from verify.harness.gate import HOLD, back_on_gpu, off_gpu

COMPILE_AWAYS = 8
"""Compiles a child lets go of the GPU for, at most (each costs two or three of its ``GATE_REQUESTS``)."""

AUTOTUNE_ENTRY_POINTS: tuple[tuple[str, str, str], ...] = (
    ("torch._inductor.runtime.benchmarking", "benchmarker", "benchmark"),
    ("torch._inductor.runtime.benchmarking", "benchmarker", "benchmark_gpu"),
    ("torch._inductor.runtime.benchmarking", "benchmarker", "benchmark_gpu_with_cuda_graph"),
    ("torch._inductor.select_algorithm", "AlgorithmSelectorCache", "__call__"),
)
"""``(module, object, method)``: where Inductor's autotuning starts work on the GPU during a compile. The benchmarker
is required (without it no compile lets go); the others are wrapped where this torch has them."""

REQUIRED_ENTRY_POINT = AUTOTUNE_ENTRY_POINTS[1]

COMPILE_NAMES: tuple[str, ...] = ("torch.compile", "_dynamo", "_inductor")
"""Names in a candidate's code for which the run child loads Dynamo before the candidate's import
(``load_dynamo_for``), so that a compile in the model's constructor lets go too (level 2 task 49's first compile held
its seat 12.9 s in session 58's first pass: Dynamo came with the constructor, after the child last looked)."""

DYNAMO_TRIGGER = "DYNAMO"
"""The compile callbacks' trigger for a frame's compile; the others (CUDA-graph recording, Triton's autotuning, a
lazy backward) run kernels, and keep the hold."""


class CompileAway:
    """Dynamo's compile callbacks for one child: let go of the gate at a compile's start, share again at its end.

    Example:
        >>> away = CompileAway({}, channel=None, sync=lambda: None)
        >>> away.start(None), away.count
        (None, 0)
    """

    def __init__(self, job: dict[str, Any], channel: Any, sync: Callable[[], None]) -> None:
        self.job, self.channel, self.sync = job, channel, sync
        self.thread = threading.get_ident()
        self.count = 0
        self.waited_s = 0.0
        """Time spent asking to share again (behind other verifications' timed series), not compiling."""
        self.block: contextlib.ExitStack | None = None

    def start(self, args: Any = None) -> None:
        """At the outermost compile's start (Dynamo's start callback)."""
        trigger = getattr(getattr(args, "callback_trigger", None), "name", None)
        if (trigger != DYNAMO_TRIGGER or self.block is not None or self.count >= COMPILE_AWAYS or HOLD.alone
                or HOLD.off or threading.get_ident() != self.thread or not self.job.get("gate_grants")
                or stream_capturing()):
            return
        self.channel.send("mark", phase="compile")
        block = contextlib.ExitStack()
        block.enter_context(off_gpu(self.job, self.channel, self.sync))
        self.block = block
        self.count += 1
        if not wrap_autotuning(self.on_gpu):
            self.on_gpu()

    def end(self, args: Any = None) -> None:
        """At the outermost compile's end: share again (waiting behind any timed series meanwhile)."""
        if threading.get_ident() != self.thread:
            return
        block, self.block = self.block, None
        if block is not None:
            began = time.perf_counter()
            block.close()
            self.waited_s += time.perf_counter() - began

    def on_gpu(self) -> None:
        """Before autotuning's GPU work inside a compile this child let go for."""
        if self.block is None or threading.get_ident() != self.thread:
            return
        began = time.perf_counter()
        if back_on_gpu(self.job, self.channel):
            self.waited_s += time.perf_counter() - began
            self.channel.send("mark", phase="compile-autotunes")


def wrap_autotuning(before: Callable[[], None]) -> bool:
    """Call ``before`` first in each of ``AUTOTUNE_ENTRY_POINTS`` this torch has (importing their modules); whether
    the required one is wrapped."""
    required = False
    for module_name, owner_name, method in AUTOTUNE_ENTRY_POINTS:
        try:
            owner = getattr(importlib.import_module(module_name), owner_name)
        except (ImportError, AttributeError):
            continue
        done = _wrap(owner, method, before)
        required |= done and (module_name, owner_name, method) == REQUIRED_ENTRY_POINT
    return required


def _wrap(owner: Any, name: str, before: Callable[[], None]) -> bool:
    original = getattr(owner, name, None)
    if original is None:
        return False
    if getattr(original, "ka_before", None) == before:
        # Wrapped at an earlier compile (a bound method is made anew at each look-up, so equal, not identical).
        return True

    @functools.wraps(original)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        before()
        return original(*args, **kwargs)

    wrapped.ka_before = before  # type: ignore[attr-defined]
    setattr(owner, name, wrapped)
    return True


def install_compile_off_gpu(job: dict[str, Any], channel: Any, sync: Callable[[], None]) -> bool:
    """Register ``CompileAway``'s callbacks with Dynamo once Dynamo is loaded; whether they are in place.

    Only behind a shared gate, and only when the candidate (or the baseline) has loaded Dynamo already: importing it
    costs a second, and most kernels never compile. Call it again later (before each trial, each probe): it does
    nothing once installed, and nothing while Dynamo is not loaded.
    """
    if not job.get("gate_grants") or "torch._dynamo" not in sys.modules:
        return False
    try:
        from torch._dynamo.callback import CallbackTrigger, callback_handler
    except ImportError:
        return False
    if not hasattr(CallbackTrigger, DYNAMO_TRIGGER) or not hasattr(callback_handler, "register_start_callback"):
        return False
    if getattr(callback_handler, "ka_compile_away", None) is not None:
        return True
    away = CompileAway(job, channel, sync)
    callback_handler.register_start_callback(away.start)
    callback_handler.register_end_callback(away.end)
    callback_handler.ka_compile_away = away
    return True


def load_dynamo_for(code: str) -> bool:
    """Import Dynamo now when ``code`` names any of ``COMPILE_NAMES`` (it would when it compiles); whether it is loaded.

    Example:
        >>> load_dynamo_for("import torch")
        False
    """
    if not any(name in code for name in COMPILE_NAMES):
        return False
    try:
        importlib.import_module("torch._dynamo")
    except Exception:  # noqa: BLE001 - a torch without a working Dynamo: the candidate will find out itself
        return False
    return True


def compile_gate_wait_s() -> float:
    """Seconds this process's compiles spent waiting to share the GPU again (0 without ``CompileAway``): a compile's
    own time is its span less these."""
    callback = sys.modules.get("torch._dynamo.callback")
    away = getattr(getattr(callback, "callback_handler", None), "ka_compile_away", None)
    return float(getattr(away, "waited_s", 0.0))
