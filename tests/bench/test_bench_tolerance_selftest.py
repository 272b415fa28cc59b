"""bench/tolerance_selftest.py on the CPU: PyTorch's own fp32 outputs pass; a broken task is an error, not a pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.lin = nn.Linear(features, 8)
    def forward(self, x):
        return torch.relu(self.lin(x))
batch_size = 4
features = 16
def get_inputs():
    return [torch.randn(batch_size, features)]
def get_init_inputs():
    return [features]
'''


# Out of memory on the first try only (as when other workers held the GPU), and out of memory every time.
OOM_ONCE = TASK.replace("def get_inputs():\n", """def get_inputs():
    import os
    if not os.path.exists("oom-once.mark"):
        open("oom-once.mark", "w").close()
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB (simulated)")
""")
OOM_ALWAYS = TASK.replace("def get_inputs():\n", """def get_inputs():
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 99.00 GiB (simulated)")
""")


def test_selftest_passes_fp32_outputs_and_reports_broken_tasks(tmp_path: Path) -> None:
    rows = [{"level_id": 1, "task_id": 1, "ref_code": TASK},
            {"level_id": 1, "task_id": 2, "ref_code": TASK.replace("self.lin(x)", "self.lin(x, 3)")},
            {"level_id": 1, "task_id": 3, "ref_code": OOM_ONCE},
            {"level_id": 1, "task_id": 4, "ref_code": OOM_ALWAYS}]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    repo = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, str(repo / "bench" / "tolerance_selftest.py"), str(path), "--device", "cpu",
                          "--workers", "1", "--time-budget", "300", "--json"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600)
    assert run.returncode == 1, run.stderr[-2000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["levels"]["total"] == {"tasks": 4, "passed": 2, "old_policy_passed": 2, "needed_fp32_bound": 0,
                                          "errors": 1, "out_of_memory": 1, "not_run": 0}
    assert summary["retried_alone_after_oom"] == 2
    failed = {f["task"]: f for f in summary["failed"]}
    assert sorted(failed) == [2, 4]
    assert "TypeError" in failed[2]["why"] and not failed[2]["out_of_memory"]
    assert failed[4]["out_of_memory"] and "OOM level 1 task 4" in run.stdout


def test_the_summary_lists_levels_in_order_and_the_total_last() -> None:
    import runpy

    summarize = runpy.run_path(str(Path(__file__).resolve().parents[2] / "bench" / "tolerance_selftest.py"))["summarize"]
    results = [{"level": 3, "passed": True}, {"level": 1, "task": 7, "passed": False, "error": "TypeError"},
               {"level": 2, "passed": True}]
    summary = summarize(results)
    assert list(summary["levels"]) == ["level 1", "level 2", "level 3", "total"]
    assert summary["levels"]["total"]["passed"] == 2 and summary["levels"]["total"]["errors"] == 1
