"""Benchmark: a measured batch pass replayed under other GPU gate policies (``verify.batch.replay``), on the CPU.

A pass of ``bench/verify_batch.py`` spends device time; this reads what one left behind (its ``--out`` folder) and
says what the same kernels' own work would have taken under each policy of ``verify.batch.replay.POLICIES``, so that
only a policy worth it goes to a GPU. ``writer-first`` is the gate as it is: its replay beside the measured pass says
how far to trust the others. ``no-gate`` is the bound with no gate at all, and the longest kernel's own chain (its
work with nothing to wait for) the bound no schedule can beat.

    python bench/gate_replay.py OUT                      # table: every policy, slots and seats as the pass had them
    python bench/gate_replay.py OUT1 OUT2 --seats 8 --json   # last line: JSON
    python bench/gate_replay.py OUT --policies writer-first,fill-guess --fill-factor 3
    python bench/gate_replay.py OUT --order longest-first   # the kernels started longest chain first (a bound)

``OUT`` is a ``bench/verify_batch.py --out`` folder (its ``reports-cold.jsonl``, or ``reports-warm.jsonl`` with
``--warm``, and ``summary.json`` for the slots and seats) or a reports file itself. Reports need harness 1.35's
pieces with their starts (``gate.pieces``); a pass where any report lacks them is listed and not replayed.

JSON keys: ``inputs``, one per ``OUT``: ``path``, ``kernels``, ``replayable`` (whether every report could be
replayed), ``slots``, ``seats``, ``order`` (``--order``: the order the replays took the kernels in), ``measured`` (``pass_s``, ``kernels_per_min``, ``seat_s``, ``stood_back_s``: the pass
as it ran, its seats held and its children's standing back at yield points, in seconds), ``longest_chain`` (``[kernel, seconds]``), ``replays`` (policy -> ``pass_s``, ``kernels_per_min``,
``stood_back_s``, ``finished``) and ``writer_first_error`` (the ``writer-first`` replay's pass against the
measured one, as a fraction: negative when the replay is shorter; null in another order than ``as-run``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify.batch.replay import ORDERS, POLICIES, measured, replay_all  # noqa: E402


def read_reports(path: Path, warm: bool) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """The ``(key, report)`` pairs of one pass, and its ``summary.json`` (empty without one)."""
    folder = path if path.is_dir() else path.parent
    file = folder / f"reports-{'warm' if warm else 'cold'}.jsonl" if path.is_dir() else path
    if not file.exists():
        raise SystemExit(f"gate_replay: {file} does not exist (give a bench/verify_batch.py --out folder or a "
                         "reports file)")
    rows = []
    for number, line in enumerate(file.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise SystemExit(f"gate_replay: {file}:{number} is not JSON ({error})") from None
        rows.append((str(row.get("key")), row.get("report") or {}))
    summary = folder / "summary.json"
    return rows, json.loads(summary.read_text()) if summary.exists() else {}


def replay_pass(path: Path, *, policies: list[str], slots: int | None, seats: int | None, fill_factor: float,
                warm: bool = False, order: str = "as-run") -> dict[str, Any]:
    """One pass, measured and replayed under each of ``policies`` (the JSON of one input)."""
    reports, summary = read_reports(path, warm)
    slots = slots or int(summary.get("slots_per_gpu") or len(reports) or 1)
    seats = seats or int(summary.get("gpu_seats") or slots)
    done = replay_all(reports, slots=slots, seats=seats, policies=policies, fill_factor=fill_factor, order=order)
    result: dict[str, Any] = {"path": str(path), "kernels": len(reports), "replayable": bool(done), "slots": slots,
                              "seats": seats, "order": order, "measured": measured(reports),
                              "longest_chain": done.get("longest_chain"), "replays": {}, "writer_first_error": None}
    for policy, run in done.get("replays", {}).items():
        result["replays"][policy] = {"pass_s": round(run.pass_s, 3), "kernels_per_min": round(run.kernels_per_min, 3),
                                     "stood_back_s": run.stood_back_s, "finished": len(run.finish_s)}
    first = result["replays"].get("writer-first")
    if first and result["measured"]["pass_s"] and order == "as-run":
        result["writer_first_error"] = round(first["pass_s"] / result["measured"]["pass_s"] - 1.0, 4)
    return result


def print_table(result: dict[str, Any]) -> None:
    """One pass's rows: measured, then each policy."""
    print(f"\n{result['path']}: {result['kernels']} kernels, {result['slots']} slots, {result['seats']} seats, "
          f"replayed {result['order']} ({ORDERS[result['order']]})")
    if not result["replayable"]:
        print("  not replayable: some reports have no gate.pieces with starts (harness 1.35 and later have them)")
        return
    key, chain = result["longest_chain"]
    print(f"  the longest kernel's own chain: {key}, {chain:.1f} s "
          f"(no schedule can finish under {60.0 * result['kernels'] / chain:.2f} kernels/min from it)")
    print(f"  {'':14s} {'pass s':>8s} {'kernels/min':>12s} {'stood back s':>13s}  policy")
    m = result["measured"]
    print(f"  {'measured':14s} {m['pass_s']:8.1f} {m['kernels_per_min']:12.2f} {m['stood_back_s']:13.1f}  as it ran "
          f"(seats held {m['seat_s']:.1f} s in all)")
    for name, r in result["replays"].items():
        mark = " (knows the future)" if POLICIES[name].knows_the_future else ""
        print(f"  {name:14s} {r['pass_s']:8.1f} {r['kernels_per_min']:12.2f} {r['stood_back_s']:13.1f}  "
              f"{POLICIES[name].describe}{mark}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("passes", nargs="+", type=Path, metavar="OUT",
                        help="bench/verify_batch.py --out folders (or reports files) to replay")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help=f"comma-separated, of: {', '.join(POLICIES)} (default: all)")
    parser.add_argument("--slots", type=int, default=None, help="slots a GPU (default: the pass's summary.json)")
    parser.add_argument("--seats", type=int, default=None, help="seats a GPU (default: the pass's summary.json)")
    parser.add_argument("--fill-factor", type=float, default=2.0,
                        help="fill-guess goes on when its last piece was no longer than this x the longest running "
                             "piece's time so far (default 2)")
    parser.add_argument("--order", choices=list(ORDERS), default="as-run",
                        help="the order the replays start the kernels in: " + "; ".join(
                            f"{name}: {what}" for name, what in ORDERS.items()) + " (default as-run)")
    parser.add_argument("--warm", action="store_true", help="replay the pass with builds cached (reports-warm.jsonl)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        parser.error(f"unknown policies {', '.join(unknown)}; known: {', '.join(POLICIES)}")
    results = [replay_pass(path, policies=policies, slots=args.slots, seats=args.seats,
                           fill_factor=args.fill_factor, warm=args.warm, order=args.order) for path in args.passes]
    for result in results:
        print_table(result)
    if args.json:
        print(json.dumps({"inputs": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
