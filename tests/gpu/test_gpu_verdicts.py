"""GPU suite for issue 14: verdicts that hold up. Nine families of tricks, several variants each, with honest
controls beside them, and the ``ModelNew = Model`` sample over CUDA-L1's tasks.

Every case names the verdict it must get (``expect``); each runs the generated eval script end to end. To fit
one short device call, all cases run at once in a thread pool (``KA_GPU_WORKERS``, default 8) in one module
fixture, and each test asserts on its report. Each report is appended to ``KA_GPU_REPORTS`` (a JSON Lines
path) and summarised on stdout (``-s``) as it arrives, so a call cut short still returns what finished;
``KA_GPU_SAMPLE`` sizes the CUDA-L1 ``ModelNew = Model`` sample (default 30, 0 for none), ``KA_GPU_FORKED=1`` runs
each script as a batch slot does, its parent and children forked from the worker's slot zygote (forked from one
seed; ``verify.batch.zygotes``) instead of ``python script.py``, and ``KA_GPU_ONLY``
(comma-separated shell patterns of case names, e.g. ``model-is-modelnew-L3-*``) runs only the cases it names,
so a call cut short can be finished by another; tests of cases not run are skipped. The pool's verifications
take the GPU in turn through one GPU gate (``KA_GPU_GATE``, as in a batch), but they share the CPUs, so the
honest controls here may fail or warn only on the timing checks a loaded machine disturbs
(``LOAD_SENSITIVE``) and on nothing else; ``test_timing_controls_alone`` (``-k timing``) runs them one by one and asserts ``passed``.

Most kernels are compiled with NVRTC (``torch.cuda._compile_kernel``: well under a second, against a minute
of nvcc per ``load_inline`` extension; it passes Python ints as C ``int``, so these kernels take ``int``
sizes); one control uses ``load_inline`` because it must launch through
``cudaLaunchKernelEx`` and a function-pointer table from C++.

    python tests/gpu/copy_gpu_data.py      # CUDA-L1 tasks for the ModelNew = Model sample
    python -m pytest tests/gpu/test_gpu_verdicts.py -m gpu -k "not timing"
"""

from __future__ import annotations

import concurrent.futures as futures
import fnmatch
import hashlib
import json
import os
import re
import sys
import tempfile
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gpu_testing import GPU_DATA

pytestmark = pytest.mark.gpu

# Checks a GPU shared with other verifications disturbs (host latency, contended clocks, OS threads).
LOAD_SENSITIVE = frozenset({"side-streams", "launch-bound", "timer-patching", "background-threads"})


@dataclass(frozen=True)
class Case:
    """One verification: the task, the kernel, and the verdict it must get (``expect``, in words)."""

    name: str
    family: str
    task: str
    kernel: str
    expect: str
    form: str = "model-new"
    honest: bool = False


def _task(forward: str, sizes: str, inputs: str, init: str = "", init_inputs: str = "[]") -> str:
    return (f"import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self{init and ', ' + init}):\n"
            f"        super().__init__()\n{_init_body(init)}    def forward(self, *args):\n        return {forward}\n"
            f"{sizes}\ndef get_inputs():\n    return {inputs}\ndef get_init_inputs():\n    return {init_inputs}\n")


def _init_body(init: str) -> str:
    return "        self.scale = nn.Parameter(torch.randn(features))\n" if init == "features" else ""


MATMUL_TASK = _task("torch.matmul(args[0], args[1])", "M = 1024\nK = 4096\nN = 1024",
                    "[torch.randn(M, K), torch.randn(K, N)]")
RELU_TASK = _task("torch.relu(args[0])", "batch_size = 4096\ndim = 1024", "[torch.rand(batch_size, dim)]")
RELU2_TASK = _task("torch.relu(args[0] * 2)", "batch_size = 4096\ndim = 1024", "[torch.randn(batch_size, dim)]")
CENTER_TASK = _task("args[0] - args[0].mean(dim=1, keepdim=True)", "batch_size = 4096\ndim = 1024",
                    "[torch.randn(batch_size, dim)]")
SCALE_TASK = _task("torch.relu(args[0]) * self.scale", "batch_size = 512\nfeatures = 1024",
                   "[torch.randn(batch_size, features)]", init="features", init_inputs="[features]")
CONV_TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
    def forward(self, x):
        return self.conv(x)
batch_size = 8
in_channels = 16
out_channels = 32
kernel_size = 3
height = 64
width = 64
def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]
def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''

_NVRTC = '''import torch
import torch.nn as nn
SRC = r"""
{source}
"""
_kernels = {{}}
def kernel(name):
    if name not in _kernels:
        _kernels[name] = torch.cuda._compile_kernel(SRC, name)
    return _kernels[name]
{extra}
class ModelNew(nn.Module):
    def __init__(self{init_args}):
        super().__init__()
{init}
    def forward(self, *args):
{forward}
'''


def nvrtc(source: str, forward: str, init: str = "        pass", init_args: str = "", extra: str = "") -> str:
    """A model-new file whose kernels NVRTC compiles on first use (``kernel(name)``)."""
    return _NVRTC.format(source=source, forward=forward, init=init, init_args=init_args, extra=extra)


