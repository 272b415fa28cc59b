"""torch.compile's compiling off a shared GPU gate (``verify/harness/compiles.py``), with real Dynamo compiles on the CPU."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from batch_testing import HONEST, TASK

from verify.harness import compiles as compiles_module
from verify.harness.common import stream_capturing
from verify.harness.compiles import compile_gate_wait_s, install_compile_off_gpu
from verify.harness.gate import HOLD, alone_on_gpu, back_on_gpu, off_gpu
from verify.runner import VerifyOptions, verify_code

REPO = Path(__file__).resolve().parents[2]
COMPILING = HONEST.replace("return torch.relu(self.lin(x))", "return _relu_linear(x, self.lin.weight, self.lin.bias)") + '''

@torch.compile(backend="eager", dynamic=False)
def _relu_linear(x, w, b):
    return torch.relu(x @ w.t() + b)
'''

COMPILING_IN_INIT = HONEST.replace(
    "self.lin = nn.Linear(n, n)",
    "self.lin = nn.Linear(n, n)\n"
    "        self.act = torch.compile(lambda t: torch.relu(t), backend='eager', dynamic=False)\n"
    "        self.act(torch.zeros(8, n))",
).replace("return torch.relu(self.lin(x))", "return self.act(self.lin(x))")


class _Channel:
    """A parent that grants every gate request at once, and remembers every message (``gate:<which>``, ``mark:<phase>``)."""

    def __init__(self, grants: str) -> None:
        self.grants = grants
        self.sent: list[str] = []

    def send(self, kind: str, **payload: Any) -> None:
        self.sent.append(f"{kind}:{payload.get('which') or payload.get('phase')}")
        if kind == "gate":
            Path(f"{self.grants}-{payload['n']}").touch()


@pytest.fixture
def channel(tmp_path: Path) -> Iterator[_Channel]:
    """A granting channel; Dynamo's callbacks, its compiled code and this process's hold are reset afterwards."""
    from torch._dynamo.callback import callback_handler

    torch._dynamo.reset()
    yield _Channel(str(tmp_path / "grant"))
    away = getattr(callback_handler, "ka_compile_away", None)
    if away is not None:
        callback_handler.remove_start_callback(away.start)
        callback_handler.remove_end_callback(away.end)
        del callback_handler.ka_compile_away
    torch._dynamo.reset()
    HOLD.alone = HOLD.off = HOLD.away = False


def _compiled() -> Any:
    return torch.compile(lambda x: torch.relu(x) * 2, backend="eager", dynamic=False)


def test_a_compile_holds_nothing_of_the_gate_and_shares_again_when_it_ends(channel: _Channel) -> None:
    syncs: list[int] = []
    assert not install_compile_off_gpu({}, channel, lambda: syncs.append(1))
    assert install_compile_off_gpu({"gate_grants": channel.grants}, channel, lambda: syncs.append(1))
    fn = _compiled()
    fn(torch.ones(4))
    assert channel.sent == ["mark:compile", "gate:away", "gate:shared"] and syncs == [1]
    fn(torch.ones(4))
    assert channel.sent == ["mark:compile", "gate:away", "gate:shared"], "a call that compiles nothing asks nothing"
    fn(torch.ones(3, 5))
    assert channel.sent[3:] == ["mark:compile", "gate:away", "gate:shared"], "a recompile lets go again"


class _SlowChannel(_Channel):
    """Grants sharing again only after ``delay_s``, as behind another verification's timed series."""

    delay_s = 0.3

    def send(self, kind: str, **payload: Any) -> None:
        if kind == "gate" and payload.get("which") == "shared":
            self.sent.append("gate:shared")
            threading.Timer(self.delay_s, Path(f"{self.grants}-{payload['n']}").touch).start()
            return
        super().send(kind, **payload)


def test_a_compiles_wait_to_share_again_is_counted_apart_from_its_time(channel: _Channel) -> None:
    slow = _SlowChannel(channel.grants)
    install_compile_off_gpu({"gate_grants": slow.grants}, slow, lambda: None)
    before = compile_gate_wait_s()
    _compiled()(torch.ones(4))
    assert slow.sent == ["mark:compile", "gate:away", "gate:shared"]
    assert compile_gate_wait_s() - before >= _SlowChannel.delay_s


