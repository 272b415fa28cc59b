"""The parent's judging on recorded child outputs: one constructed report per verdict, honest first."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from verify.harness.judge import ChildReport, Evidence, check_launch_bound, judge, overall_status, properties
from verify.harness.tensors import call_fingerprints

TRIALS = [{"index": i, "seed": 100 + i, "distribution": d} for i, d in enumerate(("task", "randn", "negative"))]
HONEST_CODE = "__global__ void relu_k(const float* x, float* y, long n) {}\nvoid f() { relu_k<<<1, 1>>>(0, 0, 0); }"


CONTEXT = {"limit.persisting_l2_cache_size": 9830400, "limit.stack_size": 1024, "context.cache_config": 0,
           "stream.timed.access_policy_window": "base=0x0 bytes=0 hit_ratio=0 hit=0 miss=0"}


def _timing(values: list[float], wall_extra: float, prints: list[list[float]], seed: int = 7) -> dict[str, Any]:
    from verify.harness.timing import summarize

    walls = [v + wall_extra for v in values]
    return {"calls": len(values), "seed_base": seed, "event_ms": values, "wall_ms": walls, "fingerprints": prints,
            "loop_s": sum(walls) / 1000 * 1.2, "event": summarize(values), "wall": summarize(walls)}


def _threads(os_count: int = 10, names: tuple[str, ...] = ("MainThread",)) -> dict[str, Any]:
    return {"python": list(names), "os": os_count}


def honest() -> Evidence:
    g = torch.Generator().manual_seed(0)
    refs, outputs, timed_inputs = {}, {}, []
    for t in TRIALS:
        x = torch.randn(64, 32, generator=g, dtype=torch.float64)
        ref64 = torch.relu(x)
        ref32 = ref64.float()
        refs[t["index"]] = {"ref64": [ref64], "ref32": [ref32]}
        for variant in ("a", "b", "c"):
            outputs[(t["index"], variant)] = [ref32.clone()]
    eager_prints = []
    for _ in range(5):
        y = torch.relu(torch.randn(64, 32, generator=g))
        timed_inputs.append(y)
        eager_prints.append(call_fingerprints(y))
    flags = {"cuda.matmul.allow_tf32": False, "float32_matmul_precision": "highest"}
    trusted = ChildReport(role="trusted", returncode=0, messages=[
        {"kind": "env", "environment": {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11"}, "flags": flags},
        {"kind": "screen", "input_sensitivity": 1.2, "weight_sensitivity": None, "flops": 0.0, "bytes": 16384},
        {"kind": "kernels", "which": "reference",
         "kernels": [{"name": "at::native::vectorized_elementwise_kernel", "stream": 7, "calls": 1, "device_us": 3.0,
                      "library": True}]},
        {"kind": "timing", "which": "overhead", "result": _timing([0.004] * 5, 0.02, [[[0.0] * 6]] * 5)},
        {"kind": "timing", "which": "eager", "result": _timing([0.012] * 5, 0.02, eager_prints)},
        {"kind": "timing", "which": "cuda-graph", "result": _timing([0.011] * 5, 0.02, eager_prints)},
        {"kind": "done"},
    ])
    trusted.received = [float(i) for i in range(len(trusted.messages))]
    compile_report = ChildReport(role="compile", returncode=0, messages=[{"kind": "compiled", "seconds": 30.0}])
    run_messages: list[dict[str, Any]] = [
        {"kind": "hello", "pid": 1, "threads": _threads(), "flags": flags, "context": dict(CONTEXT)},
        {"kind": "probe", "phase": "import", "threads": _threads(), "flags": flags, "changed": []},
        {"kind": "call", "how": "ModelNew", "weights": {"copied": {}, "unmatched_candidate": [], "unused_reference": []}},
    ]
    describe = {"type": "torch.Tensor", "exact_tensor": True, "device": "cuda:0", "dtype": "float32", "shape": [64, 32],
                "layout": "torch.strided", "has_storage": True, "is_meta": False}
    for t in TRIALS:
        for variant in ("a", "b", "c"):
            run_messages.append({"kind": "trial", "index": t["index"], "variant": variant, "blob": f"out-{t['index']}-{variant}",
                                 "outputs": [dict(describe)], "changed_after_return": [], "aliasing": [],
                                 "mutated_inputs": [], "mutated_parameters": [], "guard_damage": [],
                                 "threads_before": _threads(), "threads_after": _threads(), "flags": flags, "changed": [],
                                 "context": dict(CONTEXT)})
    run_messages += [
        {"kind": "timing-start"}, {"kind": "timing-end"},
        {"kind": "timing", "which": "candidate", "result": _timing([0.010] * 5, 0.02, [call_fingerprints(y) for y in timed_inputs]),
         "threads_before": _threads(), "threads_after": _threads(), "flags": flags, "changed": []},
        {"kind": "kernels", "which": "candidate",
         "kernels": [{"name": "relu_k(float const*, float*, long)", "stream": 7, "calls": 1, "device_us": 2.5,
                      "library": False}]},
        {"kind": "done"},
    ]
    run = ChildReport(role="run", returncode=0, seconds=3.0, messages=run_messages)
    run.received = [float(i) for i in range(len(run_messages))]
    run.received[run_messages.index({"kind": "timing-end"})] = run.received[run_messages.index({"kind": "timing-start"})] + 0.00035
    return Evidence(form="cuda-binding", kernel_code=HONEST_CODE, static=[], trials=copy.deepcopy(TRIALS),
                    trusted=trusted, compile=compile_report, run=run, refs=refs, outputs=outputs)


def _message(ev: Evidence, kind: str, **match: Any) -> dict[str, Any]:
    report = ev.run if kind not in ("screen", "env") and not match.get("trusted") else ev.trusted
    match.pop("trusted", None)
    found = report.first(kind, **match)
    assert found is not None
    return found


def test_honest_kernel_passes_every_check() -> None:
    checks, speed = judge(honest())
    assert {n: c["verdict"] for n, c in checks.items() if c["verdict"] != "pass"} == {}
    assert overall_status(checks) == "passed"
    assert speed["speedup_eager"] == pytest.approx(1.2)


def _break(name: str, ev: Evidence) -> None:
    nan = float("nan")
    if name == "stale-memory":
        for t in TRIALS:
            ev.outputs[(t["index"], "a")] = [torch.full((64, 32), nan)]
    elif name == "launch-errors":
        ev.outputs[(0, "c")] = [torch.full((64, 32), 1e30)]
    elif name == "weak-check":
        for t in TRIALS:
            ev.outputs[(t["index"], "a")] = [torch.full((64, 32), 0.5)]
    elif name == "degenerate-task":
        _message(ev, "screen", trusted=True)["input_sensitivity"] = 1e-7
        for t in TRIALS:  # and every trial's reference is the same: one fixed answer would pass them all
            ev.refs[t["index"]] = ev.refs[0]
            for variant in ("a", "b", "c"):
                ev.outputs[(t["index"], variant)] = [ev.refs[0]["ref32"][0].clone()]
    elif name == "output-aliasing":
        _message(ev, "trial", index=0, variant="a")["aliasing"] = [{"output": 0, "with": "input 0"}]
    elif name == "input-mutation":
        _message(ev, "trial", index=1, variant="a")["mutated_inputs"] = [0]
    elif name == "hard-coding":
        ev.outputs[(2, "a")] = [torch.zeros(64, 32)]
    elif name == "problem-change":
        for t in TRIALS:
            ev.outputs[(t["index"], "a")] = [ev.outputs[(t["index"], "a")][0][:32]]
    elif name == "not-a-kernel":
        _message(ev, "kernels", which="candidate")["kernels"] = [
            {"name": "sm90_xmma_gemm_f32f32", "stream": 7, "calls": 1, "device_us": 30.0, "library": True}]
    elif name == "fallback":
        _message(ev, "kernels", which="candidate")["kernels"] = copy.deepcopy(
            ev.trusted.first("kernels", which="reference")["kernels"])
    elif name == "lower-precision":
        for t in TRIALS:
            out = ev.refs[t["index"]]["ref32"][0]
            ev.outputs[(t["index"], "a")] = [out.half().float() + 1e-3 * torch.randn_like(out)]
            ev.outputs[(t["index"], "b")] = ev.outputs[(t["index"], "c")] = ev.outputs[(t["index"], "a")]
    elif name == "fake-tensor":
        _message(ev, "trial", index=0, variant="a")["outputs"][0].update(type="mod.Lazy", exact_tensor=False)
    elif name == "side-streams":
        timing = _message(ev, "timing", which="candidate")["result"]
        timing["event_ms"] = [0.001] * 5
        timing["wall_ms"] = [0.5] * 5
        timing["wall"]["median"] = 0.5
        _message(ev, "kernels", which="candidate")["kernels"][0]["stream"] = 14
    elif name == "background-threads":
        _message(ev, "trial", index=0, variant="a")["changed_after_return"] = [0]
    elif name == "caching":
        timing = _message(ev, "timing", which="candidate")["result"]
        timing["fingerprints"] = [timing["fingerprints"][0]] * 5
    elif name == "timer-patching":
        _message(ev, "probe", phase="import")["changed"] = ["torch.cuda.Event.elapsed_time"]
    elif name == "result-forging":
        ev.run.messages.insert(3, {"kind": "done", "verdict": "pass"})
        ev.run.received.insert(3, 2.5)
    elif name == "flag-flipping":
        _message(ev, "trial", index=2, variant="a")["flags"] = {"cuda.matmul.allow_tf32": True,
                                                                 "float32_matmul_precision": "highest"}
    elif name == "context-state":
        _message(ev, "trial", index=1, variant="a")["context"]["limit.persisting_l2_cache_size"] = 41943040
    elif name == "launch-bound":
        for which in ("eager", "cuda-graph"):
            result = ev.trusted.first("timing", which=which)["result"]
            result["event"]["median"] = 0.2
    elif name == "out-of-bounds":
        _message(ev, "trial", index=0, variant="c")["guard_damage"] = [0]
    elif name == "runs":
        ev.run.returncode = -11
    elif name == "compiles":
        ev.compile.messages = [{"kind": "error", "message": "nvcc: error"}]
        ev.compile.returncode = 3


CAUGHT = [
    ("compiles", "fail", "failed"), ("runs", "fail", "failed"), ("stale-memory", "fail", "failed"),
    ("launch-errors", "fail", "failed"), ("weak-check", "fail", "failed"), ("degenerate-task", "warn", "flagged"),
    ("output-aliasing", "fail", "failed"), ("input-mutation", "fail", "failed"), ("hard-coding", "fail", "failed"),
    ("problem-change", "fail", "failed"), ("not-a-kernel", "fail", "flagged"), ("fallback", "fail", "flagged"),
    ("lower-precision", "warn", "flagged"), ("fake-tensor", "fail", "failed"), ("side-streams", "fail", "flagged"),
    ("background-threads", "fail", "failed"), ("caching", "fail", "failed"), ("timer-patching", "fail", "flagged"),
    ("result-forging", "fail", "flagged"), ("flag-flipping", "fail", "flagged"), ("launch-bound", "warn", "flagged"),
    ("out-of-bounds", "fail", "failed"), ("context-state", "fail", "flagged"),
]


@pytest.mark.parametrize("check,verdict,status", CAUGHT, ids=[c[0] for c in CAUGHT])
def test_each_trick_is_caught_by_its_verdict(check: str, verdict: str, status: str) -> None:
    ev = honest()
    _break(check, ev)
    checks, speed = judge(ev)
    assert checks[check]["verdict"] == verdict, checks[check]
    assert checks[check]["evidence"]
    assert overall_status(checks) == status


def _timed_outputs(ev: Evidence, change: Any) -> None:
    """Give the candidate's timed calls the fingerprints of ``change(eager output)`` on each call's inputs."""
    g = torch.Generator().manual_seed(0)
    for _ in TRIALS:  # honest() draws the trials' inputs from the same generator first
        torch.randn(64, 32, generator=g, dtype=torch.float64)
    timed = [torch.relu(torch.randn(64, 32, generator=g)) for _ in range(5)]
    assert [call_fingerprints(y) for y in timed] == ev.trusted.first("timing", which="eager")["result"]["fingerprints"]
    _message(ev, "timing", which="candidate")["result"]["fingerprints"] = [call_fingerprints(change(y)) for y in timed]


def test_lower_precision_on_the_timed_calls_only_is_flagged() -> None:
    # fp32 on every trial, bf16 on the timed calls: within the caching check's 5%, far outside fp32's error.
    ev = honest()
    _timed_outputs(ev, lambda y: y.bfloat16().float())
    checks, _ = judge(ev)
    check = checks["lower-precision"]
    assert check["verdict"] == "warn" and check["evidence"][0].startswith("timed calls:"), check
    assert "lower precision" in check["evidence"][0]
    assert checks["caching"]["verdict"] == "pass" and checks["correctness"]["verdict"] == "pass"
    assert overall_status(checks) == "flagged"


def test_timed_calls_as_exact_as_fp32_arithmetic_pass_with_their_figure() -> None:
    # Honest controls: another summation order (a relative change of 1e-7 an element), and the same answer.
    for change in (lambda y: y * (1 + 1e-7 * torch.randn(y.shape, generator=torch.Generator().manual_seed(1))),
                   lambda y: y.clone()):
        ev = honest()
        _timed_outputs(ev, change)
        checks, _ = judge(ev)
        check = checks["lower-precision"]
        assert check["verdict"] == "pass", check
        assert any(line.startswith("timed calls: a median relative L2 difference of") for line in check["evidence"])


def test_timed_precision_is_not_told_where_the_timed_outputs_cannot_be_compared() -> None:
    stateful = honest()
    stateful.trusted.messages.append({"kind": "reference-state", "stateful": True, "mutated": []})
    stateful.trusted.received.append(99.0)
    wrong = honest()
    for t in TRIALS:
        wrong.outputs[(t["index"], "a")] = [torch.zeros(64, 32)]
    for ev in (stateful, wrong):
        _timed_outputs(ev, lambda y: y.bfloat16().float())
        check = judge(ev)[0]["lower-precision"]
        assert not any(line.startswith("timed calls:") for line in check["evidence"]), check


def test_untrusted_events_switch_the_speed_to_wall_clock() -> None:
    ev = honest()
    _break("side-streams", ev)
    _, speed = judge(ev)
    assert "wall clock" in speed["kernel_ms_from"]
    assert speed["kernel_ms"] == pytest.approx(0.5)
    assert speed["speedup_eager"] == pytest.approx(0.032 / 0.5)


def test_a_check_that_cannot_judge_fails_closed() -> None:
    ev = honest()
    ev.outputs[(0, "a")] = ["not a tensor"]  # type: ignore[list-item]
    checks, _ = judge(ev)
    assert checks["correctness"]["verdict"] == "fail"


def test_properties_name_what_the_leaderboard_can_filter() -> None:
    ev = honest()
    _break("not-a-kernel", ev)
    checks, _ = judge(ev)
    assert "library-call" in properties(checks, [])


# --- the shape probe (threat row 7: shape-specialised kernels are recorded, not failed) ------------------


def _with_shape_probe(ev: Evidence, out: torch.Tensor | None, error: str | None = None) -> Evidence:
    from verify.harness.judge import shape_probe

    x = torch.randn(9, 32, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ev.shape_ref = {"ref64": [torch.relu(x)], "ref32": [torch.relu(x).float()]}
    ev.trusted.messages.insert(-1, {"kind": "shape-variant", "name": "batch_size", "old": 16, "new": 9})
    ev.trusted.received.append(99.0)
    done = ev.run.messages.pop()
    ev.run.messages += [{"kind": "mark", "phase": "shape-probe"},
                        {"kind": "shape-trial", "error": error} if error else {"kind": "shape-trial", "blob": "out-shape"},
                        done]
    ev.run.received += [98.0, 99.0]
    ev.shape_out = None if out is None else [out]
    assert shape_probe(ev)[0] is not None
    return ev


def test_a_kernel_right_at_other_shapes_is_not_shape_specialised() -> None:
    ev = honest()
    ev = _with_shape_probe(ev, None)
    ev.shape_out = [ev.shape_ref["ref32"][0].clone()]
    checks, _ = judge(ev)
    assert overall_status(checks) == "passed"
    assert "at other shapes (batch_size 16 -> 9): right" in checks["hard-coding"]["evidence"]
    assert "shape-specialised" not in properties(checks, [], True)


@pytest.mark.parametrize("how", ["wrong", "wrong-shape", "raised"])
def test_a_kernel_wrong_at_other_shapes_is_recorded_not_failed(how: str) -> None:
    from verify.harness.judge import shape_probe

    ev = honest()
    out = {"wrong": torch.zeros(9, 32), "wrong-shape": torch.zeros(16, 32), "raised": None}[how]
    ev = _with_shape_probe(ev, out, error="RuntimeError: shape '[16, 32]' is invalid" if how == "raised" else None)
    checks, _ = judge(ev)
    right, line = shape_probe(ev)
    assert right is False and "shape-specialised" in line
    assert checks["hard-coding"]["verdict"] == "pass"
    assert overall_status(checks) == "passed"
    assert "shape-specialised" in properties(checks, [], right)


def test_a_run_that_dies_in_the_shape_probe_keeps_its_verdicts() -> None:
    from verify.harness.judge import shape_probe

    ev = _with_shape_probe(honest(), None)
    ev.run.messages = [m for m in ev.run.messages if m["kind"] not in ("shape-trial", "done")]
    ev.run.returncode = -6
    assert ev.run.died_in_shape_probe and ev.run.ok
    checks, _ = judge(ev)
    assert checks["runs"]["verdict"] == "pass"
    assert shape_probe(ev)[0] is False


def test_a_forged_shape_probe_mark_does_not_excuse_a_crash() -> None:
    ev = honest()
    ev.run.messages.insert(3, {"kind": "mark", "phase": "shape-probe"})
    ev.run.messages = [m for m in ev.run.messages if m["kind"] != "done"]
    ev.run.returncode = -11
    assert not ev.run.died_in_shape_probe
    checks, _ = judge(ev)
    assert checks["runs"]["verdict"] == "fail"


# --- issue 14: correctness relative to fp32's own error, exact counts -------------------------------------


def _heavy_gemm(k: int = 4096, m: int = 128) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """float64 and fp32 references of a K-long product on clamped-Cauchy inputs, and A, B in fp32."""
    import math

    g = torch.Generator().manual_seed(11)
    u = torch.rand(m, k, generator=g).clamp(1e-4, 1 - 1e-4)
    a = torch.tan(math.pi * (u - 0.5)).clamp(-100, 100)
    b = torch.tan(math.pi * (torch.rand(k, m, generator=g).clamp(1e-4, 1 - 1e-4) - 0.5)).clamp(-100, 100)
    return a.double() @ b.double(), a @ b, a, b


def test_a_candidate_as_accurate_as_fp32_passes_where_atol_rtol_alone_fails() -> None:
    from verify.harness.judge import TOLERANCE, judge_outputs

    _, _, a, b = _heavy_gemm()
    # An extra column cancels row 0 of the product: outputs near zero, where fp32's own error exceeds atol.
    a = torch.cat([a * 10, torch.ones(a.shape[0], 1)], 1)
    b = torch.cat([b, -(a[:, :-1].double() @ b.double())[0:1].float()], 0)
    ref64, ref32 = a.double() @ b.double(), a @ b
    chunked = sum(a[:, i:i + 512] @ b[i:i + 512, :] for i in range(0, a.shape[1], 512))
    passed, reasons, stats = judge_outputs([chunked], [ref64], [ref32], TOLERANCE)
    assert passed, reasons
    old_passed = judge_outputs([chunked], [ref64], None, TOLERANCE)[0]
    assert stats[0]["outside_atol_rtol"] > 0 and not old_passed
    assert stats[0]["bound"] == "fp32-relative" and stats[0]["mismatches"] == 0
    assert isinstance(stats[0]["mismatches"], int)


@pytest.mark.parametrize("how", ["one-element", "bf16", "zero-small"])
def test_wrong_candidates_still_fail_under_the_fp32_bound(how: str) -> None:
    from verify.harness.judge import TOLERANCE, judge_outputs

    ref64, ref32, a, b = _heavy_gemm()
    if how == "one-element":
        out = ref32.clone()
        out.view(-1)[777] += 10 * (1 + out.view(-1)[777].abs())
    elif how == "bf16":
        out = (a.bfloat16() @ b.bfloat16()).float()
    else:
        out = torch.where(ref32.abs() < 0.5 * ref32.abs().median(), torch.zeros(()), ref32)
    passed, reasons, stats = judge_outputs([out], [ref64], [ref32], TOLERANCE)
    assert not passed
    if how == "one-element":
        assert stats[0]["mismatches"] == 1
        assert f"1 of {ref64.numel()} elements" in reasons[0]


def test_mismatches_are_counted_exactly_on_large_outputs() -> None:
    from verify.harness.tensors import count_outside

    ref = torch.zeros(4_000_001, dtype=torch.float64)
    out = ref.float().clone()
    out[123] = 1.0
    assert count_outside(out, ref, 1e-2, 1e-2) == 1


def test_hard_coding_does_not_fire_within_the_fp32_bound() -> None:
    ev = honest()
    ref64, ref32, _, _ = _heavy_gemm(k=1024, m=32)
    noisy = ref32 + (ref32 - ref64.float()) * 3
    ev.refs[2] = {"ref64": [ref64], "ref32": [ref32]}
    for variant in ("a", "b", "c"):
        ev.outputs[(2, variant)] = [noisy.clone()]
    checks, _ = judge(ev)
    assert checks["correctness"]["verdict"] == "pass", checks["correctness"]
    assert checks["hard-coding"]["verdict"] == "pass"
    assert any("bound" in line for line in checks["correctness"]["evidence"])


# --- issue 14: run-time evidence outranks a static 'never launched' --------------------------------------


def test_a_static_never_launched_refuted_at_run_time_is_not_flagged() -> None:
    ev = honest()
    ev.static = [{"check": "not-a-kernel", "verdict": "warn", "rule": "cpp-unlaunched-kernel", "line": 1,
                  "evidence": "__global__ relu_k", "why": "defined but never launched"},
                 {"check": "not-a-kernel", "verdict": "fail", "rule": "cpp-no-kernel-launched", "line": 1,
                  "evidence": "relu_k", "why": "none of the defined __global__ kernels is launched"}]
    checks, _ = judge(ev)
    assert checks["not-a-kernel"]["verdict"] == "pass", checks["not-a-kernel"]
    assert checks["not-a-kernel"]["refuted"] == ["relu_k"]
    assert any("refuted by run-time evidence" in e for e in checks["not-a-kernel"]["evidence"])
    assert "unlaunched-kernel" not in properties(checks, ev.static)
    _message(ev, "kernels", which="candidate")["kernels"][0]["name"] = "other_kernel"
    checks, _ = judge(ev)
    assert checks["not-a-kernel"]["verdict"] == "warn" and checks["not-a-kernel"]["refuted"] == []
    assert "unlaunched-kernel" in properties(checks, ev.static)


def test_a_kernel_only_mentioned_while_library_kernels_run_is_named_as_never_launched() -> None:
    ev = honest()
    ev.static = [{"check": "not-a-kernel", "verdict": "warn", "rule": "cpp-unlaunched-kernel", "line": 1,
                  "evidence": "__global__ relu_k", "why": "defined but never launched"}]
    _message(ev, "kernels", which="candidate")["kernels"] = [
        {"name": "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>", "stream": 7, "calls": 1,
         "device_us": 176.0, "library": True}]
    checks, _ = judge(ev)
    assert checks["not-a-kernel"]["verdict"] == "fail"
    assert checks["not-a-kernel"]["evidence"][1].endswith("its own kernel(s) relu_k never launched")
    assert "unlaunched-kernel" in properties(checks, ev.static)
    ev = honest()
    checks, _ = judge(ev)
    assert not any("never launched" in e for e in checks["not-a-kernel"]["evidence"]), "relu_k ran: no such line"


# --- issue 14: wall time vs events -------------------------------------------------------------------------


def test_a_wall_event_gap_without_another_stream_fails_timing() -> None:
    ev = honest()
    timing = _message(ev, "timing", which="candidate")["result"]
    timing["event_ms"] = [0.35] * 5
    timing["wall_ms"] = [0.93] * 5
    timing["wall"]["median"] = 0.93
    timing["event"]["median"] = 0.35
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "fail"
    assert "disagree beyond noise" in checks["side-streams"]["evidence"][0]
    assert speed["kernel_ms"] == pytest.approx(0.93) and speed["timing_trusted"] is False


def _spread(median: float, iqr: float, n: int = 41) -> list[float]:
    """``n`` evenly spaced samples around ``median`` whose interquartile range is about ``iqr``."""
    return [median + iqr * (2 * i / (n - 1) - 1) for i in range(n)]


def _calls(event: float, wall: float, host: float | None = None, wall_iqr: float = 0.0,
           event_iqr: float = 0.0) -> dict[str, Any]:
    """A timing result with per-call samples (and per-call host times of the call when ``host`` is given)."""
    from verify.harness.timing import summarize

    events, walls = _spread(event, event_iqr), _spread(wall, wall_iqr)
    result = {"calls": len(events), "seed_base": 7, "event_ms": events, "wall_ms": walls,
              "fingerprints": [[[0.0] * 6]] * len(events), "loop_s": sum(walls) / 1000, "event": summarize(events),
              "wall": summarize(walls)}
    if host is not None:
        result["host_ms"] = _spread(host, wall_iqr)
        result["host"] = summarize(result["host_ms"])
    return result


def test_the_reference_gap_comes_from_where_the_candidate_cannot_reach() -> None:
    from verify.harness.judge import wall_event_gap

    trusted = _calls(0.004, 0.02, wall_iqr=0.01)
    slow_host_before_import = _calls(0.004, 0.124, wall_iqr=0.01)
    assert wall_event_gap(_calls(0.35, 0.40, wall_iqr=0.02), [trusted])[0] is False
    assert wall_event_gap(_calls(0.35, 0.50, wall_iqr=0.02), [trusted])[0] is True
    assert wall_event_gap(_calls(0.35, 0.50, wall_iqr=0.02), [trusted, slow_host_before_import])[0] is False


# --- harness 1.2: run-time stream evidence, host-bound kernels, spread-based noise ---------------------------


def _timed(ev: Evidence, result: dict[str, Any], trivial: dict[str, Any] | None = None) -> None:
    message = _message(ev, "timing", which="candidate")
    prints = message["result"]["fingerprints"]
    result["fingerprints"] = (prints * len(result["event_ms"]))[:len(result["event_ms"])]
    message["result"] = result
    if trivial is not None:
        _message(ev, "timing", which="overhead", trusted=True)["result"] = trivial


def _kernels(ev: Evidence, *rows: tuple[str, int, float]) -> None:
    _message(ev, "kernels", which="candidate")["kernels"] = [
        {"name": name, "stream": stream, "calls": 1, "device_us": us, "library": False} for name, stream, us in rows]


def test_work_on_an_unjoined_side_stream_fails_timing_even_when_the_wall_gap_is_lost_in_host_noise() -> None:
    # The H100 run: matmul on torch side stream 14 (176 + 5 us), events 1.3 us, wall 0.63 ms, while the trivial
    # kernel's gap under load (0.81 ms) was larger than the candidate's: the gap check alone said "agree".
    ev = honest()
    _timed(ev, _calls(0.0013, 0.6255, host=0.05, wall_iqr=0.1), _calls(0.004, 0.8145, host=0.02, wall_iqr=0.05))
    _kernels(ev, ("relu_k_gemm", 14, 175.652), ("relu_k_reduce", 14, 5.409))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "fail", checks["side-streams"]
    assert "do not cover" in checks["side-streams"]["evidence"][0]
    assert any("event and wall-clock times agree" in e for e in checks["side-streams"]["evidence"])
    assert speed["timing_trusted"] is False and speed["kernel_ms"] == pytest.approx(0.6255)
    assert speed["kernel_event_ms"] == pytest.approx(0.0013)
    assert overall_status(checks) == "flagged"
    _timed(ev, _calls(0.0013, 0.1, host=0.05, wall_iqr=0.01))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "fail"
    assert speed["kernel_ms"] == pytest.approx(0.181061), "the busiest stream's device time, when above the wall"


def test_work_on_side_streams_joined_back_and_single_stream_kernels_keep_their_event_time() -> None:
    ev = honest()
    _timed(ev, _calls(0.21, 0.23, host=0.03, wall_iqr=0.01))
    _kernels(ev, ("relu_k_a", 7, 100.0), ("relu_k_b", 14, 104.0))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "warn", checks["side-streams"]
    assert not any("do not cover" in e for e in checks["side-streams"]["evidence"])
    assert speed["kernel_ms"] == pytest.approx(0.21) and "timing_trusted" not in speed
    ev = honest()
    _timed(ev, _calls(0.10, 0.12, host=0.02, wall_iqr=0.01))
    _kernels(ev, ("relu_k", 7, 104.0))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "pass", checks["side-streams"]
    assert speed["kernel_ms"] == pytest.approx(0.10)
    _kernels(ev, ("relu_k", 7, 180.0))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "pass", "the timed stream's work is inside its events by construction"
    _kernels(ev, ("relu_k", 14, 120.0))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "fail", "20% more device time than the events is no noise"
    assert speed["kernel_ms"] == pytest.approx(0.12) and speed["timing_trusted"] is False


def test_a_host_bound_kernel_passes_and_reports_its_wall_time() -> None:
    # The H100 run under ten concurrent verifications: direct convolution, events 0.114 ms, wall 0.654 ms (IQR
    # 0.32 ms), trivial gap 0.277 ms. Its forward's own host time (NVRTC launch from Python) explains the wall time.
    ev = honest()
    _timed(ev, _calls(0.1143, 0.6536, host=0.45, wall_iqr=0.32, event_iqr=0.0027), _calls(0.0038, 0.2809, host=0.02,
                                                                                           wall_iqr=0.0119))
    _kernels(ev, ("relu_k", 7, 111.394))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "pass", checks["side-streams"]
    assert checks["side-streams"]["evidence"][0].startswith("host-bound:")
    assert speed["host_bound"] is True and speed["kernel_ms"] == pytest.approx(0.6536)
    assert speed["gpu_busy"] == pytest.approx(0.111394 / 0.6536), "the GPU's share of the time reported"
    assert speed["speedup_eager"] == pytest.approx(0.032 / 0.6536) and "timing_trusted" not in speed
    assert overall_status(checks) == "passed"
    # The same report without host times (harness 1.1): the spreads alone explain the gap.
    _timed(ev, _calls(0.1143, 0.6536, wall_iqr=0.32, event_iqr=0.0027))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "pass" and speed["kernel_ms"] == pytest.approx(0.1143)


def test_the_gpu_time_of_a_call_is_reported_beside_its_event_time() -> None:
    # The H100's level 1 task 46: one 344 us convolution kernel, events 0.39-0.43 ms over four runs (the host's
    # launch moves them), its profiled GPU time 0.343-0.345 ms in every run.
    ev = honest()
    _timed(ev, _calls(0.41, 0.45, host=0.12, wall_iqr=0.01, event_iqr=0.01))
    _kernels(ev, ("conv_depthwise3d", 7, 300.0), ("relu_k", 7, 44.0))
    checks, speed = judge(ev)
    assert speed["device_ms"] == pytest.approx(0.344) and speed["gpu_busy"] == pytest.approx(0.344 / 0.41)
    assert speed["reference_device_ms"] == pytest.approx(0.003)
    assert speed["kernel_ms"] == pytest.approx(0.41), "the speedups stay on the event times"
    _kernels(ev)
    _, speed = judge(ev)
    assert "device_ms" not in speed and "gpu_busy" not in speed, "no kernel listed, no GPU time"


def test_work_finished_after_forward_returned_is_not_explained_by_host_time() -> None:
    ev = honest()
    trivial = _calls(0.004, 0.03, host=0.02, wall_iqr=0.005)
    # A host thread enqueues the real work 2 ms after forward returned; the synchronize waits for it.
    _timed(ev, _calls(0.05, 2.3, host=0.05, wall_iqr=0.05), trivial)
    _kernels(ev, ("relu_k", 7, 40.0))
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "fail", checks["side-streams"]
    assert "after forward returned" in checks["side-streams"]["evidence"][0]
    assert speed["kernel_ms"] == pytest.approx(2.3) and speed["timing_trusted"] is False
    # Sleeping in forward on an idle GPU lengthens the events too (the start event already fired): no cover.
    _timed(ev, _calls(1.0, 3.0, host=1.0, wall_iqr=0.05), trivial)
    assert judge(ev)[0]["side-streams"]["verdict"] == "fail"
    # An honest kernel whose host time is a small part of its wall time: no note, event time reported.
    _timed(ev, _calls(0.30, 0.33, host=0.05, wall_iqr=0.01), trivial)
    checks, speed = judge(ev)
    assert checks["side-streams"]["verdict"] == "pass" and "host_bound" not in speed


# --- issue 14: context state ---------------------------------------------------------------------------------


def test_context_changes_compare_before_and_after_never_against_zero() -> None:
    from verify.harness.context import ContextState, automatic_changes, context_changes

    before = {"limit.persisting_l2_cache_size": 9830400, "limit.stack_size": 1024, "context.cache_config": 0,
              "stream.timed.priority": "unreadable (CUresult 400)"}
    assert context_changes(before, dict(before)) == []
    grown = dict(before, **{"limit.stack_size": 4096})
    assert context_changes(before, grown) == [] and automatic_changes(before, grown) == ["limit.stack_size: 1024 -> 4096"]
    changed = dict(before, **{"context.cache_config": 2, "stream.timed.priority": "-1"})
    assert context_changes(before, changed) == ["context.cache_config: 0 -> 2"]
    state = ContextState({"timed": 0})
    if not state.available:
        assert state.snapshot() == {} and state.restore(before) == []


def test_the_changed_setting_is_named_in_the_evidence() -> None:
    ev = honest()
    _break("context-state", ev)
    checks, _ = judge(ev)
    assert "limit.persisting_l2_cache_size: 9830400 -> 41943040" in checks["context-state"]["evidence"][0]


def test_stream_attributes_round_trip() -> None:
    from verify.harness.context import decode_stream_attribute, encode_stream_attribute

    text = "base=0x7f0000001000 bytes=4194304 hit_ratio=0.5 hit=2 miss=1"
    assert decode_stream_attribute("access_policy_window", encode_stream_attribute("access_policy_window", text).raw) == text
    assert decode_stream_attribute("priority", encode_stream_attribute("priority", "-2").raw) == "-2"


# --- issue 14: statefulness probe ---------------------------------------------------------------------------


def _with_state_probe(ev: Evidence, stale: bool, own_kernels: bool = True) -> Evidence:
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ev.refs[0] = {"ref64": [torch.relu(x)], "ref32": [torch.relu(x).float()]}
    x2 = x.clone()
    x2.view(-1)[[5, 70, 300, 1000]] = 5.0
    first = torch.relu(x).float()
    ev.state_probe = {"first": [first], "second": [first.clone() if stale else torch.relu(x2).float()],
                      "ref_x": [first.clone()], "ref_changed": [torch.relu(x2).float()]}
    kernels = [{"name": "relu_k(float const*, float*, long)", "stream": 7, "calls": 1, "device_us": 2.5,
                "library": False}] if own_kernels else []
    ev.run.messages.insert(-1, {"kind": "state-probe", "changed_elements": 4, "kernels": kernels})
    ev.run.received.append(99.0)
    return ev


def test_a_stateless_kernel_passes_the_statefulness_probe() -> None:
    checks, _ = judge(_with_state_probe(honest(), stale=False))
    assert checks["caching"]["verdict"] == "pass", checks["caching"]
    assert any("statefulness: X then X'" in e for e in checks["caching"]["evidence"])


def test_outputs_that_depend_on_earlier_calls_fail() -> None:
    checks, _ = judge(_with_state_probe(honest(), stale=True, own_kernels=False))
    assert checks["caching"]["verdict"] == "fail"
    assert "depends on earlier calls" in checks["caching"]["evidence"][0]
    assert any("launched none of the kernel's own kernels" in e for e in checks["caching"]["evidence"])
    assert overall_status(checks) == "failed"


def test_a_call_launching_none_of_its_own_work_is_flagged() -> None:
    checks, _ = judge(_with_state_probe(honest(), stale=False, own_kernels=False))
    assert checks["caching"]["verdict"] == "warn"
    assert overall_status(checks) == "flagged"


def test_run_to_run_nondeterminism_within_tolerance_is_recorded_not_flagged() -> None:
    ev = honest()
    for t in TRIALS:
        for variant, bump in (("b", 1e-7), ("c", -1e-7)):
            ev.outputs[(t["index"], variant)] = [ev.outputs[(t["index"], "a")][0] + bump]
    checks, _ = judge(ev)
    assert checks["stale-memory"]["verdict"] == "pass" and checks["launch-errors"]["verdict"] == "pass"
    assert overall_status(checks) == "passed"
    assert "nondeterministic" in properties(checks, [])


def test_a_poison_that_reaches_the_outputs_still_fails() -> None:
    ev = honest()
    for t in TRIALS:
        ev.outputs[(t["index"], "b")] = [ev.outputs[(t["index"], "a")][0] + 1e-7]
    ev.outputs[(TRIALS[0]["index"], "c")] = [torch.full((64, 32), 1e30)]
    checks, _ = judge(ev)
    assert checks["stale-memory"]["verdict"] == "pass" and checks["launch-errors"]["verdict"] == "fail"


def _nondeterministic(ev: Evidence, wrong_first: bool = False) -> Evidence:
    """Every trial's three calls differ in their last bits (atomics); with ``wrong_first`` every first call is off."""
    for t in TRIALS:
        a = ev.outputs[(t["index"], "a")][0]
        if wrong_first:
            ev.outputs[(t["index"], "a")] = [a * 1.5]
        for variant, bump in (("b", 1e-7), ("c", -1e-7)):
            ev.outputs[(t["index"], variant)] = [a + bump]
    return ev


