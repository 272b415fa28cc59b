"""A pass replayed under other gate policies (``verify.batch.replay``): plans from reports, and each policy on small passes."""

from __future__ import annotations

import pytest
from replay_testing import shared_report

from verify.batch.replay import KernelPlan, Step, measured, ordered, plan_from_report, replay
from verify.harness.gate import GATE_FILLS


def plan(key: str, *steps: tuple[str, float], ready: float = 0.0, after: float = 0.0, start: float | None = None):
    order = start if start is not None else ready
    return KernelPlan(key, order, ready, tuple(Step(kind, seconds) for kind, seconds in steps), after)


def drain(second_s: float) -> list[KernelPlan]:
    """A sharer with a yield point at 2 s and then a piece of ``second_s``, beside a 5 s piece, while a timed series
    asks for the GPU alone at 1 s: the drain its yield point falls into."""
    return [plan("yields", ("shared", 2.0), ("shared", second_s)), plan("long", ("shared", 5.0)),
            plan("timed", ("alone", 1.0), ready=1.0)]


def test_a_timed_series_waits_out_a_running_piece_unless_sharers_are_preempted():
    long, timed = plan("long", ("shared", 10.0)), plan("timed", ("alone", 1.0), ready=1.0)
    today = replay([long, timed], slots=2, seats=2, policy="writer-first")
    assert today.finish_s == {"long": 10.0, "timed": 11.0}
    assert today.stood_back_s == 0.0
    preempted = replay([long, timed], slots=2, seats=2, policy="preempt")
    assert preempted.finish_s == {"timed": 2.0, "long": 11.0}
    assert preempted.stood_back_s == 1.0


def test_a_sharer_stands_back_at_a_yield_point_while_a_timed_series_waits():
    plans = drain(2.0)
    today = replay(plans, slots=3, seats=3, policy="writer-first")
    assert today.finish_s == {"long": 5.0, "timed": 6.0, "yields": 8.0}
    assert today.stood_back_s == 4.0
    assert today.pass_s == 8.0 and today.kernels_per_min == pytest.approx(22.5)


def test_filling_the_drain_never_delays_the_timed_series_when_it_knows_the_pieces():
    plans = drain(2.0)
    filled = replay(plans, slots=3, seats=3, policy="fill")
    assert filled.finish_s == {"yields": 4.0, "long": 5.0, "timed": 6.0}
    assert filled.stood_back_s == 0.0
    assert replay(drain(4.0), slots=3, seats=3, policy="fill").finish_s["timed"] == 6.0


def test_guessing_uses_the_last_piece_against_how_long_the_others_have_run():
    plans = drain(4.0)
    bold = replay(plans, slots=3, seats=3, policy="fill-guess", fill_factor=2.0)
    assert bold.finish_s == {"long": 5.0, "yields": 6.0, "timed": 7.0}
    shy = replay(plans, slots=3, seats=3, policy="fill-guess", fill_factor=0.5)
    assert shy.finish_s == replay(plans, slots=3, seats=3, policy="writer-first").finish_s


def test_a_guessing_sharer_goes_on_at_most_gate_fills_yield_points_in_a_row():
    # Twelve short pieces after a first one, beside a 100 s piece, while a timed series waits from 1 s: the gate's
    # bound lets eight go on, the ninth stands back until the timed series is done; knowing the future needs none.
    plans = [plan("many", ("shared", 2.0), *[("shared", 0.1)] * 12), plan("long", ("shared", 100.0)),
             plan("timed", ("alone", 1.0), ready=1.0)]
    guessed = replay(plans, slots=3, seats=3, policy="fill-guess", fill_factor=2.0)
    assert GATE_FILLS == 8 and guessed.finish_s["many"] == pytest.approx(101.0 + 4 * 0.1)
    assert guessed.stood_back_s == pytest.approx(101.0 - 2.0 - 8 * 0.1)
    assert replay(plans, slots=3, seats=3, policy="fill").finish_s["many"] == pytest.approx(2.0 + 12 * 0.1)


def test_without_a_gate_the_timed_work_shares_the_gpu():
    plans = [plan("long", ("shared", 10.0)), plan("timed", ("alone", 1.0), ready=1.0)]
    assert replay(plans, slots=2, seats=2, policy="no-gate").finish_s == {"timed": 2.0, "long": 10.0}


def test_a_handover_keeps_the_gpu_alone_from_one_step_alone_to_the_next():
    plans = [plan("handing", ("alone", 1.0), ("alone", 1.0)), plan("next", ("alone", 1.0), ready=0.5)]
    assert replay(plans, slots=2, seats=2).finish_s == {"handing": 2.0, "next": 3.0}