def test_a_compile_inside_a_cuda_graphs_capture_keeps_the_hold(channel: _Channel,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 58 on the H100: level 2 task 85 compiles inside ``torch.cuda.graph``; the synchronize before letting go
    ended its capture, and the kernel fell back to running outside its graph."""
    monkeypatch.setattr(compiles_module, "stream_capturing", lambda: True)
    syncs: list[int] = []
    install_compile_off_gpu({"gate_grants": channel.grants}, channel, lambda: syncs.append(1))
    _compiled()(torch.ones(4))
    assert channel.sent == [] and syncs == []


def test_a_capture_is_read_from_the_current_stream_and_never_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not stream_capturing()
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert not stream_capturing(), "no GPU here"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert stream_capturing()


def test_a_candidate_naming_torch_compile_has_dynamo_loaded_before_its_import() -> None:
    probe = ("import sys, torch\n"
             "from verify.harness.compiles import load_dynamo_for\n"
             "assert 'torch._dynamo' not in sys.modules\n"
             "assert not load_dynamo_for('import torch\\ndef f(x):\\n    return x * 2\\n')\n"
             "assert 'torch._dynamo' not in sys.modules\n"
             "assert load_dynamo_for('import torch\\nf = torch.compile(g)\\n')\n"
             "assert 'torch._dynamo' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_without_dynamo_loaded_nothing_is_installed(channel: _Channel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch._dynamo")
    assert not install_compile_off_gpu({"gate_grants": channel.grants}, channel, lambda: None)


def test_a_compile_with_the_gpu_alone_keeps_it(channel: _Channel) -> None:
    job = {"gate_grants": channel.grants}
    install_compile_off_gpu(job, channel, lambda: None)
    with alone_on_gpu(job, channel, lambda: None):
        _compiled()(torch.ones(4))
    assert channel.sent == ["gate:alone", "gate:shared"]


def test_autotuning_inside_a_compile_shares_the_gpu_again_for_the_rest_of_it(channel: _Channel) -> None:
    from torch._inductor.runtime.benchmarking import benchmarker

    def tuning_backend(graph: Any, example_inputs: list[Any]) -> Any:
        for _ in range(3):
            # No GPU here: only the wrapper's request matters.
            with contextlib.suppress(Exception):
                benchmarker.benchmark_gpu(lambda: None, warmup=1, rep=1)
        return graph.forward

    install_compile_off_gpu({"gate_grants": channel.grants}, channel, lambda: None)
    torch.compile(lambda x: x + 1, backend=tuning_backend)(torch.ones(2))
    assert channel.sent == ["mark:compile", "gate:away", "gate:shared", "mark:compile-autotunes"], channel.sent
    wrapped = benchmarker.benchmark_gpu
    torch.compile(lambda x: x - 1, backend=tuning_backend)(torch.ones(2))
    assert channel.sent[4:] == ["mark:compile", "gate:away", "gate:shared", "mark:compile-autotunes"], channel.sent
    assert benchmarker.benchmark_gpu is wrapped, "wrapped once, not again at each compile"


def test_a_compile_in_another_thread_keeps_the_hold(channel: _Channel) -> None:
    install_compile_off_gpu({"gate_grants": channel.grants}, channel, lambda: None)
    thread = threading.Thread(target=lambda: _compiled()(torch.ones(4)))
    thread.start()
    thread.join()
    assert channel.sent == []


def test_past_its_limit_a_child_compiles_holding_its_seat(channel: _Channel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiles_module, "COMPILE_AWAYS", 1)
    install_compile_off_gpu({"gate_grants": channel.grants}, channel, lambda: None)
    _compiled()(torch.ones(4))
    _compiled()(torch.ones(5))
    assert channel.sent == ["mark:compile", "gate:away", "gate:shared"]


def test_off_gpu_inside_alone_or_another_off_gpu_block_asks_nothing(channel: _Channel) -> None:
    job = {"gate_grants": channel.grants}
    with alone_on_gpu(job, channel, lambda: None), off_gpu(job, channel, lambda: None):
        pass
    with off_gpu(job, channel, lambda: None), off_gpu(job, channel, lambda: None):
        assert back_on_gpu(job, channel)
        assert not back_on_gpu(job, channel)
    assert not back_on_gpu(job, channel)
    assert channel.sent == ["gate:alone", "gate:shared", "gate:away", "gate:shared"]


def test_a_verification_behind_a_shared_gate_compiles_away_from_it_with_the_verdict_unchanged(tmp_path: Path) -> None:
    options = VerifyOptions(device="cpu", trials=2, shape_probe=False)
    env = {"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"}
    compiling = verify_code(TASK, COMPILING, "model-new", options, env=env)
    ungated = verify_code(TASK, COMPILING, "model-new", options)
    plain = verify_code(TASK, HONEST, "model-new", options, env=env)
    assert compiling["status"] == ungated["status"] == "flagged", compiling.get("error")
    assert {n: c["verdict"] for n, c in compiling["checks"].items()} == {n: c["verdict"] for n, c in ungated["checks"].items()}
    run = [e for _, r, e in compiling["timeline"] if r == "run"]
    assert "mark:compile" in run and run[run.index("mark:compile") + 1:][:2] == ["gate:away", "gate:shared"], run
    assert "gate:run:away" in [e for _, r, e in compiling["timeline"] if r == "parent"]
    assert "mark:compile" not in [e for _, r, e in ungated["timeline"] if r == "run"], "no gate, nothing to let go of"
    assert "mark:compile" not in [e for _, r, e in plain["timeline"] if r == "run"], "a kernel that compiles nothing"


def test_a_compile_in_the_models_constructor_lets_go_too(tmp_path: Path) -> None:
    report = verify_code(TASK, COMPILING_IN_INIT, "model-new", VerifyOptions(device="cpu", trials=2, shape_probe=False),
                         env={"KA_GPU_GATE": str(tmp_path / "gpu-0.lock"), "KA_GPU_GATE_MODE": "shared"})
    assert report["status"] == "flagged", report.get("error")
    run = [e for _, r, e in report["timeline"] if r == "run"]
    # A second compile follows in the first trial: it runs under no_grad, which Dynamo guards on.
    assert run.count("mark:compile") >= 1 and run.index("mark:compile") < run.index("call"), run
