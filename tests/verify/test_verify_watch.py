"""``verify.harness.watch``: the candidate's own code between a timed call's inputs and its timer (harness 1.15)."""

from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from batch_testing import HONEST, TASK

from verify.harness.watch import StepWatch
from verify.runner import VerifyOptions, verify_code


def _module(folder: Path, code: str) -> Any:
    path = folder / "kernel_watched.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("kernel_watched", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_candidates_function_is_recorded_and_the_librarys_are_not(tmp_path: Path) -> None:
    own = _module(tmp_path, "def early(x):\n    return sorted(x)\n")
    watch = StepWatch([str(tmp_path)])
    with watch:
        own.early([2, 1])
        sorted([3, 1])
        Path(tmp_path).exists()
    assert watch.found == {"early (kernel_watched.py:1)": 1} and watch.hooks == []
    assert watch.evidence() == {"foreign_code": {"early (kernel_watched.py:1)": 1}}


def test_code_run_from_text_counts_as_the_candidates(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile("def hidden():\n    return 1\n", "<string>", "exec"), namespace)
    watch = StepWatch([str(tmp_path)])
    with watch:
        namespace["hidden"]()
    assert list(watch.found) == ["hidden (<string>:1)"]


def test_inside_a_window_the_collector_is_off_and_a_profiler_before_it_comes_back(tmp_path: Path) -> None:
    own = _module(tmp_path, "calls = []\ndef profiler(frame, event, arg):\n    calls.append(event)\n")
    watch = StepWatch([str(tmp_path)])
    assert gc.isenabled()
    sys.setprofile(own.profiler)
    try:
        with watch:
            assert not gc.isenabled()
            assert sys.getprofile() is not own.profiler
        assert sys.getprofile() is own.profiler
    finally:
        sys.setprofile(None)
    assert gc.isenabled()
    assert watch.hooks == ["profile profiler (kernel_watched.py:2)"]


# Two ways to work on a timed call's inputs before its timer starts, on the CPU: a torch method the harness calls on
# each fresh input replaced at import, and a torch function mode entered at import and never left. Each computes the
# answer for the input it sees and hands it back when the call comes. Without the watch the mode passed every check
# but not-a-kernel (no GPU code on the CPU), and the replaced method was caught only by a static rule on its assignment.
_EARLY = '''
_ready = [None, None]
_models = []
def _answer(t):
    if _models and t.dim() == 2 and t.shape[-1] == 16 and t.is_floating_point():
        with torch.no_grad():
            _ready[:] = [t, torch.relu(_models[0].lin(t))]
'''
PATCHED_METHOD = HONEST.replace("import torch.nn as nn\n", "import torch.nn as nn\n" + _EARLY + '''
_contiguous = torch.Tensor.contiguous
def _early_contiguous(self, *args, **kwargs):
    out = _contiguous(self, *args, **kwargs)
    _answer(out)
    return out
torch.Tensor.contiguous = _early_contiguous
''')
FUNCTION_MODE = HONEST.replace("import torch.nn as nn\n", "import torch.nn as nn\n" + _EARLY + '''
from torch.overrides import TorchFunctionMode
class _Early(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.contiguous:
            _answer(out)
        return out
_Early().__enter__()
''')
for _name in ("PATCHED_METHOD", "FUNCTION_MODE"):
    globals()[_name] = globals()[_name].replace(
        "        self.lin = nn.Linear(n, n)\n", "        self.lin = nn.Linear(n, n)\n        _models.append(self)\n").replace(
        "        return torch.relu(self.lin(x))", "        if _ready[0] is x:\n            return _ready[1]\n"
        "        return torch.relu(self.lin(x))")
# Honest control: a finalizer on each output, run when the harness drops the output after the timer stopped.
FINALIZER_ON_OUTPUTS = HONEST.replace("import torch.nn as nn\n", "import torch.nn as nn\nimport weakref\n_freed = []\n").replace(
    "        return torch.relu(self.lin(x))", "        y = torch.relu(self.lin(x))\n"
    "        weakref.finalize(y, _freed.append, 1)\n        return y")


def _verify(kernel: str) -> dict[str, Any]:
    return verify_code(TASK, kernel, "model-new", VerifyOptions(trials=3, device="cpu", target_seconds=0.05,
                                                                shape_probe=False))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [PATCHED_METHOD, FUNCTION_MODE], ids=["patched-method", "function-mode"])
def test_work_on_the_inputs_before_the_timer_starts_fails_timer_patching(kernel: str) -> None:
    report = _verify(kernel)
    assert report["checks"]["correctness"]["verdict"] == "pass", report["checks"]["correctness"]
    assert report["checks"]["caching"]["verdict"] == "pass", report["checks"]["caching"]
    check = report["checks"]["timer-patching"]
    assert check["verdict"] == "fail", check
    assert check["evidence"][0].startswith("the candidate's own code ran between making a timed call's inputs"), check
    assert "_answer" in check["evidence"][0] or "__torch_function__" in check["evidence"][0], check
    assert report["status"] == "flagged"


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [HONEST, FINALIZER_ON_OUTPUTS], ids=["honest", "finalizer-on-outputs"])
def test_an_honest_kernel_runs_nothing_of_its_own_there(kernel: str) -> None:
    report = _verify(kernel)
    check = report["checks"]["timer-patching"]
    assert check["verdict"] == "pass", check
    assert any(e.startswith("none of the candidate's code ran between") for e in check["evidence"]), check
