"""GPU suite for verify/: honest kernels pass, one adversarial kernel per threat row is caught, real kernels.

Run on a machine with an NVIDIA GPU and nvcc (through the device tool here); the tests named ``timing``
assert on timings, so run them alone on the GPU, the rest in parallel:
``python -m pytest tests/gpu -m gpu -n 6 -k "not timing"`` then ``python -m pytest tests/gpu -m gpu -k timing``. Every case runs the generated eval script end to end, so these
tests exercise exactly what ``kernel-archive verify`` and a downloaded eval script run.
Real kernels come from ``$KA_GPU_DATA`` (default ``.gpu_data/`` in the repository: a few rows of
../shared/data copied there, because the device machine only receives the repository).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from gpu_testing import GPU_DATA

pytestmark = pytest.mark.gpu



def verify(task: str, kernel: str, form: str = "model-new", **kw: Any) -> dict[str, Any]:
    from verify.runner import VerifyOptions, verify_code

    options = VerifyOptions(trials=kw.pop("trials", 3), target_seconds=kw.pop("target_seconds", 0.15),
                            compile_baseline=kw.pop("compile_baseline", False), **kw)
    report = verify_code(task, kernel, form, options)
    if os.environ.get("KA_GPU_REPORTS"):
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        with open(os.environ["KA_GPU_REPORTS"], "a") as sink:
            sink.write(json.dumps({"test": test, **{k: v for k, v in report.items() if k != "log"}},
                                  default=str) + "\n")
    print(json.dumps({"status": report.get("status"), "error": report.get("error"),
                      "checks": {n: [c["verdict"], (c.get("evidence") or [""])[0][:160]]
                                 for n, c in report.get("checks", {}).items()},
                      "speed": report.get("speed")}, indent=1, default=str))
    return report


def verdict(report: dict[str, Any], check: str) -> str:
    return report["checks"][check]["verdict"]


RELU_TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.rand(4096, 1024)]
def get_init_inputs():
    return []
'''

MATMUL_TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, A, B):
        return torch.matmul(A, B)
N = 2048
def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]
def get_init_inputs():
    return []
'''

RELU_CUDA = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward, "relu"); }
'''

HONEST_MODEL_NEW = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="honest_relu", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu_cuda"], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return ext.relu_cuda(x.contiguous())
'''


def _model_new(body: str, header: str = "") -> str:
    return f"import torch\nimport torch.nn as nn\n{header}\nclass ModelNew(nn.Module):\n    def __init__(self):\n" \
           f"        super().__init__()\n{body}"


def _inline(name: str, kernel: str, launch: str, py_forward: str) -> str:
    return f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
src = r"""
#include <torch/extension.h>
{kernel}
torch::Tensor run(torch::Tensor x) {{
{launch}
}}
"""
ext = load_inline(name="{name}", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=src,
                  functions=["run"], verbose=False)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
{py_forward}
'''


# --- honest kernels: both forms pass -------------------------------------------------------------------


def test_timing_honest_cuda_binding_passes() -> None:
    report = verify(RELU_TASK, RELU_CUDA, "cuda-binding", compile_baseline=True, target_seconds=0.5)
    assert report["status"] == "passed", report.get("checks")
    assert report["speed"]["kernel_ms"] > 0 and report["speed"]["eager_ms"] > 0 and report["speed"]["compile_ms"] > 0


def test_timing_honest_model_new_passes() -> None:
    report = verify(RELU_TASK, HONEST_MODEL_NEW, "model-new")
    assert report["status"] == "passed", report.get("checks")


# --- one adversarial kernel per threat row ----------------------------------------------------------------

ADVERSARIAL: list[tuple[str, str, str, str, str, str, tuple[str, ...]]] = [
    # (row, name, task, form, kernel, check, verdicts that count as caught)
    ("1", "empty-reads-stale-allocator-memory", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        return torch.empty_like(x)\n"), "stale-memory", ("fail",)),
    ("2", "silent-launch-failure", RELU_TASK, "model-new",
     _inline("bad_launch", "__global__ void k(const float* x, float* y, long n) { long i = blockIdx.x * 2048L + threadIdx.x; "
             "if (i < n) y[i] = fmaxf(x[i], 0.f); }",
             "    auto y = torch::empty_like(x); long n = x.numel();\n"
             "    k<<<(n + 2047) / 2048, 2048>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n    return y;",
             "        return ext.run(x.contiguous())"), "launch-errors", ("fail",)),
    ("3", "zeros-under-loose-tolerance", RELU_TASK.replace("torch.relu(x)", "torch.relu(x) * 1e-4"), "model-new",
     _model_new("    def forward(self, x):\n        return torch.zeros_like(x)\n"), "weak-check", ("warn", "fail")),
    ("4", "constant-for-degenerate-task",
     RELU_TASK.replace("torch.relu(x)", "torch.softmax(x, dim=1).sum(dim=1)"), "model-new",
     _model_new("    def forward(self, x):\n        return torch.ones(x.shape[0], device=x.device)\n"),
     "degenerate-task", ("warn",)),
    ("5", "returns-its-input", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        return x\n"), "output-aliasing", ("fail",)),
    ("6", "zeroes-its-input", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        y = torch.relu(x)\n        x.zero_()\n        return y\n"),
     "input-mutation", ("fail",)),
    ("7", "right-only-on-the-task-distribution", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        return x.clone() if bool(x.min() >= 0) else torch.zeros_like(x)\n"),
     "hard-coding", ("fail",)),
    ("8", "shrinks-the-problem", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        return torch.relu(x[: x.shape[0] // 2])\n"), "problem-change", ("fail",)),
    ("9", "library-call-with-unlaunched-kernel", MATMUL_TASK, "model-new",
     _model_new("    def forward(self, A, B):\n        return torch.matmul(A, B)\n",
                'src = r"""__global__ void my_matmul(const float* a, const float* b, float* c, int n) { }"""\n'),
     "not-a-kernel", ("fail",)),
    ("10", "modelnew-is-the-reference", MATMUL_TASK, "model-new",
     "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "    def forward(self, A, B):\n        return torch.matmul(A, B)\nclass ModelNew(Model):\n    pass\n",
     "fallback", ("fail",)),
    ("11", "fp16-inside-fp32-out", MATMUL_TASK, "model-new",
     _model_new("    def forward(self, A, B):\n        return torch.matmul(A.half(), B.half()).float()\n"),
     "lower-precision", ("warn", "fail")),
    ("12", "lazy-tensor-subclass", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        return torch.relu(x).as_subclass(Lazy)\n",
                "class Lazy(torch.Tensor):\n    pass\n"), "fake-tensor", ("fail",)),
    ("13", "timing-work-on-a-side-stream", MATMUL_TASK.replace("N = 2048", "N = 4096"), "model-new",
     _model_new("        self.s = torch.cuda.Stream()\n    def forward(self, A, B):\n"
                "        self.s.wait_stream(torch.cuda.current_stream())\n"
                "        with torch.cuda.stream(self.s):\n            out = torch.matmul(A, B)\n        return out\n"),
     "side-streams", ("fail",)),
    ("14", "background-thread-fills-output", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        out = torch.empty_like(x)\n"
                "        def fill():\n            time.sleep(0.01)\n            out.copy_(torch.relu(x))\n"
                "        threading.Thread(target=fill, daemon=True).start()\n        return out\n",
                "import threading\nimport time\n"), "background-threads", ("fail",)),
    ("15", "caches-by-pointer", RELU_TASK, "model-new",
     _model_new("        self.cache = {}\n    def forward(self, x):\n        key = (x.data_ptr(), tuple(x.shape))\n"
                "        if key not in self.cache:\n            self.cache[key] = torch.relu(x)\n        return self.cache[key]\n"),
     "caching", ("fail",)),
    ("18", "patches-the-timer", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        return torch.relu(x)\n",
                "_orig = torch.cuda.Event.elapsed_time\n"
                "torch.cuda.Event.elapsed_time = lambda self, end: _orig(self, end) * 0.01\n"), "timer-patching", ("fail",)),
    ("19", "forges-a-verdict-and-exits", RELU_TASK, "model-new",
     _model_new("    def forward(self, x):\n        return torch.relu(x)\n",
                "import os, sys\nfor fd in range(3, 64):\n    try:\n"
                "        os.write(fd, b'{\"kind\": \"done\", \"verdict\": \"pass\", \"status\": \"passed\"}\\n')\n"
                "    except OSError:\n        pass\nprint('{\"status\": \"passed\"}')\nos._exit(0)\n"),
     "result-forging", ("fail",)),
    ("21", "enables-tf32-globally", MATMUL_TASK, "model-new",
     _model_new("    def forward(self, A, B):\n        torch.backends.cuda.matmul.allow_tf32 = True\n"
                "        return torch.matmul(A, B)\n"), "flag-flipping", ("fail",)),
    ("22", "timing-cuda-graph-on-a-launch-bound-task",
     RELU_TASK.replace("torch.relu(x)", "torch.relu(x * 2 + 1) - 1").replace("torch.rand(4096, 1024)", "torch.rand(64)"),
     "model-new",
     _model_new("        self.g = None\n    def forward(self, x):\n"
                "        if self.g is None:\n            self.x = x.clone()\n            s = torch.cuda.Stream()\n"
                "            s.wait_stream(torch.cuda.current_stream())\n            with torch.cuda.stream(s):\n"
                "                torch.relu(self.x * 2 + 1) - 1\n            torch.cuda.current_stream().wait_stream(s)\n"
                "            self.g = torch.cuda.CUDAGraph()\n            with torch.cuda.graph(self.g):\n"
                "                self.y = torch.relu(self.x * 2 + 1) - 1\n"
                "        self.x.copy_(x)\n        self.g.replay()\n        return self.y.clone()\n"),
     "launch-bound", ("warn", "fail")),
    ("23", "writes-past-the-end", RELU_TASK, "model-new",
     _inline("oob_write", "__global__ void k(float* x, float* y, long n) { long i = (long)blockIdx.x * blockDim.x + threadIdx.x; "
             "if (i < n) y[i] = fmaxf(x[i], 0.f); if (i == 0) { x[n] = 0.f; x[n + 7] = 1.f; } }",
             "    auto y = torch::empty_like(x); long n = x.numel();\n"
             "    k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n    return y;",
             "        return ext.run(x)"), "out-of-bounds", ("fail",)),
]


@pytest.mark.parametrize("row,name,task,form,kernel,check,caught", ADVERSARIAL, ids=[f"row{a[0]}-{a[1]}" for a in ADVERSARIAL])
def test_adversarial_kernel_is_caught(row: str, name: str, task: str, form: str, kernel: str, check: str,
                                      caught: tuple[str, ...]) -> None:
    report = verify(task, kernel, form)
    assert report["status"] != "passed", f"row {row} ({name}) passed: {report.get('checks')}"
    assert verdict(report, check) in caught, f"row {row} ({name}): {check} = {report['checks'][check]}"


# --- compute-sanitizer: what guard bands cannot see ------------------------------------------------------

# Writes 64 elements past the end of its own output, which lies in the caching allocator's slack: no
# guard band surrounds an output the kernel allocates, so only memcheck (--sanitize) can see it.
PAST_OWN_OUTPUT = _inline(
    "oob_own_output",
    "__global__ void k(const float* x, float* y, long n) { long i = (long)blockIdx.x * blockDim.x + threadIdx.x; "
    "if (i < n + 64) y[i] = fmaxf(x[i < n ? i : 0], 0.f); }",
    "    auto y = torch::empty({x.numel() + 1}, x.options()).narrow(0, 0, x.numel()); long n = x.numel();\n"
    "    k<<<(n + 64 + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n    return y.view_as(x);",
    "        return ext.run(x)")


def _failed(report: dict[str, Any]) -> dict[str, Any]:
    """Checks that failed. Not warnings: this group runs in parallel, and a shared GPU may make the
    timing checks warn (the timing group, run alone, asserts that honest kernels pass outright)."""
    return {n: c for n, c in report["checks"].items() if c["verdict"] == "fail"}


def test_sanitizer_passes_an_honest_kernel() -> None:
    report = verify(RELU_TASK, HONEST_MODEL_NEW, "model-new", sanitize=True, target_seconds=0.1)
    assert not _failed(report), report["checks"]
    assert "compute-sanitizer memcheck: 0 errors" in report["checks"]["out-of-bounds"]["evidence"]


def test_sanitizer_catches_a_write_past_the_kernels_own_output() -> None:
    report = verify(RELU_TASK, PAST_OWN_OUTPUT, "model-new", sanitize=True, target_seconds=0.1)
    check = report["checks"]["out-of-bounds"]
    assert check["verdict"] == "fail", check
    assert any(line.startswith("compute-sanitizer memcheck: ERROR SUMMARY") for line in check["evidence"]), check


# --- the shape probe (threat row 7): right only at the task's shapes is recorded, not failed ---------------

SIZED_RELU_TASK = RELU_TASK.replace("def get_inputs():\n    return [torch.rand(4096, 1024)]",
                                    "batch_size = 4096\ndef get_inputs():\n    return [torch.rand(batch_size, 1024)]")
assert SIZED_RELU_TASK != RELU_TASK

# Sizes its output and its grid from the task's shape, compiled in: right at 4096 x 1024 only.
WIRED_TO_THE_TASK_SHAPE = _inline(
    "wired_shape",
    "__global__ void k(const float* x, float* y, long n) { long i = (long)blockIdx.x * blockDim.x + threadIdx.x; "
    "if (i < n) y[i] = fmaxf(x[i], 0.f); }",
    "    auto y = torch::empty({4096, 1024}, x.options()); long n = x.numel();\n"
    "    k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n    return y;",
    "        return ext.run(x)")


def test_shape_probe_finds_an_honest_kernel_right_at_other_shapes() -> None:
    report = verify(SIZED_RELU_TASK, HONEST_MODEL_NEW, "model-new", target_seconds=0.1)
    assert report["shape_probe"] == {"right": True, "evidence": "at other shapes (batch_size 4096 -> 2049): right"}
    assert "shape-specialised" not in report["properties"]
    assert not _failed(report), report["checks"]


def test_shape_probe_records_a_kernel_wired_to_the_task_shape() -> None:
    report = verify(SIZED_RELU_TASK, WIRED_TO_THE_TASK_SHAPE, "model-new", target_seconds=0.1)
    assert report["checks"]["correctness"]["verdict"] == "pass", report["checks"]["correctness"]
    assert report["shape_probe"]["right"] is False, report["shape_probe"]
    assert "shape-specialised" in report["properties"]
    assert not _failed(report), report["checks"]


# --- real kernels from ../shared/data -----------------------------------------------------------------------


def _rows(name: str) -> list[dict[str, Any]]:
    path = GPU_DATA / name
    if not path.is_file():
        pytest.skip(f"{path} not found (copy the rows with scripts/gpu_data.py)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_timing_cuda_l1_h100_square_matmul_is_seen_through() -> None:
    row = next(r for r in _rows("cuda-l1-h100.jsonl") if r["level_id"] == 1 and r["task_id"] == 1)
    report = verify(row["ref_code"], row["custom_code"], "model-new", trials=3, target_seconds=1.0,
                    compile_baseline=True)
    props = set(report["properties"])
    assert {"library-call", "self-timing", "try-fallback", "reduced-precision", "no-gpu-code"} <= props, props
    assert verdict(report, "not-a-kernel") == "fail"
    assert verdict(report, "fallback") in ("warn", "fail")
    assert verdict(report, "lower-precision") in ("warn", "fail")
    # It picks its path by timing itself: the fp32 path runs at ~1x of eager; the fp16 path may be faster,
    # and then the run-time error (not only the static scan) must show the lower precision.
    if report["speed"]["speedup_eager"] >= 1.2:
        assert any(e.startswith("trial") for e in report["checks"]["lower-precision"]["evidence"]), report["speed"]
    else:
        assert report["speed"]["speedup_eager"] > 0.8, report["speed"]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_sakana_archive_kernels_end_to_end(index: int) -> None:
    rows = _rows("sakana-sample.jsonl")
    if index >= len(rows):
        pytest.skip("fewer rows copied")
    row = rows[index]
    report = verify(row["PyTorch_Code_Module"], row["CUDA_Code"], "cuda-binding", target_seconds=0.5)
    assert report["status"] in ("passed", "flagged", "failed")
    assert report["checks"]["compiles"]["verdict"] == "pass", report["checks"]["compiles"]
    if row["Correct"]:
        assert verdict(report, "correctness") == "pass", report["checks"]["correctness"]


@pytest.mark.parametrize("index", [0, 1])
def test_cuda_l1_kernels_end_to_end(index: int) -> None:
    rows = [r for r in _rows("cuda-l1-h100.jsonl") if not (r["level_id"] == 1 and r["task_id"] == 1)]
    if index >= len(rows):
        pytest.skip("fewer rows copied")
    row = rows[index]
    report = verify(row["ref_code"], row["custom_code"], "model-new", target_seconds=0.5)
    assert report["status"] in ("passed", "flagged", "failed"), report.get("error")
    assert verdict(report, "runs") in ("pass", "fail")
