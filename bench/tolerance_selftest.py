"""Self-test of the correctness policy: PyTorch's own fp32 outputs, judged as a candidate's, must all pass.

For every task of a CUDA-L1 / KernelBench JSONL file (rows with ``level_id``, ``task_id``, ``ref_code``) and
every input distribution the harness draws (``verify.harness.tensors.DISTRIBUTIONS``), this builds the
reference exactly as the trusted child does (same seeding, TF32 off), computes the float64 and the fp32
references (``verify.harness.roles.reference_outputs``) and judges the fp32 outputs with the parent's own
function (``verify.harness.judge.judge_outputs``). A task passes when every distribution passes. The table
also shows how many would pass KernelBench's atol/rtol bound alone (the policy before harness 1.1), and on
how many the fp32-relative bound was needed.

    python bench/tolerance_selftest.py .gpu_data/cuda-l1-h100-tasks.jsonl --workers 8
    python bench/tolerance_selftest.py FILE.jsonl --limit 20 --time-budget 60 --json   # last line: JSON

Needs torch with a CUDA GPU (``--device cpu`` runs it on the CPU, slowly). Tasks not started within
``--time-budget`` seconds are reported as not run, never as passed; a task whose reference itself cannot
run is an error, listed with its message. Workers share the GPU, so a big task (float64 copies of large
models and inputs) can run out of memory only because its neighbours hold the rest: every task that failed
with ``OutOfMemoryError`` is retried once at the end, alone (one worker, within what is left of the time
budget), and a task still out of memory is counted under "out of memory", apart from real failures.
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _init_worker() -> None:
    import torch

    from verify.harness.common import pin_flags

    pin_flags(torch)


def judge_task(row: dict[str, Any], device: str, seed: int) -> dict[str, Any]:
    """Judge one task's fp32 references as a candidate on every distribution: the task's result row."""
    import torch

    from verify.harness.float64 import Float64Reference
    from verify.harness.judge import TOLERANCE, judge_outputs
    from verify.harness.roles import REFERENCE_RNG_SEED, _build_reference, reference_outputs
    from verify.harness.task import load_module
    from verify.harness.tensors import DISTRIBUTIONS, make_inputs

    started = time.perf_counter()
    result: dict[str, Any] = {"level": row["level_id"], "task": row["task_id"], "distributions": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="ka-selftest-") as folder:
            task = load_module(row["ref_code"], f"ka_selftest_{row['level_id']}_{row['task_id']}", folder)
            model, _ = _build_reference(torch, task, None, "model-new", seed, device)
            model64 = Float64Reference(torch, model, seed=REFERENCE_RNG_SEED, build=lambda: _build_reference(
                torch, task, None, "model-new", seed, device)[0])
            for k, distribution in enumerate(DISTRIBUTIONS):
                inputs = make_inputs(task.get_inputs, seed + k, distribution, device)
                ref32, ref64, precision = reference_outputs(torch, model, model64, inputs)
                # Judged where the outputs are: on the CPU a 48M-element output took ~90 s of float64 work.
                reference = ref64 if ref64 else ref32
                bound_ref = ref32 if ref64 else None
                passed, reasons, per_output = judge_outputs(ref32, reference, bound_ref, TOLERANCE)
                old_passed = judge_outputs(ref32, reference, None, TOLERANCE)[0]
                result["distributions"][distribution] = {
                    "passed": passed, "old_policy_passed": old_passed, "precision": precision,
                    "bound": "fp32-relative" if any(p["bound"] == "fp32-relative" for p in per_output) else "atol/rtol",
                    "outside_atol_rtol": sum(p["outside_atol_rtol"] for p in per_output),
                    "elements": sum(p["elements"] for p in per_output), "reason": "; ".join(reasons)[:300],
                }
                # One distribution's inputs and outputs at a time: level 1 task 11's float64 output alone is 13 GB.
                del inputs, ref32, ref64, reference, bound_ref
            del model, model64
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"[:400]
    finally:
        if device == "cuda":
            torch.cuda.empty_cache()
    dists = result["distributions"].values()
    result["passed"] = "error" not in result and bool(dists) and all(d["passed"] for d in dists)
    result["old_policy_passed"] = "error" not in result and bool(dists) and all(d["old_policy_passed"] for d in dists)
    result["needed_fp32_bound"] = any(d["bound"] == "fp32-relative" for d in dists)
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def run(rows: list[dict[str, Any]], *, workers: int, device: str, seed: int, budget_s: float) -> list[dict[str, Any]]:
    """Judge every row in ``workers`` processes; rows not finished within ``budget_s`` come back as not run."""
    deadline = time.monotonic() + budget_s
    results: dict[int, dict[str, Any]] = {}
    pool = futures.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_init_worker)
    pending = {pool.submit(judge_task, row, device, seed): i for i, row in enumerate(rows)}
    try:
        for done in futures.as_completed(pending, timeout=max(0.0, deadline - time.monotonic())):
            index = pending[done]
            try:
                results[index] = done.result()
            except Exception as error:
                results[index] = {"level": rows[index]["level_id"], "task": rows[index]["task_id"], "passed": False,
                                  "error": f"worker died: {type(error).__name__}: {error}"[:400]}
            if len(results) % 25 == 0:
                print(f"  {len(results)}/{len(rows)} tasks judged", file=sys.stderr, flush=True)
    except futures.TimeoutError:
        print(f"  time budget of {budget_s:.0f}s spent: {len(rows) - len(results)} tasks not run", file=sys.stderr)
    finally:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
    return [results.get(i) or {"level": r["level_id"], "task": r["task_id"], "passed": False, "not_run": True}
            for i, r in enumerate(rows)]


def out_of_memory(result: dict[str, Any]) -> bool:
    """Whether a task's error was the GPU running out of memory (not a failure of the policy or the task).

    Example:
        >>> out_of_memory({"error": "OutOfMemoryError: CUDA out of memory."}), out_of_memory({"error": "TypeError"})
        (True, False)
    """
    return str(result.get("error", "")).startswith("OutOfMemoryError")


def retry_out_of_memory(results: list[dict[str, Any]], rows: list[dict[str, Any]], *, device: str, seed: int,
                        budget_s: float) -> int:
    """Run again, alone (one worker), every task that ran out of memory; returns how many were retried.

    A retry that the remaining ``budget_s`` does not reach keeps the first (out-of-memory) result.
    """
    again = [i for i, r in enumerate(results) if out_of_memory(r)]
    if not again:
        return 0
    print(f"  retrying {len(again)} out-of-memory task(s) alone ({budget_s:.0f}s left)", file=sys.stderr, flush=True)
    for i, retried in zip(again, run([rows[i] for i in again], workers=1, device=device, seed=seed,
                                     budget_s=budget_s), strict=True):
        if not retried.get("not_run"):
            results[i] = retried
        results[i]["retried_alone"] = True
    return len(again)


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per level and in total: tasks, passed, atol/rtol alone, fp32 bound needed, errors, out of memory, not run.

    Example:
        >>> list(summarize([{"level": 2, "passed": True}, {"level": 1, "passed": True}])["levels"])
        ['level 1', 'level 2', 'total']
    """
    levels: dict[str, dict[str, int]] = {}
    for r in results:
        for key in (f"level {r['level']}", "total"):
            row = levels.setdefault(key, {"tasks": 0, "passed": 0, "old_policy_passed": 0, "needed_fp32_bound": 0,
                                          "errors": 0, "out_of_memory": 0, "not_run": 0})
            row["tasks"] += 1
            row["passed"] += bool(r.get("passed"))
            row["old_policy_passed"] += bool(r.get("old_policy_passed"))
            row["needed_fp32_bound"] += bool(r.get("needed_fp32_bound"))
            row["errors"] += "error" in r and not out_of_memory(r)
            row["out_of_memory"] += out_of_memory(r)
            row["not_run"] += bool(r.get("not_run"))
    failed = [{"level": r["level"], "task": r["task"], "out_of_memory": out_of_memory(r),
               "why": r.get("error") or "; ".join(f"{d}: {v['reason']}" for d, v in r["distributions"].items()
                                                  if not v["passed"])[:300]}
              for r in results if not r.get("passed") and not r.get("not_run")]
    # Levels in order, the total last (results arrive in completion order).
    ordered = {k: levels[k] for k in sorted(levels, key=lambda k: (k == "total", k))}
    return {"levels": ordered, "failed": failed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("file", type=Path, help="JSONL with level_id, task_id and ref_code per row")
    parser.add_argument("--limit", type=int, help="only the first N tasks")
    parser.add_argument("--workers", type=int, default=4, help="worker processes sharing the GPU (default 4)")
    parser.add_argument("--time-budget", type=float, default=150.0, help="seconds; unfinished tasks are 'not run'")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--seed", type=int, default=1234, help="weight and input seed (default 1234)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    args = parser.parse_args(argv)
    if not args.file.is_file():
        parser.error(f"{args.file}: no such file (python tests/gpu/copy_gpu_data.py writes .gpu_data/)")
    rows = [json.loads(line) for line in args.file.read_text().splitlines() if line.strip()]
    rows = sorted({(r["level_id"], r["task_id"]): r for r in rows}.values(), key=lambda r: (r["level_id"], r["task_id"]))
    if args.limit:
        rows = rows[: args.limit]
    t0 = time.monotonic()
    results = run(rows, workers=args.workers, device=args.device, seed=args.seed, budget_s=args.time_budget)
    retried = retry_out_of_memory(results, rows, device=args.device, seed=args.seed,
                                  budget_s=max(0.0, args.time_budget - (time.monotonic() - t0)))
    summary = summarize(results) | {"seconds": round(time.monotonic() - t0, 1), "workers": args.workers,
                                    "device": args.device, "retried_alone_after_oom": retried}
    print(f"{'':<9} {'tasks':>6} {'passed':>7} {'atol/rtol only':>15} {'fp32 bound used':>16} {'errors':>7} "
          f"{'out of memory':>14} {'not run':>8}")
    for name, row in summary["levels"].items():
        print(f"{name:<9} {row['tasks']:>6} {row['passed']:>7} {row['old_policy_passed']:>15} "
              f"{row['needed_fp32_bound']:>16} {row['errors']:>7} {row['out_of_memory']:>14} {row['not_run']:>8}")
    total = summary["levels"].get("total", {"passed": 0, "tasks": 0})
    print(f"tasks passed: {total['passed']}/{total['tasks']} in {summary['seconds']}s "
          f"({retried} out-of-memory task(s) retried alone)")
    for f in summary["failed"][:20]:
        print(f"  {'OOM' if f['out_of_memory'] else 'FAIL'} level {f['level']} task {f['task']}: {f['why'][:200]}")
    if args.json:
        slowest = sorted(results, key=lambda r: -r.get("seconds", 0))[:5]
        summary["slowest"] = [{"level": r["level"], "task": r["task"], "seconds": r.get("seconds")} for r in slowest]
        print(json.dumps(summary))
    return 0 if total["passed"] == total["tasks"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
