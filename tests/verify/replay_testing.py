"""A shared-mode report for the replay's tests (``verify.batch.replay``, ``bench/gate_replay.py``)."""

from __future__ import annotations


def shared_report() -> dict:
    """A kernel's report as a batch's shared gate leaves it: two trusted pieces, the baselines alone handed over to
    the run child, the parent's let-go between the children, a JIT build, a trial."""
    timeline = [[0.5, "trusted", "mark:ready"], [1.0, "parent", "compiled-without-gpu"], [2.0, "parent", "gpu-gate"],
                [4.0, "parent", "gate:trusted:yield"], [6.0, "parent", "gate:trusted:shared"],
                [7.0, "parent", "gate:trusted:alone"], [8.0, "parent", "gate:trusted:over"],
                [8.0, "parent", "gate:run:alone"], [8.5, "parent", "gate:run:shared"], [8.6, "parent", "gpu-away"],
                [9.6, "parent", "gpu-back"], [10.0, "parent", "gate:run:away"], [10.0, "run", "gate:away"],
                [13.0, "run", "gate:shared"], [14.0, "parent", "gate:run:shared"], [16.0, "parent", "run-gone"]]
    return {"harness_seconds": 20.0, "timeline_origin": 100.0, "batch": {"seconds": 21.0}, "timeline": timeline,
            "gate": {"mode": "shared", "pieces": {"trusted": [[2.0, 2.0, "reference"], [6.0, 0.9, "screen"]],
                                                  "run": [[8.5, 1.5, "mark:released"], [14.0, 2.0, "trial"]]}}}
