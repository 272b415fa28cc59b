"""A batch pass replayed under another GPU gate policy: what a policy would gain, before a GPU pass tries it.

Each shared-mode report (harness 1.35 and later) holds its children's pieces of shared work (``gate.pieces``), its
windows with the GPU alone and the parent's marks. ``plan_from_report`` turns one report into the kernel's own
work, without any of its waits: the time before it asks for a seat (``ready_s``), then steps of shared work, work
with the GPU alone and work without the GPU (a build), then its judging (``after_s``). ``replay`` runs those plans
through slots, seats and a gate again, event by event, under a policy of ``POLICIES``. Replayed under
``writer-first`` (the gate as it is) a pass should come out as it was measured; the other policies then say what
the same work would have taken under them. Pieces keep their measured lengths: a policy that puts more work beside
other work would slow it, which a replay does not see, so its gains are upper bounds.

Example:
    >>> a = KernelPlan("a", 0.0, 0.0, (Step("shared", 10.0),), 0.0)
    >>> b = KernelPlan("b", 1.0, 1.0, (Step("alone", 1.0),), 0.0)
    >>> replay([a, b], slots=2, seats=2, policy="writer-first").finish_s
    {'a': 10.0, 'b': 11.0}
    >>> replay([a, b], slots=2, seats=2, policy="preempt").finish_s
    {'b': 2.0, 'a': 11.0}
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from verify.batch.stats import _at, gate_end, ready_at, stood_back_s
from verify.harness.gate import GATE_FILLS

STEP_KINDS: tuple[str, ...] = ("shared", "alone", "off")
"""``shared``: untimed GPU work beside others; ``alone``: timed work, the GPU to itself; ``off``: no GPU (a build)."""


@dataclass(frozen=True)
class Policy:
    """A way of sharing one GPU, as data: what ``replay`` does at a yield point and while a timed series waits."""

    name: str
    describe: str
    knows_the_future: bool = False
    """Whether a gate could not decide as this policy does, for want of the lengths of pieces not yet run."""
    preempt: bool = False
    """Sharers stop the moment a timed series waits, and go on where they were after it."""
    fill: str = ""
    """At a yield point while a timed series waits, a sharer goes on with its next piece: ``oracle`` when that
    piece ends before the longest running one; ``guess`` when its last piece was no longer than ``fill_factor`` x
    the time the longest running one has run so far, at most ``GATE_FILLS`` yield points in a row, as the gate."""
    gate: bool = True
    """False: work with the GPU alone shares it like the rest (what the gate costs, not a way to time)."""


POLICIES: dict[str, Policy] = {p.name: p for p in (
    Policy("writer-first", "the gate as it is: at a yield point a sharer stands back while a timed series waits"),
    Policy("fill", "a sharer goes on at a yield point when its next piece ends before the longest running one",
           knows_the_future=True, fill="oracle"),
    Policy("fill-guess", "a sharer goes on at a yield point when its last piece was no longer than fill_factor x "
           "how long the longest running piece has run", fill="guess"),
    Policy("preempt", "sharers stop the moment a timed series waits (no drain)", knows_the_future=True,
           preempt=True),
    Policy("no-gate", "timed work shares the GPU too: the bound with no gate at all", knows_the_future=True,
           gate=False),
)}


ORDERS: dict[str, str] = {
    "as-run": "the order the batch took the kernels in (each report's start)",
    "longest-first": "each kernel's own chain, longest first: an order no batch knows ahead (a bound)",
    "shortest-first": "each kernel's own chain, shortest first",
}
"""The orders ``replay_all`` can take the kernels in (``ordered``)."""


@dataclass(frozen=True)
class Step:
    """One piece of a kernel's work: its kind (``STEP_KINDS``) and seconds."""

    kind: str
    seconds: float


@dataclass(frozen=True)
class KernelPlan:
    """One kernel's own work in a pass, without its waits.

    ``start`` orders the kernels as the batch took them (the system-wide clock); ``ready_s`` runs from its slot taking
    it to its request for a seat; ``after_s`` from its last GPU work to its end.
    """

    key: str
    start: float
    ready_s: float
    steps: tuple[Step, ...]
    after_s: float

    @property
    def chain_s(self) -> float:
        """The kernel's time with nothing to wait for: no pass that holds it can be shorter."""
        return self.ready_s + sum(s.seconds for s in self.steps) + self.after_s


