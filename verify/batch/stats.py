"""Counts and time of a batch: statuses, kernels per minute, ETA, and where each kernel's time went.

No display here (the benchmark runs where rich is not installed); ``progress`` draws it. ``time_shares`` splits one report's wall time along its critical path using the report's ``timeline``:
``compile`` (the prebuild plus the script's compile step), ``seat`` (ready for the GPU after the compile, waiting
for a seat of a batch's gate: ``seat_times``' wait), ``references`` (the trusted child still computing references
after the compile, its waits for the GPU within its seat included), ``trials`` (the candidate's correctness
trials), ``timing`` (the baselines timed after the compile, and the candidate's timed series) and ``other``
(process start, the kernel lists, the shape probe, teardown).

Example:
    >>> report = {"harness_seconds": 10.0, "timeline": [[2.0, "compile", "exit"],
    ...           [3.0, "trusted", "mark:references-sent"], [5.0, "run", "mark:released"],
    ...           [7.0, "run", "mark:trials-done"], [8.0, "run", "timing:candidate"]]}
    >>> time_shares(report, prebuild_s=2.0)
    {'compile': 4.0, 'seat': 0.0, 'references': 1.0, 'trials': 2.0, 'timing': 3.0, 'other': 2.0}
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from verify.harness.timing import HOST_BOUND_BUSY, gpu_busy

PHASES: tuple[str, ...] = ("compile", "seat", "references", "trials", "timing", "other")


def _at(timeline: list[list[Any]], role: str, event: str) -> float | None:
    times = [float(t) for t, r, e in timeline if r == role and e == event]
    return times[0] if times else None


def time_shares(report: dict[str, Any], prebuild_s: float = 0.0) -> dict[str, float]:
    """Seconds of each phase of one report's critical path (see the module docstring).

    Example:
        >>> timeline = [[1.0, "compile", "exit"], [1.5, "trusted", "mark:ready"], [1.5, "parent", "compiled-without-gpu"],
        ...             [9.5, "parent", "gpu-gate"], [11.0, "trusted", "mark:references-sent"], [12.0, "run", "mark:released"]]
        >>> time_shares({"harness_seconds": 12.0, "timeline": timeline})
        {'compile': 1.0, 'seat': 8.0, 'references': 2.0, 'trials': 0.0, 'timing': 1.0, 'other': 0.0}
    """
    total = float(report.get("harness_seconds") or 0.0)
    timeline = report.get("timeline") or []
    compiled = _at(timeline, "compile", "exit") or 0.0
    refs = _at(timeline, "trusted", "mark:references-sent")
    released = _at(timeline, "run", "mark:released")
    trials_done = _at(timeline, "run", "mark:trials-done")
    timed = _at(timeline, "run", "timing:candidate")
    seconds = dict.fromkeys(PHASES, 0.0)
    seconds["compile"] = compiled + prebuild_s
    refs_end = max(compiled, refs if refs is not None else compiled)
    if released is not None:
        refs_end = min(refs_end, released)
        gate, ready = _at(timeline, "parent", "gpu-gate"), ready_at(timeline)
        if gate is not None and ready is not None:
            seconds["seat"] = max(0.0, min(gate, refs_end) - max(ready, compiled))
        seconds["references"] = refs_end - compiled - seconds["seat"]
        seconds["timing"] = released - refs_end
        if trials_done is not None:
            seconds["trials"] = trials_done - released
            if timed is not None:
                seconds["timing"] += timed - trials_done
    seconds["other"] = max(0.0, total - sum(seconds.values()) + prebuild_s)
    return {k: round(v, 3) for k, v in seconds.items()}


@dataclass
class BatchStats:
    """Counts and time of a batch so far; ``record`` each report as it arrives.

    Example:
        >>> stats = BatchStats(total=4, started=0.0)
        >>> stats.record({"status": "passed"}, build_state="built", now=30.0)
        >>> stats.record({"status": "flagged"}, build_state="hit", now=60.0)
        >>> stats.done, stats.per_minute(60.0), stats.eta_s(60.0)
        (2, 2.0, 60.0)
    """

    total: int
    started: float = field(default_factory=time.monotonic)
    statuses: Counter[str] = field(default_factory=Counter)
    builds: Counter[str] = field(default_factory=Counter)
    phase_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    finished_at: float | None = None
    timed: int = 0
    """Reports that say how busy the GPU was in the kernel's timed call (``timing.gpu_busy``)."""
    host_bound: int = 0
    """Of those, the ones whose timed call was mostly the host's (GPU busy under ``HOST_BOUND_BUSY``)."""

    @property
    def done(self) -> int:
        """Reports received."""
        return sum(self.statuses.values())

    def record(self, report: dict[str, Any], *, build_state: str | None = None, prebuild_s: float = 0.0,
               now: float | None = None) -> None:
        """Count one report (its status, build and phase times)."""
        self.statuses[str(report.get("status", "error"))] += 1
        if build_state:
            self.builds[build_state] += 1
        for phase, seconds in time_shares(report, prebuild_s).items():
            self.phase_s[phase] += seconds
        busy = gpu_busy(report)
        if busy is not None:
            self.timed += 1
            self.host_bound += busy < HOST_BOUND_BUSY
        self.finished_at = time.monotonic() if now is None else now

    def per_minute(self, now: float | None = None) -> float:
        """Kernels per minute since the start."""
        elapsed = (time.monotonic() if now is None else now) - self.started
        return 60.0 * self.done / elapsed if elapsed > 0 else 0.0

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left at the rate so far (None before the first report)."""
        rate = self.per_minute(now)
        return 60.0 * (self.total - self.done) / rate if rate > 0 else None

    def shares(self) -> dict[str, float]:
        """Each phase's share of the summed per-kernel time."""
        total = sum(self.phase_s.values())
        return {k: round(v / total, 4) if total else 0.0 for k, v in self.phase_s.items()}

    def line(self, now: float | None = None) -> str:
        """One status line: counts, rate and ETA."""
        eta = self.eta_s(now)
        counts = " · ".join(f"{s} {self.statuses[s]}" for s in ("passed", "flagged", "failed", "error")
                            if self.statuses[s])
        rate = f"{self.per_minute(now):.1f}/min"
        return f"{counts or 'starting'} · {rate} · ETA {duration(eta) if eta is not None else '?'}"