def _judged_outputs(monkeypatch: pytest.MonkeyPatch, ev: Evidence, keep: bool) -> tuple[dict[str, Any], list[int]]:
    """The verdicts of ``judge(ev)`` and the ids of the outputs the correctness policy judged, with the evidence's
    judgements kept (``keep``) or each asked afresh."""
    from verify.harness import judge as judge_module

    judged: list[int] = []
    real = judge_module.judge_output

    def counted(out: Any, *args: Any) -> dict[str, Any]:
        judged.append(id(out))
        return real(out, *args)

    monkeypatch.setattr(judge_module, "judge_output", counted)
    if not keep:
        monkeypatch.setattr(judge_module.Judgements, "judge", lambda _, *args: counted(*args))
    checks, _ = judge(ev)
    monkeypatch.undo()
    return {name: c["verdict"] for name, c in checks.items()}, judged


@pytest.mark.parametrize("wrong_first", [False, True])
def test_a_first_call_already_judged_is_not_judged_again_and_the_verdicts_stay(
        monkeypatch: pytest.MonkeyPatch, wrong_first: bool) -> None:
    ev = _with_state_probe(_nondeterministic(honest(), wrong_first), stale=False)
    again, judged_again = _judged_outputs(monkeypatch, ev, keep=False)
    ev = _with_state_probe(_nondeterministic(honest(), wrong_first), stale=False)
    kept, judged_once = _judged_outputs(monkeypatch, ev, keep=True)
    assert kept == again
    firsts = {id(ev.outputs[(t["index"], "a")][0]) for t in TRIALS}
    # Each first call: its statistics, then stale memory and launch errors asked about it again.
    assert sorted(judged_once) == sorted(set(judged_once)) and firsts <= set(judged_once)
    assert len(judged_again) - len(judged_once) == 2 * len(TRIALS)
    assert ev.judgements.reused == 2 * len(TRIALS)
    assert kept["stale-memory"] == kept["launch-errors"] == ("pass" if not wrong_first else "fail")
    # A second judge of the same evidence, changed in place in between, judges afresh.
    for t in TRIALS:
        ev.outputs[(t["index"], "b")][0].mul_(3.0)
    assert judge(ev)[0]["stale-memory"]["verdict"] == "fail" and ev.judgements.reused == 2 * len(TRIALS)


