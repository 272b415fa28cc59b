"""Benchmark of batch verification: kernels per minute cold and warm, where the time goes, and two checks.

Targets (issue 13), one H100 machine, CUDA-L1 H100 kernels: >= 20 kernels/min with a cold build cache,
>= 120/min warm; the same honest kernel verified alone and inside the batch gets the same verdict and a
kernel time within 3% (``alone_candidate`` picks it: a device-bound kernel, ``passed`` if one is, else a correct
one; it is verified alone ``--alone-repeats`` times, and the GPU's own time per call is compared too); a batch
killed at a random point and restarted verifies every kernel exactly once.
With ``--scaling`` (a machine with several GPUs) the kernels of the cold pass are verified again on the first GPU
alone for a quarter of the budget (``--scaling-budget-s``), then the ones it finished on every GPU: ``scaling.ratio``
compares the two rates over the same kernels (None if the second pass did not finish them all), each from its pass's
start; ``scaling.span_ratio`` the same from each pass's first kernel start to its last finish (no pool set-up), and
``scaling.steady_ratio`` between each pass's fill and drain (``steady_rate`` with that pass's slots): with a few waves
of kernels a pass, the fill and the drain weigh as much as the GPUs, so only the steady rates compare the GPUs.
``--scaling-repeat N`` puts each kernel N times into both scaling passes (keys ``KEY#2`` .. ``KEY#N`` beside ``KEY``;
their builds are the cold pass's), so a short cold pass still gives the scaling passes several waves. A batch keeps
its task baselines per GPU, so each pass times a task's once on every GPU it runs on: the two-GPU pass does up to
twice the one-GPU pass's baseline timing, a share that shrinks as N grows.
``--slots-per-gpu`` and ``--gpu-seats`` set how many eval scripts run per GPU and how many of them hold its gate
at once (``slots_per_gpu``, ``gpu_seats``). ``kernels_per_min_cold_steady`` and ``kernels_per_min_warm_steady``
count from the finish that ends every slot's first kernel (slots x GPUs) to the last finish: the rate between a
long batch's fill and drain (``steady_rate``).
``--gate-mode`` picks how verifications share a GPU (``verify.harness.gate``); ``gate_held_share_cold`` is the
share of the cold pass a GPU's gate was held at all, ``gpu_alone_share_cold`` held alone (timed work, or the
whole hold in the exclusive mode), and ``alone_waited_share_cold`` waited for alone while no one held it so (the GPU
running only the untimed pieces the gate waited for to end), averaged over the GPUs
(``verify.batch.stats.gpu_occupancy``).
``--heavy first`` or ``--heavy last`` verifies the heavy kernels (``verify.batch.weight``) before or after the light
ones (``heavy_policy`` says which policy ran; ``heavy_finished_cold`` lists the heavy kernels the cold pass finished).
``finish_s_cold``: seconds from the cold pass's first start until half, three quarters, 90% and all of its finished
kernels had finished (``finish_times``): how soon the results came, which a rate counted to the last finish hides.
``alone_wait_mean_s_cold`` and ``alone_wait_median_s_cold``: how long a kernel waited in all for the GPU alone
(``verify.batch.stats.alone_waits``), and ``give_way_wait_mean_s_cold`` and ``give_way_wait_median_s_cold``: how long its
children stood back, in all, for other kernels' timed work (``verify.batch.stats.give_way_waits``);
``stood_back_n_cold`` and ``went_on_n_cold``: how often a child at a yield point stood back for a waiting timed series,
and how often it went on beside a longer piece on another seat instead (harness 1.37, ``KA_GPU_FILL``;
``verify.batch.stats.yield_answers``). ``alone_wait_total_s_cold``
and ``alone_held_up_by_cold``: those waits for the GPU alone in all, and the five pieces of other kernels' work they
waited on longest, with their seconds (``verify.batch.stats.held_up_by``), and ``alone_held_up_by_piece_cold`` the
same waits put down to the piece of work that ended where its holder let go (its report's ``gate.pieces``);
``alone_requeued_s_cold`` and
``alone_requeued_n_cold``: the part of those waits that came after another kernel's alone time had ended, and how many
waits had one (``verify.batch.stats.requeued_waits``: what handing the GPU from one timed series straight to the next
would save at most); ``held_pieces_cold``: the pieces of work under a shared gate (between two of a child's requests)
that added up longest over the cold pass, as ``[child:name, seconds in all, how many, the longest]``
(``verify.batch.stats.held_pieces``, from each report's ``gate.pieces``); ``alone_wait_by_grant_s_cold``: those waits in all by the kind of request, the trusted child's,
the run child's before the candidate's import (its trivial kernel's series) and after it (the timed series)
(``verify.batch.stats.alone_waits_by_grant``). ``ready_median_s_cold``, ``seat_wait_median_s_cold`` and
``seat_hold_median_s_cold``: when a kernel was ready for the GPU, how long it then waited for a seat and how long it
held one (``verify.batch.stats.seat_times``). ``replay_cold``: on one GPU, the cold pass's kernels per minute replayed
under each GPU gate policy from its reports (``verify.batch.replay``, ``bench/gate_replay.py``: ``writer-first`` is the
gate as it is, ``no-gate`` the bound without one), and ``longest_chain_cold`` the kernel whose own work, with nothing
to wait for, was longest, with its seconds (None for both on several GPUs, or when a report cannot be replayed;
``replay_error_cold`` then says why, if a report could not be read).
``pass_start_s_cold`` and ``pass_end_s_cold``: the cold pass's seconds
before its first script started and after its last report (``Recorder.ends``). ``host_cpu_s_per_kernel_cold``: the host CPU seconds (user and system, every
process of the pass: builds, scripts, children) per kernel finished, and ``cpu_s_by_process_cold`` the mean of each
of a kernel's processes (``verify.batch.stats.cpu_by_process``); ``ccache_cold`` what ccache did for the cold pass's
builds (hits on the command and on the preprocessed source, misses, calls it could not cache; None without ccache:
``BuildCache.ccache_stats``; the bench's build cache, and so its ccache folder, starts empty unless ``--build-cache``
names one); ``--no-zygote`` starts each verification's
children by exec instead of forking them from one zygote (``zygote`` says which), and ``--no-slot-zygote`` forks them
from a zygote of each script's own instead of its batch slot's (``slot_zygote``; ``verify.batch.zygotes``);
``--no-slot-seed`` starts each slot's zygote on its own instead of forking it from the batch's seed (``slot_seed``),
and ``--no-fork-parents`` starts each script's parent as ``python script.py`` instead of forking it from its slot's
zygote (``fork_parents``; ``parents_forked_cold`` counts the cold pass's reports whose parent was forked).
``memory_cold`` says what the host's memory did to the cold pass (``memory_plans``: reservations in the batch's
ledger, seconds waiting for room, kernels judged on fewer trials than planned).
``--against REPORTS.jsonl`` (another run's ``reports-cold.jsonl``) adds ``timing_moves_cold``: how far the same
kernels' speedups and kernel times moved between that run and this cold pass, host-bound and device-bound apart
(``verify.batch.stats.timing_moves``).

    python tests/gpu/copy_gpu_data.py                       # once, where ../shared/data exists
    python bench/verify_batch.py --limit 8 --budget-s 200 --json

Runs without DuckDB and without rich: jobs come straight from the CUDA-L1 release file
(``.gpu_data/cuda-l1-h100-all.jsonl``, else ``../shared/data/cuda-l1/h100.jsonl``) and every report is
appended to ``OUT/reports-*.jsonl`` (``$OUT`` when set, else bench/out/verify_batch), with the sha256 of
the kernel's code, so ``kernel-archive verify-import OUT/reports-cold.jsonl --source cuda-l1`` can store
them as ``verifications`` rows of the matching archive kernels later.

The kernels are a seeded random sample of the file's kernels with code (``--all``: every one);
``--budget-s`` bounds the whole run: the cold pass gets half of it, the warm pass a quarter (no kernel
starts after its pass's share; those finished count), the checks the rest (the alone check verifies its kernel
once, and again only while that rest allows); with ``--no-warm`` the cold
pass gets 85%; ``--scaling`` adds two passes of a quarter each (``--scaling-budget-s`` each, when given). A kernel started before its pass's share ran out finishes, however long it takes, unless
``--grace-s`` is given: the kernels still running that long after the share are stopped, unreported.
The warm pass verifies again only the kernels the cold pass finished, with their builds cached: a kernel the
cold pass stopped (``stopped_keys_cold``, most often the sample's heaviest) is in the cold rate's time but in neither
pass's count, so the two rates are over different kernels whenever the cold pass stopped one (session 42).

A whole release does not fit one device call, so a run can go on in the next one: ``--resume`` keeps
``OUT/reports-cold.jsonl`` and verifies only the kernels it does not hold yet, and ``--build-cache DIR``
(default: a fresh temporary folder, so the first pass is cold) keeps the builds between calls. The kernels
``--grace-s`` stops are appended to ``OUT/stopped-cold.jsonl``, and a ``--resume`` pass verifies those first, each
holding its GPU alone: heavy kernels that share a GPU can all finish late, and in session 30 a pass of 39 level 3 kernels
on one H200 finished none before its limit (``stopped_cold``, ``exclusive_cold`` and ``exclusive_finished_cold``
count the pass's stopped kernels, those it verified alone, and those of them it finished). This is how
the CUDA-L1 H100 reproduction runs on a machine without the archive::

    python bench/verify_batch.py --all --resume --no-warm --out .device/l1 --build-cache .device/l1-builds \
        --budget-s 540 --kill-kernels 0 --no-alone

``--ray ADDRESS`` (or ``local``) runs the passes on a Ray cluster instead of this machine's processes.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify.batch.build_cache import BuildCache, detect_toolchain  # noqa: E402
from verify.batch.replay import replay_all  # noqa: E402
from verify.batch.stats import (  # noqa: E402
    BatchStats,
    alone_waits,
    alone_waits_by_grant,
    cpu_by_process,
    give_way_waits,
    gpu_occupancy,
    held_pieces,
    held_up_by,
    requeued_waits,
    seat_times,
    stopped_record,
    timing_moves,
    yield_answers,
)
from verify.batch.weight import BATCH_HEAVY, HEAVY_POLICIES, HEAVY_SEATS  # noqa: E402
from verify.batch.weight import policy as heavy_policy  # noqa: E402
from verify.batch.workers import BATCH_GATE_MODE, Stopped, default_slots, gpu_seats, parse_gpus  # noqa: E402
from verify.batch.zygotes import (  # noqa: E402
    FORK_PARENTS_ENV,
    SEED_ENV,
    SLOT_ZYGOTE_ENV,
    parent_forks_enabled,
    seeds_enabled,
    slot_zygotes_enabled,
)
from verify.harness.gate import GATE_MODES  # noqa: E402
from verify.harness.zygote import ZYGOTE_ENV, zygote_enabled  # noqa: E402
from verify.pipeline import VerifyJob, verify_jobs  # noqa: E402
from verify.runner import VerifyOptions  # noqa: E402

DATA_FILES = (REPO / ".gpu_data" / "cuda-l1-h100-all.jsonl", REPO.parent / "shared" / "data" / "cuda-l1" / "h100.jsonl")
NO_CODE = {None, "", "None"}


def load_jobs(path: Path, limit: int | None, seed: int, only: set[str] | None = None) -> list[VerifyJob]:
    """CUDA-L1 records with code as jobs (key ``L<level>-T<task>``), a seeded sample of ``limit`` (of ``only``)."""
    jobs = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("custom_code") in NO_CODE or row.get("ref_code") in NO_CODE:
            continue
        key = f"L{row['level_id']}-T{row['task_id']}"
        jobs.append(VerifyJob(key=key, task_code=row["ref_code"], kernel_code=row["custom_code"], form="model-new",
                              meta={"kernel_id": key, "kernel_name": key, "source": "cuda-l1",
                                    "level": row["level_id"], "claimed_speedup": row.get("score_default")},
                              task_key=f"L{row['level_id']}-T{row['task_id']}"))
    if only is not None:
        unknown = only - {j.key for j in jobs}
        if unknown:
            raise SystemExit(f"--only names kernels {path} does not hold (with code): {', '.join(sorted(unknown))}")
        jobs = [j for j in jobs if j.key in only]
    if limit is not None and limit < len(jobs):
        jobs = sorted(random.Random(seed).sample(jobs, limit), key=lambda j: j.key)
    return jobs


class Recorder:
    """Appends each report to a JSON Lines file and counts it (statuses, phases, throughput)."""

    def __init__(self, path: Path, total: int) -> None:
        self.path = path
        if path.is_file() and not path.read_bytes().endswith(b"\n") and path.stat().st_size:
            with path.open("a") as out:  # a line cut short by a kill stays its own (ignored) line
                out.write("\n")
        self.stats = BatchStats(total=total)
        self.reports: dict[str, dict[str, Any]] = {}
        self.cpu_s = 0.0
        self.exclusive: set[str] = set()
        self.stopped: list[Stopped] = []
        self.arrivals: list[tuple[float, float]] = []
        """(when each report arrived, ``time.monotonic()``; its script's seconds in its slot, ``batch.seconds``)."""

    def ends(self) -> dict[str, float | None]:
        """Seconds from the pass's start to its first script's start (``start_s``: the toolchain, the plan, the
        pool), and from its last report to the pass's end (``end_s``); None before any report.

        Example:
            >>> recorder = Recorder(Path("/nonexistent/r.jsonl"), 1)
            >>> recorder.stats.started, recorder.stats.finished_at = 0.0, 50.0
            >>> recorder.arrivals = [(30.0, 26.0), (45.0, 20.0)]
            >>> recorder.ends()
            {'start_s': 4.0, 'end_s': 5.0}
        """
        if not self.arrivals:
            return {"start_s": None, "end_s": None}
        end = self.stats.finished_at if self.stats.finished_at is not None else time.monotonic()
        return {"start_s": round(min(at - s for at, s in self.arrivals) - self.stats.started, 2),
                "end_s": round(end - max(at for at, _ in self.arrivals), 2)}

    def stopped_records(self, mode: str) -> list[dict[str, Any]]:
        """The pass's stopped scripts, shaped as reports for ``held_up_by`` (``verify.batch.stats.stopped_record``;
        ``mode``: the batch's gate mode): a wait that ended on one is then put down to it, not to the last reported
        verification that let go.

        Example:
            >>> from verify.jobs import VerifyJob
            >>> recorder = Recorder(Path("/nonexistent/r.jsonl"), 1)
            >>> job = VerifyJob(key="L2-T34", task_code="t", kernel_code="k", form="model-new")
            >>> recorder.stopped = [Stopped(job, "0", 266.3, marks=((80.4, "gpu-gate"),), origin=1000.0)]
            >>> [(r["timeline_origin"], r["timeline"], r["stopped"]) for r in recorder.stopped_records("shared")]
            [(1000.0, [[80.4, 'parent', 'gpu-gate']], True)]
        """
        return [stopped_record(item.gpu, item.origin, item.marks, exclusive=item.exclusive, mode=mode)
                for item in self.stopped if item.origin is not None]

    def __call__(self, job: VerifyJob, report: dict[str, Any]) -> None:
        with self.path.open("a") as out:
            out.write(json.dumps({"key": job.key, "meta": job.meta, "source": job.meta.get("source"),
                                  "code_sha256": hashlib.sha256(job.kernel_code.encode()).hexdigest(),
                                  "report": report}, default=str) + "\n")
        self.reports[job.key] = report
        self.arrivals.append((time.monotonic(), float((report.get("batch") or {}).get("seconds") or 0.0)))
        build = (report.get("batch") or {}).get("build") or {}
        self.stats.record(report, build_state=build.get("state"),
                          prebuild_s=build.get("seconds", 0.0) if build.get("state") == "built" else 0.0)
        print(f"  {job.key:<10} {report.get('status', 'error'):<8} {self.stats.line()}", file=sys.stderr, flush=True)


def stopped_keys(path: Path) -> set[str]:
    """Keys an earlier pass's hard limit stopped, from its ``stopped-NAME.jsonl`` (none when there is no file)."""
    return {row["key"] for row in json_rows(path)} if path.is_file() else set()


def read_reports(path: Path) -> dict[str, dict[str, Any]]:
    """Each key's report in a JSON Lines file the bench wrote (a line cut short by a kill is ignored)."""
    return {row["key"]: row["report"] for row in json_rows(path) if "report" in row}


def json_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON Lines file the bench wrote that hold a ``key`` (a line cut short by a kill is ignored)."""
    rows = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict) and isinstance(row.get("key"), str):
                rows.append(row)
    return rows


def run_pass(name: str, jobs: list[VerifyJob], options: VerifyOptions, out: Path, *, gpus: str | None,
             compile_workers: int | None, cache: Path, budget_s: float, resume: bool = False,
             ray: str | None = None, grace_s: float | None = None, slots_per_gpu: int | None = None,
             retry_errors: bool = False) -> Recorder:
    """One batch over ``jobs`` into ``out/reports-NAME.jsonl`` (with ``resume``, only those it does not hold, and
    with ``retry_errors`` also those whose last report there is an ``error``: readers take a key's last report).

    The kernels ``grace_s`` stops are appended to ``out/stopped-NAME.jsonl``; a resumed pass verifies those first,
    each with the GPU alone (``verify_jobs(exclusive=...)``).
    """
    path = out / f"reports-{name}.jsonl"
    stopped_path = out / f"stopped-{name}.jsonl"
    stored = read_reports(path) if resume and path.is_file() else {}
    done = {key for key, report in stored.items() if not (retry_errors and report.get("status") == "error")}
    if not resume:
        path.unlink(missing_ok=True)
        stopped_path.unlink(missing_ok=True)
    todo = [j for j in jobs if j.key not in done]
    exclusive = stopped_keys(stopped_path) & {j.key for j in todo}
    retried = sum(1 for j in todo if j.key in stored)
    print(f"{name}: {len(todo)} kernels ({len(jobs) - len(todo)} stored before"
          + (f"; {retried} with an error report, verified again" if retried else "")
          + (f"; {len(exclusive)} stopped before, verified first and alone" if exclusive else "")
          + f"), budget {budget_s:.0f}s", file=sys.stderr, flush=True)
    recorder = Recorder(path, len(todo))
    recorder.exclusive = exclusive

    def stopped(item: Stopped) -> None:
        recorder.stopped.append(item)
        with stopped_path.open("a") as out_file:
            out_file.write(json.dumps({"key": item.job.key, "gpu": item.gpu, "seconds": round(item.seconds, 1),
                                       "exclusive": item.exclusive, "origin": item.origin, "marks": item.marks}) + "\n")
        last = f", its last mark {item.marks[-1][1]} at {item.marks[-1][0]:.0f}s" if item.marks else ""
        print(f"  {item.job.key:<10} stopped at the limit after {item.seconds:.0f}s"
              + (" alone on its GPU" if item.exclusive else "") + last, file=sys.stderr, flush=True)

    before = host_cpu_s()
    verify_jobs(todo, options, recorder, force=True, gpus=gpus, compile_workers=compile_workers,
                slots_per_gpu=slots_per_gpu, build_cache=cache, time_budget_s=budget_s,
                stop_after_s=None if grace_s is None else budget_s + grace_s, ray=ray, exclusive=exclusive,
                on_stopped=stopped, log=lambda line: print(f"{name}: {line}", file=sys.stderr, flush=True))
    recorder.stats.finished_at = time.monotonic()
    recorder.cpu_s = host_cpu_s() - before
    return recorder


def host_cpu_s() -> float:
    """CPU seconds (user and system) of this process and of every process it and its own have waited for.

    A local batch waits for each eval script, and each script for its children (or its zygote, which waits for
    its forked children), so a pass's difference is all the host CPU its verifications and builds used.
    """
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def scaling(args: argparse.Namespace, finished: list[VerifyJob], options: VerifyOptions, cache: Path) -> dict[str, Any]:
    """GPU-bound throughput on the first GPU alone, then on every GPU over exactly the kernels the first
    finished (builds cached by the earlier passes), so both rates are of the same kernels."""
    gpus = parse_gpus(args.gpus)
    budget_s = args.scaling_budget_s if args.scaling_budget_s is not None else args.budget_s * 0.25
    jobs = repeated(finished, args.scaling_repeat)
    one = run_pass("scaling-1gpu", jobs, options, args.out, gpus=gpus[0], compile_workers=1, cache=cache,
                   budget_s=budget_s, grace_s=args.grace_s, slots_per_gpu=args.slots_per_gpu)
    same = [j for j in jobs if j.key in one.reports]
    every = run_pass("scaling-all", same, options, args.out, gpus=",".join(gpus), compile_workers=args.compile_workers,
                     cache=cache, budget_s=budget_s, grace_s=args.grace_s, slots_per_gpu=args.slots_per_gpu)
    per_min_1 = one.stats.per_minute(one.stats.finished_at)
    per_min_all = every.stats.per_minute(every.stats.finished_at)
    complete = every.stats.done == len(same)
    span_1 = span_s([one.reports[j.key] for j in same])
    span_all = span_s(list(every.reports.values()))
    steady_1 = steady_rate([one.reports[j.key] for j in same], args.slots_per_gpu or default_slots(1))
    steady_all = steady_rate(list(every.reports.values()), len(gpus) * (args.slots_per_gpu or default_slots(len(gpus))))
    return {"gpus": len(gpus), "kernels": len(same), "kernels_all": every.stats.done,
            "per_min_1": round(per_min_1, 3), "per_min_all": round(per_min_all, 3),
            "ratio": round(per_min_all / per_min_1, 3) if per_min_1 and complete else None,
            "span_s_1": span_1, "span_s_all": span_all,
            "span_ratio": round(span_1 / span_all, 3) if span_1 and span_all and complete else None,
            "steady_1": steady_1, "steady_all": steady_all,
            "steady_ratio": round(steady_all / steady_1, 3) if steady_1 and steady_all and complete else None}


def repeated(jobs: list[VerifyJob], times: int) -> list[VerifyJob]:
    """Each job ``times`` times, the copies keyed ``KEY#2`` .. ``KEY#times``, round by round (all of round one first).

    Example:
        >>> [j.key for j in repeated([VerifyJob("A", "t", "k", "model-new"), VerifyJob("B", "t", "k", "model-new")], 2)]
        ['A', 'B', 'A#2', 'B#2']
    """
    return [job if i == 1 else dataclasses.replace(job, key=f"{job.key}#{i}")
            for i in range(1, times + 1) for job in jobs]


def _stamps(reports: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    """Each report's start and finish (its own clock, to the second), for the reports that have both."""
    import datetime as dt

    return [(dt.datetime.fromisoformat(r["started_at"]), dt.datetime.fromisoformat(r["finished_at"]))
            for r in reports if r.get("started_at") and r.get("finished_at")]


def span_s(reports: list[dict[str, Any]]) -> float | None:
    """Seconds from the first report's start to the last one's finish (their own clocks, to the second):
    the pass's rate without its set-up before the first kernel starts."""
    stamps = _stamps(reports)
    if not stamps:
        return None
    return (max(end for _, end in stamps) - min(start for start, _ in stamps)).total_seconds()


def span_rate(reports: list[dict[str, Any]]) -> float | None:
    """Kernels a minute from the first report's start to the last one's finish (``span_s``): the pass's rate
    without the pool's start and without the kernels still running when its budget ended (stopped, unreported).

    Example:
        >>> span_rate([{"started_at": "2026-11-28T04:00:00+00:00", "finished_at": "2026-11-28T04:00:30+00:00"},
        ...            {"started_at": "2026-11-28T04:00:10+00:00", "finished_at": "2026-11-28T04:01:00+00:00"}])
        2.0
    """
    span = span_s(reports)
    return round(60.0 * len(reports) / span, 3) if span else None


def finish_times(reports: list[dict[str, Any]], shares: tuple[float, ...] = (0.5, 0.75, 0.9, 1.0)) -> dict[str, float]:
    """Seconds from the first report's start until each share of the reports had finished (their own clocks, to
    the second): how soon a pass's results came, which its rate, counted to the last finish, does not say.

    Example:
        >>> stamps = [("04:00:00", "04:00:30"), ("04:00:00", "04:00:40"), ("04:00:10", "04:02:00")]
        >>> finish_times([{"started_at": f"2026-11-28T{a}+00:00", "finished_at": f"2026-11-28T{b}+00:00"}
        ...               for a, b in stamps], (0.5, 1.0))
        {'50%': 40.0, '100%': 120.0}
    """
    import math

    stamps = _stamps(reports)
    if not stamps:
        return {}
    first = min(start for start, _ in stamps)
    ends = sorted((end - first).total_seconds() for _, end in stamps)
    return {f"{share:.0%}": ends[max(1, math.ceil(share * len(ends))) - 1] for share in shares}


def steady_rate(reports: list[dict[str, Any]], slots: int) -> float | None:
    """Kernels a minute from the ``slots``-th finish to the last one: the pass once every slot has finished its first
    kernel (whose zygote's start, 11-15 s on the H200, no later kernel of that slot pays), so what a release of
    thousands of kernels would run at between its fill and its drain. None with fewer than two kernels after it.

    Example:
        >>> finishes = [f"2026-11-28T04:00:{s:02d}+00:00" for s in (10, 20, 30, 40, 50)]
        >>> steady_rate([{"finished_at": f} for f in finishes], 2)  # three kernels from 0:20 to 0:50
        6.0
    """
    import datetime as dt

    ends = sorted(dt.datetime.fromisoformat(r["finished_at"]) for r in reports if r.get("finished_at"))
    if slots < 1 or len(ends) < slots + 2:
        return None
    seconds = (ends[-1] - ends[slots - 1]).total_seconds()
    return round(60.0 * (len(ends) - slots) / seconds, 3) if seconds > 0 else None


def replay_keys(reports: dict[str, dict[str, Any]], slots: int, seats: int) -> dict[str, Any]:
    """``replay_cold`` (policy -> kernels/min of the cold pass replayed under it, ``verify.batch.replay``) and
    ``longest_chain_cold`` (``[kernel, seconds]``), or None for both when a report cannot be replayed; a report the
    replay cannot read costs the pass's figures nothing but these two (``replay_error_cold`` says why)."""
    try:
        done = replay_all(list(reports.items()), slots=slots, seats=seats or slots)
    except (KeyError, IndexError, TypeError, ValueError) as error:
        return {"replay_cold": None, "longest_chain_cold": None, "replay_error_cold": f"{type(error).__name__}: {error}"}
    return {"replay_cold": {policy: round(run.kernels_per_min, 3) for policy, run in done["replays"].items()}
            if done else None, "longest_chain_cold": done.get("longest_chain")}


def memory_plans(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the host's memory did to a pass (``verify.harness.memory``): how many verifications reserved memory in the
    batch's ledger, their seconds waiting for room in all, and each kernel judged on fewer trials than planned, as
    ``judged/planned``.

    Example:
        >>> memory_plans({"a": {"memory": {"reserved_bytes": 9, "waited_s": 1.5}, "trials_reduced": {"planned": 5,
        ...               "judged": 1}}, "b": {"status": "passed"}})
        {'reserved': 1, 'waited_s': 1.5, 'reduced': {'a': '1/5'}}
    """
    held = [r["memory"] for r in reports.values() if r.get("memory")]
    return {"reserved": len(held), "waited_s": round(sum(m.get("waited_s") or 0.0 for m in held), 3),
            "reduced": {k: f"{r['trials_reduced']['judged']}/{r['trials_reduced']['planned']}"
                        for k, r in sorted(reports.items()) if r.get("trials_reduced")}}


def kernel_ms(report: dict[str, Any]) -> float | None:
    """The report's kernel median (ms)."""
    return (report.get("speed") or {}).get("kernel_ms")


ALONE_MIN_MS = 0.1
"""The shortest kernel time the alone-vs-batch check calls device-bound: below it a call's time is mostly launch and
host work, which the batch's other processes load by design (docs/verify-batch.md, "Same verdicts as one kernel
alone")."""

ALONE_MIN_BUSY = 0.9
"""The least share of its timed call the GPU must be busy (``speed.gpu_busy``) for a kernel to count as
device-bound: the rest of the call is the host's, whose speed moves with everything else on the machine."""

ALONE_MAX_S = 60.0
"""Kernels whose verification took longer than this in the batch are picked only when no other qualifies: the check
verifies its kernel ``--alone-repeats`` times."""


def gpu_busy(report: dict[str, Any]) -> float:
    """The share of the report's timed call the GPU was busy (``timing.gpu_busy``; 0 when the report cannot say)."""
    from verify.harness.timing import gpu_busy as busy

    return busy(report) or 0.0


def alone_candidate(jobs: list[VerifyJob], batch: dict[str, dict[str, Any]],
                    max_s: float = ALONE_MAX_S) -> tuple[VerifyJob, str] | None:
    """The kernel the alone-vs-batch check verifies again and why, from the first tier that has one: ``passed``
    and device-bound, correct and device-bound, ``passed``, correct. Device-bound: events, not the host's clock
    (no ``launch-bound`` warning), at least ``ALONE_MIN_MS``, and the GPU busy ``ALONE_MIN_BUSY`` of the call.
    Within a tier: one verified within ``max_s`` (default ``ALONE_MAX_S``) first, then the busiest GPU, then plan
    order. A kernel the batch verified with its GPU alone (``gate.rerun``: stopped by an earlier pass, or killed while
    sharing) is not picked: its batch time was not taken inside the batch. None if no kernel qualifies.

    Example:
        >>> jobs = [VerifyJob(key=k, task_code="", kernel_code="", form="model-new") for k in ("a", "b", "c")]
        >>> ok = {"correctness": {"verdict": "pass"}}
        >>> batch = {"a": {"checks": ok, "speed": {"kernel_ms": 0.04, "host_bound": True}},
        ...          "b": {"checks": ok, "speed": {"kernel_ms": 0.4, "gpu_busy": 0.92}},
        ...          "c": {"checks": ok, "speed": {"kernel_ms": 0.4, "gpu_busy": 0.97}}}
        >>> [(job.key, why) for job, why in [alone_candidate(jobs, batch)]]
        [('c', 'device-bound')]
    """
    def correct(key: str) -> bool:
        return (batch[key].get("checks") or {}).get("correctness", {}).get("verdict") == "pass"

    def passed(key: str) -> bool:
        return batch[key].get("status") == "passed"

    def device_bound(key: str) -> bool:
        speed = batch[key].get("speed") or {}
        launch = (batch[key].get("checks") or {}).get("launch-bound", {}).get("verdict")
        return (not speed.get("host_bound") and launch in (None, "pass")
                and (speed.get("kernel_ms") or 0) >= ALONE_MIN_MS and gpu_busy(batch[key]) >= ALONE_MIN_BUSY)

    done = [j for j in jobs if j.key in batch and not (batch[j.key].get("gate") or {}).get("rerun")]
    order = {j.key: i for i, j in enumerate(done)}
    for why, pick in (("passed, device-bound", lambda k: passed(k) and device_bound(k)),
                      ("device-bound", lambda k: correct(k) and device_bound(k)),
                      ("passed", passed),
                      ("correct, host- or launch-bound", correct)):
        tier = [j for j in done if pick(j.key)]
        if tier:
            return min(tier, key=lambda j: ((batch[j.key].get("harness_seconds") or 0) > max_s,
                                            -gpu_busy(batch[j.key]), order[j.key])), why
    return None


def _spread(values: list[float]) -> float | None:
    return max(values) / min(values) - 1 if values and min(values) > 0 else None


def _diff(a: float | None, b: float | None) -> float | None:
    return abs(a - b) / b if a and b else None


def alone_vs_batch(jobs: list[VerifyJob], batch: dict[str, dict[str, Any]], options: VerifyOptions,
                   cache: Path, out: Path, repeats: int = 3, budget_s: float | None = None) -> dict[str, Any]:
    """Verify ``alone_candidate`` again on its own ``repeats`` times, on the GPU it had in the batch (the reports in
    ``out/reports-alone.jsonl``); compare the verdicts, and the batch's kernel time with the alone runs' median,
    both the event time the archive reports (``timing_diff``, which decides ``ok``) and the GPU's own time
    (``device_diff``). ``alone_spread`` is how far the alone runs are apart from each other.

    With ``budget_s`` the kernel is picked among those whose batch verification fits ``repeats`` times in it where
    one does, and a run is not started when the last one would not fit in what is left: ``repeats_done`` says how
    many ran (always at least one).
    """
    import statistics

    from verify.harness.timing import report_device_ms
    from verify.runner import verify_code

    started = time.monotonic()
    candidate = alone_candidate(jobs, batch, ALONE_MAX_S if budget_s is None else min(ALONE_MAX_S, budget_s / repeats))
    if candidate is None:
        return {"kernel": None, "note": "no kernel of the batch passed correctness"}
    job, why = candidate
    build_cache = BuildCache(cache, detect_toolchain(options.python))
    gpu = (batch[job.key].get("batch") or {}).get("gpu")
    env = build_cache.environment() | ({"CUDA_VISIBLE_DEVICES": str(gpu)} if gpu is not None else {})
    (out / "reports-alone.jsonl").unlink(missing_ok=True)
    recorder = Recorder(out / "reports-alone.jsonl", repeats)
    last_s = 0.0
    for _ in range(repeats):
        if budget_s is not None and last_s and time.monotonic() - started + last_s > budget_s:
            break
        run_start = time.monotonic()
        recorder(job, verify_code(job.task_code, job.kernel_code, job.form, options, meta=job.meta,
                                  build_dir=build_cache.entry(job), env=env))
        last_s = time.monotonic() - run_start
    runs = [json.loads(line)["report"] for line in recorder.path.read_text().splitlines()]

    def verdicts(report: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        return report.get("status"), {n: c["verdict"] for n, c in (report.get("checks") or {}).items()}

    alone_ms = [m for m in map(kernel_ms, runs) if m]
    alone_gpu = [m for m in map(report_device_ms, runs) if m]
    a = statistics.median(alone_ms) if alone_ms else None
    b = kernel_ms(batch[job.key])
    gpu_a, gpu_b = statistics.median(alone_gpu) if alone_gpu else None, report_device_ms(batch[job.key])
    same_status = all(r.get("status") == batch[job.key].get("status") for r in runs)
    diff = _diff(a, b)
    return {"kernel": job.key, "picked": why, "gpu": gpu, "gpu_busy_batch": round(gpu_busy(batch[job.key]), 3),
            "repeats": repeats, "repeats_done": len(runs), "status_alone": sorted({str(r.get("status")) for r in runs}),
            "status_batch": batch[job.key].get("status"),
            "kernel_ms_alone": a, "kernel_ms_alone_runs": alone_ms, "kernel_ms_batch": b, "timing_diff": diff,
            "alone_spread": _spread(alone_ms),
            "device_ms_alone": gpu_a, "device_ms_batch": gpu_b, "device_diff": _diff(gpu_a, gpu_b),
            "same_verdict": same_status and all(verdicts(r) == verdicts(batch[job.key]) for r in runs),
            "ok": same_status and diff is not None and diff <= 0.03}


def kill_and_restart(args: argparse.Namespace, keys: list[str], out: Path, cache: Path) -> dict[str, Any]:
    """Run a child batch over ``keys``, SIGKILL it at a random point after its first result, restart it."""
    results = out / "reports-kill.jsonl"
    results.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--child", str(results), "--keys", ",".join(keys), "--jsonl", str(args.jsonl),
               "--build-cache", str(cache), "--device", args.device, "--trials", str(args.trials),
               "--target-seconds", str(args.target_seconds), *(["--gpus", args.gpus] if args.gpus else []),
               *(["--slots-per-gpu", str(args.slots_per_gpu)] if args.slots_per_gpu else [])]
    first = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + args.budget_s
    while time.monotonic() < deadline and first.poll() is None and (
            not results.exists() or not results.read_text().strip()):
        time.sleep(0.1)
    time.sleep(random.Random().uniform(0.0, 3.0))
    with_result = len(results.read_text().splitlines()) if results.exists() else 0
    finished_first = first.poll() is not None
    with contextlib.suppress(ProcessLookupError):  # a warm batch can finish inside the random wait
        os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    killed_after = len(results.read_text().splitlines()) if results.exists() else 0
    second = subprocess.run(command, capture_output=True, text=True, timeout=max(60.0, args.budget_s * 2))
    seen = [json.loads(line)["key"] for line in results.read_text().splitlines()] if results.exists() else []
    return {"kernels": len(keys), "finished_before_kill": finished_first, "results_when_killed": killed_after, "results_before_random_wait": with_result,
            "restart_rc": second.returncode, "verified": len(seen),
            "exactly_once": sorted(seen) == sorted(keys)}


def child(args: argparse.Namespace) -> int:
    """The batch the kill check kills: resumes from its own results file."""
    results = Path(args.child)
    keys = args.keys.split(",")
    jobs = [j for j in load_jobs(Path(args.jsonl), None, 0) if j.key in keys]
    done = {json.loads(line)["key"] for line in results.read_text().splitlines()} if results.exists() else set()

    def store(job: VerifyJob, report: dict[str, Any]) -> None:
        with results.open("a") as out:
            out.write(json.dumps({"key": job.key, "status": report.get("status")}) + "\n")

    verify_jobs(jobs, options_of(args), store, done=done, gpus=args.gpus, build_cache=args.build_cache,
                slots_per_gpu=args.slots_per_gpu)
    return 0


def options_of(args: argparse.Namespace) -> VerifyOptions:
    """The harness options of the benchmark (the CLI's, with ``--no-compile-baseline`` as in issue 13)."""
    return VerifyOptions(trials=args.trials, device=args.device, target_seconds=args.target_seconds,
                         compile_baseline=args.compile_baseline)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jsonl", type=Path, default=next((p for p in DATA_FILES if p.is_file()), DATA_FILES[0]),
                        help="CUDA-L1 release file (JSON Lines)")
    parser.add_argument("--limit", type=int, default=8, help="kernels in the sample")
    parser.add_argument("--all", action="store_true", help="every kernel with code (no sample)")
    parser.add_argument("--only", type=lambda text: {k.strip() for k in text.split(",") if k.strip()},
                        help="only these kernels (comma-separated keys such as L1-T98,L3-T43); with --all every one of "
                             "them, else a seeded sample of --limit (default 8) of them")
    parser.add_argument("--resume", action="store_true",
                        help="keep OUT/reports-cold.jsonl and verify only the kernels it does not hold; those "
                             "--grace-s stopped before (OUT/stopped-cold.jsonl) first, each with its GPU alone")
    parser.add_argument("--retry-errors", action="store_true",
                        help="with --resume, verify again the kernels whose stored report is an error (a host "
                             "out of memory, a build that timed out); the new report is appended, and a key's "
                             "last report is the one read")
    parser.add_argument("--build-cache", type=Path,
                        help="build cache folder kept between runs (default: a fresh one, so the first pass is cold)")
    parser.add_argument("--no-warm", dest="warm", action="store_false", help="skip the warm pass")
    parser.add_argument("--ray", help="run the passes on this Ray cluster (an address, or local)")
    parser.add_argument("--seed", type=int, default=0, help="sample seed")
    parser.add_argument("--budget-s", type=float, default=200.0, help="about how long the whole benchmark may take")
    parser.add_argument("--grace-s", type=float,
                        help="stop the kernels still running this long after their pass's budget (not reported, "
                             "listed in OUT/stopped-NAME.jsonl: --resume verifies them again, first and alone); "
                             "default: let them finish")
    parser.add_argument("--gpus", help="GPUs (count or ids; default every visible one)")
    parser.add_argument("--compile-workers", type=int, help="builds at once (default: a core each, left after the seats)")
    parser.add_argument("--slots-per-gpu", type=int,
                        help="eval scripts running at once per GPU (default: the host's, "
                             "verify.batch.workers.batch_shape: 9 with 16 cores a GPU, else 3; 3 under Ray)")
    parser.add_argument("--gpu-seats", type=int,
                        help="of those, how many hold the GPU's gate at once (KA_GPU_SEATS; default: the host's, "
                             "6 or 3)")
    parser.add_argument("--gate-mode", choices=GATE_MODES,
                        help=f"how verifications share a GPU (default {BATCH_GATE_MODE}; see verify.harness.gate)")
    parser.add_argument("--heavy", choices=HEAVY_POLICIES,
                        help=f"where heavy kernels go (KA_BATCH_HEAVY; default {BATCH_HEAVY}; see verify.batch.weight): "
                             f"'first' or 'last' verifies them before or after the light ones, {HEAVY_SEATS} at a time on a GPU")
    parser.add_argument("--no-zygote", dest="zygote", action="store_false",
                        help="start each verification's children by exec instead of forking them from its zygote "
                             "(KA_ZYGOTE=0; verify.harness.zygote)")
    parser.add_argument("--no-slot-zygote", dest="slot_zygote", action="store_false",
                        help="each verification starts a zygote of its own instead of using its batch slot's, "
                             "which imported torch once for all the slot's kernels (KA_SLOT_ZYGOTE=0; "
                             "verify.batch.zygotes)")
    parser.add_argument("--no-slot-seed", dest="slot_seed", action="store_false",
                        help="each slot's zygote starts Python and imports torch on its own instead of being forked "
                             "from the batch's one seed (KA_SLOT_SEED=0)")
    parser.add_argument("--no-fork-parents", dest="fork_parents", action="store_false",
                        help="each eval script's parent starts as `python script.py` and imports torch instead of "
                             "being forked from its slot's zygote (KA_FORK_PARENTS=0)")
    parser.add_argument("--against", type=Path, metavar="REPORTS.jsonl",
                        help="another run's reports-cold.jsonl: say how far the same kernels' timings moved")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu only exercises the logic")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--target-seconds", type=float, default=1.0, help="each timed series (the CLI's default)")
    parser.add_argument("--compile-baseline", action="store_true", help="also time torch.compile (slow)")
    parser.add_argument("--kill-kernels", type=int, default=3, help="kernels in the kill-and-restart check (0: skip)")
    parser.add_argument("--no-alone", dest="alone", action="store_false", help="skip the alone-vs-batch check")
    parser.add_argument("--alone-repeats", type=int, default=3, metavar="N",
                        help="verify the alone-vs-batch check's kernel N times on its own (default 3; fewer when what is "
                             "left of --budget-s would not hold another, at least once); its time alone is their median")
    parser.add_argument("--scaling", action="store_true",
                        help="verify the cold pass's kernels again on the first GPU alone, then those on every GPU")
    parser.add_argument("--scaling-budget-s", type=float, metavar="S",
                        help="each --scaling pass's budget (default a quarter of --budget-s); the one-GPU pass needs "
                             "several waves of slots for scaling.steady_ratio")
    parser.add_argument("--scaling-repeat", type=int, default=1, metavar="N",
                        help="put each kernel N times into both scaling passes (default 1), for more waves of slots "
                             "than the cold pass's kernels give")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or REPO / "bench" / "out" / "verify_batch"))
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.gate_mode:
        # The eval scripts, and the kill check's child batches, read it from the environment.
        os.environ["KA_GPU_GATE_MODE"] = args.gate_mode
    if args.gpu_seats:
        os.environ["KA_GPU_SEATS"] = str(args.gpu_seats)
    if args.heavy:
        os.environ["KA_BATCH_HEAVY"] = args.heavy
    if not args.zygote:
        os.environ[ZYGOTE_ENV] = "0"
    if not args.slot_zygote:
        os.environ[SLOT_ZYGOTE_ENV] = "0"
    if not args.slot_seed:
        os.environ[SEED_ENV] = "0"
    if not args.fork_parents:
        os.environ[FORK_PARENTS_ENV] = "0"
    if args.retry_errors and not args.resume:
        parser.error("--retry-errors needs --resume: without it every kernel is verified anyway")
    if args.scaling_repeat < 1:
        parser.error(f"--scaling-repeat must be at least 1, not {args.scaling_repeat}")
    if args.scaling_budget_s is not None and args.scaling_budget_s <= 0:
        parser.error(f"--scaling-budget-s must be more than 0, not {args.scaling_budget_s:g}")
    if args.against is not None and not args.against.is_file():
        parser.error(f"--against: no reports file at {args.against}")
    if args.child:
        return child(args)
    if not args.jsonl.is_file():
        parser.error(f"no CUDA-L1 file at {args.jsonl}: run python tests/gpu/copy_gpu_data.py, or pass --jsonl")
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = load_jobs(args.jsonl, None if args.all else args.limit, args.seed, args.only)
    options = options_of(args)
    t_start = time.monotonic()
    cache = args.build_cache.resolve() if args.build_cache else Path(tempfile.mkdtemp(prefix="ka-bench-builds-"))
    cold = run_pass("cold", jobs, options, args.out, gpus=args.gpus, compile_workers=args.compile_workers,
                    cache=cache, budget_s=args.budget_s * (0.5 if args.warm else 0.85), resume=args.resume,
                    ray=args.ray, grace_s=args.grace_s, slots_per_gpu=args.slots_per_gpu,
                    retry_errors=args.retry_errors)
    finished = [j for j in jobs if j.key in cold.reports]
    warm = run_pass("warm", finished if args.warm else [], options, args.out, gpus=args.gpus,
                    compile_workers=args.compile_workers, cache=cache, budget_s=args.budget_s * 0.25, ray=args.ray,
                    grace_s=args.grace_s, slots_per_gpu=args.slots_per_gpu)
    n_gpus = len(parse_gpus(args.gpus))
    gate_mode = os.environ.get("KA_GPU_GATE_MODE") or BATCH_GATE_MODE
    slots = args.slots_per_gpu or default_slots(n_gpus, ray=bool(args.ray))
    result: dict[str, Any] = {
        "n_kernels": len(jobs), "n_stored_before": len(jobs) - cold.stats.total, "n_cold": cold.stats.done,
        "n_warm": warm.stats.done,
        "gpus": len(set((r.get("batch") or {}).get("gpu") for r in cold.reports.values())) or None,
        "kernels_per_min_cold": round(cold.stats.per_minute(cold.stats.finished_at), 3),
        "kernels_per_min_warm": round(warm.stats.per_minute(warm.stats.finished_at), 3) if args.warm else None,
        "kernels_per_min_cold_span": span_rate(list(cold.reports.values())),
        "kernels_per_min_warm_span": span_rate(list(warm.reports.values())) if args.warm else None,
        "kernels_per_min_cold_steady": steady_rate(list(cold.reports.values()), slots * n_gpus),
        "finish_s_cold": finish_times(list(cold.reports.values())),
        "kernels_per_min_warm_steady": steady_rate(list(warm.reports.values()), slots * n_gpus) if args.warm else None,
        **{f"share_{k}": v for k, v in cold.stats.shares().items() if k != "other"},
        "share_other": cold.stats.shares()["other"],
        "warm_shares": warm.stats.shares(),
        **{f"pass_{k}_cold": v for k, v in cold.ends().items()},
        "statuses_cold": dict(cold.stats.statuses), "builds_cold": dict(cold.stats.builds),
        "gate_mode": gate_mode,
        "heavy_policy": heavy_policy(),
        "heavy_finished_cold": sorted(k for k, r in cold.reports.items() if (r.get("batch") or {}).get("heavy")),
        "slots_per_gpu": slots,
        "gpu_seats": gpu_seats(n_gpus),
        **{f"{k}_cold": v for k, v in gpu_occupancy(list(cold.reports.values())).items()},
        **{f"{k}_cold": v for k, v in alone_waits(list(cold.reports.values())).items()},
        **{f"{k}_cold": v for k, v in give_way_waits(list(cold.reports.values())).items()},
        **{f"{k}_cold": v for k, v in yield_answers(list(cold.reports.values())).items()},
        **{f"{k}_cold": v for k, v in held_up_by(list(cold.reports.values()) + cold.stopped_records(gate_mode)).items()},
        **{f"{k}_cold": v for k, v in requeued_waits(list(cold.reports.values())).items()},
        **{f"{k}_cold": v for k, v in held_pieces(list(cold.reports.values())).items()},
        **{f"{k}_cold": v for k, v in alone_waits_by_grant(list(cold.reports.values())).items()},
        **{f"{k}_cold": v for k, v in seat_times(list(cold.reports.values())).items()},
        **(replay_keys(cold.reports, slots, gpu_seats(n_gpus)) if n_gpus == 1
           else {"replay_cold": None, "longest_chain_cold": None}),
        "stopped_cold": len(cold.stopped),
        "stopped_keys_cold": sorted(item.job.key for item in cold.stopped),
        "exclusive_cold": len(cold.exclusive),
        "exclusive_finished_cold": len(cold.exclusive & set(cold.reports)),
        "host_cpu_s_per_kernel_cold": round(cold.cpu_s / cold.stats.done, 2) if cold.stats.done else None,
        "cpu_s_by_process_cold": cpu_by_process(list(cold.reports.values())),
        "ccache_cold": BuildCache(cache, detect_toolchain(options.python)).ccache_stats(),
        "zygote": zygote_enabled(os.environ),
        "slot_zygote": slot_zygotes_enabled(os.environ),
        "slot_seed": seeds_enabled(os.environ),
        "fork_parents": parent_forks_enabled(os.environ),
        "parents_forked_cold": sum(r.get("parent_started") == "forked from the slot's zygote"
                                   for r in cold.reports.values()),
        "memory_cold": memory_plans(cold.reports),
    }
    if args.against is not None:
        result["timing_moves_cold"] = timing_moves(cold.reports, read_reports(args.against))
    if args.scaling:
        result["scaling"] = scaling(args, finished, options, cache)
    if args.alone:
        # What is left of --budget-s, shared with the kill check when it runs too.
        left = max(0.0, t_start + args.budget_s - time.monotonic()) * (0.5 if args.kill_kernels else 1.0)
        result["alone_vs_batch"] = alone_vs_batch(jobs, cold.reports, options, cache, args.out, args.alone_repeats,
                                                  budget_s=left)
    if args.kill_kernels:
        keys = [j.key for j in finished[:args.kill_kernels]] or [j.key for j in jobs[:args.kill_kernels]]
        result["kill_restart"] = kill_and_restart(args, keys, args.out, cache)
    result["wall_s"] = round(time.monotonic() - t_start, 1)
    print(f"{'figure':<28} value")
    for key, value in result.items():
        if not isinstance(value, dict):
            print(f"{key:<28} {value}")
        else:
            print(f"{key:<28} " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in value.items()))
    (args.out / "summary.json").write_text(json.dumps(result, default=str))
    if args.json:
        print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
