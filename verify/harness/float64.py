"""The reference's float64 twin: what every candidate output is judged against.

A twin is the fp32 reference's module in float64: its weights, buffers and every floating tensor it holds as a
plain attribute (an LSTM's initial state ``self.h0``, which ``Module.double`` leaves in fp32, so that the
float64 forward of eight of KernelBench's level 3 tasks failed and their kernels were judged against fp32 alone).
A module that holds a function closing over its own submodules (minGPT's ``self.mlpf = lambda x: m.c_proj(...)``)
is built again from the task instead of copied, since a copied closure still calls the fp32 original.

Its forward runs with cuDNN or with ATen's own kernels, whichever the first two forwards found faster: cuDNN's
float64 transposed convolutions (``convolveNd_dgrad_engine``) took 2.79 s a forward of level 1 task 68 on an H200
where ATen's took 0.24 s, and a verification runs seven float64 forwards. On an H200 the two ways' outputs were
within 2e-10 of each other (relative to the output's largest value) on every KernelBench task but level 3 task 24,
whose training-mode BatchNorm over 1x1 maps amplifies rounding (8e-7): far inside what fp32 itself errs there.

Example:
    >>> import torch
    >>> m = torch.nn.Linear(2, 2); m.h0 = torch.zeros(2)
    >>> twin = Float64Reference(torch, m, seed=1)
    >>> twin.module.weight.dtype, twin.module.h0.dtype, twin.built
    (torch.float64, torch.float64, False)
    >>> twin([torch.ones(1, 2)])[0].dtype
    torch.float64
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

FLOAT64_PROBE_S = 0.02
"""A first float64 forward (with cuDNN) slower than this is followed by one without cuDNN, and the faster way is
kept for the rest. A faster one is not worth a second way: on an H200, 207 of KernelBench's 241 tasks that run in
float64 take under 20 ms a forward, and half of levels 1 and 2 under 0.3 ms."""


def as_float64(torch: Any, module: Any) -> Any:
    """``module`` in float64, in place: ``Module.double`` plus every floating tensor held as a plain attribute
    (alone, or in a list or tuple) by any of its submodules.

    Example:
        >>> import torch
        >>> m = torch.nn.Linear(2, 2); m.states = [torch.zeros(1), 3]
        >>> as_float64(torch, m).states[0].dtype
        torch.float64
    """
    module.double()

    def widened(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) and value.is_floating_point():
            return value.detach().double()
        if isinstance(value, list | tuple) and any(isinstance(v, torch.Tensor) for v in value):
            return type(value)(widened(v) for v in value)
        return value

    for sub in module.modules():
        for name, value in list(vars(sub).items()):
            new = widened(value)
            if new is not value:
                setattr(sub, name, new)
    return module


def closes_over(module: Any) -> list[str]:
    """Attributes of ``module``'s submodules that are functions closing over one of its submodules (whose copy
    would still call the original).

    Example:
        >>> import torch
        >>> def attach(module):
        ...     inner = module[0]
        ...     module.act = lambda x: inner(x)
        >>> m = torch.nn.Sequential(torch.nn.ReLU()); attach(m)
        >>> closes_over(m), closes_over(torch.nn.Linear(2, 2))
        (['act'], [])
    """
    own = {id(sub) for sub in module.modules()}
    found = []
    for prefix, sub in module.named_modules():
        for name, value in vars(sub).items():
            cells = getattr(value, "__closure__", None) or ()
            if any(id(_cell_value(cell)) in own for cell in cells):
                found.append(f"{prefix}.{name}" if prefix else name)
    return found


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return None


class Float64Reference:
    """The float64 twin of ``model`` and the way (cuDNN or not) its forward runs.

    ``build`` makes a fresh fp32 module the way ``model`` was made (the task's class, the same seed); it is used
    when ``model`` holds a closure over itself (``closes_over``), and its weights are then ``model``'s. ``seed``
    is set before every float64 forward, so random layers draw what the fp32 forward drew. ``cudnn`` fixes the
    way from the start (a variant's twin takes the trials' choice).

    Example:
        >>> import torch
        >>> twin = Float64Reference(torch, torch.nn.Linear(2, 2), seed=1)
        >>> twin([torch.ones(1, 2)])[0].shape, twin.summary()["cudnn"]
        (torch.Size([1, 2]), True)
    """

    def __init__(self, torch: Any, model: Any, *, seed: int, build: Callable[[], Any] | None = None,
                 cudnn: bool | None = None) -> None:
        self.torch = torch
        self.seed = seed
        self.built = bool(build is not None and closes_over(model))
        if self.built:
            assert build is not None
            twin = build()
            twin.load_state_dict(model.state_dict())
        else:
            twin = copy.deepcopy(model)
        self.module = as_float64(torch, twin)
        self.cudnn: bool | None = cudnn
        self.seconds: dict[str, float] = {}

    def __call__(self, inputs: list[Any]) -> list[Any]:
        """The float64 outputs on ``inputs`` (their floating tensors widened to float64), as a list."""
        torch = self.torch
        wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        if self.cudnn is None and not any(t.is_cuda for t in [*wide, *self.module.parameters(), *self.module.buffers()]
                                          if isinstance(t, torch.Tensor)):
            # Nothing on a GPU, nothing of cuDNN's to time: a parameterless GPU task is told by its inputs.
            self.cudnn = True
        if self.cudnn is not None:
            return self._forward(wide, self.cudnn)
        way = "cudnn" not in self.seconds
        try:
            started = time.perf_counter()
            outputs = self._forward(wide, way)
            torch.cuda.synchronize()
        except Exception:
            if way:
                raise
            # ATen has no float64 kernel for something cuDNN ran: cuDNN stays.
            self.cudnn = True
            return self._forward(wide, True)
        self.seconds["cudnn" if way else "aten"] = round(time.perf_counter() - started, 4)
        if way and self.seconds["cudnn"] < FLOAT64_PROBE_S:
            self.cudnn = True
        elif not way:
            self.cudnn = self.seconds["cudnn"] <= self.seconds["aten"]
        return outputs

    def summary(self) -> dict[str, Any]:
        """How the twin was made and ran, for the report: ``built`` or copied, cuDNN or not (None before its first
        forward), and the seconds of the forwards that chose."""
        return {"twin": "built" if self.built else "copied", "cudnn": self.cudnn, "seconds": dict(self.seconds)}

    def _forward(self, inputs: list[Any], cudnn: bool) -> list[Any]:
        torch = self.torch
        before = torch.backends.cudnn.enabled
        torch.backends.cudnn.enabled = cudnn
        try:
            with torch.no_grad():
                torch.manual_seed(self.seed)
                outputs = self.module(*inputs)
        finally:
            torch.backends.cudnn.enabled = before
        return list(outputs) if isinstance(outputs, list | tuple) else [outputs]