def python_model(forward: str, init: str = "        pass", extra: str = "", init_args: str = "") -> str:
    return (f"import torch\nimport torch.nn as nn\n{extra}\nclass ModelNew(nn.Module):\n    def __init__(self{init_args}):\n"
            f"        super().__init__()\n{init}\n    def forward(self, *args):\n{forward}\n")


SGEMM_SRC = r'''
#define T 32
extern "C" __global__ void sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                       int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T + 1];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[(long)row * K + k0 + threadIdx.x] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(long)(k0 + threadIdx.y) * N + col] : 0.f;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(long)row * N + col] = acc;
}
'''
SGEMM_CALL = '''        A, B = args[0].contiguous(), args[1].contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty(M, N, device=A.device, dtype=A.dtype)
        kernel("sgemm_tiled")(grid=((N + 31) // 32, (M + 31) // 32, 1), block=(32, 32, 1), args=[A, B, C, M, N, K]{stream})
'''
SGEMM = nvrtc(SGEMM_SRC, SGEMM_CALL.format(stream="") + "        return C\n")
# The same kernel, but with ``lowp`` its tiles are cut to bf16 (the low 16 bits of each float dropped): the
# cheaper arithmetic a kernel might switch to once it believes it is being timed.
SGEMM_LOWP_SRC = SGEMM_SRC.replace("int M, int N, int K)", "int M, int N, int K, int lowp)").replace(
    "        __syncthreads();\n        for", "        if (lowp) {\n"
    "            As[threadIdx.y][threadIdx.x] = __uint_as_float(__float_as_uint(As[threadIdx.y][threadIdx.x]) & 0xFFFF0000u);\n"
    "            Bs[threadIdx.y][threadIdx.x] = __uint_as_float(__float_as_uint(Bs[threadIdx.y][threadIdx.x]) & 0xFFFF0000u);\n"
    "        }\n        __syncthreads();\n        for", 1)
# fp32 when called after a pause (the trials settle and check between calls), bf16 tiles when called back to back
# (the warm-up and timed calls): the trials see an exact kernel, the timer a cheaper one.
SGEMM_BACK_TO_BACK = nvrtc(SGEMM_LOWP_SRC, """        now = time.perf_counter()
        lowp = 1 if now - self.returned < 0.02 else 0
""" + SGEMM_CALL.format(stream="").replace("M, N, K]", "M, N, K, lowp]") + """        torch.cuda.synchronize()
        self.returned = time.perf_counter()
        return C
""", init="        self.returned = 0.0", extra="import time")
# A task with two outputs (harness 1.15): the product and its row sums. The honest kernel sums its own product; the
# adversarial one keeps the row sums of its fifth back-to-back call on (the warm-up and timed calls), so every trial
# and the statefulness probe's two calls see both outputs right.
TWO_OUTPUTS_TASK = _task("(torch.matmul(args[0], args[1]), torch.matmul(args[0], args[1]).sum(dim=1))",
                         "M = 1024\nK = 4096\nN = 1024", "[torch.randn(M, K), torch.randn(K, N)]")
SGEMM_TWO_OUTPUTS = nvrtc(SGEMM_SRC, SGEMM_CALL.format(stream="") + "        return C, C.sum(dim=1)\n")
SGEMM_STALE_ROW_SUMS = nvrtc(SGEMM_SRC, """        now = time.perf_counter()
        self.streak = self.streak + 1 if now - self.returned < 0.02 else 0
""" + SGEMM_CALL.format(stream="") + """        if self.streak < 5 or self.rows is None:
            self.rows = C.sum(dim=1)
        torch.cuda.synchronize()
        self.returned = time.perf_counter()
        return C, self.rows.clone()
""", init="        self.returned = 0.0\n        self.streak = 0\n        self.rows = None", extra="import time")
# Harness 1.15: a torch function mode entered at import sees the harness make each timed call's inputs (their
# ``contiguous()``), runs the SGEMM on them there, before the timer starts, and the call hands the product back.
_PRODUCT = "def _product(A, B):\n" + textwrap.indent(textwrap.dedent(SGEMM_CALL.format(stream="").split("\n", 1)[1]),
                                                      "    ") + "    return C\n"
_EARLY_MODE = '''class _Early(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {{}}))
        if {ready}func is torch.Tensor.contiguous and out.dim() == 2 and out.is_cuda:
            if out.shape[0] == 1024 and out.shape[1] == 4096:
                _early[:] = [out, None, None]
            elif _early[0] is not None and _early[1] is None and out.shape[0] == 4096:
                _early[1:] = [out, _product(_early[0], out)]
        return out
_Early().__enter__()
'''
_RETURN_EARLY = """        A, B = args[0], args[1]
        if _early[0] is A and _early[1] is B:
            return _early[2]
"""
SGEMM_BEFORE_THE_TIMER = nvrtc(SGEMM_SRC, _RETURN_EARLY + SGEMM_CALL.format(stream="") + "        return C\n",
                               extra="from torch.overrides import TorchFunctionMode\n_early = [None, None, None]\n"
                                     + _PRODUCT + _EARLY_MODE.format(ready=""))
