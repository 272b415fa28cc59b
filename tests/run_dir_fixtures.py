"""Small runs in the three layouts ``ingest.run_folder`` reads, written into a test's tmp folder.

The kernels, task and verify reports are the built-in demo's (kernel-archive's own GPU-suite kernels and
their real H100 reports); the NCU CSV follows ``ncu --csv --page details`` (see
test_ingest_profiles_ncu.py), the torch profile the eval script's key-average events, and the
clang-tidy text clang-tidy's diagnostics format.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import ingest

DATA = Path(ingest.__file__).resolve().parent / "adapters" / "demo_verified.jsonl.gz"
"""The built-in demo's data (read directly: importing its adapter would import DuckDB, absent on GPU machines)."""

RELU = "honest-relu-cuda-binding"
RELU_PY = "honest-relu-model-new"
CHEAT = "row05-returns-its-input"
NCU_HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
    '"Rule Description","Estimated Speedup Type","Estimated Speedup"'
)
TORCH_EVENTS = {
    "relu_kernel(float const*, float*, long)": {"cpu_time_total": 0.0, "device_time_total": 61.2,
                                                "self_cpu_time_total": 0.0, "self_device_time_total": 61.2,
                                                "count": 5},
    "cudaLaunchKernel": {"cpu_time_total": 21.5, "device_time_total": 0.0, "self_cpu_time_total": 21.5,
                         "self_device_time_total": 0.0, "count": 5},
}
CLANG_TIDY = ("kernel.cu:4:14: warning: performing an implicit widening conversion to type 'long' of a "
              "multiplication performed in type 'unsigned int' [bugprone-implicit-widening-of-multiplication-result]\n")
LOSSFUNK_HEADER = ("kernel_name,kernel_provider,kernel_operation_mode,metric_name,metric_unit,x_name,x_label,x_value,"
                   "y_value_50,y_value_20,y_value_80,extra_benchmark_config_str,gpu_name,timestamp")


def demo_records() -> dict[str, dict[str, Any]]:
    """The demo's records by kernel name."""
    with gzip.open(DATA, "rt", encoding="utf-8") as lines:
        return {r["kernel_name"]: r for r in map(json.loads, lines)}


def ncu_csv(kernel: str = "relu_kernel(const float *, float *, long)") -> str:
    """Five launches of one kernel in ``ncu --csv --page details`` form."""
    lines = ['==PROF== Connected to process 4242 (/usr/bin/python3)', NCU_HEADER]
    for launch in range(5):
        for section, metric, unit, value in (("Compute Workload Analysis", "Issue Slots Busy", "%", "12.5"),
                                             ("Memory Workload Analysis", "Memory Throughput", "byte/second",
                                              "2,194,949,494.95"),
                                             ("Occupancy", "Achieved Occupancy", "%", "87.1")):
            fields = [str(launch), "4242", "python3", "127.0.0.1", kernel, "1", "7", "(256, 1, 1)", "(16384, 1, 1)",
                      "0", "9.0", section, metric, unit, value, "", "", "", "", ""]
            lines.append(",".join(f'"{f}"' for f in fields))
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def own_run(root: Path, *, results: bool = True) -> Path:
    """A run folder: one task, three kernels with lineage sidecars; results for two of them when ``results``."""
    records = demo_records()
    write(root / "run.toml", 'name = "fixture-run"\nmodel = "hand-written"\ngpu = "H100"\n')
    write(root / "tasks" / "relu.py", records[RELU]["task_code"])
    write(root / "tasks" / "relu.toml", "level = 1\n")
    write(root / "kernels" / "relu" / "naive.cu", records[RELU]["kernel_code"])
    write(root / "kernels" / "relu" / "naive.toml", 'generation = 0\nstrategy = ["naive"]\nnotes = "one thread per element"\n')
    write(root / "kernels" / "relu" / "inline.py", records[RELU_PY]["kernel_code"])
    write(root / "kernels" / "relu" / "inline.toml", 'parent = "naive"\ngeneration = 1\nmodel = "claude"\n')
    write(root / "kernels" / "relu" / "cheat.py", records[CHEAT]["kernel_code"])
    write(root / "kernels" / "relu" / "cheat.toml", 'parent = "inline"\ngeneration = 2\nexpected = "failed"\n')
    if results:
        out = root / "results" / "relu"
        write(out / "naive.json", json.dumps(records[RELU]["report"]))
        write(out / "naive.ncu.csv", ncu_csv())
        write(out / "naive.torch.json", json.dumps(TORCH_EVENTS))
        write(out / "naive.clang-tidy.txt", CLANG_TIDY)
        write(out / "cheat.json", json.dumps(records[CHEAT]["report"]))
    return root