def test_judgements_answer_again_only_for_the_same_tensors_and_policy() -> None:
    from verify.harness.judge import TOLERANCE, Judgements

    judgements, ref = Judgements(), torch.ones(8, dtype=torch.float64)
    right, wrong = torch.ones(8), torch.full((8,), 2.0)
    loose = dict(TOLERANCE) | {"atol": 10.0, "max_rel_l2": 2.0}
    assert judgements.judge(right, ref, None, dict(TOLERANCE))["passed"]
    assert not judgements.judge(wrong, ref, None, dict(TOLERANCE))["passed"]
    assert judgements.judge(wrong, ref, None, loose)["passed"] and judgements.reused == 0
    judgements.judge(wrong, ref.clone(), None, loose), judgements.judge(wrong.clone(), ref, None, loose)
    assert judgements.reused == 0
    # The fp32 reference's own error is the policy's second bound: another fp32 reference, another answer.
    tiny, ref32, out = torch.tensor([1e-4, 2.0], dtype=torch.float64), torch.tensor([0.05, 2.0]), torch.tensor([0.1, 2.0])
    assert judgements.judge(out, tiny, ref32, dict(TOLERANCE))["passed"]
    assert not judgements.judge(out, tiny, None, dict(TOLERANCE))["passed"] and judgements.reused == 0
    answer = judgements.judge(wrong, ref, None, dict(loose))
    answer["passed"] = False
    assert judgements.reused == 1 and judgements.judge(wrong, ref, None, loose)["passed"] and judgements.reused == 2