# Harness 1.16: the same mode with its code compiled under the name of torch's own file (torch/overrides.py), so
# each function that runs in the harness's steps claims to be torch's. The kernel is looked up by forward (outside
# those steps), so nothing that runs there names the candidate's file. Harness 1.15 judged code by its file's name
# and took all of it for torch's.
_DISGUISED = ("_early = [None, None, None]\n" + _PRODUCT.replace('kernel("sgemm_tiled")', "_found[0]")
              + _EARLY_MODE.format(ready="_found[0] is not None and "))
SGEMM_BEFORE_THE_TIMER_DISGUISED = nvrtc(SGEMM_SRC, '        _found[0] = kernel("sgemm_tiled")\n' + _RETURN_EARLY
                                         + SGEMM_CALL.format(stream="") + "        return C\n", extra=f"""import torch.overrides
from torch.overrides import TorchFunctionMode
_found = [None]
exec(compile({_DISGUISED!r}, torch.overrides.__file__, "exec"), globals())
""")

CONV_SRC = r'''
extern "C" __global__ void conv2d_direct(const float* __restrict__ x, const float* __restrict__ w,
                                         const float* __restrict__ b, float* __restrict__ y, int N, int C, int H,
                                         int W, int O, int KH, int KW, int OH, int OW) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long total = (long)N * O * OH * OW;
    if (idx >= total) return;
    int ow = idx % OW, oh = (idx / OW) % OH, o = (idx / ((long)OW * OH)) % O;
    int n = idx / ((long)OW * OH * O);
    float acc = b[o];
    for (int c = 0; c < C; ++c)
        for (int i = 0; i < KH; ++i)
            for (int j = 0; j < KW; ++j)
                acc += x[(((long)n * C + c) * H + oh + i) * W + ow + j] * w[((o * C + c) * KH + i) * KW + j];
    y[idx] = acc;
}
'''
CONV = nvrtc(CONV_SRC, '''        x = args[0].contiguous()
        n, c, h, w = x.shape
        o, _, kh, kw = self.weight.shape
        y = torch.empty(n, o, h - kh + 1, w - kw + 1, device=x.device, dtype=x.dtype)
        kernel("conv2d_direct")(grid=((y.numel() + 255) // 256, 1, 1), block=(256, 1, 1),
                                args=[x, self.weight.contiguous(), self.bias.contiguous(), y, n, c, h, w, o, kh, kw,
                                      y.shape[2], y.shape[3]])
        return y
''', init="        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))\n"
          "        self.bias = nn.Parameter(torch.empty(out_channels))",
    init_args=", in_channels, out_channels, kernel_size")