@dataclass
class Replay:
    """What a replay found: when each kernel finished, and ``stood_back_s``, how long sharers waited to share again
    (at yield points, and after a build or their own time alone) or stood stopped (``preempt``)."""

    policy: str
    slots: int
    seats: int
    finish_s: dict[str, float] = field(default_factory=dict)
    stood_back_s: float = 0.0

    @property
    def pass_s(self) -> float:
        """From the pass's start to its last kernel's end."""
        return max(self.finish_s.values(), default=0.0)

    @property
    def kernels_per_min(self) -> float:
        """Finished kernels over the pass."""
        return 60.0 * len(self.finish_s) / self.pass_s if self.pass_s else 0.0


def _parent_marks(timeline: Sequence[Sequence[Any]]) -> list[tuple[float, str]]:
    return [(float(t), str(e)) for t, r, e in timeline if r == "parent"]


def _windows(marks: list[tuple[float, str]], role: str, state: str) -> list[tuple[float, float]]:
    """Spans from each ``gate:<role>:<state>`` mark to that role's next gate mark."""
    ours = [(t, e.split(":")[2]) for t, e in marks if e.startswith(f"gate:{role}:")]
    ends = [t for t, _ in ours[1:]] + [t for t, _ in ours[-1:]]
    return [(t, end) for (t, s), end in zip(ours, ends, strict=True) if s == state]


def plan_from_report(key: str, report: dict[str, Any]) -> KernelPlan | None:
    """One report's own work (see the module docstring); None when it holds too little to replay.

    A shared-mode report needs ``gate.pieces`` with each piece's start (harness 1.35); an exclusive one (a
    verification run again with the GPU alone) becomes one step alone from its seat to its run child's end. The
    parent's own let-go between its children (``gpu-away`` to ``gpu-back``, where it reads the references and then
    waits to share again) counts as no work: the timeline does not tell the reading from the wait.

    Example:
        >>> report = {"harness_seconds": 9.0, "timeline_origin": 100.0, "batch": {"seconds": 10.0},
        ...     "gate": {"mode": "exclusive"}, "timeline": [[0.5, "trusted", "mark:ready"],
        ...     [0.5, "parent", "compiled-without-gpu"], [2.0, "parent", "gpu-gate"], [7.0, "parent", "run-gone"]]}
        >>> plan_from_report("k", report)
        KernelPlan(key='k', start=99.0, ready_s=1.5, steps=(Step(kind='alone', seconds=5.0),), after_s=2.0)
    """
    timeline = report.get("timeline") or []
    gate = report.get("gate") or {}
    seated = _at(timeline, "parent", "gpu-gate")
    if seated is None or "harness_seconds" not in report or "timeline_origin" not in report:
        return None
    harness_s = float(report["harness_seconds"])
    before_s = max(0.0, float((report.get("batch") or {}).get("seconds", harness_s)) - harness_s)
    asked = ready_at(timeline)
    asked = seated if asked is None else asked
    gone = gate_end(timeline) or harness_s
    marks = _parent_marks(timeline)
    if gate.get("mode") != "shared":
        steps: list[tuple[float, Step]] = [(seated, Step("alone", max(0.0, gone - seated)))]
    else:
        pieces = gate.get("pieces") or {}
        if not pieces or any(len(p) < 3 for ps in pieces.values() for p in ps):
            return None
        lets_go = [(a, b) for (a, _), (b, _) in zip([m for m in marks if m[1] == "gpu-away"],
                                                    [m for m in marks if m[1] == "gpu-back"], strict=False)]
        steps = []
        for ps in pieces.values():
            for start, seconds, *_ in ps:
                start, seconds = float(start), float(seconds)
                for a, b in lets_go:
                    if start <= a and b <= start + seconds:
                        steps.append((a, Step("off", 0.0)))
                        seconds -= b - a
                steps.append((start, Step("shared", max(0.0, seconds))))
        for role in pieces:
            steps += [(a, Step("alone", b - a)) for a, b in _windows(marks, role, "alone")]
            for a, _ in _windows(marks, role, "away"):
                back = next((float(t) for t, r, e in timeline
                             if r == role and float(t) > a and e in ("gate:shared", "gate:alone")), a)
                steps.append((a, Step("off", back - a)))
    steps.sort(key=lambda s: s[0])
    return KernelPlan(key, float(report["timeline_origin"]) - before_s, before_s + min(asked, seated),
                      tuple(s for _, s in steps), max(0.0, harness_s - gone))