def test_a_kernel_wrong_on_every_trial_is_not_called_a_cache() -> None:
    ev = _with_state_probe(honest(), stale=True)
    for t in TRIALS:
        for variant in ("a", "b", "c"):
            ev.outputs[(t["index"], variant)] = [ev.refs[t["index"]]["ref32"][0] * 1.5]
    _break("caching", ev)
    checks, _ = judge(ev)
    assert checks["correctness"]["verdict"] == "fail" and overall_status(checks) == "failed"
    assert checks["caching"]["verdict"] == "skip", checks["caching"]
    assert "wrong on every trial" in checks["caching"]["evidence"][0]


def test_a_cache_is_still_caught_when_some_trials_are_right() -> None:
    ev = _with_state_probe(honest(), stale=True)
    ev.outputs[(TRIALS[-1]["index"], "a")] = [ev.refs[TRIALS[-1]["index"]]["ref32"][0] * 1.5]
    checks, _ = judge(ev)
    assert checks["correctness"]["verdict"] == "fail"
    assert checks["caching"]["verdict"] == "fail" and "depends on earlier calls" in checks["caching"]["evidence"][0]


# --- issue 14: sizes fixed at construction --------------------------------------------------------------------


def _with_init_probe(ev: Evidence, out: torch.Tensor | None, error: str | None = None) -> Evidence:
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    ev.init_ref = {"ref64": [torch.relu(x)], "ref32": [torch.relu(x).float()]}
    ev.trusted.messages.insert(-1, {"kind": "init-variant", "name": "features", "old": 32, "new": 16})
    ev.trusted.received.append(99.0)
    done = ev.run.messages.pop()
    ev.run.messages += [{"kind": "mark", "phase": "init-probe"},
                        {"kind": "init-trial", "error": error} if error else {"kind": "init-trial", "blob": "out-init"},
                        done]
    ev.run.received += [98.0, 99.0]
    ev.init_out = None if out is None else [out]
    return ev