def _union_s(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one of ``spans``."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def gpu_occupancy(reports: list[dict[str, Any]]) -> dict[str, float | None]:
    """How much of a pass each GPU's gate was held at all, held alone, and waited for alone while no one held it
    so, averaged over the GPUs.

    From each report's timeline on the host's monotonic clock (``timeline_origin``): the gate is held from
    ``gpu-gate`` to the run child's exit, and alone between a child's ``gate:<role>:alone`` and its next
    ``gate:<role>:shared`` mark (``_alone_spans``: a hand-over keeps it alone), or throughout in the exclusive mode.
    ``alone_waited_share``: some child had asked
    for the GPU alone (its ``gate:alone``) and was not yet granted it, and no other held it alone: the GPU ran only
    the pieces of untimed work the gate was waiting for to end (the sharers that reached a yield point meanwhile
    stood back). The span runs from the first report's start to the last one's run exit, per GPU.

    Example:
        >>> a = {"timeline_origin": 0.0, "gate": {"mode": "shared"}, "timeline": [[1, "parent", "gpu-gate"],
        ...      [1.5, "run", "gate:alone"], [2, "parent", "gate:run:alone"], [3, "parent", "gate:run:shared"],
        ...      [4, "run", "exit"]]}
        >>> b = {"timeline_origin": 2.0, "gate": {"mode": "exclusive"}, "timeline": [[1, "parent", "gpu-gate"],
        ...      [2, "run", "exit"]]}
        >>> gpu_occupancy([a, b])
        {'gate_held_share': 0.75, 'gpu_alone_share': 0.5, 'alone_waited_share': 0.125}
    """
    by_gpu: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        if report.get("timeline_origin") is not None and report.get("timeline"):
            by_gpu.setdefault(str((report.get("batch") or {}).get("gpu")), []).append(report)
    held_shares, alone_shares, waited_shares = [], [], []
    for group in by_gpu.values():
        held: list[tuple[float, float]] = []
        alone: list[tuple[float, float]] = []
        waited: list[tuple[float, float]] = []
        starts, ends = [], []
        for report in group:
            origin = float(report["timeline_origin"])
            timeline = [(origin + float(t), str(r), str(e)) for t, r, e in report["timeline"]]
            starts.append(origin)
            gate, exit_ = _at(report["timeline"], "parent", "gpu-gate"), _at(report["timeline"], "run", "exit")
            ends.append(max(t for t, _, _ in timeline) if exit_ is None else origin + exit_)
            if gate is None or exit_ is None:
                continue
            gate, exit_ = origin + gate, origin + exit_
            held.append((gate, exit_))
            if (report.get("gate") or {}).get("mode") != "shared":
                alone.append((gate, exit_))
                continue
            waited += [(start, end) for _, start, end in _paired_spans(timeline, _asked_alone, _granted_alone)]
            alone += _alone_spans(timeline)
        span = max(ends) - min(starts)
        if span > 0:
            held_shares.append(_union_s(held) / span)
            alone_shares.append(_union_s(alone) / span)
            waited_shares.append((_union_s(waited + alone) - _union_s(alone)) / span)
    if not held_shares:
        return {"gate_held_share": None, "gpu_alone_share": None, "alone_waited_share": None}
    return {"gate_held_share": round(sum(held_shares) / len(held_shares), 4),
            "gpu_alone_share": round(sum(alone_shares) / len(alone_shares), 4),
            "alone_waited_share": round(sum(waited_shares) / len(waited_shares), 4)}


def _alone_spans(timeline: Sequence[tuple[float, str, str]]) -> list[tuple[float, float]]:
    """The stretches a shared-mode verification held its GPU alone, from its parent's gate marks.

    A child's hold runs from its ``gate:<role>:alone`` to its next gate mark. A hold that ends in ``over`` (harness
    1.33: the trusted child's baselines hand the GPU to the run child) goes on through the next child's
    ``gate:<role>:alone`` grant that follows at once, so the hand-over's few milliseconds count as alone; when another
    mark follows ``over`` instead, or none, the hold ended at ``over``.

    Example:
        >>> _alone_spans([(1, "parent", "gate:trusted:alone"), (2, "parent", "gate:trusted:over"),
        ...               (2.1, "parent", "gate:run:alone"), (3, "parent", "gate:run:shared"),
        ...               (5, "parent", "gate:run:alone"), (6, "parent", "gate:run:shared")])
        [(1, 3), (5, 6)]
    """
    spans: list[tuple[float, float]] = []
    opened: dict[str, float] = {}
    handed: tuple[float, float] | None = None
    for t, role_, event in timeline:
        if role_ != "parent" or not event.startswith("gate:"):
            continue
        _, role, want = event.split(":", 2)
        if handed is not None and want != "alone":
            spans.append(handed)
        if want == "alone":
            opened.setdefault(role, handed[0] if handed is not None else t)
        elif role in opened:
            start = opened.pop(role)
            if want == "over":
                handed = (start, t)
                continue
            spans.append((start, t))
        handed = None
    if handed is not None:
        spans.append(handed)
    return spans


def alone_waits(reports: list[dict[str, Any]]) -> dict[str, float | None]:
    """How long a kernel waited for the GPU alone, in all, over the shared-mode reports: mean and median seconds.

    Each wait runs from a child's request (its ``gate:alone`` message) to its parent's grant (the next
    ``gate:<role>:alone`` mark); the waits of one kernel add up. It is what other verifications' untimed work
    and timed series cost this kernel's timed work (``verify.harness.gate``, yield points).

    Example:
        >>> shared = {"gate": {"mode": "shared"}, "timeline": [[1, "trusted", "gate:alone"],
        ...           [3, "parent", "gate:trusted:alone"], [5, "run", "gate:alone"], [5.5, "parent", "gate:run:alone"]]}
        >>> alone_waits([shared, {"gate": {"mode": "exclusive"}, "timeline": []}])
        {'alone_wait_mean_s': 2.5, 'alone_wait_median_s': 2.5}
    """
    waited = partial(_paired_s, opens=_asked_alone, closes=_granted_alone)
    return _mean_and_median("alone_wait", _shared_totals(reports, waited))


GRANTS: tuple[str, ...] = ("trusted", "run-before-import", "run-timed")
"""The kinds of request for the GPU alone a verification makes (``alone_waits_by_grant``): the trusted child's (the
reference's kernel list and baselines), the run child's before the candidate's import (its trivial kernel's series)
and after it (the candidate's timed series and profiled call)."""


def alone_waits_by_grant(reports: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The waits for the GPU alone (``alone_waits``) in all, in seconds, by the kind of request (``GRANTS``), over the
    shared-mode reports. A run child's request is before the import if it came before the run child's ``hello``
    (sent just before the candidate's import).

    Example:
        >>> shared = {"gate": {"mode": "shared"}, "timeline": [[1, "trusted", "gate:alone"],
        ...           [3, "parent", "gate:trusted:alone"], [5, "run", "gate:alone"], [5.5, "parent", "gate:run:alone"],
        ...           [6, "run", "hello"], [8, "run", "gate:alone"], [9, "parent", "gate:run:alone"]]}
        >>> alone_waits_by_grant([shared])
        {'alone_wait_by_grant_s': {'trusted': 2.0, 'run-before-import': 0.5, 'run-timed': 1.0}}
    """
    totals = dict.fromkeys(GRANTS, 0.0)
    for report in reports:
        if (report.get("gate") or {}).get("mode") != "shared":
            continue
        timeline = report.get("timeline") or []
        hello = _at(timeline, "run", "hello")
        for child, start, end in _paired_spans(timeline, _asked_alone, _granted_alone):
            kind = child if child == "trusted" else "run-before-import" if hello is None or start < hello else "run-timed"
            totals[kind] += end - start
    return {"alone_wait_by_grant_s": {kind: round(seconds, 3) for kind, seconds in totals.items()}}


def _asked_alone(role: str, event: str) -> str | None:
    """The child (``trusted`` or ``run``) that asked for the GPU alone with this event, else None."""
    return role if role in ("trusted", "run") and event == "gate:alone" else None


def _granted_alone(role: str, event: str) -> str | None:
    """The child whose parent granted it the GPU alone with this event (``gate:<role>:alone``), else None."""
    return event.split(":")[1] if role == "parent" and event.startswith("gate:") and event.endswith(":alone") else None


def give_way_waits(reports: list[dict[str, Any]]) -> dict[str, float | None]:
    """How long a kernel's children stood back for other verifications' timed work, in all: mean and median seconds.

    Each wait runs from a parent's ``gate:<role>:yield`` mark (the child let go of its shared hold at a yield point
    while a timed series waited) to that role's next gate mark (the GPU shared again). It is what the other
    kernels' timed work cost this one's untimed work, the other side of ``alone_waits``.

    Example:
        >>> shared = {"gate": {"mode": "shared"}, "timeline": [[1, "parent", "gate:trusted:yield"],
        ...           [1.5, "parent", "gate:run:yield"], [2, "parent", "gate:trusted:shared"],
        ...           [4, "parent", "gate:run:shared"]]}
        >>> give_way_waits([shared, {"gate": {"mode": "exclusive"}, "timeline": []}])
        {'give_way_wait_mean_s': 3.5, 'give_way_wait_median_s': 3.5}
    """
    return _mean_and_median("give_way_wait", _shared_totals(reports, stood_back_s))


def _gate_mark(role: str, event: str) -> str | None:
    """The child a parent's gate mark (``gate:<role>:<state>``) is for, else None."""
    parts = event.split(":")
    return parts[1] if role == "parent" and len(parts) == 3 and parts[0] == "gate" else None


def stood_back_s(timeline: list[list[Any]]) -> float:
    """Seconds a verification's children stood back at yield points, in all: from each parent's
    ``gate:<role>:yield`` to that role's next gate mark (the GPU shared again).

    Example:
        >>> stood_back_s([[1, "parent", "gate:run:yield"], [2, "parent", "gate:run:fill"],
        ...               [3.5, "parent", "gate:run:shared"]])
        1.0
    """
    return _paired_s(timeline, opens=_yielded, closes=_gate_mark)


def yield_answers(reports: list[dict[str, Any]]) -> dict[str, int]:
    """How often, over the reports, a child at a yield point stood back for a waiting timed series
    (``gate:<role>:yield``), and how often it went on beside a longer piece on another seat instead
    (``gate:<role>:fill``, harness 1.37).

    Example:
        >>> report = {"timeline": [[1, "parent", "gate:run:fill"], [2, "parent", "gate:run:yield"],
        ...                        [3, "parent", "gate:run:shared"], [4, "run", "gate:fill"]]}
        >>> yield_answers([report, {}])
        {'stood_back_n': 1, 'went_on_n': 1}
    """
    counts = Counter(event.rsplit(":", 1)[1] for report in reports for _, role, event in report.get("timeline") or []
                     if role == "parent" and event.startswith("gate:") and event.count(":") == 2)
    return {"stood_back_n": counts["yield"], "went_on_n": counts["fill"]}


LET_GO: dict[str, str] = {"yield": "yield", "gate:alone": "alone", "gate:away": "away", "gpu-away": "between",
                          "run-gone": "end", "run-collected": "end"}
"""How a verification lets go of its shared hold on a GPU, by timeline event (a parent's ``gate:<role>:yield`` mark
is named by its last part): at a yield point, by asking for the GPU alone or away itself, between its two children
(the parent's ``gpu-away``, harness 1.26), or at its run child's end: once its processes are dead (``run-gone``,
harness 1.32), before that once its outputs were collected too (``run-collected``)."""

GATE_ENDS: tuple[str, ...] = ("run-gone", "run-collected")
"""The parent's marks at which a verification gives its GPU's gate back, newest harness first: a report's first one
that it has is its end (``gate_end``)."""


def gate_end(timeline: list[list[Any]]) -> float | None:
    """When a verification gave its GPU's gate and seat back: its first mark of ``GATE_ENDS`` (None without one).

    Example:
        >>> gate_end([[4.0, "parent", "run-gone"], [9.0, "parent", "run-collected"]]), gate_end(
        ...     [[9.0, "parent", "run-collected"]])
        (4.0, 9.0)
    """
    for mark in GATE_ENDS:
        if (at := _at(timeline, "parent", mark)) is not None:
            return at
    return None


def held_up_by(reports: list[dict[str, Any]], top: int = 5) -> dict[str, Any]:
    """What the waits for the GPU alone waited for: their seconds in all, and the pieces of work they ended on.

    A wait (``alone_waits``: a child's request to its grant) ends when the last other verification on its GPU lets go
    of its shared hold (``LET_GO``). The piece that held it up is that verification's last child event before it let
    go, named with how it let go: ``run:mark:released -> yield`` is the stretch from its run child's release to the
    first yield point after it. Seconds add up by piece, over the shared-mode reports with a ``timeline_origin``
    (the host's monotonic clock, which puts every report of one host on one time line); the ``top`` longest come back.
    A script the batch stopped wrote no report, but its parent's marks say when it let go (``stopped_record``): its
    pieces are named by its parent's last mark before that, ``stopped:gate:run:shared -> yield``. Without them a wait
    that ended on a stopped script is put down to the last reported verification that let go before it.
    ``alone_held_up_by_piece`` adds the same waits up by the piece itself where the holder's report has its pieces
    (``gate.pieces``, harness 1.35): the child's piece that ended where it let go, named by the messages inside it
    (``run:mark:reference-built .. probe:import``: from the run child's reference to the candidate's import).

    Example:
        >>> a = {"timeline_origin": 0.0, "gate": {"mode": "shared"}, "batch": {"gpu": "0"}, "timeline": [
        ...      [1, "run", "gate:alone"], [3, "parent", "gate:run:alone"]]}
        >>> b = {"timeline_origin": 0.0, "gate": {"mode": "shared"}, "batch": {"gpu": "0"}, "timeline": [
        ...      [0.5, "trusted", "reference"], [2.9, "parent", "gate:trusted:yield"]]}
        >>> found = held_up_by([a, b])
        >>> found["alone_wait_total_s"], found["alone_held_up_by"], found["alone_held_up_by_piece"]
        (2.0, [['trusted:reference -> yield', 2.0]], [])
        >>> b["gate"]["pieces"] = {"trusted": [[0.2, 0.2, "-"], [0.4, 2.5, "reference"]]}
        >>> held_up_by([a, b])["alone_held_up_by_piece"]
        [['trusted:reference', 2.0]]
    """
    events = _gpu_timelines(reports)
    stopped = {str(id(report)) for report in reports if report.get("stopped")}
    of = {str(id(report)): report for report in reports}
    total, pieces, by_piece = 0.0, Counter[str](), Counter[str]()
    for timeline in events.values():
        lets = [(t, key, how, _let_go_role(role, event)) for t, key, role, event in timeline
                if (how := _let_go(role, event))]
        work: dict[str, list[tuple[float, str]]] = {}
        for t, key, role, event in timeline:
            if role in ("trusted", "compile", "run") and not event.startswith("gate:"):
                work.setdefault(key, []).append((t, f"{role}:{event}"))
            elif key in stopped and role == "parent" and not _let_go(role, event):
                work.setdefault(key, []).append((t, f"stopped:{event}"))
        asked: dict[tuple[str, str], float] = {}
        for t, key, role, event in timeline:
            if (child := _asked_alone(role, event)) is not None:
                asked[(key, child)] = t
            elif (child := _granted_alone(role, event)) is not None:
                start = asked.pop((key, child), None)
                if start is None:
                    continue
                total += t - start
                ends = [item for item in lets if start <= item[0] <= t and item[1] != key]
                if not ends:
                    continue
                at, other, how, who = max(ends)
                before = [name for when, name in work.get(other, []) if when <= at]
                pieces[f"{before[-1] if before else '?'} -> {how}"] += t - start
                if (piece := _piece_ended(of[other], who, at)) is not None:
                    by_piece[f"{who}:{piece}"] += t - start
    return {"alone_wait_total_s": round(total, 3) if events else None,
            "alone_held_up_by": [[name, round(s, 3)] for name, s in pieces.most_common(top)],
            "alone_held_up_by_piece": [[name, round(s, 3)] for name, s in by_piece.most_common(top)]}


def _let_go_role(role: str, event: str) -> str | None:
    """The child whose work ended where a verification let go (``_let_go``): the one that yielded or asked, the
    trusted child at the parent's ``gpu-away``, the run child at its end."""
    if (child := _yielded(role, event)) is not None:
        return child
    if role in ("trusted", "run"):
        return role
    return "trusted" if event == "gpu-away" else "run" if event in GATE_ENDS else None


def _piece_ended(report: dict[str, Any], role: str | None, at: float) -> str | None:
    """The name of ``role``'s last piece in ``report`` (``gate.pieces``) that ended by ``at`` on the host's clock
    (10 ms allowed for the rounding), or None without pieces (or with ``[seconds, name]`` ones, which 1.35's first
    commits wrote without their start)."""
    origin = report.get("timeline_origin")
    pieces = ((report.get("gate") or {}).get("pieces") or {}).get(role or "")
    if origin is None or not pieces:
        return None
    ends = [(float(origin) + piece[0] + piece[1], piece[2]) for piece in pieces if len(piece) == 3]
    ended = [(end, name) for end, name in ends if end <= at + 0.01]
    return max(ended)[1] if ended else None


def held_pieces(reports: list[dict[str, Any]], top: int = 8) -> dict[str, Any]:
    """The pieces of work under a shared gate that added up longest over a pass: by child and name, their seconds in
    all, how many, and the longest one.

    Each shared-mode report has its children's pieces (``gate.pieces``, harness 1.35,
    ``verify.harness.gate.held_pieces``): the stretches between two of a child's requests, for which a timed series
    asking for the GPU alone meanwhile waits. ``alone_held_up_by`` names what the waits ended on; this says how long
    the pieces were, whether anyone waited or not.

    Example:
        >>> a = {"gate": {"mode": "shared", "pieces": {"run": [[0, 2.0, "trial"], [3, 0.5, "hello .. call"]]}}}
        >>> b = {"gate": {"mode": "shared", "pieces": {"run": [[1, 1.0, "trial"]], "trusted": [[0, 0.2, "reference"]]}}}
        >>> held_pieces([a, b, {"gate": {"mode": "exclusive"}}])["held_pieces"]
        [['run:trial', 3.0, 2, 2.0], ['run:hello .. call', 0.5, 1, 0.5], ['trusted:reference', 0.2, 1, 0.2]]
    """
    total: Counter[str] = Counter()
    count: Counter[str] = Counter()
    longest: dict[str, float] = {}
    for report in reports:
        for role, pieces in ((report.get("gate") or {}).get("pieces") or {}).items():
            for *_, seconds, name in pieces:
                key = f"{role}:{name}"
                total[key] += float(seconds)
                count[key] += 1
                longest[key] = max(longest.get(key, 0.0), float(seconds))
    return {"held_pieces": [[key, round(s, 3), count[key], round(longest[key], 3)]
                            for key, s in total.most_common(top)] if total else None}


def requeued_waits(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The part of the waits for the GPU alone that came after another verification's alone time had ended.

    A request for the GPU alone (``alone_waits``) that arrives while another verification holds it waits for that
    hold, then for every sharer that came back meanwhile to reach its next yield point: the gate's turnstile does not
    keep them out between two timed series. This sums, over the requests that waited behind another's alone hold on
    their GPU, the seconds from the last such hold's end to their grant (``alone_requeued_s``, with
    ``alone_requeued_n`` such requests): what handing the GPU from one timed series straight to the next would save
    at most. A hold ends at its role's next gate mark (shared, away, yield) or when its parent lets go of the GPU.
    Reports as for ``held_up_by``.

    Example:
        >>> a = {"timeline_origin": 0.0, "gate": {"mode": "shared"}, "batch": {"gpu": "0"}, "timeline": [
        ...      [1, "run", "gate:alone"], [2, "parent", "gate:run:alone"], [4, "parent", "gate:run:shared"]]}
        >>> b = {"timeline_origin": 0.0, "gate": {"mode": "shared"}, "batch": {"gpu": "0"}, "timeline": [
        ...      [3, "trusted", "gate:alone"], [5.5, "parent", "gate:trusted:alone"]]}
        >>> requeued_waits([a, b])
        {'alone_requeued_s': 1.5, 'alone_requeued_n': 1}
    """
    total, count = 0.0, 0
    for timeline in _gpu_timelines(reports).values():
        holds: list[tuple[float, float, str]] = []
        held: dict[tuple[str, str], float] = {}
        asked: dict[tuple[str, str], float] = {}
        requests: list[tuple[float, float, str]] = []
        for t, key, role, event in timeline:
            if (child := _asked_alone(role, event)) is not None:
                asked[(key, child)] = t
            elif (child := _granted_alone(role, event)) is not None:
                held[(key, child)] = t
                if (start := asked.pop((key, child), None)) is not None:
                    requests.append((start, t, key))
            elif role == "parent" and (event.startswith("gate:") or event in ("gpu-away", *GATE_ENDS)):
                ending = [hold for hold in held if hold[0] == key
                          and (event in ("gpu-away", *GATE_ENDS) or event.split(":")[1] == hold[1])]
                for hold in ending:
                    holds.append((held.pop(hold), t, key))
        for start, granted, key in requests:
            ends = [end for begun, end, other in holds if other != key and begun < granted and start < end <= granted]
            if ends:
                total += granted - max(ends)
                count += 1
    return {"alone_requeued_s": round(total, 3), "alone_requeued_n": count}


def _gpu_timelines(reports: list[dict[str, Any]]) -> dict[str, list[tuple[float, str, str, str]]]:
    """Every shared-mode report's timeline events with a ``timeline_origin``, on the host's clock, by GPU, in time
    order: (seconds, the report's key, role, event). Of ``GATE_ENDS`` only a report's first mark stays: a later one
    is no longer a let-go."""
    events: dict[str, list[tuple[float, str, str, str]]] = {}
    for report in reports:
        if (report.get("gate") or {}).get("mode") != "shared" or report.get("timeline_origin") is None:
            continue
        origin, key = float(report["timeline_origin"]), str(id(report))
        gpu = str((report.get("batch") or {}).get("gpu"))
        timeline = report.get("timeline") or []
        end = gate_end(timeline)
        events.setdefault(gpu, []).extend((origin + float(t), key, str(r), str(e)) for t, r, e in timeline
                                          if not (r == "parent" and e in GATE_ENDS and float(t) != end))
    for timeline in events.values():
        timeline.sort()
    return events


def stopped_record(gpu: str, origin: float | None, marks: Sequence[Sequence[Any]], *, exclusive: bool = False,
                   mode: str = "shared") -> dict[str, Any]:
    """A script the batch stopped, shaped as a report for ``held_up_by``: its parent's marks (seconds since
    ``origin``, name; ``verify.batch.workers.Stopped``) as its timeline, flagged ``stopped``. ``exclusive``: it held
    its GPU alone (a rerun), so it shared nothing; ``mode`` is the batch's gate mode otherwise.

    Example:
        >>> waiting = {"timeline_origin": 100.0, "gate": {"mode": "shared"}, "batch": {"gpu": "0"}, "timeline": [
        ...            [1, "run", "gate:alone"], [11, "parent", "gate:run:alone"]]}
        >>> heavy = stopped_record("0", 95.0, [(5.5, "gate:run:shared"), (15.9, "gate:run:yield")])
        >>> held_up_by([waiting, heavy])["alone_held_up_by"]
        [['stopped:gate:run:shared -> yield', 10.0]]
    """
    return {"timeline_origin": origin, "gate": {"mode": "exclusive" if exclusive else mode}, "batch": {"gpu": gpu},
            "timeline": [[float(t), "parent", str(name)] for t, name in marks], "stopped": True}


def _yielded(role: str, event: str) -> str | None:
    """The child whose parent let go at its yield point with this event (``gate:<role>:yield``), else None."""
    parts = event.split(":")
    return parts[1] if role == "parent" and len(parts) == 3 and parts[0] == "gate" and parts[2] == "yield" else None


def _let_go(role: str, event: str) -> str | None:
    if _yielded(role, event) is not None:
        return LET_GO["yield"]
    if role in ("trusted", "run") and event in ("gate:alone", "gate:away"):
        return LET_GO[event]
    return LET_GO[event] if role == "parent" and event in ("gpu-away", *GATE_ENDS) else None


def _paired_spans(timeline: Sequence[Sequence[Any]], opens: Callable[[str, str], str | None],
                  closes: Callable[[str, str], str | None]) -> list[tuple[str, float, float]]:
    """Each child's stretch from its opening mark to its next closing one, as (child, start, end) in the order they
    close (``opens`` and ``closes`` name the child an event of a role opens or closes, else None); an opening never
    closed gives none."""
    open_at: dict[str, float] = {}
    spans: list[tuple[str, float, float]] = []
    for t, role, event in timeline:
        child = opens(role, event)
        if child is not None:
            open_at[child] = float(t)
            continue
        child = closes(role, event)
        if child is not None and child in open_at:
            spans.append((child, open_at.pop(child), float(t)))
    return spans


def _paired_s(timeline: list[list[Any]], opens: Callable[[str, str], str | None],
              closes: Callable[[str, str], str | None]) -> float:
    """Seconds summed over ``_paired_spans``."""
    return sum(end - start for _, start, end in _paired_spans(timeline, opens, closes))


def _shared_totals(reports: list[dict[str, Any]], total: Callable[[list[list[Any]]], float]) -> list[float]:
    """``total`` of each timeline of a script that shared its GPU's gate (the waits only that mode has)."""
    return [total(r["timeline"]) for r in reports
            if (r.get("gate") or {}).get("mode") == "shared" and r.get("timeline")]


def _mean_and_median(name: str, values: list[float]) -> dict[str, float | None]:
    """``{name}_mean_s`` and ``{name}_median_s`` of ``values``, rounded to the millisecond (None without any)."""
    if not values:
        return {f"{name}_mean_s": None, f"{name}_median_s": None}
    return {f"{name}_mean_s": round(statistics.fmean(values), 3), f"{name}_median_s": round(statistics.median(values), 3)}


def ready_at(timeline: list[list[Any]]) -> float | None:
    """When a verification was ready for its GPU: the later of the trusted child's ``mark:ready`` and the compile step
    before the gate (``compiled-without-gpu`` or ``compile-needs-gpu``); None without both.

    Example:
        >>> ready_at([[0.8, "trusted", "mark:ready"], [1.0, "parent", "compiled-without-gpu"]]), ready_at([])
        (1.0, None)
    """
    compiled = [t for t in (_at(timeline, "parent", "compiled-without-gpu"),
                            _at(timeline, "parent", "compile-needs-gpu")) if t is not None]
    trusted = _at(timeline, "trusted", "mark:ready")
    return None if not compiled or trusted is None else max(compiled[0], trusted)


def seat_times(reports: list[dict[str, Any]]) -> dict[str, float | None]:
    """Medians, in seconds, of when a kernel was ready for the GPU, how long it then waited for its seat, and how
    long it held the seat, over the reports of scripts behind a batch's gate.

    Ready is the later of the trusted child's ``mark:ready`` and the compile step before the gate
    (``compiled-without-gpu`` or ``compile-needs-gpu``), from the start of the verification (the timeline's
    origin). The wait runs from there to ``gpu-gate``, and the hold from ``gpu-gate`` to ``gate_end`` (the run
    child's processes gone; before harness 1.32 its outputs collected too), after which the script judges.

    Example:
        >>> timeline = [[0.8, "trusted", "mark:ready"], [1.0, "parent", "compiled-without-gpu"],
        ...             [4.0, "parent", "gpu-gate"], [16.0, "parent", "run-collected"]]
        >>> seat_times([{"timeline": timeline}, {"timeline": []}])
        {'ready_median_s': 1.0, 'seat_wait_median_s': 3.0, 'seat_hold_median_s': 12.0}
    """
    ready, waits, holds = [], [], []
    for report in reports:
        timeline = report.get("timeline") or []
        gate, collected, at = _at(timeline, "parent", "gpu-gate"), gate_end(timeline), ready_at(timeline)
        if gate is None or at is None:
            continue
        ready.append(at)
        waits.append(max(0.0, gate - ready[-1]))
        if collected is not None:
            holds.append(collected - gate)
    return {"ready_median_s": _median(ready), "seat_wait_median_s": _median(waits),
            "seat_hold_median_s": _median(holds)}


def timing_moves(reports: dict[str, dict[str, Any]], against: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How far the same kernels' times moved between two batches, host-bound and device-bound apart.

    For every key with a speedup in both (``speed.speedup_eager``, and the candidate's own ``speed.kernel_ms``),
    the move is ``|a / b - 1|`` in percent; a kernel is host-bound when either report has its GPU busy under
    ``HOST_BOUND_BUSY`` of the timed call. Medians and 90th percentiles.

    Example:
        >>> a = {"k": {"speed": {"speedup_eager": 1.1, "kernel_ms": 2.0, "gpu_busy": 0.9}}}
        >>> b = {"k": {"speed": {"speedup_eager": 1.0, "kernel_ms": 2.0, "gpu_busy": 0.9}}}
        >>> timing_moves(a, b)["device_bound"]
        {'n': 1, 'speedup_median_pct': 10.0, 'speedup_p90_pct': 10.0, 'kernel_ms_median_pct': 0.0, 'kernel_ms_p90_pct': 0.0}
    """
    groups: dict[str, dict[str, list[float]]] = {"host_bound": {"speedup": [], "kernel_ms": []},
                                                  "device_bound": {"speedup": [], "kernel_ms": []}}
    for key, report in reports.items():
        other = against.get(key)
        if other is None:
            continue
        here, there = report.get("speed") or {}, other.get("speed") or {}
        if not (here.get("speedup_eager") and there.get("speedup_eager")):
            continue
        busy = [b for b in (gpu_busy(report), gpu_busy(other)) if b is not None]
        group = groups["host_bound" if busy and min(busy) < HOST_BOUND_BUSY else "device_bound"]
        group["speedup"].append(abs(here["speedup_eager"] / there["speedup_eager"] - 1) * 100)
        if here.get("kernel_ms") and there.get("kernel_ms"):
            group["kernel_ms"].append(abs(here["kernel_ms"] / there["kernel_ms"] - 1) * 100)
    out: dict[str, Any] = {}
    for name, figures in groups.items():
        out[name] = {"n": len(figures["speedup"])}
        for figure, moves in figures.items():
            out[name][f"{figure}_median_pct"] = round(statistics.median(moves), 2) if moves else None
            out[name][f"{figure}_p90_pct"] = (round(statistics.quantiles(moves, n=10, method="inclusive")[-1], 2)
                                              if len(moves) > 1 else (round(moves[0], 2) if moves else None))
    return out


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def cpu_by_process(reports: list[dict[str, Any]]) -> dict[str, float]:
    """Mean CPU seconds a kernel's processes took, by process, over the reports that say (``cpu_s``).

    The parent and its zygote are always known; a child only when it was forked (its zygote waits for it with
    ``wait4``), so a process's mean is over the reports that give it.

    Example:
        >>> cpu_by_process([{"cpu_s": {"parent": 3.0, "zygote": 4.0, "run": 2.0}},
        ...                 {"cpu_s": {"parent": 5.0, "zygote": None, "run": 4.0}}, {}])
        {'parent': 4.0, 'zygote': 4.0, 'run': 3.0}
    """
    seen: dict[str, list[float]] = {}
    for report in reports:
        for process, seconds in (report.get("cpu_s") or {}).items():
            if isinstance(seconds, int | float):
                seen.setdefault(process, []).append(float(seconds))
    return {process: round(statistics.fmean(values), 2) for process, values in seen.items()}


def duration(seconds: float) -> str:
    """``1h02m`` or ``3m05s``."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
