"""``verify.harness.fused``: the judge's compiled passes give the torch operations' answers, and step aside where
they must (non-finite values, no numba, switched off, small outputs)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from scripts_testing import load_script

from verify.harness import fused, tensors
from verify.harness.judge import TOLERANCE, judge
from verify.harness.tensors import bit_equal, fails_l2_bounds, judge_output

numba = pytest.importorskip("numba", reason="the fused passes need numba (installed with kernel-archive[verify])")

NORMS = ("ref_norm", "diff_norm", "fp32_norm")
POLICY = dict(TOLERANCE)


def _same_part(torch_part: dict[str, Any], fused_part: dict[str, Any]) -> list[str]:
    """The keys on which two chunk results differ: counts and maxima exactly, norms beyond 1e-12 relative."""
    differ = []
    for key in torch_part.keys() | fused_part.keys():
        a, b = torch_part.get(key), fused_part.get(key)
        if key in NORMS and a is not None and b is not None:
            if not math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0):
                differ.append(key)
        elif a != b:
            differ.append(key)
    return differ


def _case(seed: int, n: int, scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An fp32 candidate near a GELU's float64 reference: its own rounding, relative noise of a few sizes, and
    a thousand elements exactly on KernelBench's atol/rtol bound."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=generator, dtype=torch.float64) * scale
    ref64 = torch.nn.functional.gelu(x)
    ref32 = torch.nn.functional.gelu(x.float())
    noise = torch.randn(n, generator=generator) * 10.0 ** -(seed % 5)
    out = (ref32 + noise * ref32.abs() * 1e-2).double()
    on_bound = torch.randint(0, n, (1000,), generator=generator)
    out[on_bound] = ref64[on_bound] + (POLICY["atol"] + POLICY["rtol"] * ref64.abs())[on_bound]
    return out, ref64, ref32


@pytest.mark.parametrize("seed", range(6))
def test_the_policy_pass_gives_the_torch_operations_counts_maxima_and_norms(seed: int) -> None:
    out, ref64, ref32 = _case(seed, 1 << 16, 10.0 ** (seed - 2))
    variants = {
        "float64 output": (out, ref64, ref32),
        "float32 output": (out.float(), ref64, ref32),
        "float16 output": (out.half(), ref64, ref32),
        "bfloat16 output": (out.bfloat16(), ref64, ref32),
        "no fp32 reference": (out.float(), ref64, None),
        "fp32 reference only": (out.float(), ref32, None),
    }
    for name, (o, r64, r32) in variants.items():
        expected = tensors._judge_part(o, r64, r32, POLICY, torch)
        got = fused.fused_judge_part(o, r64, r32, POLICY, torch)
        assert got is not None, name
        assert _same_part(expected, got) == [], name
    # The case must exercise both bounds, or it proves little.
    part = tensors._judge_part(out.float(), ref64, ref32, POLICY, torch)
    assert part["outside"] > 0


def test_a_candidate_failing_on_both_bounds_is_counted_the_same() -> None:
    out, ref64, ref32 = _case(1, 1 << 15, 1.0)
    out[::7] += 0.5
    expected = tensors._judge_part(out.float(), ref64, ref32, POLICY, torch)
    got = fused.fused_judge_part(out.float(), ref64, ref32, POLICY, torch)
    assert expected["mismatches"] > 4000 and got is not None and _same_part(expected, got) == []


@pytest.mark.parametrize("where", ["output", "reference", "fp32 reference"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_chunk_with_a_non_finite_value_is_left_to_the_torch_operations(where: str, value: float) -> None:
    out, ref64, ref32 = _case(2, 4096, 1.0)
    out = out.float()
    {"output": out, "reference": ref64, "fp32 reference": ref32}[where][123] = value
    assert fused.fused_judge_part(out, ref64, ref32, POLICY, torch) is None


def _judged_both_ways(monkeypatch: pytest.MonkeyPatch, call: Any) -> tuple[Any, Any]:
    """``call()`` with the torch operations alone, then with the fused passes on outputs of any size."""
    monkeypatch.setenv(fused.FUSED_ENV, "0")
    plain = call()
    monkeypatch.setenv(fused.FUSED_ENV, "1")
    monkeypatch.setattr(fused, "FUSED_MIN_ELEMENTS", 1)
    return plain, call()


def _same_stats(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(
        math.isclose(a[k], b[k], rel_tol=1e-12) if isinstance(a[k], float) and math.isfinite(a[k])
        else (math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] if isinstance(a[k], float) else a[k] == b[k]
        for k in a)


@pytest.mark.parametrize("spoil", ["none", "nan in one chunk", "fp32 overflow", "nan reference", "wrong"])
def test_judge_output_is_the_same_with_and_without_the_fused_passes(monkeypatch: pytest.MonkeyPatch,
                                                                   spoil: str) -> None:
    n = 3 * tensors.JUDGE_CHUNK + 1000
    _, ref64, ref32 = _case(3, n, 1.0)
    out = ref32.clone()
    policy = POLICY | {"nan_reference_undefined": spoil == "nan reference"}
    if spoil == "nan in one chunk":
        out[tensors.JUDGE_CHUNK + 5] = math.nan
    elif spoil == "fp32 overflow":
        ref32[7] = math.inf
        ref64[7] = 3.5e38
        out[7] = math.inf
    elif spoil == "nan reference":
        ref64[99], ref32[99] = math.nan, math.nan
    elif spoil == "wrong":
        out[: n // 3] *= 1.5
    plain, fast = _judged_both_ways(monkeypatch, lambda: judge_output(out, ref64, ref32, policy))
    assert _same_stats(plain, fast), (plain, fast)
    assert plain["passed"] == (spoil in ("none", "fp32 overflow", "nan reference"))


def test_the_l2_norms_are_the_same_with_and_without_the_fused_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 2 * tensors.JUDGE_CHUNK + 77
    out, ref64, ref32 = _case(4, n, 1.0)
    near = out.float()
    spoilt = near.clone()
    spoilt[3] = math.nan
    # The last overflows to an infinite norm, which the full policy is left to decide.
    outs = [0.0, float(ref64.mean()), near, near * 1.2, spoilt, torch.zeros(5), None, -1e300]
    plain, fast = _judged_both_ways(monkeypatch, lambda: fails_l2_bounds(outs, ref64, ref32, POLICY))
    assert plain == fast == [True, True, False, True, False, False, False, False]
    plain, fast = _judged_both_ways(monkeypatch, lambda: fails_l2_bounds(outs, ref64, None, POLICY))
    assert plain == fast


def test_the_l2_norms_of_the_fused_pass_match_torchs() -> None:
    out, ref64, ref32 = _case(5, 50_000, 3.0)
    got = fused.fused_l2_norms([0.5, out.float(), None], ref64, ref32, torch)
    assert got is not None
    ref_norm, err_norm, diffs = got
    assert math.isclose(ref_norm, float(torch.linalg.vector_norm(ref64)), rel_tol=1e-12)
    assert math.isclose(err_norm, float(torch.linalg.vector_norm(ref32.double() - ref64)), rel_tol=1e-12)
    assert math.isclose(diffs[0], float(torch.linalg.vector_norm(0.5 - ref64)), rel_tol=1e-12)
    assert math.isclose(diffs[1], float(torch.linalg.vector_norm(out.float().double() - ref64)), rel_tol=1e-12)
    assert math.isnan(diffs[2])
    # The first two numbers are summed in registers by block, the rest in memory: every one matches torch's norm.
    numbers = [0.5, -2.0, 3.0, 0.0]
    got = fused.fused_l2_norms(numbers, ref64, None, torch)
    assert got is not None and len(got[2]) == len(numbers)
    for value, norm in zip(numbers, got[2], strict=True):
        assert math.isclose(norm, float(torch.linalg.vector_norm(value - ref64)), rel_tol=1e-12), value
    huge = torch.full((10,), 1e200, dtype=torch.float64)
    assert fused.fused_l2_norms([0.0], huge, None, torch)[0] == math.inf == float(torch.linalg.vector_norm(huge))


def test_the_whole_judge_gives_the_same_verdicts_with_and_without_the_fused_passes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    evidence = load_script("bench/judge.py", "bench_judge").evidence
    honest = evidence(40_000, 3)
    wrong = evidence(40_000, 3)
    for key, outs in wrong.outputs.items():
        wrong.outputs[key] = [o * (1.0 + 0.1 * (key[1] == "c")) for o in outs]
    for ev in (honest, wrong):
        plain, fast = _judged_both_ways(monkeypatch, lambda ev=ev: judge(ev)[0])
        assert {k: v["verdict"] for k, v in plain.items()} == {k: v["verdict"] for k, v in fast.items()}
    assert plain["correctness"]["verdict"] == "pass" and plain["launch-errors"]["verdict"] == "fail"


def test_without_numba_or_switched_off_nothing_is_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    out, ref64, ref32 = _case(0, 4096, 1.0)
    assert fused.fused_enabled(fused.FUSED_MIN_ELEMENTS)
    assert not fused.fused_enabled(fused.FUSED_MIN_ELEMENTS - 1)
    assert not fused.fused_enabled(fused.FUSED_MIN_ELEMENTS, {fused.FUSED_ENV: "0"})
    monkeypatch.setattr(fused, "_compiled", [None])
    assert not fused.fused_enabled(1 << 30)
    assert fused.fused_judge_part(out, ref64, ref32, POLICY, torch) is None
    assert fused.fused_l2_norms([0.0], ref64, ref32, torch) is None
    assert fused.fused_stale_counts(out, ref64, ref64, 0.1, torch) is None
    assert fused.warm_fused(1 << 30) is None
    monkeypatch.setattr(fused, "FUSED_MIN_ELEMENTS", 1)
    assert judge_output(ref32, ref64, ref32, POLICY)["passed"]


def test_what_the_fused_passes_judged_is_counted_and_a_chunk_left_to_torch_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    n = 3 * tensors.JUDGE_CHUNK
    _, ref64, ref32 = _case(6, n, 1.0)
    out = ref32.clone()
    out[tensors.JUDGE_CHUNK + 5] = math.nan

    def used() -> dict[str, int]:
        before = dict(fused.FUSED_USED)
        judge_output(out, ref64, ref32, POLICY)
        fails_l2_bounds([0.0, out], ref64, ref32, POLICY)
        return {k: fused.FUSED_USED[k] - before[k] for k in before}

    plain, fast = _judged_both_ways(monkeypatch, used)
    assert plain == {"chunks": 0, "elements": 0, "norm_passes": 0, "stale_chunks": 0}
    assert fast["chunks"] == 2 and fast["elements"] == 2 * tensors.JUDGE_CHUNK and fast["norm_passes"] >= 2


def _probe_case(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The statefulness probe's references for X and X' (a few thousand elements changed, some non-finite), and
    an honest and a half-stale output for X'."""
    g = torch.Generator().manual_seed(11)
    r1 = torch.randn(n, generator=g)
    r2 = r1.clone()
    changed = torch.randint(0, n, (4000,), generator=g)
    r2[changed] += torch.randn(4000, generator=g)
    r1[:6] = torch.tensor([math.nan, math.inf, -math.inf, 0.0, 2.0, 1.0])
    r2[3], r2[4], r2[5] = math.nan, math.inf, 3.0
    honest = r2 + 1e-7 * torch.randn(n, generator=g)
    stale = honest.clone()
    stale[changed[:2000]] = r1[changed[:2000]]
    stale[changed[2000]] = math.nan
    return r1, r2, honest, stale