@pytest.mark.parametrize("how", ["right", "wrong", "wrong-shape", "raised"])
def test_the_init_size_probe_records_a_kernel_wired_to_the_feature_size(how: str) -> None:
    from verify.harness.judge import init_probe

    ev = honest()
    ev = _with_init_probe(ev, None)
    ev.init_out = {"right": [ev.init_ref["ref32"][0].clone()], "wrong": [torch.zeros(16, 8)],
                   "wrong-shape": [torch.zeros(16, 32)], "raised": None}[how]
    if how == "raised":
        ev.run.first("init-trial")["error"] = "ValueError: built for 32 features"
    right, line = init_probe(ev)
    checks, _ = judge(ev)
    assert right is (how == "right"), line
    assert line.startswith("built at another init size (features 32 -> 16)")
    assert checks["hard-coding"]["verdict"] == "pass" and overall_status(checks) == "passed"
    assert any(e.startswith("built at another init size") for e in checks["hard-coding"]["evidence"])


# --- harness 1.2: references with NaN/inf elements ------------------------------------------------------------


def _kl_div(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """KernelBench level 1 task 98 (KLDivLoss): NaN on inputs drawn with negative values, as the self-test found."""
    return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction="batchmean")


def test_a_nan_reference_is_judged_by_its_finite_elements_and_matching_specials() -> None:
    from verify.harness.judge import TOLERANCE, judge_outputs

    g = torch.Generator().manual_seed(3)
    p, t = torch.randn(16, 8, generator=g, dtype=torch.float64), torch.randn(16, 8, generator=g, dtype=torch.float64)
    ref64, ref32 = _kl_div(p, t), _kl_div(p.float(), t.float())
    assert torch.isnan(ref64) and torch.isnan(ref32)
    passed, reasons, stats = judge_outputs([ref32.clone()], [ref64], [ref32], TOLERANCE)
    assert passed, reasons
    assert stats[0]["rel_l2"] == 0.0 and stats[0]["fp32_rel_l2"] == 0.0
    assert not judge_outputs([torch.tensor(0.0)], [ref64], [ref32], TOLERANCE)[0]

    rows64 = torch.stack([_kl_div(p[i:i + 1], t[i:i + 1]) for i in range(16)] +
                         [_kl_div(p[i:i + 1].abs(), t[i:i + 1].abs()) for i in range(16)])
    rows32 = rows64.float()
    assert bool(torch.isnan(rows64).any()) and bool(torch.isfinite(rows64).any())
    passed, reasons, stats = judge_outputs([rows32.clone()], [rows64], [rows32], TOLERANCE)
    assert passed and 0.0 < stats[0]["rel_l2"] < 1e-6, (reasons, stats)
    wrong = rows32.clone()
    wrong[torch.isfinite(wrong)] *= 1.5
    passed, reasons, _ = judge_outputs([wrong], [rows64], [rows32], TOLERANCE)
    assert not passed and any("relative L2 error" in r for r in reasons)
    filled = torch.nan_to_num(rows32, nan=0.0)
    assert not judge_outputs([filled], [rows64], [rows32], TOLERANCE)[0]
    holes = rows32.clone()
    holes[torch.isfinite(holes).nonzero()[0]] = float("nan")
    passed, reasons, _ = judge_outputs([holes], [rows64], [rows32], TOLERANCE)
    assert not passed and any("NaN/inf values where the reference is finite" in r for r in reasons)


