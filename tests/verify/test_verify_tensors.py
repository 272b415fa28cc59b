"""``verify.harness.tensors``: the content fingerprint the timed calls are checked by."""

from __future__ import annotations

import math

import pytest
import torch

from verify.harness import tensors
from verify.harness.judge import TOLERANCE
from verify.harness.tensors import (
    JUDGE_CHUNK,
    fails_l2_bound,
    fails_l2_bounds,
    fingerprint,
    fingerprint_distance,
    fingerprints_agree,
    is_constant,
    stale_counts,
)


def _seeded_signs(n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator()
    generator.manual_seed(seed)
    return torch.randint(0, 2, (n,), generator=generator, dtype=torch.int8).to(torch.float64) * 2 - 1


def _signs_by_definition(n: int, k: int) -> torch.Tensor:
    """Projection k's signs: drawn per element up to 2**22 elements; above, row sign times column sign for rows of
    4096 elements, and drawn per element for the shorter tail, each factor from its own seed."""
    seed = 7919 * (k + 1)
    if n <= 2**22:
        return _seeded_signs(n, seed)
    rows = n // 4096
    body = _seeded_signs(rows, seed + 1)[:, None] * _seeded_signs(4096, seed + 2)[None, :]
    return torch.cat([body.reshape(-1), _seeded_signs(n - rows * 4096, seed + 3)])


def _fingerprint_in_float64(t: torch.Tensor, projections: int = 4) -> list[float]:
    """The fingerprint's definition, spelled out: float64 copy, norm, +-1 projections, non-finite count."""
    x = t.detach().reshape(-1).to(torch.float64)
    finite = torch.isfinite(x)
    x = torch.where(finite, x, torch.zeros((), dtype=x.dtype))
    values = [float(torch.linalg.vector_norm(x))]
    for k in range(projections):
        values.append(float((x * _signs_by_definition(x.numel(), k)).sum()))
    return [*values, float(int((~finite).sum()))]


@pytest.mark.parametrize("t", [
    torch.randn(1000), torch.randn(37, 5).half(), torch.randn(100).bfloat16(), torch.arange(10),
    torch.tensor([True, False, True]), torch.tensor([1.0, float("inf"), float("nan"), -2.0]), torch.empty(0),
    torch.randn(3, 4, dtype=torch.float64), torch.randn(6, 4).t(),
], ids=["f32", "f16", "bf16", "int64", "bool", "non-finite", "empty", "f64", "strided"])
def test_the_fingerprint_keeps_its_float64_definition(t: torch.Tensor) -> None:
    got, want = fingerprint(t), _fingerprint_in_float64(t)
    assert len(got) == 6 and got[-1] == want[-1]
    assert got[0] == pytest.approx(want[0], rel=1e-12, abs=1e-12)
    # The projections of a small floating output are float32 sums: within 1e-5 of the norm (the check allows 5e-2).
    assert all(abs(a - b) <= 1e-5 * max(want[0], 1e-30) for a, b in zip(got[1:5], want[1:5], strict=True))


def test_a_finite_floating_output_never_takes_the_slow_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.harness import tensors

    def refuse(*_: object) -> list[float]:
        raise AssertionError("the spelled-out definition ran")

    monkeypatch.setattr(tensors, "_exact_fingerprint", refuse)
    for t in (torch.randn(3), torch.randn(64, 64).half(), torch.randn(tensors.FINGERPRINT_CACHED_ELEMENTS + 1)):
        assert len(tensors.fingerprint(t)) == 6
    with pytest.raises(AssertionError, match="definition ran"):
        tensors.fingerprint(torch.tensor([1.0, float("nan")]))


def test_the_fingerprint_tells_a_wrong_answer_from_a_right_one_in_a_low_precision_dtype() -> None:
    right = torch.randn(4096).half()
    wrong = right.clone()
    wrong[17] += 1.0
    assert fingerprints_agree(fingerprint(right), fingerprint(right.clone()), 1e-12)
    assert not fingerprints_agree(fingerprint(right), fingerprint(wrong), 1e-4)


def _with_nan(t: torch.Tensor) -> torch.Tensor:
    t[-3] = float("nan")
    return t


@pytest.mark.parametrize("t", [
    torch.tensor([1e200, 1.0], dtype=torch.float64), torch.tensor([float("inf"), -float("inf")]),
    torch.full((7,), float("nan")), torch.randn(2**22 + 1).half(), _with_nan(torch.randn(2**22 + 4099)),
], ids=["squares-overflow", "infinities-cancel", "all-nan", "above-the-cache", "non-finite-above-the-cache"])
def test_outputs_the_fast_product_cannot_take_get_the_definition(t: torch.Tensor) -> None:
    got, want = fingerprint(t), _fingerprint_in_float64(t)
    assert got[-1] == want[-1]
    for a, b in zip(got, want, strict=True):
        assert (math.isinf(a) and a == b) or abs(a - b) <= 1e-9 * max(1.0, abs(b))


@pytest.mark.parametrize("n", [2**22 + 1, 2**22 + 4096 * 3, 2**22 + 4096 * 7 + 11])
def test_a_large_output_is_projected_a_chunk_of_rows_at_a_time_as_defined(n: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.harness import tensors

    monkeypatch.setattr(tensors, "FINGERPRINT_CHUNK_ELEMENTS", 4096 * 300)
    t = torch.randn(n) + 0.5
    got, want = fingerprint(t), _fingerprint_in_float64(t)
    assert got[-1] == want[-1] == 0.0
    assert all(abs(a - b) <= 1e-9 * want[0] for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("error", ["random", "one-element", "one-row", "one-column", "every-element", "last-rows"])
def test_the_factored_signs_see_an_error_of_any_shape_at_its_size(error: str) -> None:
    n = 2**22 + 4096 * 5 + 100
    right = torch.randn(n, generator=torch.Generator().manual_seed(5))
    grid = torch.zeros(n)
    body = grid[: (n // 4096) * 4096].view(-1, 4096)
    if error == "random":
        grid.normal_(generator=torch.Generator().manual_seed(6))
    elif error == "one-element":
        grid[123_457] = 1.0
    elif error == "one-row":
        body[77] = 1.0
    elif error == "one-column":
        body[:, 3001] = 1.0
    elif error == "every-element":
        grid.fill_(1.0)
    else:
        grid[-5000:] = 1.0
    scale = 1e-3 * float(right.norm()) / float(grid.norm())
    wrong = right + scale * grid
    estimate = fingerprint_distance(fingerprint(right), fingerprint(wrong))
    # Four projections estimate the relative L2 difference (1e-3 here) up to a chi-square spread: a structured
    # error must not vanish in the product of row and column signs.
    assert estimate is not None and 2e-4 < estimate < 3e-3
    assert not fingerprints_agree(fingerprint(right), fingerprint(wrong), 1e-4)


def test_the_cached_weights_are_the_seeded_ones_for_every_size() -> None:
    for n in (3, 1000, 3, 77):
        t = torch.randn(n)
        got, want = fingerprint(t), _fingerprint_in_float64(t)
        assert all(abs(a - b) <= 1e-5 * want[0] for a, b in zip(got, want, strict=True))


def test_task_inputs_are_drawn_on_the_device_and_fall_back_to_the_cpu_from_the_same_seed() -> None:
    from verify.harness.tensors import task_inputs

    on_device = task_inputs(lambda: [torch.randn(4), 3], 5, "meta")
    assert on_device[0].device.type == "meta" and on_device[1] == 3

    def needs_numpy() -> list[torch.Tensor]:
        return [torch.from_numpy(torch.randn(4).numpy())]

    fallen_back = task_inputs(needs_numpy, 5, "meta")
    torch.manual_seed(5)
    assert fallen_back[0].device.type == "cpu" and torch.equal(fallen_back[0], torch.randn(4))
    drawn = task_inputs(lambda: [torch.randn(4)], 5, "cpu")[0]
    torch.manual_seed(5)
    assert torch.equal(drawn, torch.randn(4))


def test_fails_l2_bounds_answers_each_output_as_it_would_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensors, "JUDGE_CHUNK", 64)  # several chunks, on judge_workers() threads where there are cores
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn(1000, dtype=torch.float64, generator=generator)
    outs = [0.0, float(ref.mean()), ref.float(), ref.float() + 0.5, torch.full((1000,), math.nan), torch.zeros(10),
            (ref * 1.005).float(), 7]
    # Far off (a zero, the mean, a shifted answer, a whole number) fail; right, NaN and misshapen are the policy's.
    expected = [True, True, False, True, False, False, False, True]
    assert fails_l2_bounds(outs, ref, ref.float(), TOLERANCE) == expected
    assert [fails_l2_bound(o, ref, ref.float(), TOLERANCE) for o in outs] == expected
    assert fails_l2_bounds(outs[::-1], ref, ref.float(), TOLERANCE) == expected[::-1]
    # An fp32 reference 10% off widens the bound to 8 x its error (0.8): the answer shifted by 0.5 (0.5 off) is in it.
    assert fails_l2_bounds(outs, ref, (ref * 1.1).float(), TOLERANCE) == [True, True, False, False, False, False, False,
                                                                          True]
    nan_ref = ref.clone()
    nan_ref[3] = math.nan
    assert fails_l2_bounds(outs, nan_ref, None, TOLERANCE) == [False] * len(outs)
    assert fails_l2_bounds(outs, torch.zeros(1000, dtype=torch.float64), None, TOLERANCE) == [False] * len(outs)
    assert fails_l2_bounds([0.0], torch.zeros(0, dtype=torch.float64), None, TOLERANCE) == [False]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_is_constant_says_what_a_float64_standard_deviation_of_zero_said(dtype: torch.dtype) -> None:
    one = torch.tensor(1.0, dtype=dtype)
    cases = [torch.full((1000,), 0.1, dtype=dtype), torch.zeros(5, dtype=dtype), torch.tensor([0.0, -0.0], dtype=dtype),
             torch.randn(1000).to(dtype), torch.tensor([1.0, 1.0, float("nan")], dtype=dtype),
             torch.full((4,), float("inf"), dtype=dtype), torch.tensor([float("-inf"), 1.0], dtype=dtype),
             torch.stack([one, torch.nextafter(one, torch.tensor(2.0, dtype=dtype))]), torch.ones(1, dtype=dtype),
             torch.full((3, 4), 7.0, dtype=dtype).t(), torch.ones(8, dtype=dtype)[::2], torch.arange(3)]
    old = [t.numel() > 1 and t.is_floating_point() and float(t.double().std()) == 0.0 for t in cases]
    assert [is_constant(t) for t in cases] == old
    assert old == [True, True, True, False, False, False, False, False, False, True, True, False]


def test_is_constant_finds_the_float64_constants_a_standard_deviation_missed() -> None:
    # In float64 itself the mean of a constant can round off it, so its standard deviation is not exactly 0.
    tenth = torch.full((1000,), 0.1, dtype=torch.float64)
    assert float(tenth.std()) != 0.0 and is_constant(tenth)


def _stale_counts_whole(y2: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor) -> tuple[int, int]:
    """The statefulness probe's counts over whole tensors, as the judge computed them before they were chunked."""
    r1d, r2d, y2d = r1.double(), r2.double(), y2.double()
    scale = float(torch.nan_to_num(r1d.abs(), nan=0.0, posinf=0.0).max()) if r1d.numel() else 0.0
    move = (r2d - r1d).abs()
    affected = torch.isfinite(move) & (move > 1e-2 * scale + 1e-6)
    return int(affected.sum()), int((affected & ~((y2d - r2d).abs() <= 0.5 * move)).sum())


@pytest.mark.parametrize("workers", ["1", "2"])
def test_stale_counts_in_chunks_equal_the_whole_tensor_counts(workers: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KA_JUDGE_WORKERS", workers)
    g = torch.Generator().manual_seed(3)
    n = 3 * JUDGE_CHUNK + 1234
    r1 = torch.randn(n, generator=g)
    r2 = r1.clone()
    changed = torch.randint(0, n, (5000,), generator=g)
    r2[changed] += torch.randn(5000, generator=g)
    r1[:5] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 2.0])
    r2[3] = float("nan")
    honest = r2 + 1e-7 * torch.randn(n, generator=g)
    stale = honest.clone()
    stale[changed[:1000]] = r1[changed[:1000]]
    for y2 in (honest, stale, torch.zeros(n)):
        assert stale_counts(y2, r1, r2) == _stale_counts_whole(y2, r1, r2)
    moved, kept = stale_counts(stale, r1, r2)
    assert 0 < kept < moved
    # A transposed (non-contiguous) output of the same shape is compared element by element.
    shaped = [t[: 1024 * 512].view(1024, 512) for t in (honest, r1, r2)]
    y2t = shaped[0].t().contiguous().t()
    assert y2t.stride() == (1, 1024) and torch.equal(y2t.nan_to_num(), shaped[0].nan_to_num())
    assert stale_counts(y2t, shaped[1], shaped[2]) == _stale_counts_whole(y2t, shaped[1], shaped[2])
    assert stale_counts(torch.zeros(0), torch.zeros(0), torch.zeros(0)) == (0, 0)


@pytest.mark.parametrize(("cores", "running", "workers"), [
    (16, 40, 4),     # a busy host: a quarter of the cores
    (16, 1, 12),     # the batch's tail, nothing else running: three quarters of them
    (16, 9, 8),      # eight cores idle, and the judge's own thread is one of the nine running
    (64, 200, 8),    # busy, a quarter capped at JUDGE_WORKERS_MAX
    (64, 1, 48),
    (2, 1, 1),       # the 2-core CI host: one, idle or not
    (2, 5, 1),
    (16, None, 4),   # /proc/loadavg unreadable: as on a busy host
])
def test_judge_workers_follow_the_idle_cores(monkeypatch: pytest.MonkeyPatch, cores: int, running: int | None,
                                             workers: int) -> None:
    monkeypatch.delenv("KA_JUDGE_WORKERS", raising=False)
    monkeypatch.setattr(tensors.os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(tensors, "runnable_tasks", lambda: running)
    assert tensors.judge_workers() == workers
    monkeypatch.setenv("KA_JUDGE_WORKERS", "3")
    assert tensors.judge_workers() == 3


def test_runnable_tasks_reads_this_hosts_load() -> None:
    running = tensors.runnable_tasks()
    assert running is not None and running >= 1  # this test's own thread is running
