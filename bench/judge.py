"""Benchmark: the parent's judge on large outputs (the CPU time a verification spends after its GPU work).

On the H100 (session 5) judging took 25-52 s per kernel for the showcase's large elementwise and row tasks
(``gelu``: 33.5M outputs), inside a batch slot. This times ``verify.harness.judge.judge`` on synthetic
evidence shaped like an honest kernel's: per trial a float64 and an fp32 reference of a GELU over ``--elements``
random values, and the candidate's three calls (poisoned, after the reference, other poison) returning the
fp32 answer, and the statefulness probe (X, then X with a few elements changed: two more outputs and two more
fp32 references of the same size). It also times the correctness policy on one output (``judge_output``), and
samples the process's resident memory every 2 ms while it judges: what the judge needs beyond the evidence it
holds is what decides whether a billion-element output fits on the host. The judge runs in this
process on ``KA_JUDGE_THREADS`` intra-op threads (default: the parent's own setting), as the eval script's
parent does, with its chunks spread over ``KA_JUDGE_WORKERS`` threads (``verify.harness.tensors.judge_workers``).

    python bench/judge.py                         # table: 3 trials of 33.5M elements
    python bench/judge.py --elements 4194304 --trials 9 --json   # last line: JSON
    python bench/judge.py --elements 268435456 --trials 1 --workers 1,4,8,12 --no-unfused   # threads' scaling
    python bench/judge.py --elements 67108864 --nondeterministic --no-unfused   # calls that differ, as atomics make them

With ``--nondeterministic`` the second and third calls of each trial differ from the first in the last bit of every
97th element, as a kernel with atomics gives: the stale-memory and launch-error checks then judge every call, and the
first calls a second time (each first call is judged once, ``verify.harness.judge.Judgements``).

The outputs are judged with the fused passes where numba is installed and they are large enough
(``verify.harness.fused``), then again with the torch operations alone (``KA_JUDGE_FUSED=0``).

JSON keys: ``elements``, ``trials``, ``nondeterministic``, ``threads``, ``workers``, ``fused`` (whether the fused passes ran),
``fused_compile_s`` (compiling them, as the parent does while the candidate runs), ``judge_s`` (the median of
``--repeats`` whole judges), ``judge_unfused_s`` (the same with the torch operations alone; null when the fused
passes did not run), ``judge_output_s``, ``weak_check_s`` (the weak check alone, after the judge as in the
parent), ``check_s`` (one more whole judge, check by check in the judge's own order: ``trial statistics`` first,
then each of ``verify.harness.judge.CHECK_FUNCTIONS``, seconds each; what to make faster first), ``judge_s_by_workers`` (with ``--workers``: the whole judge's median with ``KA_JUDGE_WORKERS`` set to each count),
``held_bytes_per_element`` (the process's resident memory with the evidence built, per output element),
``peak_growth_bytes_per_element`` (the most the timed whole judges raised it, per output element), ``verdicts``
(the checks that read outputs -> verdict: all ``pass`` for this honest evidence), ``same_verdicts`` (the same
verdicts both ways).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


DATA_CHECKS = ("correctness", "stale-memory", "launch-errors", "weak-check", "degenerate-task", "hard-coding", "caching")
"""The checks that read the outputs (the rest need messages this synthetic evidence does not carry)."""


def evidence(elements: int, trials: int, nondeterministic: bool = False) -> Any:
    """An honest kernel's evidence: references and candidate outputs for ``trials`` trials, the three calls of a
    trial identical, or (``nondeterministic``) the second and third one ulp off on every 97th element."""
    import math

    import torch

    from verify.harness.judge import ChildReport, Evidence
    from verify.harness.tensors import call_fingerprints

    distributions = ["task", "randn", "rand", "negative", "heavy-tailed"]
    plan = [{"index": i, "seed": 100 + i, "distribution": distributions[i % len(distributions)]}
            for i in range(trials)]
    generator = torch.Generator().manual_seed(0)
    refs, outputs, messages = {}, {}, [{"kind": "hello"}]
    for trial in plan:
        x = torch.randn(elements, generator=generator)
        ref64 = torch.nn.functional.gelu(x.double())
        ref32 = torch.nn.functional.gelu(x)
        refs[trial["index"]] = {"ref64": [ref64], "ref32": [ref32]}
        for variant in "abc":
            out = ref32.clone()
            if nondeterministic and variant != "a":
                out[::97] = torch.nextafter(out[::97], torch.tensor(math.inf))
            outputs[(trial["index"], variant)] = [out]
            messages.append({"kind": "trial", "index": trial["index"], "variant": variant})
    # The statefulness probe: the first trial's inputs (the generator's first draw) with every 4096th element changed.
    x = torch.randn(elements, generator=torch.Generator().manual_seed(0))
    x[::4096] += 1.0
    changed = torch.nn.functional.gelu(x)
    probe = {"first": [refs[0]["ref32"][0].clone()], "second": [changed.clone()],
             "ref_x": [refs[0]["ref32"][0].clone()], "ref_changed": [changed]}
    timed = {"seed_base": 7, "fingerprints": [call_fingerprints(torch.full((64,), float(i))) for i in range(3)]}
    messages += [{"kind": "timing", "which": "candidate", "result": timed},
                 {"kind": "state-probe", "changed_elements": len(range(0, elements, 4096)),
                  "kernels": []},
                 {"kind": "done"}]
    run = ChildReport(role="run", returncode=0, messages=messages, received=[0.0] * len(messages))
    trusted = ChildReport(role="trusted", returncode=0, messages=[
        {"kind": "screen", "input_sensitivity": 1.0, "weight_sensitivity": None},
        {"kind": "timing", "which": "eager", "result": timed}, {"kind": "done"}])
    return Evidence(form="model-new", kernel_code="", static=[], trials=plan, trusted=trusted, run=run, refs=refs,
                    outputs=outputs, state_probe=probe)


def check_seconds(ev: Any) -> dict[str, float]:
    """One whole judge of ``ev`` (``verify.harness.judge.judge`` itself), timed check by check where it calls them:
    seconds by name in the judge's order, ``trial statistics`` first (a check the judge runs again adds up).

    Example:
        >>> list(check_seconds(evidence(1000, 1)))[:2]
        ['trial statistics', 'compiles']
    """
    from verify.harness import judge as judging

    seconds: dict[str, float] = {}
    guarded, trial_stats = judging._guarded, judging.compute_trial_stats

    def timed(name: str, function: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started

    with mock.patch.object(judging, "compute_trial_stats", lambda e: timed("trial statistics", trial_stats, e)), \
            mock.patch.object(judging, "_guarded", lambda name, f, e, speed: timed(name, guarded, name, f, e, speed)):
        judging.judge(ev)
    return {name: round(s, 4) for name, s in seconds.items()}


class ResidentPeak:
    """This process's resident memory in bytes, and its peak since ``reset`` (sampled every 2 ms by a thread).

    Example:
        >>> memory = ResidentPeak()
        >>> memory.reset() > 0 and memory.peak >= memory.reset() - (1 << 30)
        True
        >>> memory.close()
    """

    def __init__(self) -> None:
        self.peak = self.now()
        self._stop = threading.Event()
        threading.Thread(target=self._watch, daemon=True, name="ka-bench-memory").start()

    @staticmethod
    def now() -> int:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def reset(self) -> int:
        self.peak = self.now()
        return self.peak

    def _watch(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self.now())

    def close(self) -> None:
        self._stop.set()


def measure(elements: int, trials: int, repeats: int = 1, workers: list[int] | None = None,
            unfused: bool = True, nondeterministic: bool = False) -> dict[str, Any]:
    """Build the evidence, compile the fused passes (where numba is installed and the outputs are large enough),
    then time the whole judge (the median of ``repeats``) with them and (with ``unfused``) without, one output's
    policy and the weak check, and the whole judge again on each of ``workers`` chunk threads."""
    import gc
    import statistics

    import torch

    from verify.harness.fused import FUSED_ENV, warm_fused
    from verify.harness.judge import TOLERANCE, check_weak_check, judge
    from verify.harness.parent import JUDGE_THREADS
    from verify.harness.tensors import judge_output, judge_workers

    threads = int(os.environ.get("KA_JUDGE_THREADS", JUDGE_THREADS))
    torch.set_num_threads(threads)
    ev = evidence(elements, trials, nondeterministic)
    started = time.perf_counter()
    warming = warm_fused(elements)
    fused = warming is not None
    if fused:
        warming.join()
    compile_s = time.perf_counter() - started if fused else None

    def whole_judges() -> tuple[float, dict[str, Any]]:
        times = []
        for _ in range(max(1, repeats)):
            started = time.perf_counter()
            checks, _ = judge(ev)
            times.append(time.perf_counter() - started)
        return statistics.median(times), checks

    gc.collect()
    memory = ResidentPeak()
    held = memory.reset()
    try:
        judge_s, checks = whole_judges()
        growth = max(memory.peak, memory.now()) - held
    finally:
        memory.close()
    ref = ev.refs[0]
    started = time.perf_counter()
    judge_output(ev.outputs[(0, "a")][0], ref["ref64"][0], ref["ref32"][0], TOLERANCE)
    judge_output_s = time.perf_counter() - started
    started = time.perf_counter()
    check_weak_check(ev)
    weak_check_s = time.perf_counter() - started
    check_s = check_seconds(ev)
    by_workers = {}
    for count in workers or []:
        with mock.patch.dict(os.environ, {"KA_JUDGE_WORKERS": str(count)}):
            by_workers[str(count)] = round(whole_judges()[0], 3)
    unfused_s, unfused_checks = None, checks
    if fused and unfused:
        with mock.patch.dict(os.environ, {FUSED_ENV: "0"}):
            unfused_s, unfused_checks = whole_judges()
    return {"elements": elements, "trials": trials, "nondeterministic": nondeterministic, "threads": threads, "workers": judge_workers(),
            "fused": fused, "fused_compile_s": None if compile_s is None else round(compile_s, 3),
            "judge_s": round(judge_s, 3), "judge_unfused_s": None if unfused_s is None else round(unfused_s, 3),
            "judge_output_s": round(judge_output_s, 3), "judge_s_by_workers": by_workers,
            "weak_check_s": round(weak_check_s, 6),  # under a millisecond on small outputs
            "check_s": check_s,
            "held_bytes_per_element": round(held / elements, 1),
            "peak_growth_bytes_per_element": round(growth / elements, 1),
            "verdicts": {name: checks[name]["verdict"] for name in DATA_CHECKS},
            "same_verdicts": all(checks[name]["verdict"] == unfused_checks[name]["verdict"] for name in DATA_CHECKS)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=8192 * 4096, help="elements per output (gelu's 33.5M)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1, help="whole judges to time; judge_s is their median")
    parser.add_argument("--workers", type=lambda v: [int(n) for n in v.split(",")], default=[],
                        help="comma-separated chunk-thread counts to time the whole judge on again (KA_JUDGE_WORKERS)")
    parser.add_argument("--no-unfused", action="store_true",
                        help="skip the whole judge with the torch operations alone (slow on large outputs)")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="a trial's second and third calls differ from its first in their last bits (atomics)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args(argv)
    result = measure(args.elements, args.trials, args.repeats, args.workers, not args.no_unfused,
                     args.nondeterministic)
    rows = [("elements per output", f"{result['elements']:,}"), ("trials (3 calls each)", str(result["trials"])),
            ("the three calls", "differ in their last bits" if result["nondeterministic"] else "identical"),
            ("judge threads", str(result["threads"])), ("chunk workers", str(result["workers"])),
            ("fused passes", f"yes, compiled in {result['fused_compile_s']:.2f} s" if result["fused"] else "no"),
            ("whole judge", f"{result['judge_s']:.2f} s"),
            ("whole judge, torch operations only", "-" if result["judge_unfused_s"] is None
             else f"{result['judge_unfused_s']:.2f} s"),
            ("policy on one output", f"{result['judge_output_s']:.2f} s"),
            *((f"whole judge on {count} chunk threads", f"{seconds:.2f} s")
              for count, seconds in result["judge_s_by_workers"].items()),
            ("weak check", f"{result['weak_check_s']:.2f} s"),
            *((f"in the judge: {name}", f"{seconds:.2f} s") for name, seconds in
              sorted(result["check_s"].items(), key=lambda item: -item[1])[:4]),
            ("resident memory with the evidence", f"{result['held_bytes_per_element']:.0f} B an output element"),
            ("most the judge added to it", f"{result['peak_growth_bytes_per_element']:.1f} B an output element"),
            ("correctness verdict", result["verdicts"].get("correctness", "-")),
            ("same verdicts both ways", "yes" if result["same_verdicts"] else "NO")]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
