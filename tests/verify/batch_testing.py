"""Tasks and kernels for the batch tests: CPU-only, so the whole pipeline runs in CI."""

from __future__ import annotations

from verify.pipeline import VerifyJob

TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
    def forward(self, x):
        return torch.relu(self.lin(x))
def get_inputs():
    return [torch.randn(8, 16)]
def get_init_inputs():
    return [16]
'''
TASK_TANH = TASK.replace("torch.relu", "torch.tanh")
HONEST = TASK.replace("class Model(", "class ModelNew(").split("def get_inputs")[0]
HONEST_TANH = TASK_TANH.replace("class Model(", "class ModelNew(").split("def get_inputs")[0]
MUTATING = HONEST.replace("return torch.relu(self.lin(x))", "y = torch.relu(self.lin(x))\n        x.zero_()\n        return y")
# A C++ extension built by torch's load_inline on import (CPU only), so the build cache has work to do.
EXTENSION = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = "torch::Tensor relu_linear(torch::Tensor x, torch::Tensor w, torch::Tensor b) {\\n  return torch::relu(torch::addmm(b, x, w.t()));\\n}\\n"
_ext = load_inline(name="ka_batch_test_relu_linear", cpp_sources=[_SOURCE], functions=["relu_linear"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return _ext.relu_linear(x, self.lin.weight, self.lin.bias)
'''


def job(key: str, kernel: str = HONEST, task: str = TASK) -> VerifyJob:
    """A model-new job."""
    return VerifyJob(key=key, task_code=task, kernel_code=kernel, form="model-new", meta={"kernel_name": key})
# The same extension built in the constructor instead of on import (seven of 36 CUDA-L1 kernels on the H100).
EXTENSION_IN_INIT = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = "torch::Tensor relu_linear(torch::Tensor x, torch::Tensor w, torch::Tensor b) {\\n  return torch::relu(torch::addmm(b, x, w.t()));\\n}\\n"


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.ext = load_inline(name="ka_batch_test_relu_linear_init", cpp_sources=[_SOURCE], functions=["relu_linear"],
                               verbose=False)

    def forward(self, x):
        return self.ext.relu_linear(x, self.lin.weight, self.lin.bias)
'''
# Code that does not compile, caught in the constructor with a fallback to PyTorch, as several CUDA-L1 kernels do.
BROKEN_WITH_FALLBACK = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
        try:
            self.ext = load_inline(name="ka_batch_test_broken",
                                   cpp_sources=["torch::Tensor f(torch::Tensor x) { return no_such_function(x); }"],
                                   functions=["f"], verbose=False)
        except Exception as error:
            print(f"compilation failed: {error}")
            self.ext = None

    def forward(self, x):
        return torch.relu(self.lin(x))
'''