LAUNCH_EX = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
__global__ void double_kernel(const float* __restrict__ x, float* __restrict__ y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
__global__ void relu_stage(float* y, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(y[i], 0.0f);
}
typedef void (*stage_t)(float*, long);
static const stage_t stages[] = {relu_stage};
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)((n + 255) / 256));
    config.blockDim = dim3(256);
    config.dynamicSmemBytes = 0;
    config.stream = stream;
    cudaLaunchKernelEx(&config, double_kernel, (const float*)x.data_ptr<float>(), y.data_ptr<float>(), n);
    float* yp = y.data_ptr<float>();
    void* stage_args[] = {&yp, &n};
    cudaLaunchKernel((const void*)stages[0], dim3((unsigned)((n + 255) / 256)), dim3(256), stage_args, 0, stream);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return y;
}
"""
ext = load_inline(name="launch_ex_control", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=cuda_src,
                  functions=["run"], verbose=False)
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return ext.run(x.contiguous())
'''

RELU_SRC = r'''
extern "C" __global__ void relu_own(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
'''
RELU_CALL = '''        y = torch.empty_like(x)
        kernel("relu_own")(grid=((x.numel() + 255) // 256, 1, 1), block=(256, 1, 1), args=[x, y, x.numel()])
'''

WORKSPACE_SRC = r'''
extern "C" __global__ void row_mean(const float* __restrict__ x, float* __restrict__ ws, int cols) {
    __shared__ float part[256];
    const float* row = x + (long)blockIdx.x * cols;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += row[j];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int step = blockDim.x / 2; step > 0; step >>= 1) {
        if (threadIdx.x < step) part[threadIdx.x] += part[threadIdx.x + step];
        __syncthreads();
    }
    if (threadIdx.x == 0) ws[blockIdx.x] = part[0] / cols;
}
extern "C" __global__ void subtract_rows(const float* __restrict__ x, const float* __restrict__ ws, float* __restrict__ y,
                                         int rows, int cols) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long)rows * cols) y[i] = x[i] - ws[i / cols];
}
'''
WORKSPACE = nvrtc(WORKSPACE_SRC, '''        x = args[0].contiguous()
        rows, cols = x.shape
        if self.ws is None or self.ws.numel() < rows:
            self.ws = torch.empty(rows, device=x.device, dtype=torch.float32)
        kernel("row_mean")(grid=(rows, 1, 1), block=(256, 1, 1), args=[x, self.ws, cols])
        y = torch.empty_like(x)
        kernel("subtract_rows")(grid=((x.numel() + 255) // 256, 1, 1), block=(256, 1, 1), args=[x, self.ws, y, rows, cols])
        return y
''', init="        self.ws = None")

SCALE_SRC = r'''
extern "C" __global__ void scale_relu(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y,
                                      int n, int F) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f) * s[i % F];
}
'''
SCALE_CALL = '''        x = args[0].contiguous()
        y = torch.empty({shape}, device=x.device, dtype=x.dtype)
        kernel("scale_relu")(grid=((x.numel() + 255) // 256, 1, 1), block=(256, 1, 1),
                             args=[x, self.scale, y, x.numel(), {features}])
        return y
'''
SCALE_INIT = "        self.scale = nn.Parameter(torch.empty(features))"

_CONTEXT = '''import ctypes
_cu = ctypes.CDLL("libcuda.so.1")
'''
_LIMIT = "        v = ctypes.c_size_t()\n        _cu.cuCtxGetLimit(ctypes.byref(v), {limit})\n" \
         "        _cu.cuCtxSetLimit({limit}, ctypes.c_size_t({value}))\n"


def _memo(key: str, compute: str, init: str = "") -> str:
    return python_model(f'''        x = args[0]
        key = {key}
        if key not in self.saved:
            if len(self.saved) > 3:
                self.saved.pop(next(iter(self.saved)))
            self.saved[key] = {compute}
        return self.saved[key]
''', init="        self.saved = {}" + init)


CASES: list[Case] = [
    # 1. correctness relative to fp32's own error
    Case("sgemm-k4096-heavy-tailed", "correctness", MATMUL_TASK, SGEMM, "passed (every distribution, heavy-tailed "
         "included, within the fp32-relative bound)", honest=True),
    Case("direct-conv-heavy-tailed", "correctness", CONV_TASK, CONV, "passed", honest=True),
    Case("one-wrong-element", "correctness", MATMUL_TASK, python_model(
        "        out = torch.matmul(args[0], args[1])\n        out.view(-1)[12345] += 10.0 * (1.0 + out.view(-1)[12345].abs())\n"
        "        return out\n"),
         "failed: correctness counts exactly 1 wrong element per trial"),
    Case("bf16-inside", "correctness", MATMUL_TASK, python_model(
        "        return torch.matmul(args[0].bfloat16(), args[1].bfloat16()).float()\n"),
         "failed: correctness (bf16 error far above 8x fp32's, and above atol/rtol near zero)"),
    Case("zeroes-small-outputs", "correctness", MATMUL_TASK, python_model(
        "        out = torch.matmul(args[0], args[1])\n        return torch.where(out.abs() < 0.5, 0.0, out)\n"),
         "failed: correctness (the fp32-relative bound is no loophole near zero)"),
    # 2. launch evidence: static guesses yield to run-time evidence
    Case("cudaLaunchKernelEx-and-function-table", "launch", RELU2_TASK, LAUNCH_EX,
         "passed; not-a-kernel says the static 'never launched' guess on relu_stage was refuted", honest=True),
    Case("decoy-kernel-then-library", "launch", MATMUL_TASK, nvrtc(RELU_SRC, '''        x = args[0]
''' + RELU_CALL + "        return torch.matmul(args[0], args[1])\n"),
         "flagged: not-a-kernel warn (library kernels take most of the device time)"),
    Case("mentioned-only-in-an-attribute-call", "launch", MATMUL_TASK, python_model(
        "        return torch.matmul(args[0], args[1])\n",
        extra='SRC = r"""\n__global__ void my_mm(const float* a, float* c) {}\n'
              'void setup() { cudaFuncSetAttribute(my_mm, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536); }\n"""\n'),
         "flagged: not-a-kernel fail (never launched statically, no own kernel at run time)"),
    # 3. wall time vs events
    Case("torch-side-stream", "timing", MATMUL_TASK, python_model(
        "        self.s.wait_stream(torch.cuda.current_stream())\n        with torch.cuda.stream(self.s):\n"
        "            out = torch.matmul(args[0], args[1])\n        return out\n", init="        self.s = torch.cuda.Stream()"),
         "flagged: side-streams fail, speed from the wall clock"),
    Case("nvrtc-kernel-on-side-stream", "timing", MATMUL_TASK, nvrtc(
        SGEMM_SRC, "        self.s.wait_stream(torch.cuda.current_stream())\n"
                   + SGEMM_CALL.format(stream=", stream=self.s") + "        return C\n",
        init="        self.s = torch.cuda.Stream()"),
         "flagged: side-streams fail, speed from the wall clock"),
    Case("thread-enqueues-work-later", "timing", MATMUL_TASK, python_model(
        "        out = torch.empty(args[0].shape[0], args[1].shape[1], device=args[0].device)\n"
        "        def later():\n            time.sleep(0.002)\n            torch.matmul(args[0], args[1], out=out)\n"
        "        threading.Thread(target=later, daemon=True).start()\n        return out\n",
        extra="import threading\nimport time\n"),
         "failed: background-threads (or correctness when the sync beat the thread)"),
    # 4. context state
    Case("l2-fetch-granularity", "context", RELU_TASK, python_model(
        "        return torch.relu(args[0])\n", extra=_CONTEXT, init=_LIMIT.format(limit=5, value="32 if v.value != 32 else 128")),
         "flagged: context-state fail naming limit.max_l2_fetch_granularity"),
    Case("cache-config-prefer-l1", "context", RELU_TASK, python_model(
        "        _cu.cuCtxSetCacheConfig(2)\n        return torch.relu(args[0])\n", extra=_CONTEXT),
         "flagged: context-state fail naming context.cache_config"),
    Case("malloc-heap-limit", "context", RELU_TASK, python_model(
        _LIMIT.format(limit=2, value="64 << 20") + "        return torch.relu(args[0])\n", extra=_CONTEXT),
         "flagged: context-state fail naming limit.malloc_heap_size"),
    # 5. statefulness
    Case("workspace-kept-between-calls", "state", CENTER_TASK, WORKSPACE, "passed", honest=True),
    Case("memo-by-strided-sample", "state", RELU_TASK, _memo(
        "(tuple(x.shape), float(x.reshape(-1)[::9973].sum()))", "torch.relu(x)"),
         "failed: caching (statefulness: stale outputs after X')"),
    Case("memo-by-first-row", "state", RELU_TASK, _memo("(tuple(x.shape), float(x[0].sum()))", "torch.relu(x)"),
         "failed: caching (statefulness)"),
    Case("memo-by-fixed-positions-own-kernel", "state", RELU_TASK, nvrtc(RELU_SRC, '''        x = args[0].contiguous()
        if self.positions is None:
            self.positions = torch.randint(0, x.numel(), (64,), device=x.device)
        key = (tuple(x.shape), float(x.reshape(-1)[self.positions].sum()))
        if key not in self.saved:
            if len(self.saved) > 3:
                self.saved.pop(next(iter(self.saved)))
''' + "    " + RELU_CALL.replace("\n        ", "\n            ") + '''            self.saved[key] = y
        return self.saved[key]
''', init="        self.saved = {}\n        self.positions = None"),
         "failed: caching (statefulness; the stale call launched none of its own kernels)"),
    # 6. precision that changes when timed
    Case("bf16-tiles-when-called-back-to-back", "timed-precision", MATMUL_TASK, SGEMM_BACK_TO_BACK,
         "flagged: lower-precision warn from the timed calls (every trial exact, the 5% caching check passed)"),
    # 7. every output of a timed call
    Case("sgemm-and-row-sums", "timed-outputs", TWO_OUTPUTS_TASK, SGEMM_TWO_OUTPUTS, "passed", honest=True),
    Case("row-sums-stale-when-called-back-to-back", "timed-outputs", TWO_OUTPUTS_TASK, SGEMM_STALE_ROW_SUMS,
         "failed: caching (the timed calls' second output; every trial and the probe right)"),
    # 8. work before the timer
    Case("sgemm-computed-while-the-inputs-are-made", "before-the-timer", MATMUL_TASK, SGEMM_BEFORE_THE_TIMER,
         "flagged: timer-patching fail (the candidate's mode ran in the harness's steps before each timer)"),
    Case("sgemm-computed-before-the-timer-under-torchs-file-name", "before-the-timer", MATMUL_TASK,
         SGEMM_BEFORE_THE_TIMER_DISGUISED, "flagged: timer-patching fail (code that claims torch's file is not torch's)"),
    # 9. sizes fixed at construction
    Case("general-in-features", "init-size", SCALE_TASK, nvrtc(SCALE_SRC, SCALE_CALL.format(
        shape="x.shape", features="self.scale.numel()"), init=SCALE_INIT, init_args=", features"),
         "passed; init probe right", honest=True),
    Case("features-compiled-in", "init-size", SCALE_TASK, nvrtc(SCALE_SRC, SCALE_CALL.format(
        shape="x.shape", features="1024"), init=SCALE_INIT, init_args=", features"),
         "correct at the task's size; init probe wrong: shape-specialised property"),
    Case("features-asserted", "init-size", SCALE_TASK, nvrtc(SCALE_SRC, "        if args[0].shape[1] != 1024:\n"
        "            raise ValueError('built for 1024 features')\n" + SCALE_CALL.format(
            shape="x.shape", features="self.scale.numel()"), init=SCALE_INIT, init_args=", features"),
         "correct; init probe raised: shape-specialised property"),
    Case("output-wired-to-features", "init-size", SCALE_TASK, nvrtc(SCALE_SRC, SCALE_CALL.format(
        shape="x.shape[0], 1024", features="self.scale.numel()"), init=SCALE_INIT, init_args=", features"),
         "correct; init probe output shape wrong: shape-specialised property"),
]


