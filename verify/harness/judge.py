"""The parent's judgement: every check of ``verify-threats.md`` as its own verdict, with evidence.

Nothing here trusts the candidate's process: it reads the reports the children sent (messages and saved
outputs), the references the trusted child computed, and decides. Each check is one function of the
``Evidence``; a check that has nothing to look at says ``skip`` and why. The tolerance policy is data
(``TOLERANCE``) and is recorded with every result.

Example:
    >>> TOLERANCE["atol"], TOLERANCE["rtol"]
    (0.01, 0.01)
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from verify.harness.context import automatic_changes, context_changes
from verify.harness.static import CHECKS, kernel_names, static_verdicts
from verify.harness.tensors import (
    bit_equal,
    call_distance,
    calls_agree,
    error_stats,
    fails_l2_bound,
    fails_l2_bounds,
    is_constant,
    judge_output,
    stale_counts,
)
from verify.harness.timing import device_ms

TOLERANCE: dict[str, Any] = {
    "atol": 1e-2,
    "rtol": 1e-2,
    "max_rel_l2": 1e-2,
    "fp32_factor": 8.0,
    "fp32_block": 64,
    "fp32_l2_factor": 8.0,
    "precision_factor": 32.0,
    "fp32_floor": 1e-6,
    "timed_fingerprint_rtol": 5e-2,
    "timed_precision_floor": 1e-4,
    "degenerate_sensitivity": 1e-3,
    "stream_cover_rtol": 0.10,
    "stream_cover_atol_ms": 0.005,
    "gap_iqr_factor": 1.5,
    "gap_floor_ms": 0.03,
    "gap_rtol": 0.05,
    "gap_reference_factor": 2.0,
    "launch_gain_iqr_factor": 1.0,
    "specialised_factor": 10.0,
    "describe": (
        "correct when, on every trial, every element satisfies |out - ref64| <= atol + rtol*|ref64| (KernelBench's "
        "1e-2/1e-2) OR |out - ref64| <= fp32_factor x the fp32 reference's own error vs float64 (maximum over its "
        "block of fp32_block elements), AND ||out - ref64|| / ||ref64|| <= max(max_rel_l2, fp32_l2_factor x the fp32 "
        "reference's relative L2 error) (so zeros and constants never pass) AND no output is NaN/inf where the "
        "reference is finite (where the reference is NaN/inf only the same special value is right, except that on "
        "inputs off the task's own distribution a NaN reference is undefined and not judged, and both relative "
        "L2 errors are taken over its finite elements); mismatches are counted exactly and each trial says which bound applied. Lower precision is flagged when the relative L2 error "
        "exceeds precision_factor x max(the fp32 reference's own relative L2 error vs float64, fp32_floor), on a trial, "
        "or when the timed calls' outputs differ from the reference's eager outputs on the same inputs by a median "
        "relative L2 (from their fingerprints) above max((precision_factor + 1) x the largest fp32 reference error of "
        "the trials, timed_precision_floor). "
        "Timing (side-streams): each stream other than the timed one must be busy per call no longer than the event "
        "time x (1 + stream_cover_rtol) + stream_cover_atol_ms; wall - max(host, event) per call must not exceed a "
        "trivial kernel's by more than max(gap_iqr_factor x both interquartile ranges, gap_floor_ms, gap_rtol x the call's "
        "max(host, event) time), nor gap_reference_factor x the task reference's own (eager, CUDA graph) by that much. "
        "Launch-bound: a gain over eager counts only beyond launch_gain_iqr_factor x both series' interquartile ranges. "
        "Hard-coding: right on some input distributions and wrong on others is specialised, unless every wrong trial "
        "failed only by the element-wise and L2 bounds, with a finite relative L2 error within specialised_factor x "
        "the largest of the right trials' and its own fp32 reference's: then the kernel is about as far off on every "
        "input, imprecise rather than specialised."
    ),
}

# Fails of these checks mean the answer is wrong or not the kernel's; fails of the others flag the result.
CORRECTNESS_CHECKS: frozenset[str] = frozenset({
    "compiles", "runs", "correctness", "stale-memory", "launch-errors", "output-aliasing", "input-mutation",
    "hard-coding", "problem-change", "fake-tensor", "caching", "background-threads", "out-of-bounds",
})

# Speed-of-light ceilings (dense tensor-core FLOP/s, memory bytes/s) by GPU name; generous on purpose.
PEAKS: tuple[tuple[str, float, float], ...] = (
    (r"H200", 989e12, 4.8e12),
    (r"H100", 989e12, 3.35e12),
    (r"H20\b", 148e12, 4.0e12),
    (r"B200|B100|GB200", 2250e12, 8.0e12),
    (r"A100", 312e12, 2.04e12),
    (r"L40S", 362e12, 0.864e12),
    (r"L40|L4\b|A10\b|A40|RTX", 362e12, 1.0e12),
)
DEFAULT_PEAK = (2500e12, 10e12)


@dataclass
class ChildReport:
    """What one child process left behind: exit status, messages (with receive times), rejected lines, log."""

    role: str
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    exited_at: float | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    received: list[float] = field(default_factory=list)
    rejects: list[str] = field(default_factory=list)
    log_tail: str = ""
    started: str = "exec"
    cpu_s: float | None = None

    def all(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        """Messages of ``kind`` whose fields equal ``match``."""
        return [m for m in self.messages if m.get("kind") == kind and all(m.get(k) == v for k, v in match.items())]

    def first(self, kind: str, **match: Any) -> dict[str, Any] | None:
        """The first such message, or None."""
        found = self.all(kind, **match)
        return found[0] if found else None

    def time_of(self, kind: str) -> float | None:
        """When the parent received the first message of ``kind``."""
        for message, at in zip(self.messages, self.received, strict=False):
            if message.get("kind") == kind:
                return at
        return None

    @property
    def ok(self) -> bool:
        """Exited 0, in time, without an error, having sent its final message (compiled, or done)."""
        final = "compiled" if self.role == "compile" else "done"
        if self.died_in_shape_probe:
            return not self.first("error")
        return (self.returncode == 0 and not self.timed_out and not self.first("error")
                and (not self.messages_expected or bool(self.first(final))))

    @property
    def died_in_shape_probe(self) -> bool:
        """A run child that reported everything, then crashed or hung at the other shapes (its last step)."""
        if self.role != "run" or self.first("done") or (self.returncode == 0 and not self.timed_out):
            return False
        kinds = [(m.get("kind"), m.get("phase") or m.get("which")) for m in self.messages]
        marks = [kinds.index(m) for m in (("mark", "shape-probe"), ("mark", "init-probe")) if m in kinds]
        return bool(marks) and ("kernels", "candidate") in kinds[:min(marks)]

    @property
    def messages_expected(self) -> bool:
        """Whether this child reports through the channel (ncu and sanitizer runs may not)."""
        return self.role in ("trusted", "compile", "run", "profile")

    def failure(self) -> str:
        """One line on why the child failed."""
        if self.timed_out:
            return f"{self.role} step killed after its {self.seconds:.0f}s timeout (hang?)"
        error = self.first("error")
        if error:
            return f"{self.role} step: {error.get('message', '')}"
        if self.returncode and self.returncode < 0:
            return f"{self.role} step died from signal {-self.returncode}"
        if self.returncode == 0:
            return f"{self.role} step exited without finishing its report: {self.log_tail[-400:]}"
        return f"{self.role} step exited with code {self.returncode}: {self.log_tail[-400:]}"


class Judgements:
    """``judge_output``'s answers within one judge, by the identity of the tensors it compared and the policy's
    contents. Checks that ask again about an output already judged against the same reference (stale memory and
    launch errors ask about each deep trial's first call, whose statistics the trial already took) read the first
    answer instead of judging every element again: three full passes over level 2 task 34's 1.07 billion elements
    became one (and their L2 passes none, ``_passes``). It keeps what it compared, so no id it holds can be reused
    by another tensor; only the evidence's own tensors go through it (never a temporary, such as a constant output
    built to be judged once).

    Example:
        >>> import torch
        >>> judged, ref = Judgements(), torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> out, policy = torch.tensor([1.0, 2.5]), dict(TOLERANCE)
        >>> judged.judge(out, ref, None, policy)["mismatches"], judged.reused
        (1, 0)
        >>> judged.judge(out, ref, None, policy)["mismatches"], judged.reused
        (1, 1)
    """

    def __init__(self) -> None:
        self._found: dict[tuple[Any, ...], tuple[tuple[Any, Any, Any], dict[str, Any]]] = {}
        self.reused = 0

    @staticmethod
    def _key(out: Any, ref64: Any, ref32: Any | None, policy: dict[str, Any]) -> tuple[Any, ...] | None:
        try:
            key = (id(out), id(ref64), id(ref32), tuple(sorted(policy.items())))
            hash(key)
        except TypeError:
            return None
        return key

    def judge(self, out: Any, ref64: Any, ref32: Any | None, policy: dict[str, Any]) -> dict[str, Any]:
        """``judge_output(out, ref64, ref32, policy)``, judged once (a copy of the kept answer after that)."""
        key = self._key(out, ref64, ref32, policy)
        if key is None:
            return judge_output(out, ref64, ref32, policy)
        if key in self._found:
            self.reused += 1
        else:
            self._found[key] = ((out, ref64, ref32), judge_output(out, ref64, ref32, policy))
        return dict(self._found[key][1])


@dataclass
class Evidence:
    """Everything the parent holds when it judges."""

    form: str
    kernel_code: str
    static: list[dict[str, Any]]
    trials: list[dict[str, Any]]
    trusted: ChildReport | None = None
    compile: ChildReport | None = None
    run: ChildReport | None = None
    sanitizer: ChildReport | None = None
    refs: dict[int, dict[str, Any]] = field(default_factory=dict)
    shape_ref: dict[str, Any] | None = None
    shape_out: list[Any] | None = None
    init_ref: dict[str, Any] | None = None
    init_out: list[Any] | None = None
    state_probe: dict[str, Any] | None = None
    outputs: dict[tuple[int, str], list[Any]] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=lambda: dict(TOLERANCE))
    trial_stats: list[dict[str, Any]] = field(default_factory=list)
    judgements: Judgements = field(default_factory=Judgements, repr=False)


def _verdict(verdict: str, *evidence: str) -> dict[str, Any]:
    return {"verdict": verdict, "evidence": [e for e in evidence if e]}


def _static_part(ev: Evidence, check: str, findings: list[dict[str, Any]] | None = None) -> tuple[str, list[str]]:
    grouped = static_verdicts(ev.static if findings is None else findings).get(check)
    if not grouped:
        return "pass", []
    lines = [f"static: line {f['line']}: {f['why']}: {f['evidence']}" for f in grouped["findings"][:8]]
    if len(grouped["findings"]) > 8:
        lines.append(f"static: ... {len(grouped['findings']) - 8} more")
    return grouped["verdict"], lines


def _worst(*verdicts: str) -> str:
    order = ["skip", "pass", "warn", "fail"]
    return max(verdicts, key=order.index)


def _ran(ev: Evidence) -> bool:
    return ev.run is not None and ev.run.ok and bool(ev.run.first("done"))


def _trial_messages(ev: Evidence) -> list[dict[str, Any]]:
    return ev.run.all("trial") if ev.run else []


def trial_policy(policy: dict[str, Any], trial: dict[str, Any]) -> dict[str, Any]:
    """The correctness policy for one trial: off the task's own input distribution a NaN reference is undefined.

    The harness also draws inputs the task never makes (negative, heavy-tailed, ...), where PyTorch's answer can
    be NaN (the log of a negative probability). There an honest rewrite may give another value: CUDA-L1's level 1
    task 98 kernel computes KL divergence as ``xlogy(t, t / p)``, finite for two negative inputs where
    ``kl_div(log(p), t)`` is NaN, and failed correctness on that alone (harness 1.9). Such elements are not
    judged and are counted (``undefined``); on the task's own inputs NaN stays the only right answer to NaN.

    Example:
        >>> trial_policy({"atol": 0.01}, {"distribution": "negative"})["nan_reference_undefined"]
        True
        >>> trial_policy({"atol": 0.01}, {"distribution": "task"})["nan_reference_undefined"]
        False
    """
    return policy | {"nan_reference_undefined": trial.get("distribution") != "task"}


def compute_trial_stats(ev: Evidence) -> list[dict[str, Any]]:
    """Per trial (variant a): max abs / rel error, relative L2, fp32 reference error, pass or fail and why.

    ``bounds_only``: every output was a tensor of the reference's shape and finite where the reference is, so only
    the element-wise and L2 bounds could fail the trial.
    """
    stats = []
    policy = ev.policy
    for trial in ev.trials:
        index = trial["index"]
        ref = ev.refs.get(index)
        outs = ev.outputs.get((index, "a"))
        row: dict[str, Any] = {"index": index, "distribution": trial["distribution"], "seed": trial["seed"]}
        if ref is None or outs is None:
            row.update(passed=False, reason="no output" if ref is not None else "no reference")
            stats.append(row)
            continue
        ref64, ref32 = _ref_pair(ref)
        passed, reasons, per_output = judge_outputs(outs, ref64, ref32, trial_policy(policy, trial), ev.judgements)
        worst = max(per_output, key=lambda s: s["rel_l2"] if math.isfinite(s["rel_l2"]) else math.inf, default={})
        row.update(
            passed=passed,
            reason="; ".join(reasons),
            bounds_only=len(outs) == len(ref64) == len(per_output)
            and not any(p["nonfinite_where_finite"] for p in per_output),
            mismatches=sum(p["mismatches"] for p in per_output),
            elements=sum(p["elements"] for p in per_output),
            outside_atol_rtol=sum(p["outside_atol_rtol"] for p in per_output),
            bound="fp32-relative" if any(p["bound"] == "fp32-relative" for p in per_output) else "atol/rtol",
            max_abs=worst.get("max_abs"),
            max_rel=worst.get("max_rel"),
            rel_l2=worst.get("rel_l2"),
            fp32_rel_l2=worst.get("fp32_rel_l2"),
            ref_norm=worst.get("ref_norm"),
        )
        if any(p.get("undefined") for p in per_output):
            row["undefined"] = sum(p.get("undefined", 0) for p in per_output)
        stats.append(row)
    return stats


def judge_outputs(outs: list[Any], ref64: list[Any], ref32: list[Any] | None, policy: dict[str, Any],
                  judgements: Judgements | None = None) -> tuple[bool, list[str], list[dict[str, Any]]]:
    """The correctness policy on every output of one call: (passed, reasons, per-output statistics).

    ``ref32`` None means there is no fp32 reference distinct from ``ref64`` (the float64 forward failed), so
    only KernelBench's atol/rtol bound applies. The parent's trials and ``bench/tolerance_selftest.py`` both
    judge through this function; with ``judgements`` (the evidence's) an output already judged is not judged again.
    """
    reasons, per_output = [], []
    if len(outs) != len(ref64):
        reasons.append(f"{len(outs)} outputs, reference has {len(ref64)}")
    for k, (o, r64) in enumerate(zip(outs, ref64, strict=False)):
        r32 = ref32[k] if ref32 is not None and k < len(ref32) else None
        if o is None or not hasattr(o, "shape"):
            reasons.append(f"output {k} is not a tensor")
            continue
        if tuple(o.shape) != tuple(r64.shape):
            reasons.append(f"output {k} shape {list(o.shape)} != reference {list(r64.shape)}")
            continue
        r32 = r32 if r32 is not None and tuple(r32.shape) == tuple(r64.shape) else None
        s = judge_output(o, r64, r32, policy) if judgements is None else judgements.judge(o, r64, r32, policy)
        per_output.append(s)
        if s["nonfinite_where_finite"]:
            reasons.append(f"output {k}: {s['nonfinite_where_finite']} NaN/inf values where the reference is finite")
        if s["mismatches"]:
            reasons.append(f"output {k}: {s['mismatches']} of {s['elements']} elements outside both atol/rtol and "
                           f"{policy['fp32_factor']:g}x the fp32 reference's own error")
        if not s["rel_l2_ok"]:
            reasons.append(f"output {k}: relative L2 error {s['rel_l2']:.3g} > {s['rel_l2_bound']:.3g}")
    return not reasons, reasons, per_output


def _passes(out: Any, ref64: Any, policy: dict[str, Any], ref32: Any | None = None,
            judgements: Judgements | None = None) -> bool:
    # The L2 shortcut spares the full policy an output far off (a constant built to be judged). The evidence's own
    # outputs (with judgements) mostly pass, where it would be one more pass over them, and an answer kept makes it
    # pointless; the answer is the same either way (fails_l2_bound only answers True for outputs the policy fails).
    if judgements is None and out is not None and fails_l2_bound(out, ref64, ref32, policy):
        return False
    return judge_outputs([out], [ref64], None if ref32 is None else [ref32], policy, judgements)[0]


def _constants_pass(values: list[float], ref64: Any, policy: dict[str, Any], ref32: Any | None = None) -> list[bool]:
    """Whether an output holding each value everywhere would pass; one built at full size only when its L2 error
    alone does not already fail it (the L2 errors of all the values come from one pass over the reference)."""
    import torch

    fails = fails_l2_bounds(values, ref64, ref32, policy)
    return [not failed and _passes(torch.full_like(ref64, value), ref64, policy, ref32)
            for value, failed in zip(values, fails, strict=True)]


def _ref_pair(ref: dict[str, Any]) -> tuple[list[Any], list[Any] | None]:
    """(reference, fp32 reference for the error bound or None) of one trial's references."""
    if ref.get("ref64") is not None:
        return ref["ref64"], ref["ref32"]
    return ref["ref32"], None


def _all_pass(outs: list[Any], ref: dict[str, Any], policy: dict[str, Any], judgements: Judgements) -> bool:
    r64, r32 = _ref_pair(ref)
    return all(_passes(x, r, policy, r32[k] if r32 is not None else None, judgements)
               for k, (x, r) in enumerate(zip(outs, r64, strict=False)) if x is not None)


def _bit_equal(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is not None and y is not None and bit_equal(x, y)
                                    for x, y in zip(a, b, strict=True))


def check_compiles(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "compiles")
    if ev.compile is None:
        return _verdict("skip" if static_verdict == "pass" else static_verdict, "not compiled (static-only)", *lines)
    if not ev.compile.ok:
        return _verdict("fail", ev.compile.failure(), *lines)
    compiled = ev.compile.first("compiled") or {}
    return _verdict("pass", f"built/imported in {compiled.get('seconds', float('nan')):.1f}s in its own process")


def check_runs(ev: Evidence) -> dict[str, Any]:
    if ev.run is None:
        return _verdict("skip", "not run")
    if not ev.run.ok:
        return _verdict("fail", ev.run.failure(), "the crash/hang was confined to the candidate's process")
    missing = [f"trial {t['index']}" for t in ev.trials if not ev.run.first("trial", index=t["index"], variant="a")]
    if not ev.run.first("hello") or missing:
        return _verdict("fail", "the run step said done without reporting " + (", ".join(missing) or "its start"))
    started, done = ev.run.time_of("hello"), ev.run.time_of("done")
    took = f"{done - started:.1f}s" if started is not None and done is not None else f"{ev.run.seconds:.1f}s"
    return _verdict("pass", f"ran every trial and the timed calls in {took} (from loading the candidate)")


def check_correctness(ev: Evidence) -> dict[str, Any]:
    if not ev.trial_stats or not any("max_abs" in s for s in ev.trial_stats):
        return _verdict("skip" if ev.run is None else "fail", "no outputs to compare")
    lines = []
    for s in ev.trial_stats:
        if "max_abs" in s and s["max_abs"] is not None:
            lines.append(f"trial {s['index']} ({s['distribution']}): max_abs={s['max_abs']:.3g} max_rel={s['max_rel']:.3g} "
                         f"rel_l2={s['rel_l2']:.3g} fp32_ref_rel_l2={s.get('fp32_rel_l2') or 0:.3g} "
                         f"outside atol/rtol {s.get('outside_atol_rtol', 0)}/{s.get('elements', 0)}, "
                         f"outside both bounds {s.get('mismatches', 0)}; bound {s.get('bound', 'atol/rtol')} "
                         f"{'ok' if s['passed'] else 'FAIL: ' + s['reason']}")
        else:
            lines.append(f"trial {s['index']} ({s['distribution']}): FAIL: {s.get('reason')}")
    verdict = "pass" if all(s["passed"] for s in ev.trial_stats) else "fail"
    return _verdict(verdict, *lines)


def check_stale_memory(ev: Evidence) -> dict[str, Any]:
    lines, verdict = [], "pass"
    for trial in ev.trials:
        a, b = ev.outputs.get((trial["index"], "a")), ev.outputs.get((trial["index"], "b"))
        ref = ev.refs.get(trial["index"])
        if a is None or b is None or ref is None:
            continue
        same = _bit_equal(a, b)
        if same:
            lines.append(f"trial {trial['index']}: poisoned call and post-reference call bit-identical")
            continue
        policy = trial_policy(ev.policy, trial)
        a_ok, b_ok = _all_pass(a, ref, policy, ev.judgements), _all_pass(b, ref, policy, ev.judgements)
        if b_ok and not a_ok:
            verdict = "fail"
            lines.append(f"trial {trial['index']}: wrong on NaN-poisoned memory but right right after the reference ran "
                         "in the same process: the output comes from the reference's freed memory")
        else:
            # Both right with NaN-poisoned memory under one of them: no stale value reached the outputs, and the
            # difference is run-to-run nondeterminism (atomics, cuDNN's algorithms), which honest kernels have.
            if not (a_ok and b_ok):
                verdict = "fail"
            lines.append(f"trial {trial['index']}: the call before and the call after a reference run differ "
                         f"({'both within tolerance: nondeterministic, not stale' if a_ok and b_ok else 'one is wrong'})")
    if not lines:
        return _verdict("skip", "no candidate-reference-candidate runs")
    return _verdict(verdict, *lines)


def check_launch_errors(ev: Evidence) -> dict[str, Any]:
    lines, verdict = [], "pass"
    if ev.run is not None and not ev.run.ok:
        message = ev.run.failure()
        if re.search(r"CUDA|cuda|illegal|launch|device-side", message):
            return _verdict("fail", message)
    for trial in ev.trials:
        a, c = ev.outputs.get((trial["index"], "a")), ev.outputs.get((trial["index"], "c"))
        if a is None or c is None:
            continue
        if _bit_equal(a, c):
            lines.append(f"trial {trial['index']}: NaN and 1e30 poison fills give bit-identical outputs")
            continue
        ref = ev.refs.get(trial["index"])
        policy = trial_policy(ev.policy, trial)
        both_ok = ref is not None and _all_pass(a, ref, policy, ev.judgements) and _all_pass(c, ref, policy, ev.judgements)
        if not both_ok:
            verdict = "fail"
        lines.append(f"trial {trial['index']}: outputs differ between poison fills: "
                     + ("both within tolerance (nondeterministic, e.g. atomics; no poison reached the outputs)" if both_ok
                        else "the output depends on uninitialised memory or a launch silently failed"))
    if not lines:
        return _verdict("skip", "no poison-fill runs")
    return _verdict(verdict, "the CUDA error state was checked by a device-wide synchronize after every call", *lines)


def check_weak_check(ev: Evidence) -> dict[str, Any]:
    lines, verdict = [], "pass"
    weak: dict[int, list[str]] = {}
    judged: dict[int, int] = {}
    for trial in ev.trials:
        ref = ev.refs.get(trial["index"])
        if ref is None:
            continue
        r64s, r32s = _ref_pair(ref)
        for k, r in enumerate(r64s):
            r32 = r32s[k] if r32s is not None else None
            judged[k] = judged.get(k, 0) + 1
            # A one-element output (a loss) is its own mean: whether one fixed value passes every trial is
            # check_degenerate's question, not this one's.
            passes = _constants_pass([0.0, float(r.double().mean())] if r.numel() > 1 else [0.0], r, ev.policy, r32)
            zero_ok, const_ok = passes[0], len(passes) > 1 and passes[1]
            if zero_ok or const_ok:
                weak.setdefault(k, []).append(f"trial {trial['index']} ({trial['distribution']}): a "
                                              f"{'zero' if zero_ok else 'constant'} output would pass")
    # A distribution that makes the answer trivial (relu of negative inputs is all zeros) weakens that trial
    # only; the check proves little only when a trivial output passes on every trial.
    for k, found in weak.items():
        if len(found) == judged[k]:
            verdict = "warn"
            lines.append(f"output {k}: a trivial output would pass on every trial: this check proves little for "
                         f"this task ({'; '.join(found)})")
        else:
            lines.append(f"output {k}: {'; '.join(found)}, but not on the other trials, which decide")
    for trial in ev.trials:
        ref = ev.refs.get(trial["index"])
        if ref is None:
            continue
        outs = ev.outputs.get((trial["index"], "a")) or []
        for k, o in enumerate(outs):
            if o is not None and is_constant(o):
                r = (ref["ref64"] or ref["ref32"])[k]
                if float(r.double().std()) > 0:
                    verdict = "fail"
                    lines.append(f"trial {trial['index']} output {k}: the candidate returned a constant")
    if not ev.refs:
        return _verdict("skip", "no references")
    return _verdict(verdict, *(lines or ["neither a zero nor a constant output passes the check on any trial"]))


def check_degenerate(ev: Evidence) -> dict[str, Any]:
    screen = ev.trusted.first("screen") if ev.trusted else None
    if not screen:
        return _verdict("skip", "no task screen")
    limit = ev.policy["degenerate_sensitivity"]
    lines, verdict = [], "pass"
    inputs = screen.get("input_sensitivity")
    weights = screen.get("weight_sensitivity")
    if inputs is not None and not (inputs > limit):
        apart = trials_apart(ev)
        if apart is None:
            verdict = "warn"
            lines.append(f"new inputs change the reference output by only {inputs:.3g} (relative L2): the task is "
                         "degenerate")
        else:
            lines.append(f"new inputs from the task's own distribution change the reference output by only "
                         f"{inputs:.3g} (relative L2, an average such as a loss), but the trials' distributions "
                         f"move it apart: {apart}; no fixed answer passes them all")
    else:
        lines.append(f"new inputs change the output by {inputs:.3g}")
    if weights is not None:
        if not weights > limit:
            verdict = "warn"
            lines.append(f"new weights change the reference output by only {weights:.3g}: weights barely matter")
        else:
            lines.append(f"new weights change the output by {weights:.3g}")
    return _verdict(verdict, *lines)


def trials_apart(ev: Evidence) -> str | None:
    """Two trials whose references are too far apart for any one fixed answer to pass both, or None.

    An answer A passing trials i and j has |A - r_i| <= b|r_i| and |A - r_j| <= b|r_j| (b: the relative L2
    bound), so |r_i - r_j| <= b(|r_i| + |r_j|); references further apart than that cannot both be matched by
    a hard-coded output. b is the largest bound any trial allowed (the fp32 allowance included).
    """
    import torch

    bound = max([ev.policy["max_rel_l2"]] + [ev.policy["fp32_l2_factor"] * s["fp32_rel_l2"] for s in ev.trial_stats
                                            if s.get("fp32_rel_l2") is not None and math.isfinite(s["fp32_rel_l2"])])
    refs = [(t, [None if r is None else r.detach().double() for r in _ref_pair(ev.refs[t["index"]])[0]])
            for t in ev.trials if t["index"] in ev.refs]
    norms = [[None if r is None else float(torch.linalg.vector_norm(r)) for r in outs] for _, outs in refs]
    for n, (ti, ri) in enumerate(refs):
        for m, (tj, rj) in enumerate(refs[n + 1:], start=n + 1):
            for k, (a, b) in enumerate(zip(ri, rj, strict=False)):
                if a is None or b is None or tuple(a.shape) != tuple(b.shape) or not a.numel():
                    continue
                gap = float(torch.linalg.vector_norm(a - b))
                room = bound * (norms[n][k] + norms[m][k])
                if math.isfinite(gap) and gap > room * (1 + 1e-6):
                    return (f"output {k} of trial {ti['index']} ({ti['distribution']}) and trial {tj['index']} "
                            f"({tj['distribution']}) differ by {gap:.3g} in L2, more than {bound:.3g} x the sum of "
                            f"their norms ({room:.3g})")
    return None


def _run_facts(ev: Evidence, key: str) -> list[tuple[dict[str, Any], Any]]:
    return [(m, m.get(key)) for m in _trial_messages(ev) if m.get(key)]


def check_aliasing(ev: Evidence) -> dict[str, Any]:
    if not _trial_messages(ev):
        return _verdict("skip", "not run")
    found = _run_facts(ev, "aliasing")
    if found:
        return _verdict("fail", *[f"trial {m['index']}{m['variant']}: output {a['output']} shares storage with {a['with']}"
                                  for m, items in found for a in items])
    return _verdict("pass", "no output storage overlaps any input, parameter or buffer; inputs drawn from "
                    + ", ".join(sorted({t["distribution"] for t in ev.trials})))


def reference_is_stateful(ev: Evidence) -> bool:
    """Whether the trusted child found the task's reference stateful (its output depends on earlier calls)."""
    message = ev.trusted.first("reference-state") if ev.trusted else None
    return bool(message and message.get("stateful"))


def reference_mutates(ev: Evidence) -> set[str]:
    """State entries (``bn.running_mean``) the task reference's own forward changes, as its trusted child saw."""
    message = ev.trusted.first("reference-state") if ev.trusted else None
    return set(message.get("mutated", [])) if message else set()


def check_mutation(ev: Evidence) -> dict[str, Any]:
    """Inputs and the module's state must be left as they were, except state the reference changes itself.

    A training-mode BatchNorm updates its running statistics on every call: a candidate doing the same is
    faithful to the task, not tampering, so entries the reference's forward changes are allowed (by name).
    """
    if not _trial_messages(ev):
        return _verdict("skip", "not run")
    own = reference_mutates(ev)
    lines = [f"trial {m['index']}{m['variant']}: input {j} changed" for m, items in _run_facts(ev, "mutated_inputs") for j in items]
    lines += [f"trial {m['index']}{m['variant']}: parameter {n} changed" for m, items in _run_facts(ev, "mutated_parameters")
              for n in items if n not in own]
    if lines:
        return _verdict("fail", *lines)
    also = sorted(own & {n for _, items in _run_facts(ev, "mutated_parameters") for n in items})
    return _verdict("pass", "inputs (each its own copy) and parameters bit-identical after every call"
                    + (f", except {', '.join(also)}, which the reference's own forward changes too" if also else ""))


def check_hard_coding(ev: Evidence) -> dict[str, Any]:
    if not ev.trial_stats:
        return _verdict("skip", "no trials")
    passed = {s["distribution"] for s in ev.trial_stats if s["passed"]}
    failed = {s["distribution"] for s in ev.trial_stats if not s["passed"]}
    seeds = len({s["seed"] for s in ev.trial_stats})
    if passed and failed:
        alike = imprecise_alike(ev)
        if alike is None:
            return _verdict("fail", f"right on {sorted(passed)} but wrong on {sorted(failed)}: specialised to some inputs")
        return _verdict("pass", alike, shape_probe(ev)[1], init_probe(ev)[1])
    if not passed:
        return _verdict("fail", "wrong on every trial (see correctness)")
    return _verdict("pass", f"right on {seeds} fresh seeds the candidate could not predict, distributions {sorted(passed)}",
                    shape_probe(ev)[1], init_probe(ev)[1])


def imprecise_alike(ev: Evidence) -> str | None:
    """Why a kernel right on some distributions and wrong on others is not specialised to them, or None if it may be.

    A half-precision kernel is off by about the same relative L2 error on every input; a few elements of a
    heavy-tailed draw then cross the element-wise bound where the other draws' did not. A kernel that special-cases
    some inputs is right on them (near the fp32 reference's own error) and far off, raising or non-finite on the
    rest. So every wrong trial must fail only by the element-wise and L2 bounds (``bounds_only``), with a finite
    relative L2 error within ``specialised_factor`` x the largest of the right trials' errors and its own fp32
    reference's. Correctness fails either way: this only says why.

    Example:
        >>> ev = Evidence(form="model-new", kernel_code="", static=[], trials=[], trial_stats=[
        ...     {"distribution": "randn", "passed": True, "rel_l2": 3.6e-4, "fp32_rel_l2": 1.4e-7},
        ...     {"distribution": "heavy-tailed", "passed": False, "rel_l2": 3.3e-4, "fp32_rel_l2": 1.4e-7,
        ...      "bounds_only": True}])
        >>> imprecise_alike(ev).startswith("wrong on ['heavy-tailed'] by a relative L2 error of at most 0.00033")
        True
        >>> ev.trial_stats[1]["rel_l2"] = 0.9
        >>> imprecise_alike(ev) is None
        True
    """
    factor = ev.policy.get("specialised_factor", TOLERANCE["specialised_factor"])
    right = [s for s in ev.trial_stats if s["passed"]]
    wrong = [s for s in ev.trial_stats if not s["passed"]]
    right_err = max((s.get("rel_l2") or 0.0 for s in right), default=0.0)
    worst = 0.0
    for s in wrong:
        err = s.get("rel_l2")
        if not s.get("bounds_only") or err is None or not math.isfinite(err):
            return None
        if err > factor * max(right_err, s.get("fp32_rel_l2") or 0.0):
            return None
        worst = max(worst, err)
    return (f"wrong on {sorted({s['distribution'] for s in wrong})} by a relative L2 error of at most {worst:.2g}, "
            f"within {factor:g}x the {right_err:.2g} where right on {sorted({s['distribution'] for s in right})}: "
            "about as far off on every input, so imprecise rather than specialised to some (see correctness)")


def shape_probe(ev: Evidence) -> tuple[bool | None, str]:
    """Whether the kernel was right at other input shapes (None: not tried), and the evidence line.

    A kernel right only at the task's shapes is recorded as shape-specialised (a property), not failed.
    """
    variant = ev.trusted.first("shape-variant") if ev.trusted else None
    if variant is None:
        note = ev.trusted.first("note", which="shape-variant") if ev.trusted else None
        return None, (note or {}).get("message") or "other shapes not tried (no input-size constant to vary)"
    where = f"at other shapes ({variant['name']} {variant['old']} -> {variant['new']})"
    trial = ev.run.first("shape-trial") if ev.run else None
    if trial is None:
        if ev.run is not None and ev.run.died_in_shape_probe and ev.run.first("mark", phase="shape-probe"):
            return False, f"{where}: the run step died ({ev.run.failure()[:160]}): shape-specialised"
        return None, f"{where}: not run"
    if trial.get("error"):
        return False, f"{where}: raised {trial['error'][:200]}: shape-specialised"
    ref = ev.shape_ref or {}
    refs = ref.get("ref64") or ref.get("ref32") or []
    outs = ev.shape_out or []
    if len(outs) != len(refs) or any(o is None or tuple(o.shape) != tuple(r.shape) for o, r in zip(outs, refs, strict=False)):
        got = [list(o.shape) if o is not None else None for o in outs]
        return False, f"{where}: output shapes {got} vs reference {[list(r.shape) for r in refs]}: shape-specialised"
    refs32 = ref.get("ref32") if ref.get("ref64") is not None else None
    if judge_outputs(outs, refs, refs32, ev.policy)[0]:
        return True, f"{where}: right"
    stats = error_stats(outs[0], refs[0], None) if outs else {}
    return False, (f"{where}: wrong (rel_l2={stats.get('rel_l2', float('nan')):.3g}): shape-specialised, "
                   "recorded as a property, not failed")


def init_probe(ev: Evidence) -> tuple[bool | None, str]:
    """Whether the kernel was right with the model built at another ``__init__`` size (None: not tried).

    A kernel hard-wired to the task's feature size is recorded as shape-specialised, not failed.
    """
    variant = ev.trusted.first("init-variant") if ev.trusted else None
    if variant is None:
        note = ev.trusted.first("note", which="init-variant") if ev.trusted else None
        return None, (note or {}).get("message") or "other init sizes not tried (no constructor size to vary)"
    where = f"built at another init size ({variant['name']} {variant['old']} -> {variant['new']})"
    trial = ev.run.first("init-trial") if ev.run else None
    if trial is None:
        if ev.run is not None and ev.run.died_in_shape_probe and ev.run.first("mark", phase="init-probe"):
            return False, f"{where}: the run step died ({ev.run.failure()[:160]}): shape-specialised"
        return None, f"{where}: not run"
    if trial.get("error"):
        return False, f"{where}: raised {trial['error'][:200]}: shape-specialised"
    ref = ev.init_ref or {}
    refs, refs32 = _ref_pair(ref) if ref else ([], None)
    outs = ev.init_out or []
    if len(outs) != len(refs) or any(o is None or tuple(o.shape) != tuple(r.shape) for o, r in zip(outs, refs, strict=False)):
        got = [list(o.shape) if o is not None else None for o in outs]
        return False, f"{where}: output shapes {got} vs reference {[list(r.shape) for r in refs]}: shape-specialised"
    passed, reasons, _ = judge_outputs(outs, refs, refs32, ev.policy)
    if passed:
        return True, f"{where}: right"
    return False, f"{where}: wrong ({'; '.join(reasons)[:200]}): shape-specialised, recorded as a property, not failed"


def state_probe_verdict(ev: Evidence) -> tuple[str, list[str]]:
    """The statefulness probe: is the output for X' (X with a few unpredictable elements changed) X's stale one?

    Outputs that the change moves (|ref(X') - ref(X)| above 1e-2 of the output's scale) must move with it:
    each must end nearer the new answer than half the move. More than 10% of them keeping their old value
    fails; a call on X' launching none of the kernel's own kernels (when its normal call does) is flagged.
    """
    import torch

    message = ev.run.first("state-probe") if ev.run else None
    probe = ev.state_probe
    if message is not None and message.get("error"):
        return "warn", [f"statefulness probe: the candidate raised on X' (X with a few elements changed): "
                        f"{message['error'][:200]}"]
    if message is None or probe is None:
        return "skip", ["statefulness probe not run"]
    lines, verdict = [], "pass"
    ref0 = ev.refs.get(ev.trials[0]["index"]) if ev.trials else None
    if ref0 is not None and not _all_pass(probe["first"], ref0, ev.policy, ev.judgements):
        verdict = "fail"
        lines.append("statefulness: wrong on the first trial's inputs when called again after the timed calls")
    if ref0 is not None and not _all_pass(probe["ref_x"], ref0, ev.policy, ev.judgements):
        verdict = _worst(verdict, "warn")
        lines.append("statefulness: the run child's own reference disagrees with the trusted one (probe untrusted)")
    moved = stale = 0
    for y2, r1, r2 in zip(probe["second"], probe["ref_x"], probe["ref_changed"], strict=False):
        if not isinstance(r2, torch.Tensor) or not isinstance(r1, torch.Tensor) or r1.shape != r2.shape:
            continue
        if y2 is None or tuple(y2.shape) != tuple(r2.shape):
            verdict = "fail"
            lines.append("statefulness: no comparable output for the changed input")
            continue
        moved_here, stale_here = stale_counts(y2, r1, r2)
        moved, stale = moved + moved_here, stale + stale_here
    if moved == 0:
        lines.append(f"statefulness: changing {message.get('changed_elements')} input elements moved no output "
                     "measurably; inconclusive")
    elif stale > 0.1 * moved:
        verdict = "fail"
        lines.insert(0, f"statefulness: after a call on X, a call on X with {message.get('changed_elements')} "
                        f"unpredictable elements changed left {stale} of {moved} affected outputs at their old values: "
                        "the output depends on earlier calls (memoised by a sample of the input?)")
    else:
        lines.append(f"statefulness: X then X' ({message.get('changed_elements')} elements changed at positions drawn "
                     f"after the candidate ran): all but {stale} of {moved} affected outputs followed the change")
    own_names = kernel_names(ev.kernel_code)
    normal = ev.run.first("kernels", which="candidate")
    normal_own = [k for k in (normal or {}).get("kernels", []) if _own_kernel(k["name"], own_names) or not k["library"]]
    probe_own = [k for k in message.get("kernels", []) if _own_kernel(k["name"], own_names) or not k["library"]]
    if normal_own and not probe_own:
        verdict = _worst(verdict, "warn")
        lines.append("statefulness: the call on X' launched none of the kernel's own kernels (a normal call launches "
                     f"{', '.join(k['name'][:40] for k in normal_own[:3])}): where did its output come from?")
    return verdict, lines


def check_problem_change(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "problem-change")
    verdict = static_verdict
    lines = ["inputs and init args came from the reference's get_inputs/get_init_inputs only", *lines]
    for trial in ev.trials:
        ref = ev.refs.get(trial["index"])
        outs = ev.outputs.get((trial["index"], "a"))
        if ref is None or outs is None:
            continue
        for k, (o, r) in enumerate(zip(outs, ref["ref32"], strict=False)):
            if o is None:
                continue
            if tuple(o.shape) != tuple(r.shape) or o.dtype != r.dtype:
                verdict = "fail"
                lines.append(f"trial {trial['index']} output {k}: {list(o.shape)} {o.dtype} vs reference {list(r.shape)} {r.dtype}")
        if ev.outputs.get((trial["index"], "a")) and len(outs) != len(ref["ref32"]):
            verdict = "fail"
            lines.append(f"{len(outs)} outputs vs {len(ref['ref32'])} in the reference")
    call = ev.run.first("call") if ev.run else None
    weights = (call or {}).get("weights")
    if weights:
        unmatched = [n for n in weights.get("unmatched_candidate", []) if not n.endswith("num_batches_tracked")]
        if unmatched:
            verdict = _worst(verdict, "warn")
            lines.append(f"candidate parameters with no reference counterpart (shapes differ): {unmatched[:6]}")
        unused = [n for n in weights.get("unused_reference", []) if not n.endswith("num_batches_tracked")]
        if unused:
            verdict = _worst(verdict, "warn")
            lines.append(f"reference parameters the candidate does not hold: {unused[:6]}")
    return _verdict(verdict, *lines)


def _own_kernel(name: str, own: list[str]) -> bool:
    return any(re.search(rf"\b{re.escape(k)}\b", name) for k in own)


def refuted_static(ev: Evidence) -> list[str]:
    """Kernels the static scan called never launched that the run-time kernel list shows running.

    Run-time evidence outranks a static guess: such findings are reported as refuted, not flagged.
    """
    message = ev.run.first("kernels", which="candidate") if ev.run else None
    if not message:
        return []
    ran = [k["name"] for k in message["kernels"]]
    names = {f["evidence"].removeprefix("__global__ ") for f in ev.static if f["rule"] == "cpp-unlaunched-kernel"}
    return sorted(n for n in names if any(_own_kernel(k, [n]) for k in ran))


def _unrefuted(findings: list[dict[str, Any]], refuted: list[str]) -> list[dict[str, Any]]:
    kept = []
    for f in findings:
        if f["rule"] == "cpp-unlaunched-kernel" and f["evidence"].removeprefix("__global__ ") in refuted:
            continue
        if f["rule"] == "cpp-no-kernel-launched" and refuted:
            continue
        kept.append(f)
    return kept


def check_not_a_kernel(ev: Evidence) -> dict[str, Any]:
    refuted = refuted_static(ev)
    static_verdict, lines = _static_part(ev, "not-a-kernel", _unrefuted(ev.static, refuted))
    if refuted:
        lines.append(f"static guess refuted by run-time evidence: {', '.join(refuted)} "
                     "'defined but never launched' ran (launched in a way the scan did not recognise)")
    message = ev.run.first("kernels", which="candidate") if ev.run else None
    if message is None:
        return _verdict(static_verdict if static_verdict != "pass" else ("skip" if not lines else "pass"),
                        "no run-time kernel list (static only)", *lines)
    kernels = message["kernels"]
    own_names = kernel_names(ev.kernel_code)
    total = sum(k["device_us"] for k in kernels) or 0.0
    library = sum(k["device_us"] for k in kernels if k["library"] and not _own_kernel(k["name"], own_names))
    own = [k for k in kernels if _own_kernel(k["name"], own_names) or not k["library"]]
    listing = "; ".join(f"{k['name'][:70]} x{k['calls']} {k['device_us']:.0f}us{' [library]' if k['library'] else ''}"
                        for k in kernels[:6])
    run_lines = [f"run time: {len(kernels)} kernel(s): {listing}" if kernels else "run time: no GPU kernel launched"]
    if not kernels:
        verdict = "fail"
    elif not own:
        verdict = "fail"
        idle = [n for n in own_names if not any(_own_kernel(k["name"], [n]) for k in kernels)]
        run_lines.append("none of the launched kernels is the candidate's own: library kernels did all the work"
                         + (f"; its own kernel(s) {', '.join(idle[:6])} never launched" if idle else ""))
    elif total and library / total > 0.5:
        verdict = "warn"
        run_lines.append(f"library kernels took {100 * library / total:.0f}% of device time (library call)")
    else:
        verdict = "pass"
        run_lines.append(f"own kernels took {100 * (1 - library / total) if total else 100:.0f}% of device time")
    if static_verdict == "fail" and verdict == "pass":
        static_verdict = "warn"
    result = _verdict(_worst(verdict, static_verdict), *run_lines, *lines)
    result["refuted"] = refuted
    return result


def check_fallback(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "fallback")
    verdict = static_verdict
    cand = ev.run.first("kernels", which="candidate") if ev.run else None
    ref = ev.trusted.first("kernels", which="reference") if ev.trusted else None
    if cand and ref and cand["kernels"]:
        names = sorted((k["name"], k["calls"]) for k in cand["kernels"])
        if names == sorted((k["name"], k["calls"]) for k in ref["kernels"]):
            verdict = "fail"
            lines.insert(0, "run time: the candidate launches exactly the reference's kernels (it is the reference)")
        else:
            lines.insert(0, "run time: the candidate's kernel list differs from the reference's")
    return _verdict(verdict, *(lines or ["no try/except fallback, ModelNew is not the reference"]))


def check_lower_precision(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "lower-precision")
    verdict = static_verdict
    policy = ev.policy
    for s in ev.trial_stats:
        if s.get("rel_l2") is None or s.get("fp32_rel_l2") is None:
            continue
        bound = policy["precision_factor"] * max(s["fp32_rel_l2"], policy["fp32_floor"])
        if s["rel_l2"] > bound:
            verdict = _worst(verdict, "warn")
            lines.insert(0, f"trial {s['index']}: relative L2 error {s['rel_l2']:.3g} is {s['rel_l2'] / max(s['fp32_rel_l2'], policy['fp32_floor']):.0f}x "
                            f"the fp32 reference's own ({s['fp32_rel_l2']:.3g}): computed in lower precision than fp32")
    for trial in ev.trials:
        outs, ref = ev.outputs.get((trial["index"], "a")), ev.refs.get(trial["index"])
        if outs and ref:
            for k, (o, r) in enumerate(zip(outs, ref["ref32"], strict=False)):
                if o is not None and o.dtype != r.dtype:
                    verdict = "fail"
                    lines.insert(0, f"output {k} dtype {o.dtype} != reference {r.dtype}")
    timed_verdict, timed_line = timed_precision(ev)
    if timed_line:
        verdict = _worst(verdict, timed_verdict)
        if timed_verdict == "pass":
            lines.append(timed_line)
        else:
            lines.insert(0, timed_line)
    flags = ev.run.first("hello") if ev.run else None
    if flags:
        lines.append("backend flags pinned: " + ", ".join(f"{k}={v}" for k, v in flags["flags"].items()
                                                           if "tf32" in k or "precision" in k))
    return _verdict(verdict, *(lines or ["errors are those of fp32 arithmetic"]))


def timed_precision(ev: Evidence) -> tuple[str, str | None]:
    """Whether the timed calls computed as precisely as the trials: ``warn`` and why, ``pass`` and the figure, or
    ``("pass", None)`` where it cannot be told.

    A kernel may count its calls, or watch for the timer, and compute in fp32 on the trials but in bf16 or fp16 on
    the timed calls, which the caching check's 5% tolerance lets through. Each timed call's output is compared,
    by fingerprint, with the reference's eager output on the same inputs: the median over the calls (the statistic
    the timing reports) must stay within what fp32 arithmetic explains, as on the trials. Not told for a stateful
    reference, without fp32 errors from the trials, or when every trial failed (correctness says why).
    """
    cand, eager = _timing(ev.run, "candidate"), _timing(ev.trusted, "eager")
    errors = [s["fp32_rel_l2"] for s in ev.trial_stats
              if s.get("fp32_rel_l2") is not None and math.isfinite(s["fp32_rel_l2"])]
    if (not cand or not eager or not errors or cand.get("seed_base") != eager.get("seed_base")
            or reference_is_stateful(ev) or not any(s.get("passed") for s in ev.trial_stats)):
        return "pass", None
    distances = [d for c, e in zip(cand.get("fingerprints") or [], eager.get("fingerprints") or [], strict=False)
                 if (d := call_distance(c, e)) is not None]
    if not distances:
        return "pass", None
    policy, own = ev.policy, max(errors)
    bound = max((policy["precision_factor"] + 1) * max(own, policy["fp32_floor"]), policy["timed_precision_floor"])
    median = statistics.median(distances)
    figure = (f"timed calls: a median relative L2 difference of {median:.3g} from the reference's eager outputs on "
              f"the same inputs ({len(distances)} calls; allowed {bound:.3g}, from the fp32 reference's own error "
              f"{own:.3g} on the trials)")
    if median > bound:
        return "warn", figure + ": computed in lower precision, or less exactly, on the timed calls than fp32 allows"
    return "pass", figure


def check_fake_tensor(ev: Evidence) -> dict[str, Any]:
    messages = _trial_messages(ev)
    if not messages:
        return _verdict("skip", "not run")
    device = "cuda" if any(m.get("outputs") and m["outputs"][0].get("device", "").startswith("cuda") for m in messages) else None
    lines = []
    for m in messages:
        for k, o in enumerate(m.get("outputs", [])):
            problems = []
            if not o.get("exact_tensor"):
                problems.append(f"type {o.get('type')} is not exactly torch.Tensor")
            if not o.get("has_storage") or o.get("is_meta"):
                problems.append("no real storage")
            if device and not str(o.get("device", "")).startswith(device):
                problems.append(f"on {o.get('device')}")
            if problems:
                lines.append(f"trial {m['index']}{m['variant']} output {k}: " + ", ".join(problems))
    if lines:
        return _verdict("fail", *lines)
    return _verdict("pass", "every output is a plain torch.Tensor with real storage on the device")


def _timing(report: ChildReport | None, which: str) -> dict[str, Any] | None:
    message = report.first("timing", which=which) if report else None
    return message["result"] if message else None


def stream_busy_ms(ev: Evidence) -> dict[str, float]:
    """Device time per call on each stream (ms): the sum of its kernels' durations in the profiled call.

    Kernels on one stream never overlap, so this is the least time that stream was busy for the call.
    """
    message = ev.run.first("kernels", which="candidate") if ev.run else None
    busy: dict[str, float] = {}
    for k in (message or {}).get("kernels", []):
        busy[str(k["stream"])] = busy.get(str(k["stream"]), 0.0) + float(k["device_us"]) / 1000
    return busy


def uncovered_stream_work(busy: dict[str, float], event_ms: float, policy: dict[str, Any]) -> list[tuple[str, float]]:
    """Streams whose device time per call exceeds the event time of a call beyond tolerance: (stream, ms).

    The events of one call must cover the device time of the call's own work; work that outlasts them ran
    where the events did not wait for it (a side stream never joined back).

    Example:
        >>> policy = {"stream_cover_rtol": 0.10, "stream_cover_atol_ms": 0.005}
        >>> uncovered_stream_work({"14": 0.176, "15": 0.001}, 0.0013, policy)
        [('14', 0.176)]
        >>> uncovered_stream_work({"14": 0.176}, 0.2, policy)
        []
    """
    limit = event_ms * (1 + policy["stream_cover_rtol"]) + policy["stream_cover_atol_ms"]
    return sorted(((s, ms) for s, ms in busy.items() if ms > limit), key=lambda item: -item[1])


def check_side_streams(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "side-streams")
    verdict = static_verdict
    kernels = ev.run.first("kernels", which="candidate") if ev.run else None
    reference = ev.trusted.first("kernels", which="reference") if ev.trusted else None
    timed_streams = {str(k["stream"]) for k in (reference or {}).get("kernels", [])}
    other_stream = False
    if kernels:
        streams = sorted({str(k["stream"]) for k in kernels["kernels"]})
        extra = [s for s in streams if timed_streams and s not in timed_streams]
        if len(streams) > 1 or extra:
            other_stream = True
            verdict = _worst(verdict, "warn")
            lines.insert(0, f"run time: kernels ran on stream(s) {', '.join(streams)}; the timed (current) stream is "
                            f"{', '.join(sorted(timed_streams)) or '?'}")
        else:
            lines.insert(0, f"run time: every kernel ran on one stream ({', '.join(streams) or 'none'})")
    cand = _timing(ev.run, "candidate")
    host_bound = False
    gap_check = wall_event_gap(cand, [_timing(ev.trusted, "overhead"), _timing(ev.run, "overhead-pre-import")],
                               ev.policy, own=[_timing(ev.trusted, "eager"), _timing(ev.trusted, "cuda-graph")])
    if gap_check is not None:
        exceeded, detail, host_bound = gap_check
        if exceeded:
            verdict = "fail"
            cause = ("work on another stream" if other_stream or static_verdict != "pass"
                     else "work the candidate's host machinery finished after forward returned, off the timed stream")
            lines.insert(0, f"synchronised wall time and event time disagree beyond noise ({cause}): timing fails and "
                            "the honest (slower) wall-clock time is reported: " + detail)
        else:
            lines.insert(0, "event and wall-clock times agree: " + detail)
    if cand and cand.get("event_ms"):
        event_median = statistics.median(cand["event_ms"])
        # Work on the timed stream is inside its events by construction; a profiled call slowed by a GPU shared
        # with other processes must not fail an honest single-stream kernel, so only other streams are compared.
        busy = {s: ms for s, ms in stream_busy_ms(ev).items() if s not in timed_streams}
        uncovered = uncovered_stream_work(busy, event_median, ev.policy)
        if uncovered:
            verdict = "fail"
            lines.insert(0, "the events of a call do not cover the call's own device work: stream "
                            + ", ".join(f"{s} was busy {ms * 1000:.1f}us" for s, ms in uncovered)
                            + f" per call (profiler) against an event time of {event_median * 1000:.1f}us: work ran "
                            "where the timing events did not wait for it; timing fails and the honest time "
                            "max(wall clock, busiest stream) is reported")
    host_bound = host_bound and verdict != "fail"
    if host_bound:
        lines.insert(0, "host-bound: the forward call's own host time exceeds its event time, which explains the "
                        "wall-clock time; the wall-clock time is reported")
    result = _verdict(verdict, *(lines or ["no run-time data"]))
    result["host_bound"] = host_bound
    return result


def _quartiles(values: list[float]) -> tuple[float, float]:
    """(median, interquartile range) of a non-empty list."""
    ordered = sorted(values)
    n = len(ordered)
    return statistics.median(ordered), ordered[(3 * n) // 4] - ordered[n // 4]


def unexplained_ms(result: dict[str, Any] | None) -> list[float] | None:
    """Per timed call: wall time minus max(the call's own host time, its event time); None without events.

    What is left is the device-wide synchronize's own cost plus any work that finished after both the call
    returned and its end event fired. Reports without host times (harness 1.1) use the event time alone.
    """
    if not result or not result.get("event_ms"):
        return None
    hosts = result.get("host_ms") or [0.0] * len(result["event_ms"])
    return [w - max(h, e) for w, e, h in zip(result["wall_ms"], result["event_ms"], hosts, strict=True)]


def trivial_gap_allowance(result: dict[str, Any] | None, policy: dict[str, Any] | None = None) -> float:
    """How much a trivial kernel's series lets a candidate's unexplained wall time reach in ``wall_event_gap``: its
    median unexplained time plus ``gap_iqr_factor`` x its interquartile range (infinite without events).

    Example:
        >>> trivial_gap_allowance({"event_ms": [0.004] * 9, "wall_ms": [0.02] * 9}) < trivial_gap_allowance(None)
        True
    """
    gaps = unexplained_ms(result)
    if not gaps:
        return math.inf
    median, iqr = _quartiles(gaps)
    return median + (policy or TOLERANCE)["gap_iqr_factor"] * iqr


def wall_event_gap(cand: dict[str, Any] | None, references: list[dict[str, Any] | None],
                   policy: dict[str, Any] | None = None,
                   own: Sequence[dict[str, Any] | None] = ()) -> tuple[bool, str, bool] | None:
    """Whether the candidate's unexplained wall time exceeds a trivial kernel's beyond noise; why; host-bound?

    Per call the unexplained time is wall - max(host time of the call, event time) (``unexplained_ms``): a
    host-bound kernel's wall time is explained by its own forward host time, while work finished after the
    call returned, off the timed stream, is not. The reference is the same quantity for a trivial kernel timed
    where the candidate cannot reach (the trusted child; the run child before the import; the larger median
    counts). ``own`` are the task reference's own timed series (eager, CUDA graph), timed the same way by the
    trusted child: some tasks leave wall time unexplained even in PyTorch (a training-mode BatchNorm on large
    tensors, say), and a candidate is allowed ``gap_reference_factor`` x the reference's own gap. Noise =
    the largest of ``gap_iqr_factor`` x (the candidate's interquartile range + the reference's),
    ``gap_floor_ms`` and ``gap_rtol`` x the call's max(host, event) median. Host-bound: the median host time
    exceeds the median event time (by more than ``stream_cover_rtol`` and ``stream_cover_atol_ms``).

    Example:
        >>> honest = {"event_ms": [0.35] * 9, "wall_ms": [0.37] * 9}
        >>> late = {"event_ms": [0.35] * 9, "wall_ms": [0.93] * 9}
        >>> trivial = {"event_ms": [0.004] * 9, "wall_ms": [0.02] * 9}
        >>> wall_event_gap(honest, [trivial])[0], wall_event_gap(late, [trivial])[0]
        (False, True)
        >>> same_as_reference = {"event_ms": [0.35] * 9, "wall_ms": [0.95] * 9}
        >>> wall_event_gap(late, [trivial], own=[same_as_reference])[0]
        False
    """
    policy = policy or TOLERANCE
    mine = unexplained_ms(cand)
    bases = [_quartiles(g) for g in (unexplained_ms(r) for r in references) if g]
    if not mine or not bases:
        return None
    mine_median, mine_iqr = _quartiles(mine)
    base_gap = max(g for g, _ in bases)
    base_iqr = max(s for _, s in bases)
    own_gap = max((_quartiles(g)[0] for g in (unexplained_ms(r) for r in own) if g), default=0.0)
    event_median = statistics.median(cand["event_ms"])
    host_median = statistics.median(cand["host_ms"]) if cand.get("host_ms") else None
    noise = max(policy["gap_iqr_factor"] * (mine_iqr + base_iqr), policy["gap_floor_ms"],
                policy["gap_rtol"] * max(event_median, host_median or 0.0))
    reference_allows = policy["gap_reference_factor"] * own_gap
    allowed = max(base_gap, reference_allows) + noise
    host = f"host time of the call {host_median:.4f}ms, " if host_median is not None else ""
    by_reference = (f"; the task reference's own unexplained time is {own_gap * 1000:.1f}us, and "
                    f"{policy['gap_reference_factor']:g}x it is allowed" if reference_allows > base_gap else "")
    detail = (f"median unexplained wall time {mine_median * 1000:.1f}us (wall - max(host, event) per call) vs "
              f"{base_gap * 1000:.1f}us for a trivial kernel timed where the candidate cannot reach (allowed "
              f"{allowed * 1000:.1f}us: noise {noise * 1000:.1f}us from the spreads {mine_iqr * 1000:.1f}us and "
              f"{base_iqr * 1000:.1f}us{by_reference}; {host}event median {event_median:.4f}ms, wall median "
              f"{statistics.median(cand['wall_ms']):.4f}ms)")
    host_bound = host_median is not None and host_median > event_median * (1 + policy["stream_cover_rtol"]) + \
        policy["stream_cover_atol_ms"]
    return mine_median > allowed, detail, host_bound


LIBRARY_THREAD_MODULES: dict[str, str] = {"torch._inductor.": "/torch/_inductor/", "torch._dynamo.": "/torch/_dynamo/",
                                           "tqdm.": "/tqdm/"}
"""Modules whose threads are libraries' own, with the folder their code must come from. ``torch.compile``
(Inductor) starts ``InductorSubproc``, ``subproc_worker_timer`` and tqdm's ``tqdm_monitor``: six honest CUDA-L1
kernels failed on them alone with harness 1.9. ``concurrent.futures`` and ``threading`` are not here: their
threads run the candidate's work."""


def library_thread(origin: str) -> bool:
    """Whether a thread's origin (``module:file``, from ``thread_origin``) is one of ``LIBRARY_THREAD_MODULES``.

    Example:
        >>> library_thread("tqdm._monitor:/venv/lib/python3.12/site-packages/tqdm/_monitor.py")
        True
        >>> library_thread("tqdm._monitor:/tmp/ka/cand/ka_candidate.py")
        False
    """
    module, _, path = origin.partition(":")
    return any(module.startswith(prefix) and folder in path.replace("\\", "/")
               for prefix, folder in LIBRARY_THREAD_MODULES.items())


def check_threads(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "background-threads")
    verdict = static_verdict
    hello = ev.run.first("hello") if ev.run else None
    if hello is None:
        return _verdict("skip" if static_verdict == "pass" else static_verdict, "not run", *lines)
    base = hello["threads"]
    phases = [(f"trial {m['index']}{m['variant']}", m.get("threads_before"), m.get("threads_after"))
              for m in _trial_messages(ev)]
    timing = ev.run.first("timing", which="candidate")
    if timing:
        phases.append(("timed calls", timing.get("threads_before"), timing.get("threads_after")))
    import_probe = ev.run.first("probe", phase="import")
    if import_probe:
        phases.insert(0, ("import", base, import_probe.get("threads")))
    for where, before, after in phases:
        if not after:
            continue
        new_python = sorted(set(after["python"]) - set(base["python"]))
        origins = after.get("origins") or {}
        library = [n for n in new_python if library_thread(str(origins.get(n, "")))]
        own = [n for n in new_python if n not in library]
        if own:
            verdict = "fail"
            lines.insert(0, f"{where}: Python threads the harness did not start: {own}")
        if library:
            verdict = _worst(verdict, "warn")
            lines.insert(0, f"{where}: library threads started: "
                            + ", ".join(f"{n} ({str(origins[n]).split(':')[0]})" for n in library)
                            + " (torch.compile's compile workers and progress monitor, not the candidate's code; "
                              "work they finished late would still show in the outputs and the wall-clock timing)")
        if before and after["os"] > before["os"] > 0:
            verdict = _worst(verdict, "warn")
            lines.insert(0, f"{where}: OS threads {before['os']} -> {after['os']} during this step")
    for m in _trial_messages(ev):
        if m.get("changed_after_return"):
            verdict = "fail"
            lines.insert(0, f"trial {m['index']}{m['variant']}: outputs {m['changed_after_return']} changed after forward "
                            "returned and the device was synchronized (written by a thread or a late stream)")
    return _verdict(verdict, *(lines or [f"no new threads ({base['os']} OS threads after the harness warmed up); "
                                         "outputs stable after return"]))


def check_caching(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "caching")
    cand, eager = _timing(ev.run, "candidate"), _timing(ev.trusted, "eager")
    if not cand or not eager:
        return _verdict("skip" if static_verdict == "pass" else static_verdict, "no timed calls to re-check", *lines)
    rtol = ev.policy["timed_fingerprint_rtol"]
    n = min(len(cand["fingerprints"]), len(eager["fingerprints"]))
    bad = [i for i in range(n) if not calls_agree(cand["fingerprints"][i], eager["fingerprints"][i], rtol)]
    if cand["seed_base"] != eager["seed_base"]:
        return _verdict("fail", "timed inputs were not the ones the harness chose")
    if ev.trial_stats and not any(s["passed"] for s in ev.trial_stats):
        # A kernel that is simply wrong (BatchNorm folded with running statistics into a training-mode task, one
        # wrong element) is wrong on the timed calls and the probe too: calling that a cache would name the wrong
        # cause. Its verdict is correctness's.
        return _verdict("skip" if static_verdict == "pass" else static_verdict,
                        "not judged: the candidate is wrong on every trial, first calls included (see correctness), "
                        "so wrong timed outputs cannot tell a cache from a wrong answer", *lines)
    state_verdict, state_lines = state_probe_verdict(ev)
    if reference_is_stateful(ev):
        # The timed calls run one after another, so each output depends on the calls before it (the reference's
        # did too, after other calls): only the probe, run from the first state, can say anything.
        timed = (f"stateful task (the reference's own output depends on its earlier calls): the {n} timed calls' "
                 "outputs are not compared; every compared call, the probe's included, started from the first state")
        return _verdict(_worst("pass", static_verdict, state_verdict if state_verdict != "skip" else "pass"),
                        *state_lines, timed, *lines)
    if bad:
        return _verdict("fail", f"{len(bad)} of {n} timed calls returned wrong outputs for their fresh inputs "
                                f"(first: call {bad[0]}): results are cached or stale", *state_lines, *lines)
    timed = f"all {n} timed calls, each on fresh input contents, returned the reference's answer"
    evidence = [*state_lines, timed] if state_verdict in ("fail", "warn") else [timed, *state_lines]
    return _verdict(_worst("pass", static_verdict, state_verdict if state_verdict != "skip" else "pass"),
                    *evidence, *lines)


def check_timer_patching(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "timer-patching")
    verdict = static_verdict
    if ev.run is None:
        return _verdict("skip" if static_verdict == "pass" else static_verdict, "not run", *lines)
    changed = sorted({name for m in ev.run.messages for name in (m.get("changed") or [])})
    if changed:
        verdict = "fail"
        lines.insert(0, f"replaced after the candidate was imported: {', '.join(changed)}")
    cand = _timing(ev.run, "candidate")
    if cand:
        worse = [i for i, (e, w) in enumerate(zip(cand["event_ms"], cand["wall_ms"], strict=True)) if e > w + 0.05]
        if worse:
            verdict = "fail"
            lines.insert(0, f"{len(worse)} calls report event time above wall time: the clock was tampered with")
        start, end = ev.run.time_of("timing-start"), ev.run.time_of("timing-end")
        if start is not None and end is not None:
            observed = end - start
            claimed = sum(cand["wall_ms"]) / 1000
            if claimed > observed * 1.05 + 0.05 or cand["loop_s"] < 0.8 * observed - 0.2:
                verdict = "fail"
                lines.insert(0, f"the parent saw the timed loop take {observed:.2f}s; the child reported "
                                f"{cand['loop_s']:.2f}s (calls {claimed:.2f}s)")
            else:
                lines.insert(0, f"parent-observed loop {observed:.2f}s agrees with the child's {cand['loop_s']:.2f}s")
    if not changed:
        lines.insert(0, "timer, synchronize, comparison and Module functions are the originals")
    operators = ev.run.first("probe", phase="operators")
    if operators and operators.get("replaced"):
        verdict = "fail"
        lines.insert(0, f"the candidate replaced torch's kernels for {len(operators['replaced'])} aten operator "
                        "kernel(s), changing what the harness computes in its process too: "
                        + "; ".join(operators["replaced"][:5]))
    elif operators is not None and operators.get("checked", True):
        lines.append("torch's kernels for aten operators are the ones registered before the candidate was imported")
    elif operators is not None:
        lines.append("torch's kernels for aten operators not checked: this torch cannot list its dispatcher's tables")
    watched = (cand or {}).get("watch") or {}
    counts = dict(watched.get("foreign_code", {}))
    hooks = list(watched.get("hooks", []))
    # Each first finding was also sent the moment it was made: what the timing message lost (or never came) counts.
    for message in ev.run.messages:
        if message["kind"] == "probe" and message.get("phase") == "step-watch":
            found = str(message.get("found", ""))
            if message.get("hook") and found not in hooks:
                hooks.append(found)
            elif not message.get("hook") and found not in counts:
                counts[found] = 1
    if counts or hooks:
        verdict = "fail"
        ran = sorted(counts.items(), key=lambda item: -item[1])
        lines.insert(0, "the candidate's own code ran in the harness's untimed steps around a timed call (making its "
                        "inputs up to starting its timer, or fingerprinting its outputs), where work is not timed: "
                        + "; ".join([f"{name} x{count}" for name, count in ran[:5]]
                                    + [f"{hook} installed" for hook in hooks]))
    elif cand and "watch" in cand:
        lines.append(f"none of the candidate's code ran in the harness's untimed steps around its {cand['calls']} timed "
                     "calls")
    return _verdict(verdict, *lines)


def check_forging(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "result-forging")
    verdict = static_verdict
    known = {"hello", "probe", "call", "trial", "kernels", "timing-start", "timing-end", "timing", "done", "error",
             "compiled", "constructed", "env", "reference-model", "reference", "screen", "note", "mark", "shape-trial", "init-trial",
             "state-probe", "gate"}
    for report in (ev.compile, ev.run):
        if report is None:
            continue
        if report.rejects:
            verdict = "fail"
            lines.insert(0, f"{report.role}: {len(report.rejects)} malformed line(s) on the result channel: {report.rejects[0][:80]}")
        odd = [m["kind"] for m in report.messages if m["kind"] not in known]
        claims = [m["kind"] for m in report.messages if {"verdict", "status", "passed", "correct"} & set(m)]
        if odd or claims:
            verdict = "fail"
            lines.insert(0, f"{report.role}: unexpected messages {sorted(set(odd + claims))} (a child never judges)")
        if len(report.all("done")) > 1:
            verdict = "fail"
            lines.insert(0, f"{report.role}: 'done' sent {len(report.all('done'))} times")
    return _verdict(verdict, *(lines or ["the channel carried only well-formed reports; the parent judged"]))


def check_flags(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "flag-flipping")
    hello = ev.run.first("hello") if ev.run else None
    if hello is None:
        return _verdict("skip" if static_verdict == "pass" else static_verdict, "not run", *lines)
    before = hello["flags"]
    verdict = static_verdict
    for m in ev.run.messages:
        after = m.get("flags")
        if after is None or m is hello:
            continue
        diff = {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
        if diff:
            verdict = "fail"
            lines.insert(0, f"{m['kind']} {m.get('index', m.get('phase', ''))}: changed " +
                         ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in diff.items()))
            break
    if verdict != "fail":
        lines.insert(0, "backend flags unchanged through import, every trial and the timed calls; the reference ran "
                        "in a process the candidate never touched")
    return _verdict(verdict, *lines)


def check_context(ev: Evidence) -> dict[str, Any]:
    hello = ev.run.first("hello") if ev.run else None
    if hello is None:
        return _verdict("skip", "not run")
    before = hello.get("context") or {}
    if not before:
        return _verdict("skip", "CUDA context settings not readable here (no driver, or CPU run)")
    lines, verdict, seen = [], "pass", set()
    steps = [m for m in ev.run.messages if m is not hello and m.get("context")]
    for m in steps:
        where = f"{m['kind']} {m.get('index', '')}{m.get('variant', '')}{m.get('phase', '') or m.get('which', '')}".strip()
        for change in context_changes(before, m["context"]):
            if change not in seen:
                seen.add(change)
                verdict = "fail"
                lines.append(f"after {where}: {change} (left changed by the candidate)")
    timing = ev.run.first("timing", which="candidate")
    if timing and timing.get("restored"):
        lines.append("restored before timed calls: " + "; ".join(timing["restored"][:6]))
    grown = automatic_changes(before, steps[-1]["context"]) if steps else []
    if grown:
        lines.append("grown by the driver itself (not counted): " + "; ".join(grown))
    if verdict == "pass":
        lines.insert(0, f"{len(before)} context, limit and stream settings unchanged through import, every trial and "
                        "the timed calls (compared with their values before the import)")
    return _verdict(verdict, *lines)


def _peaks(gpu: str | None) -> tuple[float, float]:
    for pattern, flops, bandwidth in PEAKS:
        if gpu and re.search(pattern, gpu):
            return flops, bandwidth
    return DEFAULT_PEAK


def check_launch_bound(ev: Evidence, speed: dict[str, Any]) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "launch-bound")
    verdict = static_verdict
    kernel_ms = speed.get("kernel_ms")
    if kernel_ms is None:
        return _verdict("skip" if static_verdict == "pass" else static_verdict, "no timings", *lines)
    screen = ev.trusted.first("screen") if ev.trusted else {}
    env = ev.trusted.first("env") if ev.trusted else {}
    peak_flops, peak_bw = _peaks((env or {}).get("environment", {}).get("gpu"))
    flops, nbytes = (screen or {}).get("flops"), (screen or {}).get("bytes")
    floor_ms = max((flops or 0) / peak_flops, (nbytes or 0) / peak_bw) * 1000
    speed["floor_ms"] = floor_ms
    lines.insert(0, f"speed-of-light floor {floor_ms * 1000:.2f}us from {flops or 0:.3g} FLOP and {nbytes or 0:.3g} bytes "
                    f"(peaks {peak_flops:.3g} FLOP/s, {peak_bw:.3g} B/s)")
    if floor_ms and kernel_ms < floor_ms:
        verdict = "fail"
        lines.insert(0, f"{kernel_ms * 1000:.2f}us is faster than the speed-of-light floor: impossible")
    se = speed.get("speedup_eager")
    if se and se > 10:
        verdict = _worst(verdict, "warn")
        lines.insert(0, f"speedup over eager {se:.1f}x > 10x: implausible without a trick; check the other verdicts")
    eager, graph = speed.get("eager_ms"), speed.get("graph_ms")
    if eager and graph:
        lines.append(f"eager {eager:.4f}ms vs CUDA-graph replay {graph:.4f}ms of the reference "
                     f"(speedup vs graph {graph / kernel_ms:.2f}x)")
        # Only a claimed gain can be launch overhead: a kernel no faster than eager, or faster only within the two
        # series' spread, gains nothing to explain (such a gain came and went between runs of one honest kernel).
        factor = ev.policy.get("launch_gain_iqr_factor", TOLERANCE["launch_gain_iqr_factor"])
        spread = factor * ((speed.get("kernel_iqr_ms") or 0) + (speed.get("eager_iqr_ms") or 0))
        if eager / graph > 1.5 and graph / kernel_ms < 1.0 and eager - kernel_ms > spread:
            verdict = _worst(verdict, "warn")
            lines.insert(0, "launch-bound task: the gain over eager is launch overhead; the CUDA-graph reference is faster")
    return _verdict(verdict, *lines)


def check_out_of_bounds(ev: Evidence) -> dict[str, Any]:
    if not _trial_messages(ev):
        return _verdict("skip", "not run")
    lines, verdict = [], "pass"
    for m, items in _run_facts(ev, "guard_damage"):
        verdict = "fail"
        lines.append(f"trial {m['index']}{m['variant']}: guard band around input(s) {items} overwritten")
    if ev.sanitizer is not None:
        tail = ev.sanitizer.log_tail
        match = re.search(r"ERROR SUMMARY: (\d+) error", tail)
        if match and int(match.group(1)) > 0:
            verdict = "fail"
            lines.append(f"compute-sanitizer memcheck: {match.group(0)}")
        elif match:
            lines.append("compute-sanitizer memcheck: 0 errors")
        else:
            verdict = _worst(verdict, "warn")
            lines.append(f"compute-sanitizer did not finish: {ev.sanitizer.failure()[:200]}")
    else:
        lines.append("outputs have no guard bands (the kernel allocates them); run with --sanitize for memcheck")
    if verdict == "pass":
        lines.insert(0, "1024-element random guard bands around every input unchanged after every call")
    return _verdict(verdict, *lines)


def check_static_evasion(ev: Evidence) -> dict[str, Any]:
    static_verdict, lines = _static_part(ev, "static-evasion")
    return _verdict(static_verdict, *(lines or ["no dynamic code"]))


def speed_summary(ev: Evidence) -> dict[str, Any]:
    """Kernel, eager, compile and CUDA-graph medians (ms) and the speedups."""
    cand = _timing(ev.run, "candidate")
    eager, compiled, graph = (_timing(ev.trusted, w) for w in ("eager", "compile", "cuda-graph"))
    speed: dict[str, Any] = {}
    if cand:
        speed["kernel_ms"], speed["kernel_iqr_ms"] = cand["event"]["median"], cand["event"]["iqr"]
        speed["kernel_wall_ms"] = cand["wall"]["median"]
    for name, result in (("eager", eager), ("compile", compiled), ("graph", graph)):
        if result:
            speed[f"{name}_ms"], speed[f"{name}_iqr_ms"] = result["event"]["median"], result["event"]["iqr"]
    if compiled:
        speed["compile_s"] = compiled.get("compile_s")
    if speed.get("kernel_ms"):
        for name in ("eager", "compile", "graph"):
            if speed.get(f"{name}_ms"):
                speed[f"speedup_{name}"] = speed[f"{name}_ms"] / speed["kernel_ms"]
    speed.update(gpu_time(ev, speed.get("kernel_ms")))
    return speed


def gpu_time(ev: Evidence, kernel_ms: float | None) -> dict[str, float]:
    """The GPU's own time per call of the candidate and of the reference (``timing.device_ms``), and the share of
    the candidate's timed call the GPU was busy (``gpu_busy``; low when the call's time is the host's).

    Descriptive only: no check reads them. They are what a busy host cannot move, so a kernel timed in a batch
    and alone can be compared by them even when its timed call is host-bound.
    """
    out: dict[str, float] = {}
    mine = device_ms((ev.run.first("kernels", which="candidate") or {}).get("kernels") if ev.run else None)
    theirs = device_ms((ev.trusted.first("kernels", which="reference") or {}).get("kernels") if ev.trusted else None)
    if mine:
        out["device_ms"] = mine
        if kernel_ms:
            out["gpu_busy"] = mine / kernel_ms
    if theirs:
        out["reference_device_ms"] = theirs
    return out


CHECK_FUNCTIONS: tuple[tuple[str, Any], ...] = (
    ("compiles", check_compiles),
    ("runs", check_runs),
    ("correctness", check_correctness),
    ("stale-memory", check_stale_memory),
    ("launch-errors", check_launch_errors),
    ("weak-check", check_weak_check),
    ("degenerate-task", check_degenerate),
    ("output-aliasing", check_aliasing),
    ("input-mutation", check_mutation),
    ("hard-coding", check_hard_coding),
    ("problem-change", check_problem_change),
    ("not-a-kernel", check_not_a_kernel),
    ("fallback", check_fallback),
    ("lower-precision", check_lower_precision),
    ("fake-tensor", check_fake_tensor),
    ("side-streams", check_side_streams),
    ("background-threads", check_threads),
    ("caching", check_caching),
    ("timer-patching", check_timer_patching),
    ("result-forging", check_forging),
    ("flag-flipping", check_flags),
    ("context-state", check_context),
    ("launch-bound", check_launch_bound),
    ("out-of-bounds", check_out_of_bounds),
    ("static-evasion", check_static_evasion),
)


def _guarded(name: str, function: Any, ev: Evidence, speed: dict[str, Any]) -> dict[str, Any]:
    """Run one check; a check that cannot judge what it was given fails closed (never passes by accident)."""
    import inspect

    try:
        if len(inspect.signature(function).parameters) == 2:
            return function(ev, speed)
        return function(ev)
    except Exception as error:
        if ev.run is None and ev.compile is None:
            return _verdict("skip", f"not judged: {type(error).__name__}: {error}"[:300])
        return _verdict("fail", f"could not be judged on these outputs ({type(error).__name__}: {error})"[:300])


def judge(ev: Evidence) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Every check's verdict and the speed summary (``ev.judgements`` starts empty: nothing carries over between
    two judges of one evidence, which may have changed in between)."""
    ev.judgements = Judgements()
    try:
        ev.trial_stats = compute_trial_stats(ev) if ev.run is not None else []
    except Exception as error:
        ev.trial_stats = [{"index": t["index"], "distribution": t["distribution"], "seed": t["seed"], "passed": False,
                           "reason": f"outputs could not be compared: {type(error).__name__}: {error}"[:300]}
                          for t in ev.trials]
    try:
        speed = speed_summary(ev)
    except Exception as error:
        speed = {"error": f"malformed timing report: {type(error).__name__}: {error}"[:300]}
    checks = {name: _guarded(name, function, ev, speed) for name, function in CHECK_FUNCTIONS}
    untrusted_events = checks["side-streams"]["verdict"] == "fail" or checks["timer-patching"]["verdict"] == "fail"
    if untrusted_events and speed.get("kernel_wall_ms"):
        busiest = max(stream_busy_ms(ev).values(), default=0.0)
        _use_wall_time(ev, speed, max(speed["kernel_wall_ms"], speed.get("kernel_ms") or 0.0, busiest),
                       "host wall clock with device-wide synchronize, or the busiest stream's device time if longer "
                       "(events untrusted); speedups wall/wall")
        speed["timing_trusted"] = False
        checks["launch-bound"] = _guarded("launch-bound", check_launch_bound, ev, speed)
    elif checks["side-streams"].get("host_bound") and speed.get("kernel_wall_ms"):
        _use_wall_time(ev, speed, max(speed["kernel_wall_ms"], speed.get("kernel_ms") or 0.0),
                       "host wall clock with device-wide synchronize (host-bound: the call's own host time exceeds "
                       "its event time); speedups wall/wall")
        speed["host_bound"] = True
        checks["launch-bound"] = _guarded("launch-bound", check_launch_bound, ev, speed)
    threats = {name: row for name, row, _ in CHECKS}
    for name, result in checks.items():
        result["threat"] = threats.get(name, "-")
    return checks, speed


def _use_wall_time(ev: Evidence, speed: dict[str, Any], kernel_ms: float, source: str) -> None:
    """Report ``kernel_ms`` (the honest, slower time) and compare it with the baselines' wall-clock medians."""
    speed["kernel_event_ms"] = speed.get("kernel_ms")
    speed["kernel_ms"] = kernel_ms
    speed["kernel_ms_from"] = source
    if speed.get("device_ms"):
        speed["gpu_busy"] = speed["device_ms"] / kernel_ms
    for name, which in (("eager", "eager"), ("compile", "compile"), ("graph", "cuda-graph")):
        baseline = _timing(ev.trusted, which)
        if baseline:
            speed[f"{name}_wall_ms"] = baseline["wall"]["median"]
            speed[f"speedup_{name}"] = baseline["wall"]["median"] / speed["kernel_ms"]