def measured(reports: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, float]:
    """The pass as it ran: ``pass_s`` (first kernel's start to last one's end), ``kernels_per_min``, ``seat_s`` (every
    kernel's time from its seat to its run child's end) and ``stood_back_s`` (every child's time from letting go at a
    yield point to sharing again).

    Example:
        >>> report = {"harness_seconds": 5.0, "timeline_origin": 10.0, "batch": {"seconds": 6.0}, "timeline": [
        ...     [0.5, "parent", "gpu-gate"], [1.0, "parent", "gate:run:yield"], [3.5, "parent", "gate:run:shared"],
        ...     [4.5, "parent", "run-gone"]]}
        >>> measured([("k", report)])
        {'pass_s': 6.0, 'kernels_per_min': 10.0, 'seat_s': 4.0, 'stood_back_s': 2.5}
    """
    spans: list[tuple[float, float]] = []
    stood = seat = 0.0
    for _, report in reports:
        timeline = report.get("timeline") or []
        seated = _at(timeline, "parent", "gpu-gate")
        if seated is not None:
            seat += (gate_end(timeline) or float(report.get("harness_seconds") or 0.0)) - seated
        harness_s = float(report.get("harness_seconds") or 0.0)
        total_s = float((report.get("batch") or {}).get("seconds", harness_s))
        start = float(report.get("timeline_origin") or 0.0) - max(0.0, total_s - harness_s)
        spans.append((start, start + total_s))
        stood += stood_back_s(timeline)
    pass_s = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0
    return {"pass_s": round(pass_s, 3), "kernels_per_min": round(60.0 * len(spans) / pass_s, 3) if pass_s else 0.0,
            "seat_s": round(seat, 3), "stood_back_s": round(stood, 3)}


class _Gate:
    """The replay's state: one GPU's gate, its seats and slots, and every kernel's place in its plan."""

    def __init__(self, plans: Sequence[KernelPlan], slots: int, seats: int, policy: Policy, fill_factor: float):
        self.plans = sorted(plans, key=lambda p: p.start)
        self.policy, self.fill_factor = policy, fill_factor
        self.free_slots, self.free_seats = slots, seats
        self.queue = list(range(len(self.plans)))
        self.events: list[tuple[float, int, str, int, int]] = []
        self.count = 0
        self.step = [0] * len(self.plans)
        self.version = [0] * len(self.plans)
        self.began: dict[int, float] = {}
        self.ends: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.fills = [0] * len(self.plans)
        self.seat_queue: list[int] = []
        self.writers: list[tuple[int, float]] = []
        self.standing: list[tuple[int, float, float]] = []
        self.paused: dict[int, tuple[float, float]] = {}
        self.alone: int | None = None
        self.finish: dict[str, float] = {}
        self.stood = 0.0

    def push(self, at: float, what: str, i: int) -> None:
        self.count += 1
        heapq.heappush(self.events, (at, self.count, what, i, self.version[i]))

    def start_kernels(self, now: float) -> None:
        while self.free_slots and self.queue:
            i = self.queue.pop(0)
            self.free_slots -= 1
            self.push(now + self.plans[i].ready_s, "seat", i)

    def run(self, i: int, now: float, seconds: float) -> None:
        self.version[i] += 1
        self.began[i], self.ends[i] = now, now + seconds
        self.push(now + seconds, "piece", i)

    def goes_on(self, i: int, now: float, seconds: float) -> bool:
        """At a yield point while a timed series waits: whether this policy lets the sharer's next piece start."""
        if not self.ends:
            return False
        if self.policy.fill == "oracle":
            return now + seconds <= max(self.ends.values())
        if self.policy.fill == "guess":
            last = self.last.get(i)
            return (self.fills[i] < GATE_FILLS and last is not None
                    and last <= self.fill_factor * max(now - b for b in self.began.values()))
        return False

    def advance(self, i: int, now: float) -> None:
        plan = self.plans[i]
        if self.step[i] >= len(plan.steps):
            self.free_seats += 1
            self.push(now + plan.after_s, "done", i)
            while self.free_seats and self.seat_queue:
                self.free_seats -= 1
                self.advance(self.seat_queue.pop(0), now)
            self.settle(now)
            return
        step = plan.steps[self.step[i]]
        self.step[i] += 1
        kind = "shared" if step.kind == "alone" and not self.policy.gate else step.kind
        if kind == "off":
            self.push(now + step.seconds, "off", i)
        elif kind == "alone":
            if self.alone == i:
                self.push(now + step.seconds, "alone", i)
            else:
                self.writers.append((i, step.seconds))
        elif self.alone is None and not self.writers:
            self.fills[i] = 0
            self.run(i, now, step.seconds)
        elif self.alone is None and self.goes_on(i, now, step.seconds):
            self.fills[i] += 1
            self.run(i, now, step.seconds)
        else:
            self.fills[i] = 0
            self.standing.append((i, step.seconds, now))
        self.last[i] = step.seconds if kind == "shared" else self.last.get(i, 0.0)
        self.settle(now)

    def settle(self, now: float) -> None:
        """Grant the GPU alone once no one shares it; share it again once no timed series waits."""
        if self.alone is None and self.writers:
            if self.policy.preempt:
                for j in list(self.ends):
                    self.paused[j] = (self.ends.pop(j) - now, now)
                    self.began.pop(j)
                    self.version[j] += 1
            if not self.ends:
                i, seconds = self.writers.pop(0)
                self.alone = i
                self.push(now + seconds, "alone", i)
        if self.alone is None and not self.writers:
            for j, (left, since) in list(self.paused.items()):
                del self.paused[j]
                self.stood += now - since
                self.run(j, now, left)
            for j, seconds, since in self.standing:
                self.stood += now - since
                self.run(j, now, seconds)
            self.standing.clear()

    def replay(self) -> dict[str, float]:
        self.start_kernels(0.0)
        while self.events:
            now, _, what, i, version = heapq.heappop(self.events)
            if what == "seat":
                if self.free_seats:
                    self.free_seats -= 1
                    self.advance(i, now)
                else:
                    self.seat_queue.append(i)
            elif what == "piece":
                if version == self.version[i]:
                    self.ends.pop(i)
                    self.began.pop(i)
                    self.advance(i, now)
            elif what == "off":
                self.advance(i, now)
            elif what == "alone":
                plan = self.plans[i]
                if not (self.step[i] < len(plan.steps) and plan.steps[self.step[i]].kind == "alone"):
                    self.alone = None
                self.advance(i, now)
            else:
                self.finish[self.plans[i].key] = round(now, 3)
                self.free_slots += 1
                self.start_kernels(now)
        return self.finish


