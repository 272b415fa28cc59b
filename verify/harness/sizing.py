"""How large each task's outputs are, from its reference run on PyTorch's meta device (no GPU, no data).

The batch runs this file as a script with the Python that runs its eval scripts (``verify.batch.weight``):
tasks come in as JSON lines on stdin (``{"task": KEY, "code": REFERENCE_CODE}``) and one JSON line goes out
per task as soon as it is sized: ``{"task": KEY, "output_bytes": N}``, or ``{"task": KEY, "error": "..."}`` when
the reference does not run on the meta device (``Tensor.item()``, a module outside torch) or takes longer than
``--per-task-s``. Only reference code runs here, the code the trusted child runs; never a candidate's.
It imports nothing of the project's, so it runs wherever torch does.

Example:
    >>> import torch
    >>> code = "import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, x): return x.repeat(2, 1)\\n" \\
    ...        "def get_inputs(): return [torch.randn(4, 8)]\\ndef get_init_inputs(): return []\\n"
    >>> output_bytes(code)
    256
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import types
from typing import Any

PER_TASK_S = 1.0
"""A task's time limit: recurrent networks run their time steps one Python call at a time on the meta device
(6-18 s for KernelBench level 3's LSTMs and GRUs on one core), and their outputs are small."""


class _TooSlow(Exception):
    pass


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    return []


def output_bytes(code: str) -> int:
    """The bytes of every tensor the reference ``Model`` returns for its task's ``get_inputs()``."""
    import torch

    module = types.ModuleType("ka_task_size")
    exec(compile(code, "<task>", "exec"), module.__dict__)
    with torch.device("meta"), torch.no_grad():
        init = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
        model = module.Model(*init)
        inputs = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in module.get_inputs()]
        out = model(*inputs)
    return int(sum(t.numel() * t.element_size() for t in _tensors(out)))


def _alarm(*_: Any) -> None:
    raise _TooSlow


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-task-s", type=float, default=PER_TASK_S)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    # The first meta call pays the dispatcher's lazy set-up (about 0.5 s), which is no task's size.
    with torch.device("meta"), torch.no_grad():
        torch.nn.Linear(2, 2)(torch.ones(1, 2)).relu()
    signal.signal(signal.SIGALRM, _alarm)
    for line in sys.stdin:
        if not line.strip():
            continue
        item = json.loads(line)
        signal.setitimer(signal.ITIMER_REAL, args.per_task_s)
        try:
            row = {"task": item["task"], "output_bytes": output_bytes(item["code"])}
        except _TooSlow:
            row = {"task": item["task"], "error": f"not sized within {args.per_task_s:g} s"}
        except BaseException as error:  # noqa: BLE001 - task code may raise anything, SystemExit included
            row = {"task": item["task"], "error": f"{type(error).__name__}: {error}"[:300]}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