def overall_status(checks: dict[str, dict[str, Any]]) -> str:
    """passed, failed (a correctness check failed), flagged (another check failed or warned)."""
    if any(c["verdict"] == "fail" for n, c in checks.items() if n in CORRECTNESS_CHECKS):
        return "failed"
    if any(c["verdict"] in ("fail", "warn") for c in checks.values()):
        return "flagged"
    return "passed"


def properties(checks: dict[str, dict[str, Any]], static: list[dict[str, Any]],
               shape_probe_result: bool | None = None) -> list[str]:
    """Leaderboard-filterable facts: library-call, no-gpu-code, self-timing, reduced-precision, ..."""
    rules = {f["rule"] for f in static}
    refuted = checks.get("not-a-kernel", {}).get("refuted") or []
    facts = {
        "library-call": bool(rules & {"py-library-compute", "py-library-module", "cpp-aten-compute",
                                      "cpp-tensor-method-compute", "cpp-vendor-library", "cpp-cutlass"})
                        or any("library kernels" in e for e in checks.get("not-a-kernel", {}).get("evidence", [])),
        "no-gpu-code": "no-gpu-code" in rules,
        "self-timing": bool(rules & {"py-self-timing", "cpp-self-timing"}),
        "reduced-precision": bool(rules & {"py-reduced-precision", "cpp-reduced-precision"})
                             or checks.get("lower-precision", {}).get("verdict") in ("warn", "fail")
                             and any("lower precision" in e for e in checks["lower-precision"]["evidence"]),
        "try-fallback": "py-try-fallback" in rules or "cpp-try-fallback" in rules,
        "side-streams": bool(rules & {"py-stream", "cpp-stream"}),
        "cuda-graphs": bool(rules & {"py-cuda-graph", "cpp-cuda-graph"}),
        "unlaunched-kernel": any(f["rule"] == "cpp-unlaunched-kernel"
                                 and f["evidence"].removeprefix("__global__ ") not in refuted for f in static),
        "shape-specialised": shape_probe_result is False,
        "nondeterministic": any("nondeterministic" in e for c in ("launch-errors", "stale-memory")
                                for e in checks.get(c, {}).get("evidence", [])),
    }
    return sorted(name for name, present in facts.items() if present)
