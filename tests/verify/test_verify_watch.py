"""``verify.harness.watch``: the candidate's own code between a timed call's inputs and its timer (harness 1.15, 1.16);
whose code a function is, without torch: ``test_verify_watch_code.py``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from batch_testing import EXTENSION, HONEST, TASK

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


def test_a_profiler_installed_before_a_window_is_named_and_comes_back_after_it(tmp_path: Path) -> None:
    own = _module(tmp_path, "calls = []\ndef profiler(frame, event, arg):\n    calls.append(event)\n")
    # The profile-function way (Python 3.11, or the watch's sys.monitoring tool taken) puts its own in place.
    watch = StepWatch([str(tmp_path)], monitoring=False)
    sys.setprofile(own.profiler)
    try:
        with watch:
            assert sys.getprofile() is not own.profiler
        assert sys.getprofile() is own.profiler
    finally:
        sys.setprofile(None)
    assert watch.hooks == ["profile profiler (kernel_watched.py:2)"]



def test_the_fingerprints_of_a_timed_calls_outputs_are_watched_too(tmp_path: Path, monkeypatch) -> None:
    import torch

    from verify.harness import timing

    # Stands for code of the candidate's that answers the fingerprint's operations (a mode it entered on its way out).
    own = _module(tmp_path, "def forged(out, real=None):\n    return real(out)\n")
    real = timing.call_fingerprints
    monkeypatch.setattr(timing, "call_fingerprints", lambda out: own.forged(out, real))
    watch = StepWatch([str(tmp_path)])
    timing.time_callable(timing.Clock(torch, "cpu"), lambda inputs: inputs[0] * 2, [torch.ones(4)], 7, min_calls=3,
                         max_calls=3, target_s=0.0, warmup=0, watch=watch)
    # (The test's own lambda counts too: this file is outside the interpreter's folders.)
    assert watch.found["forged (kernel_watched.py:1)"] == 3

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
_MODE = _EARLY + '''
from torch.overrides import TorchFunctionMode
class _Early(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.contiguous:
            _answer(out)
        return out
_Early().__enter__()
'''
FUNCTION_MODE = HONEST.replace("import torch.nn as nn\n", "import torch.nn as nn\n" + _MODE)
# Harness 1.16: the same mode with its code compiled under the name of torch's own file, so each function that runs
# in the harness's steps claims to be torch's (harness 1.15 took it for torch's: it judged code by its file's name).
DISGUISED_MODE = HONEST.replace("import torch.nn as nn\n", "import torch.nn as nn\nimport torch.overrides\n"
                                f"exec(compile({_MODE!r}, torch.overrides.__file__, 'exec'), globals())\n")
for _name in ("PATCHED_METHOD", "FUNCTION_MODE", "DISGUISED_MODE"):
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
@pytest.mark.parametrize("kernel", [PATCHED_METHOD, FUNCTION_MODE, DISGUISED_MODE],
                         ids=["patched-method", "function-mode", "function-mode-under-torchs-file-name"])
def test_work_on_the_inputs_before_the_timer_starts_fails_timer_patching(kernel: str) -> None:
    report = _verify(kernel)
    assert report["checks"]["correctness"]["verdict"] == "pass", report["checks"]["correctness"]
    assert report["checks"]["caching"]["verdict"] == "pass", report["checks"]["caching"]
    check = report["checks"]["timer-patching"]
    assert check["verdict"] == "fail", check
    assert check["evidence"][0].startswith("the candidate's own code ran in the harness's untimed steps"), check
    assert "_answer" in check["evidence"][0] or "__torch_function__" in check["evidence"][0], check
    assert report["status"] == "flagged"


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [HONEST, FINALIZER_ON_OUTPUTS], ids=["honest", "finalizer-on-outputs"])
def test_an_honest_kernel_runs_nothing_of_its_own_there(kernel: str) -> None:
    report = _verify(kernel)
    check = report["checks"]["timer-patching"]
    assert check["verdict"] == "pass", check
    assert any(e.startswith("none of the candidate's code ran in the harness's untimed steps") for e in check["evidence"]), check


@pytest.mark.filterwarnings("ignore:Warning only once for all operators")
def test_a_kernel_registered_for_an_aten_operator_is_named() -> None:
    import torch

    from verify.harness.watch import aten_kernels, replaced_kernels

    before = aten_kernels(torch)
    library = torch.library.Library("aten", "IMPL")
    library.impl("sinc", lambda x: torch.where(x == 0, torch.ones_like(x), torch.sin(x) / x), "CPU")
    try:
        found = replaced_kernels(before, aten_kernels(torch), str(Path(torch.__file__).parent))
    finally:
        library._destroy()
    assert len(found) == 1 and found[0].startswith("aten::sinc: CPU: registered at "), found
    assert replaced_kernels(before, aten_kernels(torch), str(Path(torch.__file__).parent)) == []


# A C++ extension that registers its own kernel for an aten operator (a faithful one) when it is loaded, and a
# Python module that does the same through torch.library: what the harness computes in that process changes too.
_OVERRIDE = ("at::Tensor early_contiguous(const at::Tensor& self, at::MemoryFormat format) {\n"
             "  return self.is_contiguous(format) ? self : self.clone(format);\n}\n"
             'TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("contiguous", early_contiguous); }\n')
CPP_ATEN_OVERRIDE = EXTENSION.replace('_SOURCE = "', f"_SOURCE = {_OVERRIDE!r} + \"").replace(
    "ka_batch_test_relu_linear", "ka_watch_test_aten_override")
PY_ATEN_OVERRIDE = HONEST.replace("import torch.nn as nn\n", "import torch.nn as nn\n"
                                  "_library = torch.library.Library('aten', 'IMPL')\n"
                                  "_library.impl('sinc', lambda x: torch.where(x == 0, torch.ones_like(x), "
                                  "torch.sin(x) / x), 'CPU')\n")


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "operator"), [(CPP_ATEN_OVERRIDE, "aten::contiguous"),
                                                  (PY_ATEN_OVERRIDE, "aten::sinc")], ids=["c++", "python"])
def test_a_kernel_that_replaces_an_aten_operators_kernel_fails_timer_patching(kernel: str, operator: str) -> None:
    report = _verify(kernel)
    assert report["checks"]["correctness"]["verdict"] == "pass", report["checks"]["correctness"]
    check = report["checks"]["timer-patching"]
    assert check["verdict"] == "fail", check
    assert check["evidence"][0].startswith("the candidate replaced torch's kernels for 1 aten operator"), check
    assert f"{operator}: CPU: registered at " in check["evidence"][0], check


@pytest.mark.slow
def test_an_extension_with_its_own_functions_replaces_no_operator() -> None:
    check = _verify(EXTENSION)["checks"]["timer-patching"]
    assert check["verdict"] == "pass", check
    assert "torch's kernels for aten operators are the ones registered before the candidate was imported" in \
        check["evidence"], check