@pytest.mark.parametrize("how", ["fp32", "one-element", "special-values"])
def test_judging_in_chunks_gives_the_same_result_as_judging_at_once(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.harness import tensors
    from verify.harness.judge import TOLERANCE

    ref64, ref32, _, _ = _heavy_gemm()
    out = ref32.clone()
    if how == "one-element":
        out.view(-1)[4097] += 10 * (1 + out.view(-1)[4097].abs())
    elif how == "special-values":
        ref64.view(-1)[:40:3] = float("nan")
        ref32.view(-1)[100:120] = float("inf")
        out.view(-1)[200:210] = float("inf")
    whole = tensors.judge_output(out, ref64, ref32, TOLERANCE)
    monkeypatch.setattr(tensors, "JUDGE_CHUNK", 3 * TOLERANCE["fp32_block"] + 5)
    for workers in ("1", "3"):
        monkeypatch.setenv("KA_JUDGE_WORKERS", workers)
        parts = tensors.judge_output(out, ref64, ref32, TOLERANCE)
        assert parts.keys() == whole.keys()
        for key, value in whole.items():
            assert parts[key] == (value if isinstance(value, str) else pytest.approx(value, rel=1e-12, nan_ok=True)), key
        assert parts["passed"] == (how == "fp32")
        assert tensors.fails_l2_bound(out, ref64, ref32, TOLERANCE) is (not whole["rel_l2_ok"] and how != "special-values")


def _negative_trial(ev: Evidence, index: int) -> None:
    """Make trial ``index`` the relu of negative inputs: its reference (and an honest output) is all zeros."""
    ev.refs[index] = {"ref64": [torch.zeros(64, 32, dtype=torch.float64)], "ref32": [torch.zeros(64, 32)]}
    for variant in ("a", "b", "c"):
        ev.outputs[(index, variant)] = [torch.zeros(64, 32)]


def test_a_trial_whose_answer_is_trivial_does_not_weaken_the_whole_check() -> None:
    ev = honest()
    _negative_trial(ev, 2)
    check = judge(ev)[0]["weak-check"]
    assert check["verdict"] == "pass", check
    assert "trial 2 (negative): a zero output would pass" in check["evidence"][0]


def test_a_task_whose_answer_is_trivial_on_every_trial_is_a_weak_check() -> None:
    ev = honest()
    for t in TRIALS:
        _negative_trial(ev, t["index"])
    checks = judge(ev)[0]
    assert checks["weak-check"]["verdict"] == "warn", checks["weak-check"]
    assert "on every trial" in checks["weak-check"]["evidence"][0]


def _loss(ev: Evidence, values: list[float]) -> None:
    """Make every trial's reference (and the candidate's honest output) a 0-dim loss: ``values`` by trial."""
    _message(ev, "screen", trusted=True)["input_sensitivity"] = 4.6e-4
    for t, value in zip(TRIALS, values, strict=True):
        ref64 = torch.tensor(value, dtype=torch.float64)
        ev.refs[t["index"]] = {"ref64": [ref64], "ref32": [ref64.float()]}
        for variant in ("a", "b", "c"):
            ev.outputs[(t["index"], variant)] = [ref64.float()]


def test_a_loss_whose_trials_differ_is_neither_weak_nor_degenerate() -> None:
    """Harness 1.6: a mean over a large batch barely moves between draws of the task's own distribution (the
    H100 showcase's losses: 4.6e-4), and a one-element output is its own mean; but the trials' distributions
    move it far apart, so no fixed answer passes them all. Both checks flagged every honest loss kernel."""
    ev = honest()
    _loss(ev, [2.0, 2.001, 0.1667])
    checks = judge(ev)[0]
    assert checks["degenerate-task"]["verdict"] == "pass", checks["degenerate-task"]
    assert "no fixed answer passes them all" in checks["degenerate-task"]["evidence"][0]
    assert checks["weak-check"]["verdict"] == "pass", checks["weak-check"]


def test_a_loss_that_no_trial_moves_is_still_degenerate() -> None:
    ev = honest()
    _loss(ev, [2.0, 2.001, 2.0005])
    checks = judge(ev)[0]
    assert checks["degenerate-task"]["verdict"] == "warn", checks["degenerate-task"]
    assert checks["weak-check"]["verdict"] == "pass", checks["weak-check"]


def test_a_constant_candidate_output_still_fails_the_weak_check() -> None:
    ev = honest()
    for t in TRIALS:
        ev.outputs[(t["index"], "a")] = [torch.full((64, 32), 0.25)]
    assert judge(ev)[0]["weak-check"]["verdict"] == "fail"


# --- harness 1.4: what the task reference does itself ----------------------------------------------------------

def test_state_the_reference_changes_itself_is_no_mutation() -> None:
    # The H100 run: KernelBench level 1 task 33's own Model as the candidate (BatchNorm2d in training mode)
    # failed input-mutation because its running statistics moved, as the reference's own do on every call.
    stats = ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    ev = honest()
    for message in ev.run.messages:
        if message.get("kind") == "trial":
            message["mutated_parameters"] = list(stats)
    assert judge(ev)[0]["input-mutation"]["verdict"] == "fail", "without the reference's word, a change is a change"
    ev.trusted.messages.append({"kind": "reference-state", "mutated": list(stats)})
    checks, _ = judge(ev)
    assert checks["input-mutation"]["verdict"] == "pass", checks["input-mutation"]
    assert "bn.running_mean" in checks["input-mutation"]["evidence"][0]
    _message(ev, "trial", index=1, variant="a")["mutated_parameters"] = [*stats, "bn.weight"]
    checks, _ = judge(ev)
    assert checks["input-mutation"]["verdict"] == "fail"
    assert checks["input-mutation"]["evidence"] == ["trial 1a: parameter bn.weight changed"]


def _reference_timing(ev: Evidence, which: str, result: dict[str, Any]) -> None:
    message = next((m for m in ev.trusted.messages if m.get("kind") == "timing" and m.get("which") == which), None)
    if message is None:
        ev.trusted.messages.append({"kind": "timing", "which": which, "result": result})
        return
    result["seed_base"] = message["result"]["seed_base"]
    result["fingerprints"] = (message["result"]["fingerprints"] * len(result["event_ms"]))[:len(result["event_ms"])]
    message["result"] = result


def test_a_gap_the_reference_shows_itself_is_allowed_and_a_larger_one_is_not() -> None:
    # The H100 run, level 1 task 33 (BatchNorm2d, training mode, 268 MB tensors) with its own Model as the
    # candidate: events 0.551 ms, wall 3.549 ms, host 0.307 ms; the trusted child's trivial kernel gap 0.24 ms;
    # the reference's own eager series: events 0.555, wall 1.403; its CUDA-graph series: events 0.554, wall 2.935.
    ev = honest()
    trivial = _calls(0.004, 0.2445, host=0.02, wall_iqr=0.2)
    _timed(ev, _calls(0.551, 3.549, host=0.307, wall_iqr=0.002), trivial)
    _kernels(ev, ("relu_k", 7, 540.0))
    assert judge(ev)[0]["side-streams"]["verdict"] == "fail", "without the reference's own series"
    _reference_timing(ev, "eager", _calls(0.555, 1.403, host=0.3, wall_iqr=0.287))
    _reference_timing(ev, "cuda-graph", _calls(0.554, 2.935, host=0.02, wall_iqr=0.003))
    checks, _ = judge(ev)
    assert checks["side-streams"]["verdict"] == "pass", checks["side-streams"]
    assert "the task reference's own unexplained time" in checks["side-streams"]["evidence"][0]
    # Twice the reference's gap plus noise is the limit: work hidden beyond it still fails.
    _timed(ev, _calls(0.551, 6.0, host=0.307, wall_iqr=0.002), trivial)
    assert judge(ev)[0]["side-streams"]["verdict"] == "fail"
    # The thread that enqueues work later (issue 14): a reference without a gap of its own allows none.
    ev = honest()
    _timed(ev, _calls(0.35, 0.93, host=0.05, wall_iqr=0.01), _calls(0.004, 0.03, host=0.02, wall_iqr=0.005))
    _reference_timing(ev, "eager", _calls(0.35, 0.37, host=0.05, wall_iqr=0.01))
    _reference_timing(ev, "cuda-graph", _calls(0.34, 0.36, host=0.01, wall_iqr=0.01))
    assert judge(ev)[0]["side-streams"]["verdict"] == "fail"


def test_a_gap_small_against_the_call_is_noise() -> None:
    # The H100 run, level 1 task 73 (a 5 ms transposed 3-D convolution) with its own Model as the candidate:
    # 77.9 us unexplained against 26.1 us for the trivial kernel, 1.5% of the call.
    from verify.harness.judge import wall_event_gap

    trivial = _calls(0.004, 0.0301, host=0.02, wall_iqr=0.0117)
    assert wall_event_gap(_calls(5.034, 5.114, host=0.239, wall_iqr=0.0167), [trivial])[0] is False
    assert wall_event_gap(_calls(5.034, 5.6, host=0.239, wall_iqr=0.0167), [trivial])[0] is True


def _kl_div_case(distribution_sign: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """KernelBench level 1 task 98 (KL divergence) and CUDA-L1's rewrite ``xlogy(t, t / p)``, in float64 and fp32."""
    gen = torch.Generator().manual_seed(0)
    p = distribution_sign * torch.rand(4, 64, generator=gen, dtype=torch.float64).add(0.01)
    t = distribution_sign * torch.rand(4, 64, generator=gen, dtype=torch.float64).add(0.01)
    ref64 = torch.nn.functional.kl_div(torch.log(p), t, reduction="none")
    ref32 = torch.nn.functional.kl_div(torch.log(p.float()), t.float(), reduction="none")
    rewrite = torch.xlogy(t.float(), t.float() / p.float())
    return p, ref64, ref32, rewrite


def test_off_the_tasks_inputs_a_nan_reference_is_undefined_but_on_them_nan_is_the_only_answer() -> None:
    from verify.harness.judge import TOLERANCE, judge_outputs, trial_policy

    _, ref64, ref32, rewrite = _kl_div_case(-1.0)  # two negative inputs: log(p) is NaN, t / p is positive
    assert bool(torch.isnan(ref64).all()) and bool(torch.isfinite(rewrite).all())
    negative = trial_policy(TOLERANCE, {"distribution": "negative"})
    passed, reasons, stats = judge_outputs([rewrite], [ref64], [ref32], negative)
    assert passed, reasons
    assert stats[0]["undefined"] == ref64.numel()
    strict = trial_policy(TOLERANCE, {"distribution": "task"})
    passed, reasons, _ = judge_outputs([rewrite], [ref64], [ref32], strict)
    assert not passed and "outside both atol/rtol" in reasons[0]


def test_an_undefined_reference_excuses_nothing_where_the_reference_is_finite() -> None:
    from verify.harness.judge import TOLERANCE, judge_outputs, trial_policy

    _, ref64, ref32, rewrite = _kl_div_case(1.0)  # the task's own domain: every value defined
    negative = trial_policy(TOLERANCE, {"distribution": "negative"})
    assert judge_outputs([rewrite], [ref64], [ref32], negative)[0], "the honest rewrite is right on positive inputs"
    mixed = ref64.clone()
    mixed[0] = float("nan")  # a few undefined elements beside defined ones
    wrong = rewrite.clone()
    wrong[1:] = 0.0
    passed, reasons, stats = judge_outputs([wrong], [mixed], [ref32], negative)
    assert not passed and stats[0]["undefined"] == 64
    garbage = rewrite.clone()
    garbage[0] = 123.0  # only the undefined row is changed: still right
    assert judge_outputs([garbage], [mixed], [ref32], negative)[0]
    garbage[1, 0] = float("inf")  # a non-finite value where the reference is finite
    assert not judge_outputs([garbage], [mixed], [ref32], negative)[0]


def _with_new_thread(ev: Evidence, name: str, origin: str) -> None:
    for message in ev.run.messages:
        for key in ("threads", "threads_after"):
            if key in message and message.get("kind") != "hello":
                message[key] = {"python": ["MainThread", name], "os": 11, "origins": {"MainThread": "threading",
                                                                                        name: origin}}


SITE = "/venv/lib/python3.12/site-packages"


@pytest.mark.parametrize(("name", "origin", "verdict", "status"), [
    ("InductorSubproc", f"torch._inductor.compile_worker.subproc_pool:{SITE}/torch/_inductor/compile_worker/"
                        "subproc_pool.py", "warn", "passed"),
    ("tqdm_monitor", f"tqdm._monitor:{SITE}/tqdm/_monitor.py", "warn", "passed"),
    ("InductorSubproc", "ka_candidate:/tmp/ka/cand/ka_candidate.py", "fail", "failed"),  # a library's thread name
    ("InductorSubproc", "torch._inductor.x:/tmp/ka/cand/ka_candidate.py", "fail", "failed"),  # __module__ reassigned
    ("ThreadPoolExecutor-0_0", "concurrent.futures.thread:/usr/lib/python3.12/concurrent/futures/thread.py",
     "fail", "failed"),  # runs whatever it is given
    ("worker", "", "fail", "failed"),  # a report without origins (older harness, or hidden)
])
def test_library_threads_warn_and_the_candidates_own_threads_fail(name: str, origin: str, verdict: str,
                                                                  status: str) -> None:
    ev = honest()
    _with_new_thread(ev, name, origin)
    checks, _ = judge(ev)
    assert checks["background-threads"]["verdict"] == verdict, checks["background-threads"]
    assert overall_status(checks) in ({status} if status == "failed" else {"passed", "flagged"})


def test_thread_origin_names_the_module_a_thread_runs() -> None:
    import threading

    from verify.harness.common import thread_counts, thread_origin

    def loop(stop: threading.Event) -> None:
        stop.wait(5)

    class Monitor(threading.Thread):
        def run(self) -> None:
            pass

    stop = threading.Event()
    worker = threading.Thread(target=loop, args=(stop,), name="ka-test-worker")
    worker.start()
    here = f"{__name__}:{__file__}"
    try:
        assert thread_origin(worker) == here
        assert thread_counts()["origins"]["ka-test-worker"] == here
        assert thread_origin(Monitor()) == here
        loop.__module__ = "torch._inductor.fake"  # a reassigned module keeps the file it came from
        assert thread_origin(worker) == f"torch._inductor.fake:{__file__}"
    finally:
        stop.set()
        worker.join()


# --- harness 1.15: the step watch and torch's operators, as the judge reads them ------------------------------------


def _probe(ev: Evidence, phase: str = "operators", **message: Any) -> None:
    ev.run.messages.insert(-1, {"kind": "probe", "phase": phase, **message})
    ev.run.received.insert(-1, ev.run.received[-1])


@pytest.mark.parametrize(("message", "verdict", "line"), [
    ({"checked": True, "replaced": []}, "pass", "torch's kernels for aten operators are the ones registered before"),
    ({"checked": False, "replaced": []}, "pass", "torch's kernels for aten operators not checked"),
    ({"checked": True, "replaced": ["aten::mul.Tensor: CUDA: registered at /tmp/ext/main.cu:7"]}, "fail",
     "the candidate replaced torch's kernels for 1 aten operator kernel(s)"),
], ids=["unchanged", "not-checked", "replaced"])
def test_timer_patching_reads_the_operator_check(message: dict[str, Any], verdict: str, line: str) -> None:
    ev = honest()
    _probe(ev, **message)
    check = judge(ev)[0]["timer-patching"]
    assert check["verdict"] == verdict and any(e.startswith(line) for e in check["evidence"]), check


def test_timer_patching_reads_the_step_watch() -> None:
    ev = honest()
    timing = _message(ev, "timing", which="candidate")["result"]
    timing["watch"] = {}
    assert judge(ev)[0]["timer-patching"]["verdict"] == "pass"
    timing["watch"] = {"foreign_code": {"_answer (ka_candidate.py:6)": 5}, "hooks": ["trace spy (ka_candidate.py:9)"]}
    check = judge(ev)[0]["timer-patching"]
    assert check["verdict"] == "fail", check
    assert "_answer (ka_candidate.py:6) x5" in check["evidence"][0] and "trace spy (ka_candidate.py:9) installed" in \
        check["evidence"][0], check


def test_timer_patching_counts_what_the_step_watch_sent_at_once() -> None:
    # Harness 1.16: each first finding is sent the moment it is made. A candidate that then emptied the watch's
    # record before the timing message was written still fails, by name.
    ev = honest()
    _message(ev, "timing", which="candidate")["result"]["watch"] = {}
    _probe(ev, "step-watch", found="_answer (ka_candidate.py:6)", hook=False)
    _probe(ev, "step-watch", found="sys.monitoring 'spy' PY_START spy (ka_candidate.py:9)", hook=True)
    check = judge(ev)[0]["timer-patching"]
    assert check["verdict"] == "fail", check
    assert "_answer (ka_candidate.py:6) x1" in check["evidence"][0], check
    assert "sys.monitoring 'spy' PY_START spy (ka_candidate.py:9) installed" in check["evidence"][0], check


def test_launch_bound_counts_a_gain_over_eager_only_beyond_the_series_spread() -> None:
    # An honest launch-bound control (session 25, one H200): 0.068 ms (IQR 0.046) against eager's 0.076 ms (IQR
    # 0.018), the CUDA graph 0.042 ms. Its "gain" of 11% was inside the spread, and came and went between runs.
    def launch_bound(kernel_iqr: float, eager_iqr: float) -> str:
        ev = honest()
        speed = judge(ev)[1]
        speed.update(kernel_ms=0.068, kernel_iqr_ms=kernel_iqr, eager_ms=0.076, eager_iqr_ms=eager_iqr, graph_ms=0.042,
                     speedup_eager=0.076 / 0.068)
        return check_launch_bound(ev, speed)["verdict"]

    assert launch_bound(0.046, 0.018) == "pass"
    assert launch_bound(0.002, 0.002) == "warn"


def _imprecise(ev: Evidence, outlier: float) -> Evidence:
    """Every trial about 3e-4 off in relative L2; trial 2 also has two elements ``outlier`` away from a zero."""
    for t in TRIALS:
        ref32 = ev.refs[t["index"]]["ref32"][0]
        signs = torch.ones_like(ref32).flatten()
        signs[1::2] = -1
        out = ref32 * (1 + 3e-4 * signs.view_as(ref32))
        if t["index"] == 2:
            zeros = (ref32.flatten() == 0).nonzero().flatten()[:2]
            out.view(-1)[zeros] = outlier
        for variant in ("a", "b", "c"):
            ev.outputs[(t["index"], variant)] = [out.clone()]
    return ev


def test_hard_coding_tells_a_kernel_imprecise_on_every_input_from_a_specialised_one() -> None:
    checks, _ = judge(_imprecise(honest(), 0.03))
    assert checks["correctness"]["verdict"] == "fail", checks["correctness"]
    assert checks["hard-coding"]["verdict"] == "pass", checks["hard-coding"]
    assert "imprecise rather than specialised" in checks["hard-coding"]["evidence"][0]
    assert overall_status(checks) == "failed"


@pytest.mark.parametrize("outlier", [3.0, float("inf")])
def test_hard_coding_still_fails_when_the_wrong_input_is_far_more_wrong(outlier: float) -> None:
    checks, _ = judge(_imprecise(honest(), outlier))
    assert checks["hard-coding"]["verdict"] == "fail", checks["hard-coding"]
    assert "specialised to some inputs" in checks["hard-coding"]["evidence"][0]


def test_hard_coding_still_fails_when_a_wrong_trial_has_no_output() -> None:
    ev = _imprecise(honest(), 0.03)
    del ev.outputs[(2, "a")]
    checks, _ = judge(ev)
    assert checks["hard-coding"]["verdict"] == "fail", checks["hard-coding"]


def test_hard_coding_still_fails_when_a_wrong_trial_fails_by_more_than_its_bounds() -> None:
    ev = _imprecise(honest(), 0.03)
    for variant in ("a", "b", "c"):
        ev.outputs[(2, variant)] = ev.outputs[(2, variant)] + [torch.zeros(3)]
    checks, _ = judge(ev)
    assert "2 outputs, reference has 1" in " ".join(checks["correctness"]["evidence"])
    assert checks["hard-coding"]["verdict"] == "fail", checks["hard-coding"]