def replay(plans: Sequence[KernelPlan], *, slots: int, seats: int, policy: str = "writer-first",
           fill_factor: float = 2.0) -> Replay:
    """The pass these plans make through ``slots`` slots, ``seats`` seats and one GPU under ``policy``.

    Kernels take slots in the order they started; a kernel's steps of the GPU alone that follow each other keep it
    (the trusted child's baselines handing over to the run child's trivial series). See the module docstring.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown gate policy {policy!r}; one of {', '.join(POLICIES)}")
    if slots < 1 or seats < 1:
        raise ValueError(f"a replay needs at least one slot and one seat, not {slots} and {seats}")
    gate = _Gate(plans, slots, seats, POLICIES[policy], fill_factor)
    finish = gate.replay()
    return Replay(policy, slots, seats, finish, round(gate.stood, 3))


def ordered(plans: Sequence[KernelPlan], order: str = "as-run") -> list[KernelPlan]:
    """``plans`` renumbered to start in ``order`` (one of ``ORDERS``); ties keep the order they started in.

    Example:
        >>> a, b = KernelPlan("a", 0.0, 1.0, (), 0.0), KernelPlan("b", 1.0, 5.0, (), 0.0)
        >>> [(p.key, p.start) for p in ordered([a, b], "longest-first")]
        [('b', 0.0), ('a', 1.0)]
    """
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; one of {', '.join(ORDERS)}")
    started = sorted(plans, key=lambda p: p.start)
    if order == "as-run":
        return started
    by_chain = sorted(started, key=lambda p: -p.chain_s if order == "longest-first" else p.chain_s)
    return [replace(p, start=float(i)) for i, p in enumerate(by_chain)]


def replay_all(reports: Sequence[tuple[str, dict[str, Any]]], *, slots: int, seats: int,
               policies: Sequence[str] = tuple(POLICIES), fill_factor: float = 2.0,
               order: str = "as-run") -> dict[str, Any]:
    """One GPU's pass replayed under each of ``policies``, its kernels taken in ``order`` (``ORDERS``): ``{"replays":
    {policy: Replay}, "longest_chain": [key, seconds]}``, or ``{}`` when any report cannot be replayed
    (``plan_from_report``).

    Example:
        >>> report = {"harness_seconds": 3.0, "timeline_origin": 10.0, "batch": {"seconds": 3.0},
        ...     "gate": {"mode": "exclusive"}, "timeline": [[1.0, "parent", "gpu-gate"], [2.0, "parent", "run-gone"]]}
        >>> done = replay_all([("k", report)], slots=1, seats=1, policies=["writer-first"])
        >>> done["longest_chain"], done["replays"]["writer-first"].pass_s
        (['k', 3.0], 3.0)
    """
    plans = [plan_from_report(key, report) for key, report in reports]
    whole = [p for p in plans if p is not None]
    if not whole or len(whole) < len(plans):
        return {}
    whole = ordered(whole, order)
    longest = max(whole, key=lambda p: p.chain_s)
    return {"replays": {policy: replay(whole, slots=slots, seats=seats, policy=policy, fill_factor=fill_factor)
                        for policy in policies},
            "longest_chain": [longest.key, round(longest.chain_s, 3)]}