def test_the_statefulness_probe_counts_the_same_with_and_without_the_fused_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    r1, r2, honest, stale = _probe_case(2 * tensors.JUDGE_CHUNK + 321)
    outputs = {"honest": honest, "stale": stale, "zeros": torch.zeros_like(r2), "float64": stale.double(),
               "float16": stale.half(), "transposed": stale.view(-1, 1).t().contiguous().t().view(-1)}

    def counts() -> dict[str, tuple[int, int]]:
        before = fused.FUSED_USED["stale_chunks"]
        found = {name: tensors.stale_counts(y2, r1, r2) for name, y2 in outputs.items()}
        found["stale_chunks"] = (fused.FUSED_USED["stale_chunks"] - before, 0)
        return found

    plain, fast = _judged_both_ways(monkeypatch, counts)
    assert plain.pop("stale_chunks") == (0, 0) and fast.pop("stale_chunks") == (3 * len(outputs), 0)
    assert plain == fast
    moved, kept = plain["stale"]
    assert plain["honest"] == (moved, 0) and 1500 < kept < moved and plain["zeros"][1] > kept


def test_warming_compiles_the_usual_variant_ahead_only_for_large_outputs() -> None:
    assert fused.warm_fused(fused.FUSED_MIN_ELEMENTS - 1) is None
    thread = fused.warm_fused(fused.FUSED_MIN_ELEMENTS)
    assert thread is not None
    thread.join(120)
    kernels = fused.fused_kernels()
    assert kernels is not None and all(len(kernel.signatures) >= 1 for kernel in kernels)


@pytest.mark.parametrize("start", [0, 1, 2, 3])
@pytest.mark.parametrize("length", [1, 3, 8, 17])
def test_bit_equal_compares_words_the_same_as_bytes(start: int, length: int) -> None:
    base = torch.randn(64)
    a = base[start:start + length]
    assert bit_equal(a, a.clone()) and bit_equal(a.clone(), a)
    changed = a.clone()
    changed[-1] = -changed[-1] if changed[-1] != 0 else 1.0
    assert not bit_equal(a, changed)
    signed = torch.zeros(length)
    signed[length // 2] = -0.0
    assert not bit_equal(torch.zeros(length), signed)
    payload = torch.full((length,), math.nan)
    other = payload.clone()
    other.view(torch.int32)[0] ^= 1
    assert bit_equal(payload, payload.clone()) and not bit_equal(payload, other)
    assert bit_equal(a.half(), a.half().clone()) and not bit_equal(a.half(), changed.half())