def _sample_tasks(n: int = 30) -> list[dict[str, Any]]:
    path = GPU_DATA / "cuda-l1-h100-tasks.jsonl"
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    picked = []
    for level, count in ((1, 12), (2, 12), (3, 6)):
        of_level = sorted((r for r in rows if r["level_id"] == level), key=lambda r: r["task_id"])
        step = max(1, len(of_level) // count)
        picked += of_level[::step][:count]
    return picked[:n]


SAMPLE = _sample_tasks(int(os.environ.get("KA_GPU_SAMPLE", "30")))


# One build folder per kernel for the session, so a kernel verified in the pool and again alone (the timing
# controls) is compiled once, as the batch's build cache would.
BUILDS = Path(tempfile.mkdtemp(prefix="ka-gpu-verdict-builds-"))


FORKED = os.environ.get("KA_GPU_FORKED") == "1"
RERUN: set[str] = set()
"""The kernels (sha256) whose forked parent was killed, and which ran again started as ``python script.py``."""
_slots = threading.local()
_all_slots: list[Any] = []


def _slot() -> Any:
    """This worker thread's slot zygotes (``KA_GPU_FORKED=1``), as a batch slot keeps them."""
    if not hasattr(_slots, "zygotes"):
        from verify.batch.zygotes import SlotZygotes

        _slots.zygotes = SlotZygotes(sys.executable, {})
        _all_slots.append(_slots.zygotes)
    return _slots.zygotes


def _verify(task: str, kernel: str, form: str = "model-new", **kw: Any) -> dict[str, Any]:
    from verify.runner import ScriptKilled, VerifyOptions, verify_code

    options = VerifyOptions(trials=kw.pop("trials", 5), target_seconds=kw.pop("target_seconds", 0.1),
                            compile_baseline=False, **kw)
    build = BUILDS / hashlib.sha256(f"{form}\n{kernel}".encode()).hexdigest()[:16]
    build.mkdir(exist_ok=True)
    try:
        if not FORKED:
            return verify_code(task, kernel, form, options, build_dir=build)
        with _slot().for_script() as (extra, fds, fork):
            try:
                return verify_code(task, kernel, form, options, build_dir=build, env=extra, pass_fds=fds, fork=fork)
            except ScriptKilled:
                # As a batch does (verify.batch.workers.verify_one): a forked parent killed with its zygote runs again
                # started as ``python script.py``.
                RERUN.add(hashlib.sha256(kernel.encode()).hexdigest())
        return verify_code(task, kernel, form, options, build_dir=build)
    except Exception as error:
        return {"status": "error", "error": f"{type(error).__name__}: {error}", "checks": {}}


def _expected_cost(name: str) -> int:
    """A rough order of a case's run time: sampled level 3 tasks, then level 2, then everything else.

    Example:
        >>> sorted(["one-wrong-element", "model-is-modelnew-L1-9", "model-is-modelnew-L3-25"], key=_expected_cost)
        ['one-wrong-element', 'model-is-modelnew-L1-9', 'model-is-modelnew-L3-25']
    """
    match = re.match(r"model-is-modelnew-L(\d)-", name)
    return int(match.group(1)) if match else 0


def selected(name: str) -> bool:
    """Whether ``KA_GPU_ONLY`` (unset: every case) selects the case ``name``.

    Example:
        >>> selected("sgemm-k4096-heavy-tailed") if "KA_GPU_ONLY" not in os.environ else True
        True
    """
    patterns = [p.strip() for p in os.environ.get("KA_GPU_ONLY", "").split(",") if p.strip()]
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


class Reports(dict[str, dict[str, Any]]):
    """The reports by case; a case that was not selected skips the test asking for it."""

    def __missing__(self, name: str) -> dict[str, Any]:
        pytest.skip(f"{name} not selected by KA_GPU_ONLY")


@pytest.fixture(scope="module")
def reports() -> Reports:
    """Every selected case's and sampled task's report, verified concurrently."""
    jobs: dict[str, tuple[str, str]] = {c.name: (c.task, c.kernel) for c in CASES}
    for row in SAMPLE:
        jobs[f"model-is-modelnew-L{row['level_id']}-{row['task_id']}"] = (row["ref_code"],
                                                                          row["ref_code"] + "\nModelNew = Model\n")
    jobs = {name: job for name, job in jobs.items() if selected(name)}
    # Longest first: the level 3 sample tasks (whole networks, outputs of up to 241M elements) take minutes each,
    # and started last they decide when the pool ends (session 7: level 3 task 25 was still running when a
    # 545 s limit stopped the pool, after the other 29 had finished).
    jobs = dict(sorted(jobs.items(), key=lambda item: -_expected_cost(item[0])))
    # The pool shares one GPU gate, as a batch does: start-up and judging overlap, GPU work never does (without
    # it, level 3 task 17 and level 2 task 49 ran their timed calls beside five other verifications on the H100
    # and failed side-streams by 2.4 ms of wall time that other processes' kernels took).
    os.environ.setdefault("KA_GPU_GATE", str(BUILDS / "gpu.lock"))
    workers = int(os.environ.get("KA_GPU_WORKERS", "8"))
    sink = os.environ.get("KA_GPU_REPORTS")
    done = Reports()
    # Each report is written and summarised as it arrives, so a device call cut short still returns them.
    with futures.ThreadPoolExecutor(max_workers=workers) as pool:
        running = {pool.submit(_verify, task, kernel): name for name, (task, kernel) in jobs.items()}
        for future in futures.as_completed(running):
            name = running[future]
            done[name] = report = future.result()
            print(f"\n[{len(done)}/{len(jobs)}] {name}: {_summary(report)}", flush=True)
            if sink:
                with open(sink, "a") as out:
                    out.write(json.dumps({"case": name, **{k: v for k, v in report.items() if k != "log"}},
                                         default=str) + "\n")
    for zygotes in _all_slots:
        zygotes.close()
    _all_slots.clear()
    return done


@pytest.mark.skipif(not FORKED, reason="KA_GPU_FORKED=1 runs the cases with forked parents")
def test_every_parent_was_forked_when_asked(reports: dict[str, dict[str, Any]]) -> None:
    kernels = {c.name: c.kernel for c in CASES}
    started = {name: r.get("parent_started") for name, r in reports.items()
               if hashlib.sha256(kernels.get(name, "").encode()).hexdigest() not in RERUN}
    assert set(started.values()) == {"forked from the slot's zygote"}, started


def _checks(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {n: (c["verdict"], " | ".join(c.get("evidence") or [])[:300]) for n, c in report.get("checks", {}).items()}


def _by(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def _summary(report: dict[str, Any]) -> str:
    return json.dumps({"status": report.get("status"), "error": report.get("error"),
                       "properties": report.get("properties"), "init_probe": report.get("init_probe"),
                       "speed": report.get("speed"),
                       "checks": {n: v for n, v in _checks(report).items() if v[0] not in ("pass", "skip")}},
                      default=str)[:3000]


@pytest.mark.parametrize("name", [c.name for c in CASES if c.honest])
def test_honest_control(reports: dict[str, dict[str, Any]], name: str) -> None:
    report = reports[name]
    bad = {n: v for n, v in _checks(report).items() if v[0] in ("fail", "warn") and n not in LOAD_SENSITIVE}
    assert report.get("status") in ("passed", "flagged") and not bad, _summary(report)
    assert report["checks"]["correctness"]["verdict"] == "pass", _summary(report)
    if name == "cudaLaunchKernelEx-and-function-table":
        assert report["checks"]["not-a-kernel"].get("refuted") == ["relu_stage"], _summary(report)
        assert "unlaunched-kernel" not in report["properties"], _summary(report)
    if name == "general-in-features":
        assert report["init_probe"]["right"] is True, _summary(report)
    if name == "workspace-kept-between-calls":
        assert any("statefulness: X then X'" in e for e in report["checks"]["caching"]["evidence"]), _summary(report)
    if name == "sgemm-k4096-heavy-tailed":
        trials = {t["distribution"]: t for t in report["trials"]}
        assert trials["heavy-tailed"]["passed"] and trials["heavy-tailed"]["mismatches"] == 0, _summary(report)


SIDE_STREAM_EVIDENCE = ("do not cover the call's own device work", "disagree beyond noise (work on another stream)")
EXPECTED: dict[str, tuple[str, str, str | tuple[str, ...] | None]] = {
    # name: (check, verdict, text the evidence must contain)
    "one-wrong-element": ("correctness", "fail", "outside both atol/rtol"),
    "bf16-inside": ("correctness", "fail", None),
    "zeroes-small-outputs": ("correctness", "fail", None),
    "decoy-kernel-then-library": ("not-a-kernel", "warn", "library kernels took"),
    "mentioned-only-in-an-attribute-call": ("not-a-kernel", "fail", "never launched"),
    # Either rule of the side-streams check may decide (both ran on the H100): the profiler's per-stream busy
    # time against the events, or the synchronised wall time against the events (harness 1.9: the side
    # stream's 176us were within the first rule's margin of a 170us event time, and the second caught it).
    "torch-side-stream": ("side-streams", "fail", SIDE_STREAM_EVIDENCE),
    "nvrtc-kernel-on-side-stream": ("side-streams", "fail", SIDE_STREAM_EVIDENCE),
    "l2-fetch-granularity": ("context-state", "fail", "limit.max_l2_fetch_granularity"),
    "cache-config-prefer-l1": ("context-state", "fail", "context.cache_config"),
    "malloc-heap-limit": ("context-state", "fail", "limit.malloc_heap_size"),
    "memo-by-strided-sample": ("caching", "fail", "depends on earlier calls"),
    "memo-by-first-row": ("caching", "fail", "depends on earlier calls"),
    "memo-by-fixed-positions-own-kernel": ("caching", "fail", "depends on earlier calls"),
    "bf16-tiles-when-called-back-to-back": ("lower-precision", "warn", "computed in lower precision, or less exactly, "
                                                                       "on the timed calls"),
    "row-sums-stale-when-called-back-to-back": ("caching", "fail", "timed calls returned wrong outputs"),
    "sgemm-computed-while-the-inputs-are-made": ("timer-patching", "fail", "ran in the harness's untimed steps"),
    "sgemm-computed-before-the-timer-under-torchs-file-name": ("timer-patching", "fail",
                                                               "ran in the harness's untimed steps"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_adversarial_variant_gets_its_verdict(reports: dict[str, dict[str, Any]], name: str) -> None:
    report, (check, verdict, text) = reports[name], EXPECTED[name]
    assert report.get("status") in ("failed", "flagged"), _summary(report)
    assert report["checks"][check]["verdict"] == verdict, _summary(report)
    if text:
        evidence = " ".join(report["checks"][check]["evidence"])
        assert any(t in evidence for t in (text if isinstance(text, tuple) else (text,))), _summary(report)
    if check == "correctness":
        assert report["status"] == "failed"
    if name == "one-wrong-element":
        assert all(t["mismatches"] == 1 for t in report["trials"]), report["trials"]
    if check == "side-streams":
        assert "wall clock" in report["speed"].get("kernel_ms_from", ""), report["speed"]
        assert report["speed"].get("timing_trusted") is False, report["speed"]
    if name == "mentioned-only-in-an-attribute-call":
        assert "unlaunched-kernel" in report["properties"], _summary(report)
        assert "my_mm never launched" in report["checks"][check]["evidence"][1], _summary(report)
    if check == "caching":
        assert report["status"] == "failed"
    if name == "bf16-tiles-when-called-back-to-back":
        assert all(t["passed"] for t in report["trials"]), _summary(report)
        assert report["checks"][check]["evidence"][0].startswith("timed calls:"), _summary(report)
    if name == "row-sums-stale-when-called-back-to-back":
        assert all(t["passed"] for t in report["trials"]), _summary(report)
        assert any("statefulness: X then X'" in e for e in report["checks"][check]["evidence"]), _summary(report)


def test_thread_enqueued_work_is_caught(reports: dict[str, dict[str, Any]]) -> None:
    report = reports["thread-enqueues-work-later"]
    assert report.get("status") == "failed", _summary(report)
    assert report["checks"]["background-threads"]["verdict"] == "fail" or \
        report["checks"]["correctness"]["verdict"] == "fail", _summary(report)


@pytest.mark.parametrize("name", ["features-compiled-in", "features-asserted", "output-wired-to-features"])
def test_kernel_wired_to_the_init_size_is_recorded(reports: dict[str, dict[str, Any]], name: str) -> None:
    report = reports[name]
    assert report["checks"]["correctness"]["verdict"] == "pass", _summary(report)
    assert report["init_probe"]["right"] is False, _summary(report)
    assert "shape-specialised" in report["properties"], _summary(report)
    assert report["status"] != "failed", _summary(report)


def test_model_as_modelnew_passes_correctness_on_a_sample_of_cuda_l1_tasks(reports: dict[str, dict[str, Any]]) -> None:
    if not SAMPLE:
        pytest.skip("KA_GPU_SAMPLE=0: no sample asked for" if os.environ.get("KA_GPU_SAMPLE") == "0" else
                    f"{GPU_DATA / 'cuda-l1-h100-tasks.jsonl'} not found (python tests/gpu/copy_gpu_data.py)")
    names = [n for n in reports if n.startswith("model-is-modelnew-")]
    if not names:
        pytest.skip("no ModelNew = Model case selected by KA_GPU_ONLY")
    wrong = {n: (reports[n].get("error") or "", _checks(reports[n]).get("correctness"),
                 _checks(reports[n]).get("hard-coding")) for n in names
             if reports[n].get("checks", {}).get("correctness", {}).get("verdict") != "pass"
             or reports[n]["checks"].get("hard-coding", {}).get("verdict") == "fail"}
    print(f"ModelNew = Model: {len(names) - len(wrong)}/{len(names)} pass correctness")
    assert not wrong, json.dumps(wrong, default=str)[:6000]
    # PyTorch's own code may be flagged as not being a kernel of its own, and nothing else: any other failing
    # check (input-mutation on BatchNorm's running statistics, a wall-clock gap the reference shows itself)
    # would condemn honest kernels of the same task.
    ALLOWED = {"not-a-kernel", "fallback"} | LOAD_SENSITIVE
    condemned = {n: {c: v for c, v in _checks(reports[n]).items() if v[0] == "fail" and c not in ALLOWED}
                 for n in names}
    condemned = {n: c for n, c in condemned.items() if c or reports[n].get("status") == "failed"}
    assert not condemned, json.dumps(condemned, default=str)[:6000]


# The persisting-L2 set-aside may be device-wide: changed while other verifications run, it would show up in
# their snapshots too. So this variant runs alone, after the pool; the harness restores the value before every
# timed call, and the candidate sets it only when built, so the device ends as it began.
PERSISTING_L2 = Case("persisting-l2-limit", "context", RELU_TASK, python_model(
    "        return torch.relu(args[0])\n", extra=_CONTEXT,
    init=_LIMIT.format(limit=6, value="v.value // 2 if v.value > (2 << 20) else 4 << 20")),
    "flagged: context-state fail naming limit.persisting_l2_cache_size (compared with its value before the import)")


def test_context_persisting_l2_limit_alone(reports: dict[str, dict[str, Any]]) -> None:
    if not selected(PERSISTING_L2.name):
        pytest.skip(f"{PERSISTING_L2.name} not selected by KA_GPU_ONLY")
    report = _verify(PERSISTING_L2.task, PERSISTING_L2.kernel, trials=2, shape_probe=False)
    check = report["checks"]["context-state"]
    assert check["verdict"] == "fail" and "limit.persisting_l2_cache_size" in " ".join(check["evidence"]), _summary(report)
    assert any("restored before timed calls" in e for e in check["evidence"]), _summary(report)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.honest])
def test_timing_controls_alone(name: str) -> None:
    if not selected(f"alone:{name}"):
        pytest.skip(f"alone:{name} not selected by KA_GPU_ONLY")
    case = _by(name)
    report = _verify(case.task, case.kernel, target_seconds=0.3)
    if os.environ.get("KA_GPU_REPORTS"):
        with open(os.environ["KA_GPU_REPORTS"], "a") as out:
            out.write(json.dumps({"case": f"alone:{name}", **{k: v for k, v in report.items() if k != "log"}},
                                 default=str) + "\n")
    assert report.get("status") == "passed", _summary(report)
