"""Write the built-in demo data: kernel-archive's own GPU-suite kernels with the reports our verifier made of them.

The GPU suite (tests/gpu/test_gpu_verify.py) holds honest kernels and one adversarial kernel per row of
the threat list, each with its task. Run with ``KA_GPU_REPORTS=FILE``, it appends every verification
report to FILE. This script joins the two: one JSON line per kernel with its task, its code and the
report, gzip-compressed into ``ingest/adapters/demo_verified.jsonl.gz``, which the ``demo`` source
ingests. Reports of the real archive and CUDA-L1 kernels are left out (those kernels are others' data).

    python scripts/make_demo_data.py REPORTS.jsonl [REPORTS.jsonl ...]   # later files win per test
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "ingest" / "adapters" / "demo_verified.jsonl.gz"


def _suite() -> Any:
    sys.path[:0] = [str(REPO), str(REPO / "tests" / "gpu")]
    spec = importlib.util.spec_from_file_location("gpu_suite", REPO / "tests" / "gpu" / "test_gpu_verify.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(suite: Any) -> dict[str, tuple[str, str, str, str]]:
    """Test id -> (kernel name, task code, kernel code, form)."""
    cases = {
        "test_timing_honest_cuda_binding_passes": ("honest-relu-cuda-binding", suite.RELU_TASK, suite.RELU_CUDA,
                                                   "cuda-binding"),
        "test_timing_honest_model_new_passes": ("honest-relu-model-new", suite.RELU_TASK, suite.HONEST_MODEL_NEW,
                                                "model-new"),
        "test_sanitizer_passes_an_honest_kernel": ("honest-relu-under-memcheck", suite.RELU_TASK,
                                                   suite.HONEST_MODEL_NEW, "model-new"),
        "test_sanitizer_catches_a_write_past_the_kernels_own_output": ("writes-past-its-own-output", suite.RELU_TASK,
                                                                       suite.PAST_OWN_OUTPUT, "model-new"),
        "test_shape_probe_finds_an_honest_kernel_right_at_other_shapes": (
            "honest-relu-at-other-shapes", suite.SIZED_RELU_TASK, suite.HONEST_MODEL_NEW, "model-new"),
        "test_shape_probe_records_a_kernel_wired_to_the_task_shape": (
            "wired-to-the-task-shape", suite.SIZED_RELU_TASK, suite.WIRED_TO_THE_TASK_SHAPE, "model-new"),
    }
    for row, name, task, form, kernel, _check, _caught in suite.ADVERSARIAL:
        cases[f"test_adversarial_kernel_is_caught[row{row}-{name}]"] = (f"row{int(row):02d}-{name}", task, kernel, form)
    return cases


def task_name(code: str) -> str:
    """A short name for a task: what its forward returns and the shapes of its inputs.

    Example:
        >>> task_name("def forward(self, x):\\n    return torch.relu(x)\\ndef get_inputs():\\n    return [torch.rand(8, 4)]")
        'torch.relu(x) on rand(8, 4)'
    """
    forward = re.search(r"def forward\(self[^)]*\):\s*\n\s*return (.+)", code)
    inputs = re.search(r"def get_inputs\(\):\s*\n\s*return \[(.+)\]", code)
    what = forward.group(1).strip() if forward else "task"
    shapes = inputs.group(1).replace("torch.", "").strip() if inputs else ""
    return f"{what} on {shapes}" if shapes else what


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path, help="JSON Lines written by the GPU suite (KA_GPU_REPORTS)")
    args = parser.parse_args()
    cases = _cases(_suite())
    reports: dict[str, dict[str, Any]] = {}
    for path in args.reports:
        for line in path.read_text().splitlines():
            report = json.loads(line)
            test = report.pop("test").split("::")[-1]
            if test in cases:
                reports[test] = report
    records = []
    for test, report in sorted(reports.items(), key=lambda item: cases[item[0]][0]):
        name, task_code, kernel_code, form = cases[test]
        records.append({"kernel_name": name, "task_name": task_name(task_code), "task_code": task_code,
                        "kernel_code": kernel_code, "form": form, "report": report})
    with gzip.open(OUT, "wt", encoding="utf-8") as sink:
        for record in records:
            sink.write(json.dumps(record, sort_keys=True) + "\n")
    print(f"wrote {len(records)} kernels with their reports to {OUT.relative_to(REPO)} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