def collected(showcase: Path) -> Path:
    """Fill what ``own_run`` leaves out (a report for ``inline``, profiles for every kernel that ran) from the
    ``naive`` kernel's files, as a finished ``collect`` would have: the demo shows only a complete showcase."""
    out = showcase / "results" / "relu"
    if not (out / "inline.json").exists():
        (out / "inline.json").write_text((out / "naive.json").read_text())
    for name in ("inline", "cheat"):
        for suffix in (".ncu.csv", ".torch.json"):
            (out / f"{name}{suffix}").write_text((out / f"naive{suffix}").read_text())
    return showcase


def kernelbench_checkout(root: Path) -> Path:
    """A KernelBench checkout with one task file (level 1, problem 19) and a task index."""
    write(root / "KernelBench" / "level1" / "19_ReLU.py", demo_records()[RELU]["task_code"])
    return root


def kernelbench_run(root: Path) -> Path:
    """KernelBench's ``runs/<run>``: two samples of level 1 problem 19 and their eval_results.json."""
    records = demo_records()
    write(root / "level_1_problem_19_sample_0_kernel.py", records[RELU_PY]["kernel_code"])
    write(root / "level_1_problem_19_sample_1_kernel.py", records[CHEAT]["kernel_code"])
    results = {"19": [
        {"sample_id": 0, "compiled": True, "correctness": True, "metadata": {"hardware": "NVIDIA H100 80GB HBM3"},
         "runtime": 0.0213, "runtime_stats": {"mean": 0.0213, "std": 0.001, "num_trials": 100,
                                              "hardware": "NVIDIA H100 80GB HBM3", "device": "cuda:0"}},
        {"sample_id": 1, "compiled": True, "correctness": False,
         "metadata": {"correctness_issue": "Output mismatch", "hardware": "NVIDIA H100 80GB HBM3"},
         "runtime": -1.0, "runtime_stats": {}},
    ]}
    write(root / "eval_results.json", json.dumps(results))
    return root


def plain_folder(root: Path) -> Path:
    """A folder of load_inline kernel files (relu.py) beside a helper module that is not a kernel."""
    write(root / "relu.py", demo_records()[RELU_PY]["kernel_code"])
    write(root / "utils.py", "def ceil_div(a, b):\n    return (a + b - 1) // b\n")
    return root


def reference_folder(root: Path) -> Path:
    """A folder of reference task files, matched to plain-folder kernels by name."""
    write(root / "ReLU.py", demo_records()[RELU]["task_code"])
    return root


def lossfunk_csv(path: Path) -> Path:
    """A benchmark CSV in Lossfunk's columns: layer_norm by two providers and torch, two sizes, speed + memory."""
    rows = [LOSSFUNK_HEADER]
    for provider, scale in (("flash", 0.5), ("liger", 0.8), ("torch", 1.0)):
        for x in (1024, 4096):
            ms = scale * x / 1024 * 0.1
            rows.append(f"layer_norm,{provider},forward,speed,ms,N,hidden size,{x},{ms:.4f},{ms * 0.95:.4f},"
                        f"{ms * 1.05:.4f},\"{{\"\"M\"\": 4096, \"\"dtype\"\": \"\"torch.float32\"\"}}\","
                        f"NVIDIA H100 80GB HBM3,2025-06-01 10:00:00")
            rows.append(f"layer_norm,{provider},forward,memory,MB,N,hidden size,{x},{x * scale / 8:.1f},"
                        f"{x * scale / 8:.1f},{x * scale / 8:.1f},{{}},NVIDIA H100 80GB HBM3,2025-06-01 10:00:00")
    return write(path, "\n".join(rows) + "\n")
