"""The correctness policy's element-wise work in one pass per chunk, compiled with numba where it is installed.

``tensors.judge_output`` reads each element of a large output about twenty times as separate torch
operations (float64 copies, differences, comparisons, counts, norms): 40 ns an element on one thread, several
seconds of the parent's CPU for each verification with outputs of tens of millions of elements.
``fused_judge_part`` does the same arithmetic in one loop at about 6 ns an element, ``fused_l2_norms`` the
norms of ``tensors.fails_l2_bounds`` (the weak check, the constant outputs), and ``fused_stale_counts`` the
statefulness probe's counts (``tensors.stale_counts``). The policy's pass handles only
chunks where the output and both references are finite, and says so: any other chunk goes to the torch
operations, which know the policy's rules for non-finite values. Where both run, the counts and maxima are the
same, and the norms the same up to the order of a sum (``tests/verify/test_verify_fused.py``). The probe's counts
are the same float64 comparisons in any order, so they are always the same.

numba is optional: without it (or with ``KA_JUDGE_FUSED=0``) every chunk goes to the torch operations, so the
eval script still needs only Python and torch. Compiling the passes costs one to three seconds of CPU in
each process, so outputs below ``FUSED_MIN_ELEMENTS`` never use them, and the parent compiles them in the
background (``warm_fused``) once the references say the outputs are large, while the candidate runs.

Example:
    >>> FUSED_MIN_ELEMENTS
    16777216
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

FUSED_MIN_ELEMENTS = 1 << 24
"""Outputs smaller than this are judged by the torch operations alone. Compiling took 2.5 s on a loaded 16-core
H200 host (session 29); there, outputs of 16.8M elements were judged in 1.8-2.3 s instead of 4.3-5.4 s and their
parents took 14-15.5 CPU-seconds instead of 17-18, so from about this size on the compile pays for itself."""

FUSED_ENV = "KA_JUDGE_FUSED"
"""``0``: judge every output with the torch operations (for comparisons, or where numba misbehaves)."""

_lock = threading.Lock()


class Passes(NamedTuple):
    """The compiled passes (``numba.njit``): ``policy_pass``, ``l2_pass`` and ``stale_pass``."""

    policy: Any
    l2: Any
    stale: Any


_compiled: list[Passes | None] = []
_used_lock = threading.Lock()
FUSED_USED: dict[str, int] = {"chunks": 0, "elements": 0, "norm_passes": 0, "stale_chunks": 0}
"""What the fused passes judged in this process (the parent's report says it under ``judge_fused``): chunks and
elements through the policy's pass, passes of the norms, and chunks of the statefulness probe's counts. Zero where
the torch operations judged everything."""


def _used(**counts: int) -> None:
    with _used_lock:
        for name, value in counts.items():
            FUSED_USED[name] += value


def fused_enabled(elements: int, env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether an output of ``elements`` elements is judged by the fused passes: large enough, not switched off,
    and numba importable.

    Example:
        >>> fused_enabled(16, {}), fused_enabled(1 << 30, {"KA_JUDGE_FUSED": "0"})
        (False, False)
    """
    return elements >= FUSED_MIN_ELEMENTS and env.get(FUSED_ENV, "1") != "0" and fused_kernels() is not None


def fused_kernels() -> Passes | None:
    """The passes under ``numba.njit``, or None without numba. Each is compiled for a dtype combination at its
    first call with it (``warm_fused`` does the usual one ahead)."""
    with _lock:
        if not _compiled:
            try:
                import numba
                import numpy
            except ImportError:
                _compiled.append(None)
            else:
                jit = numba.njit(nogil=True, cache=False)
                _compiled.append(Passes(jit(policy_pass(numpy.float64)), jit(l2_pass(numpy.float64)),
                                        jit(stale_pass(numpy.float64))))
        return _compiled[0]


def warm_fused(elements: int) -> threading.Thread | None:
    """Compile the passes in a background thread for float32 outputs against float64 and float32 references,
    if an output of ``elements`` elements will use them; the thread, or None when nothing is compiled.

    Example:
        >>> warm_fused(16) is None
        True
    """
    if not fused_enabled(elements):
        return None
    thread = threading.Thread(target=compile_fused, name="ka-fused-compile", daemon=True)
    thread.start()
    return thread


def compile_fused(env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Compile the passes for float32 outputs against float64 and float32 references (the probe's for float32
    outputs and references), here and now; whether they are (False without numba or with ``KA_JUDGE_FUSED=0``). A
    compiled pass is not compiled again.

    Example:
        >>> compile_fused({"KA_JUDGE_FUSED": "0"})
        False
    """
    if env.get(FUSED_ENV, "1") == "0":
        return False
    kernels = fused_kernels()
    if kernels is None:
        return False
    import numpy

    o, r, r32 = numpy.zeros(1, numpy.float32), numpy.zeros(1, numpy.float64), numpy.zeros(1, numpy.float32)
    kernels.policy(o, r, r32, True, 0.0, 0.0, 1.0, 1)
    values = numpy.zeros(1, numpy.float64)
    kernels.l2(o, True, values, values.copy(), r, r32, True)
    kernels.stale(o, r32, o, 0.0)
    return True


def fused_judge_part(out: Any, ref64: Any, ref32: Any | None, policy: dict[str, Any], torch: Any) -> dict[str, Any] | None:
    """``tensors._judge_part``'s result for one flat CPU chunk, or None where the chunk holds a non-finite value
    or numba is missing (the caller judges it with the torch operations then).

    The chunk must start at a multiple of ``policy["fp32_block"]`` of the whole output, as
    ``tensors.judge_output``'s chunks do, so that the blocks of the fp32 allowance are the same.
    """
    kernels = fused_kernels()
    if kernels is None:
        return None
    o, r = _array(out, torch), _array(ref64, torch)
    has32 = ref32 is not None
    special, mismatches, outside, ss_r, ss_d, ss_32, max_abs, max_rel, ref_absmax = kernels.policy(
        o, r, _array(ref32, torch) if has32 else _empty(), has32, float(policy["atol"]), float(policy["rtol"]),
        float(policy["fp32_factor"]), int(policy["fp32_block"]))
    if special:
        return None
    _used(chunks=1, elements=int(o.size))
    part = {"mismatches": int(mismatches), "outside": int(outside), "overflowed": 0, "nonfinite_where_finite": 0,
            "nonfinite": 0, "undefined": 0, "ref_norm": math.sqrt(ss_r), "diff_norm": math.sqrt(ss_d),
            "max_abs": float(max_abs), "max_rel": float(max_rel), "ref_absmax": float(ref_absmax)}
    if has32:
        part["fp32_norm"] = math.sqrt(ss_32)
    return part


def fused_l2_norms(outs: list[Any], ref64: Any, ref32: Any | None, torch: Any) -> tuple[float, float, list[float]] | None:
    """``tensors.fails_l2_bounds``'s norms of one flat CPU chunk: (‖r‖, ‖r32 - r‖ or 0, [‖o - r‖ for each of
    ``outs``]), where an entry of ``outs`` is a chunk, a number standing for an output holding it everywhere, or
    None (NaN); None without numba. Non-finite values give non-finite norms, as torch's do. The numbers share one
    pass over the reference, and each chunk among ``outs`` takes one more.
    """
    import numpy

    kernels = fused_kernels()
    if kernels is None:
        return None
    r = _array(ref64, torch)
    has32 = ref32 is not None
    r32 = _array(ref32, torch) if has32 else _empty()
    numbers = [k for k, o in enumerate(outs) if isinstance(o, float)]
    tensors = [k for k, o in enumerate(outs) if o is not None and not isinstance(o, float)]
    diffs = [math.nan] * len(outs)
    values = numpy.array([outs[k] for k in numbers], dtype=numpy.float64)
    sums = numpy.zeros(len(numbers), dtype=numpy.float64)
    ss_r, ss_32, _ = kernels.l2(_empty(), False, values, sums, r, r32, has32)
    for k, total in zip(numbers, sums.tolist(), strict=True):
        diffs[k] = math.sqrt(total)
    no_values = numpy.empty(0, dtype=numpy.float64)
    for k in tensors:
        diffs[k] = math.sqrt(kernels.l2(_array(outs[k], torch), True, no_values, no_values, r, r32, False)[2])
    _used(norm_passes=1 + len(tensors))
    return math.sqrt(ss_r), math.sqrt(ss_32), diffs


def fused_stale_counts(y2: Any, r1: Any, r2: Any, threshold: float, torch: Any) -> tuple[int, int] | None:
    """``tensors.stale_counts``'s (moved, stale) on one flat CPU chunk of each tensor, for the probe's
    ``threshold``; None without numba.

    Example:
        >>> import torch
        >>> r1, r2 = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 5.0, 3.0])
        >>> fused_stale_counts(r1, r1, r2, 0.03, torch) in (None, (1, 1))
        True
    """
    kernels = fused_kernels()
    if kernels is None:
        return None
    moved, stale = kernels.stale(_array(r1, torch), _array(r2, torch), _array(y2, torch), float(threshold))
    _used(stale_chunks=1)
    return int(moved), int(stale)


def _empty() -> Any:
    """An empty float32 array for an argument that is not used: one compiled variant serves both cases."""
    import numpy

    return numpy.empty(0, dtype=numpy.float32)


def _array(t: Any, torch: Any) -> Any:
    """A contiguous float32 or float64 NumPy view of a CPU tensor (other dtypes converted to float64, exactly as
    the torch operations convert them)."""
    t = t.detach()
    if t.dtype not in (torch.float32, torch.float64):
        t = t.to(torch.float64)
    return t.contiguous().numpy()


def policy_pass(f64: Any) -> Callable[..., tuple[bool, int, int, float, float, float, float, float, float]]:
    """The pass, reading every element as ``f64`` (``numpy.float64``: numba's ``float()`` keeps a float32 a
    float32, and a compiled function cannot import, so the type comes in from outside).

    The pass maps ``(o, r, r32, has32, atol, rtol, factor, block)`` to (special, mismatches, outside atol/rtol,
    sum of r², of (o - r)², of (r32 - r)², max |o - r|, max relative error, max |r|), each as
    ``tensors._judge_part`` computes it; ``special`` when a value is not finite. Plain Python, so it also runs
    (slowly) uncompiled.

    Example:
        >>> import numpy
        >>> r = numpy.array([1.0, 2.0])
        >>> policy_pass(numpy.float64)(numpy.array([1.0, 2.5], numpy.float32), r, r[:0], False, 0.01, 0.01, 8.0, 64)[:3]
        (False, 1, 1)
    """

    def run(o: Any, r: Any, r32: Any, has32: bool, atol: float, rtol: float, factor: float,
            block: int) -> tuple[bool, int, int, float, float, float, float, float, float]:
        n = r.shape[0]
        mismatches = 0
        outside = 0
        ss_r = 0.0
        ss_d = 0.0
        ss_32 = 0.0
        max_abs = 0.0
        max_rel = 0.0
        ref_absmax = 0.0
        for start in range(0, n, block):
            end = min(n, start + block)
            bound = 0.0
            if has32:
                for i in range(start, end):
                    r32_i = f64(r32[i])
                    if not math.isfinite(r32_i):
                        return True, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
                    e = abs(r32_i - f64(r[i]))
                    if e > bound:
                        bound = e
                bound = factor * bound
            # Sums by block, then added up: closer to torch's vectorised sums than one running sum.
            block_r = 0.0
            block_d = 0.0
            block_32 = 0.0
            for i in range(start, end):
                o_i = f64(o[i])
                r_i = f64(r[i])
                if not (math.isfinite(o_i) and math.isfinite(r_i)):
                    return True, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
                d = abs(o_i - r_i)
                r_abs = abs(r_i)
                kb = d <= atol + rtol * r_abs
                if not kb:
                    outside += 1
                    if not (has32 and d <= bound):
                        mismatches += 1
                block_r += r_i * r_i
                block_d += d * d
                if has32:
                    e32 = f64(r32[i]) - r_i
                    block_32 += e32 * e32
                if d > max_abs:
                    max_abs = d
                rel = d / max(r_abs, 1e-6)
                if rel > max_rel:
                    max_rel = rel
                if r_abs > ref_absmax:
                    ref_absmax = r_abs
            ss_r += block_r
            ss_d += block_d
            ss_32 += block_32
        return False, mismatches, outside, ss_r, ss_d, ss_32, max_abs, max_rel, ref_absmax

    return run


def l2_pass(f64: Any) -> Callable[..., tuple[float, float, float]]:
    """The norms' pass, reading every element as ``f64`` (see ``policy_pass``).

    It maps ``(o, has_o, values, value_sums, r, r32, has32)`` to the sums of r², of (r32 - r)² and of (o - r)²
    (0 unless ``has_o``), and adds the sum of (value - r)² for each of ``values`` to ``value_sums``; each in
    float64, as ``tensors.fails_l2_bounds``'s torch operations compute them (no scaling: a square that
    overflows gives infinity there too).

    Example:
        >>> import numpy
        >>> r, sums = numpy.array([3.0, 4.0]), numpy.zeros(2)
        >>> [float(x) for x in l2_pass(numpy.float64)(r, True, numpy.array([0.0, 3.0]), sums, r, r[:0], False)]
        [25.0, 0.0, 0.0]
        >>> sums.tolist()
        [25.0, 1.0]
    """

    def run(o: Any, has_o: bool, values: Any, value_sums: Any, r: Any, r32: Any,
            has32: bool) -> tuple[float, float, float]:
        ss_r = 0.0
        ss_32 = 0.0
        ss_o = 0.0
        n = r.shape[0]
        m = values.shape[0]
        # The first two values (the weak check's zero and mean) are summed in registers by block, like the others.
        v0 = values[0] if m > 0 else 0.0
        v1 = values[1] if m > 1 else 0.0
        for start in range(0, n, 64):
            block_r = 0.0
            block_32 = 0.0
            block_o = 0.0
            block_0 = 0.0
            block_1 = 0.0
            for i in range(start, min(n, start + 64)):
                r_i = f64(r[i])
                block_r += r_i * r_i
                if has32:
                    e = f64(r32[i]) - r_i
                    block_32 += e * e
                if has_o:
                    d = f64(o[i]) - r_i
                    block_o += d * d
                if m > 0:
                    d = v0 - r_i
                    block_0 += d * d
                if m > 1:
                    d = v1 - r_i
                    block_1 += d * d
                for k in range(2, m):
                    v = values[k] - r_i
                    value_sums[k] += v * v
            ss_r += block_r
            ss_32 += block_32
            ss_o += block_o
            if m > 0:
                value_sums[0] += block_0
            if m > 1:
                value_sums[1] += block_1
        return ss_r, ss_32, ss_o

    return run


def stale_pass(f64: Any) -> Callable[..., tuple[int, int]]:
    """The statefulness probe's pass, reading every element as ``f64`` (see ``policy_pass``).

    It maps ``(a, b, y, threshold)`` (the references for X and for X', the candidate's output for X') to
    (moved, stale): an element moved when |b - a| is finite and above ``threshold``, and is stale when |y - b| is
    not at most half that move (a NaN output is stale), as ``tensors.stale_counts``'s torch operations count them.

    Example:
        >>> import numpy
        >>> a, b = numpy.array([1.0, 2.0, 3.0]), numpy.array([1.0, 5.0, numpy.inf])
        >>> stale_pass(numpy.float64)(a, b, a, 0.03), stale_pass(numpy.float64)(a, b, b, 0.03)
        ((1, 1), (1, 0))
    """

    def run(a: Any, b: Any, y: Any, threshold: float) -> tuple[int, int]:
        moved = 0
        stale = 0
        for i in range(b.shape[0]):
            b_i = f64(b[i])
            move = abs(b_i - f64(a[i]))
            if math.isfinite(move) and move > threshold:
                moved += 1
                if not abs(f64(y[i]) - b_i) <= 0.5 * move:
                    stale += 1
        return moved, stale

    return run