def test_seats_and_slots_bound_how_many_kernels_run_at_once():
    three = [plan(k, ("shared", 1.0)) for k in "abc"]
    assert replay(three, slots=3, seats=1).finish_s == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert replay(three, slots=3, seats=3).finish_s == {"a": 1.0, "b": 1.0, "c": 1.0}
    slow_start = [plan(k, ("shared", 1.0), ready=1.0, after=0.5) for k in "abc"]
    assert replay(slow_start, slots=1, seats=3).finish_s == {"a": 2.5, "b": 5.0, "c": 7.5}
    assert plan("x", ("shared", 1.0), ("off", 2.0), ready=1.0, after=0.5).chain_s == 4.5


def test_work_without_the_gpu_holds_its_seat_and_lets_others_share():
    plans = [plan("builds", ("shared", 1.0), ("off", 3.0), ("shared", 1.0)), plan("other", ("alone", 1.0), ready=1.5)]
    assert replay(plans, slots=2, seats=2).finish_s == {"other": 2.5, "builds": 5.0}
    assert replay(plans, slots=2, seats=1).finish_s == {"builds": 5.0, "other": 6.0}


def test_kernels_take_slots_in_the_order_they_started():
    plans = [plan("late", ("shared", 1.0), start=5.0), plan("early", ("shared", 2.0), start=1.0)]
    assert replay(plans, slots=1, seats=1).finish_s == {"early": 2.0, "late": 3.0}


def test_kernels_can_be_replayed_in_the_order_of_their_own_chains():
    plans = [plan("short", ("shared", 1.0), start=1.0), plan("long", ("shared", 4.0), start=2.0),
             plan("mid", ("shared", 2.0), start=3.0), plan("mid-later", ("shared", 2.0), start=4.0)]
    assert [p.key for p in ordered(plans)] == ["short", "long", "mid", "mid-later"]
    assert [p.key for p in ordered(plans, "longest-first")] == ["long", "mid", "mid-later", "short"]
    assert [p.key for p in ordered(plans, "shortest-first")] == ["short", "mid", "mid-later", "long"]
    assert replay(ordered(plans, "longest-first"), slots=1, seats=1).finish_s == {
        "long": 4.0, "mid": 6.0, "mid-later": 8.0, "short": 9.0}
    with pytest.raises(ValueError, match="unknown order 'random'"):
        ordered(plans, "random")


def test_an_unknown_policy_or_no_seat_is_refused():
    with pytest.raises(ValueError, match="unknown gate policy 'fifo'"):
        replay([], slots=1, seats=1, policy="fifo")
    with pytest.raises(ValueError, match="at least one slot and one seat"):
        replay([], slots=1, seats=0)


def test_a_report_becomes_its_kernels_own_work_without_its_waits():
    got = plan_from_report("k", shared_report())
    assert got is not None
    assert (got.key, got.start, got.ready_s, got.after_s) == ("k", 99.0, 2.0, 4.0)
    assert [(s.kind, round(s.seconds, 3)) for s in got.steps] == [
        ("shared", 2.0), ("shared", 0.9), ("alone", 1.0), ("alone", 0.5), ("shared", 0.5), ("off", 0.0),
        ("off", 3.0), ("shared", 2.0)]


def test_a_child_with_pieces_and_no_gate_mark_of_its_own_is_replayed():
    report = shared_report()
    report["timeline"] = [e for e in report["timeline"] if not e[2].startswith("gate:run:")]
    got = plan_from_report("k", report)
    assert got is not None and ("alone", 0.5) not in [(s.kind, round(s.seconds, 3)) for s in got.steps]
    assert [s.kind for s in got.steps].count("alone") == 1


def test_reports_that_cannot_be_replayed_say_so():
    old = shared_report()
    old["gate"]["pieces"] = {"run": [[1.5, "trial"]]}
    assert plan_from_report("old", old) is None
    unseated = shared_report()
    unseated["timeline"] = [e for e in unseated["timeline"] if e[2] != "gpu-gate"]
    assert plan_from_report("unseated", unseated) is None


def test_the_pass_as_measured_counts_every_stand_back():
    report = shared_report()
    report["timeline"] += [[16.5, "parent", "gate:run:yield"], [17.0, "parent", "gate:run:shared"]]
    other = {"harness_seconds": 5.0, "timeline_origin": 130.0, "batch": {"seconds": 5.0}, "timeline": []}
    assert measured([("k", report), ("o", other)]) == {"pass_s": 36.0, "kernels_per_min": 3.333, "seat_s": 14.0,
                                                       "stood_back_s": 2.5}
