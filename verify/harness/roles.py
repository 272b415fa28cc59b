"""What each child process does: ``trusted`` (reference and baselines), ``compile`` and ``run`` (the candidate).

The trusted child never imports the candidate: it draws the inputs, computes the float64 and fp32
references, screens the task (degenerate? launch-bound?), lists the reference's GPU kernels and times
the eager, ``torch.compile`` and CUDA-graph baselines. The candidate children import the candidate only
after the harness has captured its clock, flags, identities and thread counts, and they only *report*:
outputs go to files, facts and raw timings to the channel. The parent judges.

Example:
    >>> sorted(ROLES)
    ['compile', 'profile', 'run', 'trusted']
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from verify.harness.batons import install_baton_guard
from verify.harness.builds import build_off_gpu, construct_for_build, install_build_memo, install_ccache
from verify.harness.common import (
    BlobChannel,
    Channel,
    changed_identities,
    die_with_parent,
    make_non_dumpable,
    pin_flags,
    set_dumpable,
    snapshot_flags,
    snapshot_identities,
    thread_counts,
    wait_until,
)
from verify.harness.compiles import compile_gate_wait_s, install_compile_off_gpu, load_dynamo_for
from verify.harness.context import ContextState
from verify.harness.float64 import Float64Reference
from verify.harness.frames import load_values, save_values, send_groups, tensor_bytes
from verify.harness.gate import alone_on_gpu, yield_point
from verify.harness.pch import install_pch
from verify.harness.signals import await_signal, signalled
from verify.harness.task import copy_matching_state, derive_call, load_module, parse_forward_signature
from verify.harness.tensors import (
    POISON_FILLS,
    bit_equal,
    describe,
    guarded_copy,
    guards_intact,
    is_symmetric,
    make_inputs,
    overlaps,
    poison_free_memory,
    storage_span,
    zero_pattern,
)
from verify.harness.timing import Clock, l2_flush_buffer, time_callable
from verify.harness.watch import StepWatch, aten_kernels, replaced_kernels

# Library kernel names (cuBLAS, cuDNN, CUTLASS, ATen's own kernels, Triton): work the candidate did not write.
LIBRARY_KERNEL_PATTERNS: tuple[str, ...] = (
    r"cublas", r"cudnn", r"cutlass", r"\bgemm", r"gemv", r"sm\d+_xmma", r"xmma_", r"ampere_", r"hopper_", r"volta_",
    r"turing_", r"sm90_", r"sm80_", r"nvjet", r"cusparse", r"cufft", r"at::native::", r"\bat_cuda_detail",
    r"elementwise_kernel", r"reduce_kernel", r"vectorized_elementwise", r"unrolled_elementwise", r"softmax_warp",
    r"cunn_", r"implicit_convolve", r"conv2d_grouped", r"flash_fwd", r"fmha", r"triton_", r"CatArrayBatchedCopy",
    r"indexSelect", r"splitKreduce", r"Kernel_\w+_tensorop", r"winograd", r"fft2d", r"scalePackedTensor",
)


REFERENCE_RNG_SEED = 0x5EED


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _trace_kernels(torch: Any, call: Any, inputs: list[Any], folder: Path, keep_output: bool = False) -> list[Any]:
    """GPU kernels one call launched: name, device microseconds and stream, from a profiler trace.

    With ``keep_output`` the call's output is appended as the list's last item.
    """
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        output = call(inputs)
        torch.cuda.synchronize()
    path = folder / f"trace-{os.getpid()}-{time.perf_counter_ns()}.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text()).get("traceEvents", [])
    path.unlink()
    kernels: dict[tuple[str, Any], dict[str, Any]] = {}
    for event in events:
        if event.get("cat") not in ("kernel", "Kernel") or event.get("ph") != "X":
            continue
        name = event.get("name", "")
        stream = (event.get("args") or {}).get("stream")
        entry = kernels.setdefault((name, stream), {"name": name, "stream": stream, "calls": 0, "device_us": 0.0})
        entry["calls"] += 1
        entry["device_us"] += float(event.get("dur", 0.0))
    for entry in kernels.values():
        entry["library"] = any(re.search(p, entry["name"], re.I) for p in LIBRARY_KERNEL_PATTERNS)
    listing: list[Any] = sorted(kernels.values(), key=lambda e: -e["device_us"])
    return [*listing, output] if keep_output else listing


def _environment(torch: Any, device: str) -> dict[str, Any]:
    import platform
    import subprocess

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
    }
    if device == "cuda":
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        env.update(
            gpu=props.name,
            capability=f"{props.major}.{props.minor}",
            sms=props.multi_processor_count,
            memory_gb=round(props.total_memory / 2**30, 1),
            l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
            cudnn=torch.backends.cudnn.version(),
        )
        try:
            query = "driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu"
            line = subprocess.run(
                ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader", "-i", str(index)],
                capture_output=True, text=True, timeout=10,
            ).stdout.strip().splitlines()[0]
            env.update(dict(zip(query.split(","), (v.strip() for v in line.split(",")), strict=False)))
            env["driver"] = env.pop("driver_version", None)
        except Exception as error:
            env["nvidia_smi"] = f"unavailable: {error}"
    return env


def _reference_class(task: Any, functional: Any, form: str) -> Any:
    if form == "cuda-binding" and functional is not None and hasattr(functional, "Model"):
        return functional.Model
    return task.Model


def _load_task(embedded: dict[str, Any], folder: Path) -> tuple[Any, Any]:
    task = load_module(embedded["task_code"], "ka_task", folder)
    functional = None
    if embedded.get("functional_code"):
        functional = load_module(embedded["functional_code"], "ka_task_functional", folder)
    return task, functional


def _build_reference(torch: Any, task: Any, functional: Any, form: str, seed: int, device: str) -> tuple[Any, list[Any]]:
    torch.manual_seed(seed)
    init_inputs = list(task.get_init_inputs())
    torch.manual_seed(seed)
    model = _reference_class(task, functional, form)(*init_inputs).to(device)
    return model, init_inputs


def _cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if isinstance(value, list | tuple):
        return [_cpu(v) for v in value]
    return value


def _flops(torch: Any, model: Any, inputs: list[Any]) -> float | None:
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(*inputs)
        return float(counter.get_total_flops())
    except Exception:
        return None


def _warm_flop_counter(torch: Any) -> None:
    """Pay the flop counter's first-use cost (about 2 s of Python) on the CPU while waiting for the GPU."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False), torch.no_grad():
            torch.nn.Linear(4, 4)(torch.ones(2, 4))
    except Exception:
        return


def _bytes_moved(torch: Any, model: Any, inputs: list[Any], outputs: list[Any]) -> int:
    return int(tensor_bytes([t for t in [*inputs, *outputs] if isinstance(t, torch.Tensor)] + list(model.parameters())))


def _rel_change(torch: Any, a: list[Any], b: list[Any]) -> float:
    changes = []
    for x, y in zip(a, b, strict=False):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape:
            x64, y64 = x.double(), y.double()
            denom = float(torch.linalg.vector_norm(x64)) or 1.0
            changes.append(float(torch.linalg.vector_norm(x64 - y64)) / denom)
    return max(changes) if changes else float("nan")


def role_trusted(job: dict[str, Any], embedded: dict[str, Any], channel: Channel, blobs: BlobChannel) -> None:
    """References, task screens and baselines, in a process that never sees the candidate.

    The references go to the parent through the blob pipe, never to a file; the process is non-dumpable from before
    it reads its job (``child_main``).
    """
    import torch

    device = job["device"]
    pin_flags(torch)
    if hasattr(torch.serialization, "set_crc32_options"):
        # The weights' file lives for seconds in a private folder; a checksum costs a third of its save.
        torch.serialization.set_crc32_options(False)
    work = Path(job["work"])
    shared = Path(job["shared"])
    channel.send("env", environment=_environment(torch, device), flags=snapshot_flags({"torch": torch}))
    if job.get("gate_file"):
        _warm_flop_counter(torch)
        if device == "cuda":
            torch.empty(1, device=device)  # the CUDA context, outside the gate: it launches no kernel
        # The parent takes the GPU gate only after this: a gate taken while the child still starts holds the GPU
        # idle (44 s of 334 s over 24 CUDA-L1 kernels on an H100) that another slot's ready kernel could use.
        channel.send("mark", phase="ready")
        await_signal(Path(job["gate_file"]), job.get("signal_key"), job.get("gate_timeout_s", 3600),
                     what="the GPU's gate")
        channel.send("mark", phase="gpu-ours")
    task, functional = _load_task(embedded, work)
    build = partial(_build_reference, torch, task, functional, embedded["form"], job["weight_seed"], device)
    model, init_inputs = build()
    torch.save(_cpu(model.state_dict()), shared / "weights.pt")
    channel.send("reference-model", reference=type(model).__module__ + "." + type(model).__name__,
                 parameters={n: list(p.shape) for n, p in model.state_dict().items()},
                 init_inputs=repr(init_inputs)[:500])
    clock = Clock(torch, device)
    offer = partial(yield_point, job, channel, clock.full_sync)
    offer()
    model64 = Float64Reference(torch, model, seed=REFERENCE_RNG_SEED, build=lambda: build()[0])
    state_before = {n: t.detach().clone() for n, t in model.state_dict().items()}
    stateful = bool(job["trials"]) and is_stateful(torch, model, make_inputs(
        task.get_inputs, job["trials"][0]["seed"], job["trials"][0]["distribution"], device))
    # Every compared call, here and in the run child, starts from the first state: the parent tells the run child
    # whether the reference is stateful with its release (``reference-state``), not through a file.
    restart = Restart(torch, [model, model64.module], stateful=stateful)

    def probe_references() -> tuple[int, int]:
        """The shape and init probes' references, sent; their references' bytes and their outputs'."""
        held = out = 0
        restart()
        variant = job.get("shape_variant")
        if variant:
            yield_point(job, channel, clock.full_sync)
            try:
                shaped = load_module(variant["code"], "ka_task_shape", work)
                inputs = make_inputs(shaped.get_inputs, job["screen_seed"] + 2, "randn", device)
                ref32, ref64, precision = _send_reference(torch, model, model64, inputs, "ref-shape", blobs,
                                                          between=offer)
                held, out = held + tensor_bytes(ref32) + tensor_bytes(ref64), out + tensor_bytes(ref32)
                save_values(torch, inputs, shared / "inputs-shape")
                channel.send("shape-variant", name=variant["name"], old=variant["old"], new=variant["new"],
                             precision=precision, inputs=[describe(x) for x in inputs if isinstance(x, torch.Tensor)],
                             outputs=[describe(t) for t in ref32])
            except Exception as error:
                channel.send("note", which="shape-variant",
                             message=f"the reference does not run with {variant['name']}={variant['new']}: "
                                     f"{type(error).__name__}: {error}"[:500])
        init = job.get("init_variant")
        if init and not (embedded["form"] == "cuda-binding" and functional is not None):
            yield_point(job, channel, clock.full_sync)
            try:
                sized = load_module(init["code"], "ka_task_init", work)
                build_sized = partial(_build_reference, torch, sized, None, embedded["form"], job["weight_seed"],
                                      device)
                init_model, init_args = build_sized()
                torch.save(_cpu(init_model.state_dict()), shared / "weights-init.pt")
                inputs = make_inputs(sized.get_inputs, job["screen_seed"] + 3, "randn", device)
                init64 = Float64Reference(torch, init_model, seed=REFERENCE_RNG_SEED, cudnn=model64.cudnn,
                                          build=lambda: build_sized()[0])
                ref32, ref64, precision = _send_reference(torch, init_model, init64, inputs, "ref-init", blobs,
                                                          between=offer)
                held, out = held + tensor_bytes(ref32) + tensor_bytes(ref64), out + tensor_bytes(ref32)
                save_values(torch, inputs, shared / "inputs-init")
                channel.send("init-variant", name=init["name"], old=init["old"], new=init["new"],
                             precision=precision, init_inputs=repr(init_args)[:300],
                             outputs=[describe(t) for t in ref32])
                del init_model, init64
            except Exception as error:
                channel.send("note", which="init-variant",
                             message=f"the reference does not build or run with {init['name']}={init['new']}: "
                                     f"{type(error).__name__}: {error}"[:500])
        return held, out

    judged: set[int] | None = None
    probed = False
    for trial in job["trials"]:
        yield_point(job, channel, clock.full_sync)
        inputs = make_inputs(task.get_inputs, trial["seed"], trial["distribution"], device)
        save_values(torch, inputs, shared / f"inputs-{trial['index']}")
        if judged is not None and trial["index"] not in judged:
            continue
        # Yield points between a trial's inputs, its references and their sending (seconds each for outputs of
        # gigabytes): a timed series waits for the piece under way, not for all three (harness 1.36).
        offer()
        restart()
        ref32, ref64, precision = _send_reference(torch, model, model64, inputs, f"ref-{trial['index']}", blobs,
                                                  between=offer)
        if trial is job["trials"][0]:
            # What the reference's own forward changes (training-mode statistics) a candidate may change too.
            channel.send("reference-state", mutated=_equal_state(torch, state_before, model), stateful=stateful)
        channel.send("reference", index=trial["index"], precision=precision, outputs=[describe(t) for t in ref32])
        if trial is job["trials"][0] and job.get("plan_file"):
            # The probes' references before the plan, so that it counts what they hold and will receive exactly.
            probe_held, probe_out = probe_references()
            probed = True
            judged = _await_plan(job, channel, clock, ref_bytes=tensor_bytes(ref32) + tensor_bytes(ref64),
                                 out_bytes=tensor_bytes(ref32), probe_ref_bytes=probe_held, probe_out_bytes=probe_out)
    if not probed:
        probe_references()
    channel.send("float64", **model64.summary())
    channel.send("mark", phase="references-sent")
    if job.get("baselines_cached"):
        # Another kernel of this task measured the baselines on this GPU (the parent holds them); the timed
        # inputs' template still comes from here, from the same seed those baselines used.
        template = make_inputs(task.get_inputs, job["timing"]["template_seed"], "task", device)
        save_values(torch, template, shared / "template")
        channel.send("done")
        return
    yield_point(job, channel, clock.full_sync)
    screen_inputs = make_inputs(task.get_inputs, job["screen_seed"], "randn", device)
    other_inputs = make_inputs(task.get_inputs, job["screen_seed"] + 1, "randn", device)
    other_model, _ = _build_reference(torch, task, functional, embedded["form"], job["weight_seed"] + 7919, device)
    with torch.no_grad():
        base = _as_list(model(*screen_inputs))
        by_inputs = _as_list(model(*other_inputs))
        by_weights = _as_list(other_model(*screen_inputs))
    has_weights = any(p.numel() for p in model.parameters())
    channel.send("screen", input_sensitivity=_rel_change(torch, base, by_inputs),
                 weight_sensitivity=_rel_change(torch, base, by_weights) if has_weights else None,
                 flops=_flops(torch, model, screen_inputs),
                 bytes=_bytes_moved(torch, model, screen_inputs, base))
    template = make_inputs(task.get_inputs, job["timing"]["template_seed"], "task", device)
    save_values(torch, template, shared / "template")
    if job.get("go_file"):
        await_signal(Path(job["go_file"]), job.get("signal_key"), job.get("go_timeout_s", 900),
                     what="the compile step's end")
    channel.send("mark", phase="go")
    timed = device == "cuda" and job["timing"].get("enabled", True)
    compiled, compile_s = None, 0.0
    if timed and job["timing"].get("compile", True):
        # torch.compile's own build is CPU work: it happens before the GPU is asked for alone, and holds nothing of
        # a shared gate (``install_compile_off_gpu``).
        try:
            t0 = time.perf_counter()
            compiled = torch.compile(model)
            install_compile_off_gpu(job, channel, clock.full_sync)
            with torch.no_grad():
                compiled(*template)
            compile_s = time.perf_counter() - t0 - compile_gate_wait_s()
        except Exception as error:
            _compile_failed(channel, error)
    # The baselines are this child's last GPU work: its parent may hand the GPU alone straight to the run child's
    # trivial kernel's series (``hand_over``), so that series waits for no other verification's untimed work.
    with alone_on_gpu(job, channel, clock.full_sync, hand_over=bool(job.get("hand_over"))):
        _time_baselines(torch, job, channel, clock, work, model, template, compiled, compile_s)
    channel.send("done")


def _compile_failed(channel: Channel, error: Exception) -> None:
    channel.send("note", which="compile", message=f"torch.compile baseline failed: {type(error).__name__}: {error}"[:800])


def _time_baselines(torch: Any, job: dict[str, Any], channel: Channel, clock: Clock, work: Path, model: Any,
                    template: list[Any], compiled: Any, compile_s: float) -> None:
    """The reference's kernel list and timed series (trivial kernel, eager, torch.compile, CUDA graph).

    The trivial kernel's series is left out when the job says ``overhead_cached``: in a batch it is the GPU's, not the
    task's, and the parent holds one measured by an earlier kernel on this GPU (``parent.OverheadCache``).
    """
    device = job["device"]
    if device == "cuda":
        with torch.no_grad():
            channel.send("kernels", which="reference", kernels=_trace_kernels(torch, lambda i: model(*i), template, work))
    flush = l2_flush_buffer(torch, device)
    options = {k: v for k, v in job["timing"].items() if k in ("warmup", "min_calls", "max_calls", "target_s")}
    seed_base = job["timing"]["seed_base"]
    if not job.get("overhead_cached"):
        tiny = torch.zeros(1, device=device)
        channel.send("timing", which="overhead",
                     result=time_callable(clock, lambda i: tiny.add_(1), [], seed_base, flush=flush, **options))
    with torch.no_grad():
        channel.send("timing", which="eager",
                     result=time_callable(clock, lambda i: model(*i), template, seed_base, flush=flush, **options))
    if device != "cuda" or not job["timing"].get("enabled", True):
        return
    if compiled is not None:
        try:
            with torch.no_grad():
                result = time_callable(clock, lambda i: compiled(*i), template, seed_base, flush=flush, **options)
            result["compile_s"] = compile_s
            channel.send("timing", which="compile", result=result)
        except Exception as error:
            _compile_failed(channel, error)
    try:
        static = [x.clone() if isinstance(x, torch.Tensor) else x for x in template]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(3):
                model(*static)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), torch.no_grad():
            graph_out = model(*static)

        def prepare(inputs: list[Any]) -> None:
            for dst, src in zip(static, inputs, strict=True):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)

        def replay(_: list[Any]) -> Any:
            graph.replay()
            return graph_out

        channel.send("timing", which="cuda-graph",
                     result=time_callable(clock, replay, template, seed_base, flush=flush, prepare=prepare, **options))
    except Exception as error:
        channel.send("note", which="cuda-graph", message=f"CUDA-graph baseline failed: {type(error).__name__}: {error}"[:800])


def reference_outputs(torch: Any, model: Any, model64: Float64Reference,
                      inputs: list[Any]) -> tuple[list[Any], list[Any] | None, str]:
    """The fp32 outputs, the float64 outputs (None when the model does not run in float64) and which precision.

    Used by the trusted child and by ``bench/tolerance_selftest.py``, so the self-test judges exactly the
    references a verification compares with. Both forwards start from the same RNG seed, so random layers
    (dropout in training mode) draw the same masks in both precisions.
    """
    with torch.no_grad():
        torch.manual_seed(REFERENCE_RNG_SEED)
        ref32 = _as_list(model(*inputs))
    ref64: list[Any] | None
    try:
        ref64 = model64(inputs)
        precision = "float64"
    except Exception as error:
        ref64, precision = None, f"float32 (float64 failed: {type(error).__name__}: {str(error)[:120]})"
    return ref32, ref64, precision


def _send_reference(torch: Any, model: Any, model64: Float64Reference, inputs: list[Any], name: str,
                    blobs: BlobChannel, between: Callable[[], None] | None = None
                    ) -> tuple[list[Any], list[Any] | None, str]:
    """Compute the fp32 and float64 references on ``inputs`` and send both as blob ``name`` (tensor frames);
    ``between`` (a yield point) runs after computing them, before sending."""
    ref32, ref64, precision = reference_outputs(torch, model, model64, inputs)
    if between is not None:
        between()
    send_groups(torch, blobs, name, {"ref64": ref64, "ref32": ref32})
    return ref32, ref64, precision


def _await_plan(job: dict[str, Any], channel: Channel, clock: Clock, **sizes: int) -> set[int]:
    """Say how large a trial's references and outputs are, and the probes' (``sized``), then wait for the parent's
    answer: the trials whose references to compute (``verify.harness.memory``). Nothing of this process runs on the
    GPU meanwhile."""
    clock.full_sync()
    channel.send("sized", **sizes)
    plan = await_signal(Path(job["plan_file"]), job.get("signal_key"), job.get("plan_timeout_s", 3600),
                        what="which trials to judge", poll_s=0.005)
    return {int(i) for i in json.loads(plan)["judged"]}


def _extension_name(code: str) -> str:
    return "ka_kernel_" + hashlib.sha256(code.encode()).hexdigest()[:12]


def _load_candidate(torch: Any, embedded: dict[str, Any], work: Path, build_dir: str | None = None) -> Any:
    """Build and import the candidate; ``build_dir`` (a build-cache entry) holds a cuda-binding's build."""
    if embedded["form"] == "cuda-binding":
        from torch.utils.cpp_extension import load

        source = Path(build_dir or work) / "kernel.cu"
        if not source.is_file() or source.read_text(encoding="utf-8") != embedded["kernel_code"]:
            source.write_text(embedded["kernel_code"], encoding="utf-8")
        build = Path(build_dir or work) / "build"
        build.mkdir(exist_ok=True)
        return load(name=_extension_name(embedded["kernel_code"]), sources=[str(source)],
                    build_directory=str(build), extra_cuda_cflags=["-O3"], verbose=False)
    module = load_module(embedded["kernel_code"], "ka_candidate", work)
    if not hasattr(module, "ModelNew"):
        raise AttributeError("the kernel file defines no class ModelNew")
    return module


def role_compile(job: dict[str, Any], embedded: dict[str, Any], channel: Channel, blobs: BlobChannel) -> None:
    """Build (cuda-binding) or import (model-new, whose load_inline builds) the candidate."""
    import torch

    pin_flags(torch)
    install_build_memo()
    install_ccache()
    install_baton_guard()
    install_pch(build=True)
    t0 = time.perf_counter()
    candidate = _load_candidate(torch, embedded, Path(job["work"]), job.get("build_dir"))
    channel.send("compiled", seconds=time.perf_counter() - t0)
    if embedded["form"] == "model-new" and job.get("construct", True):
        t1 = time.perf_counter()
        task, _ = _load_task(embedded, Path(job["work"]))
        # Hidden on purpose (a prebuild, or a batch's compile step): the constructor may ask for a GPU and only
        # then build, so it is told there is one; it cannot reach one.
        hidden = job.get("device") == "cuda" and os.environ.get("CUDA_VISIBLE_DEVICES") == ""
        outcome = _bounded(lambda: construct_for_build(candidate, list(task.get_init_inputs()), pretend_gpu=hidden),
                           job.get("construct_timeout_s", 300))
        channel.send("constructed", seconds=time.perf_counter() - t1, outcome=outcome)


def _bounded(step: Any, seconds: float) -> str:
    """Run ``step`` in this (main) thread, interrupted by SIGALRM after ``seconds``: a warm-up may not hang."""
    import signal

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"gave up after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return str(step())
    except TimeoutError as error:
        return f"TimeoutError: {error}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _equal_state(torch: Any, before: dict[str, Any], model: Any) -> list[str]:
    now = dict(model.state_dict())
    return [n for n, t in before.items() if n in now and not torch.equal(now[n], t)]


JUDGED_FILE = "judged.json"
"""Written into the shared folder by the parent when the host's memory leaves trials unjudged: the judged trials'
indices (``verify.harness.memory``). The run child sends its outputs on those trials only; the parent keeps no
others whatever it is sent."""


def judged_trials(shared: Path) -> set[int] | None:
    """The trials whose outputs the parent judges, from ``JUDGED_FILE``; None (all of them) without one."""
    try:
        return {int(i) for i in json.loads((shared / JUDGED_FILE).read_text())}
    except (OSError, ValueError, TypeError):
        return None


def is_stateful(torch: Any, model: Any, inputs: list[Any]) -> bool:
    """Whether the reference's output depends on its earlier calls: two calls on the same inputs differ.

    KernelBench's level 3 VanillaRNN keeps its hidden state in a plain attribute and updates it on every call.
    The tolerance is far above a nondeterministic reduction's, far below a changed state's. The model is put
    back in its state afterwards.

    Example:
        >>> import torch
        >>> class Counter(torch.nn.Module):
        ...     def __init__(self): super().__init__(); self.calls = torch.zeros(1)
        ...     def forward(self, x): self.calls = self.calls + 1; return x * self.calls
        >>> counter = Counter()
        >>> is_stateful(torch, counter, [torch.ones(3)]), is_stateful(torch, torch.nn.ReLU(), [torch.ones(3)])
        (True, False)
        >>> counter.calls.item()
        0.0
    """
    saved = snapshot_state(torch, model)
    outputs = []
    with torch.no_grad():
        for _ in range(2):
            torch.manual_seed(REFERENCE_RNG_SEED)
            outputs.append(_as_list(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])))
    restore_state(torch, model, saved)
    first, second = outputs
    tensors = [(a, b) for a, b in zip(first, second, strict=False)
               if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)]
    return len(first) != len(second) or any(
        a.shape != b.shape or not torch.allclose(a, b, rtol=1e-3, atol=1e-5, equal_nan=True) for a, b in tensors)


def snapshot_state(torch: Any, model: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A copy of ``model``'s state: its state dict and every submodule's plain tensor attributes (by name).

    No deep copy of the module: a candidate's module may hold objects that cannot be copied (a loaded
    extension, a stream).
    """
    with torch.no_grad():
        state = {n: t.detach().clone() for n, t in model.state_dict().items()}
        plain = {name: {k: v.detach().clone() for k, v in vars(sub).items()
                        if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter)}
                 for name, sub in model.named_modules()}
    return state, plain


def restore_state(torch: Any, target: Any, saved: tuple[dict[str, Any], dict[str, dict[str, Any]]]) -> None:
    """Put ``target`` back, in place, in the state ``snapshot_state`` saved; a tensor attribute added since stays.

    Example:
        >>> import torch
        >>> m = torch.nn.Linear(2, 2); m.hidden = torch.zeros(2); saved = snapshot_state(torch, m)
        >>> m.hidden = torch.ones(2); restore_state(torch, m, saved); m.hidden.sum().item()
        0.0
    """
    state, plain = saved
    with torch.no_grad():
        target.load_state_dict(state)
        modules = dict(target.named_modules())
        for name, attributes in plain.items():
            if name in modules:
                for key, value in attributes.items():
                    setattr(modules[name], key, value.clone())


class Restart:
    """For a stateful task, put modules back in their first state before each compared call; otherwise nothing.

    Example:
        >>> import torch
        >>> m = torch.nn.Linear(2, 2); m.hidden = torch.zeros(2)
        >>> restart = Restart(torch, [m], stateful=True); m.hidden = torch.ones(2); restart(); m.hidden.sum().item()
        0.0
    """

    def __init__(self, torch: Any, modules: list[Any], *, stateful: bool) -> None:
        self.torch = torch
        unique = {id(m): m for m in modules}.values()
        self.saved = [(m, snapshot_state(torch, m)) for m in unique] if stateful else []

    def __call__(self) -> None:
        for target, saved in self.saved:
            restore_state(self.torch, target, saved)


def _warm_process(torch: Any, device: str, clock: Clock, work: Path) -> None:
    """Do once everything the harness will do (CPU pool, cuBLAS, events, generators, profiler) so the
    threads and state those create exist before the baseline snapshot, not after the candidate ran."""
    a = torch.randn(256, 256)
    (a @ a).sum().item()
    b = torch.randn(256, 256, device=device)
    (b @ b).sum().item()
    time_callable(clock, lambda i: i[0].add_(1), [b], 1, warmup=1, min_calls=2, max_calls=2, target_s=0.0)
    poison_free_memory(torch, device, POISON_FILLS[0], 2**20)
    if device == "cuda":
        torch.cuda.synchronize()


def _warm_without_kernels(torch: Any, device: str) -> None:
    """Create the CUDA context and start the profiler once, launching no kernel.

    Runs while the trusted child times its baselines, so it must not put work on the GPU; it takes the
    seconds that the profiler's first start (CUPTI) costs off the run's critical path.
    """
    from torch.profiler import ProfilerActivity, profile

    torch.empty(1, device=device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.cuda.synchronize()


def _overhead_before_import(torch: Any, job: dict[str, Any], channel: Channel, clock: Clock) -> None:
    """The run child's own trivial kernel's series, timed with the GPU alone before anything of the candidate runs
    (``judge.wall_event_gap`` compares the candidate with it and with the trusted child's)."""
    tiny = torch.zeros(1, device=job["device"])
    with alone_on_gpu(job, channel, clock.full_sync):
        channel.send("timing", which="overhead-pre-import",
                     result=time_callable(clock, lambda i: tiny.add_(1), [], 1, warmup=2, min_calls=30,
                                          max_calls=30, target_s=0.0))


def _handed_the_gpu(job: dict[str, Any], channel: Channel) -> bool:
    """Say ``overhead-ready`` and wait for the GPU alone handed over (the ``overhead-go`` signal) or for the release;
    whether it was handed over (if both have come, it was)."""
    go, release, key = Path(job["overhead_go_file"]), Path(job["wait_file"]), job.get("signal_key")
    channel.send("mark", phase="overhead-ready")
    came: list[bool] = []

    def either() -> bool:
        if signalled(go, key):
            came.append(True)
        elif signalled(release, key):
            came.append(False)
        return bool(came)

    wait_until(either, job.get("wait_timeout_s", 900), poll_s=0.002)
    return bool(came) and came[0]


def role_run(job: dict[str, Any], embedded: dict[str, Any], channel: Channel, blobs: BlobChannel) -> None:
    """Run the candidate on the trusted inputs; report outputs, probes, the kernel list and raw timings."""
    import torch

    device = job["device"]
    work, shared = Path(job["work"]), Path(job["shared"])
    pin_flags(torch)
    install_build_memo()
    install_ccache()
    install_baton_guard()
    install_pch()
    clock = Clock(torch, device)
    if job.get("gate_grants") and load_dynamo_for(embedded["kernel_code"]):
        install_compile_off_gpu(job, channel, clock.full_sync)
    timed = device == "cuda" and not job.get("light")
    measured = False
    if timed:
        _warm_without_kernels(torch, device)
        if job.get("overhead_go_file") and job.get("wait_file") and _handed_the_gpu(job, channel):
            # Handed the GPU alone by the parent as the trusted child's baselines end (``GateKeeper``, ``over``).
            _overhead_before_import(torch, job, channel, clock)
            measured = True
    released: dict[str, Any] = {"stateful": bool(job.get("stateful"))}
    if job.get("wait_file"):
        payload = await_signal(Path(job["wait_file"]), job.get("signal_key"), job.get("wait_timeout_s", 900),
                               what="the run child's release", poll_s=0.005)
        with contextlib.suppress(ValueError, TypeError):
            released |= dict(json.loads(payload or "{}"))
    channel.send("mark", phase="released")
    if timed and not measured:
        _overhead_before_import(torch, job, channel, clock)
    build_off_gpu(job, channel, clock.full_sync)
    # From here to the import is mostly Python on a loaded host (0.6-3 s in a batch), with the gate shared: a
    # timed series waiting for it waited for all of it (session 35: half the batch's waits to be alone), so it
    # goes first between the pieces.
    yield_point(job, channel, clock.full_sync)
    _warm_process(torch, device, clock, work)
    channel.send("mark", phase="warmed")
    yield_point(job, channel, clock.full_sync)
    task, functional = _load_task(embedded, work)
    reference, init_inputs = _build_reference(torch, task, functional, embedded["form"], job["weight_seed"], device)
    yield_point(job, channel, clock.full_sync)
    reference.load_state_dict(torch.load(shared / "weights.pt", map_location=device))
    # From the parent's release, before the candidate's code runs: the trusted child said whether the reference is
    # stateful.
    stateful = bool(released.get("stateful"))
    channel.send("mark", phase="reference-built")
    identities = snapshot_identities()
    kernels_before, torch_folder = aten_kernels(torch), os.path.dirname(torch.__file__)
    # Made before the import: it takes its sys.monitoring tool before the candidate could take every one, and
    # each first finding reaches the parent at once, before the candidate's code there has run.
    watch = StepWatch([str(work)], (torch_folder,),
                      on_found=lambda label, hook: channel.send("probe", phase="step-watch", found=label[:300],
                                                                     hook=hook))
    flags_before = snapshot_flags({"torch": torch})
    threads_before = thread_counts()
    context = ContextState({"timed": int(torch.cuda.current_stream().cuda_stream)} if device == "cuda" else {})
    context_before = context.snapshot()
    if not job.get("light"):
        # The watched steps once on a small input, before the import and off the GPU-alone time: each library
        # function they run is judged (compiled from its file) here, not in the candidate's first timed call.
        with torch.no_grad():
            time_callable(clock, lambda i: i[0], [torch.zeros(8, 8, device=device)], 1, warmup=0, min_calls=1,
                          max_calls=1, target_s=0.0, reset=lambda: context.restore(context_before), watch=watch)
    channel.send("hello", pid=os.getpid(), threads=threads_before, flags=flags_before, context=context_before)
    # Every signal this child waits for before the import has come; the candidate's process is dumpable as an
    # exec'd one would be.
    set_dumpable()
    candidate = _load_candidate(torch, embedded, work, job.get("build_dir"))
    channel.send("probe", phase="import", threads=thread_counts(), flags=snapshot_flags({"torch": torch}),
                 context=context.snapshot(), changed=changed_identities(identities, snapshot_identities()))
    # The import and the model's construction are each the candidate's code, run to their end: a yield point
    # between them, and one before each trial's inputs, keep a timed series from waiting for both (harness 1.36).
    yield_point(job, channel, clock.full_sync)
    params_of: Any
    if embedded["form"] == "cuda-binding":
        if functional is not None and hasattr(functional, "module_fn"):
            def call(inputs: list[Any]) -> Any:
                return reference(*inputs, fn=candidate.forward)

            channel.send("call", how="functional form: Model.forward(..., fn=kernel.forward)")
        else:
            signature = parse_forward_signature(embedded["kernel_code"])
            build, explanation = derive_call(reference, init_inputs, signature, len(task.get_inputs()))

            def call(inputs: list[Any]) -> Any:
                return candidate.forward(*build(inputs))

            channel.send("call", how="derived from the module form", explanation=explanation)
        params_of = reference
    else:
        torch.manual_seed(job["weight_seed"])
        model_new = candidate.ModelNew(*init_inputs).to(device)
        mapping = copy_matching_state(reference, model_new)
        channel.send("call", how="ModelNew(*reference get_init_inputs()), weights copied from the reference",
                     weights=mapping)

        def call(inputs: list[Any]) -> Any:
            return model_new(*inputs)

        params_of = model_new
    restart = Restart(torch, [params_of, reference], stateful=stateful)
    guard_gen = torch.Generator(device=device)
    guard_gen.manual_seed(job["weight_seed"] ^ 0xBAD)
    poison_bytes = job.get("poison_bytes", 256 * 2**20)
    judged = judged_trials(shared)
    for trial in job["trials"]:
        yield_point(job, channel, clock.full_sync)
        install_compile_off_gpu(job, channel, clock.full_sync)
        index = trial["index"]
        pristine = load_values(torch, shared / f"inputs-{index}", device)
        state_before = {n: t.detach().clone() for n, t in params_of.state_dict().items()}
        variants = ["a", "b", "c"] if index < job.get("deep_trials", 2) else ["a"]
        for variant in variants:
            yield_point(job, channel, clock.full_sync)
            guard = 1024
            guarded = [guarded_copy(x, guard, guard_gen) if isinstance(x, torch.Tensor) else (x, None, None)
                       for x in pristine]
            inputs = [g[0] for g in guarded]
            if variant == "b":
                with torch.no_grad():
                    bait = reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in pristine])
                del bait
            elif device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                poison_free_memory(torch, device, POISON_FILLS[0 if variant == "a" else 1], poison_bytes)
                for _ in range(8):
                    poison_free_memory(torch, device, POISON_FILLS[0 if variant == "a" else 1], 512 * 1024)
            threads_pre = thread_counts()
            error = None
            restart()
            try:
                with torch.no_grad():
                    out = call(inputs)
                clock.full_sync()
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:2000]
                channel.send("trial", index=index, variant=variant, error=error, traceback=traceback.format_exc()[-3000:])
                raise
            outs = _as_list(out)
            snapshot = [o.detach().clone() if isinstance(o, torch.Tensor) else None for o in outs]
            time.sleep(job.get("settle_s", 0.05))
            clock.full_sync()
            changed_after_return = [i for i, (o, s) in enumerate(zip(outs, snapshot, strict=True))
                                    if s is not None and not bit_equal(o, s)]
            input_spans = [storage_span(g[1]) if g[1] is not None else None for g in guarded]
            param_spans = [storage_span(t) for t in params_of.state_dict().values()]
            aliasing = [
                {"output": i, "with": f"input {j}"} for i, o in enumerate(outs) if isinstance(o, torch.Tensor)
                for j, span in enumerate(input_spans) if overlaps(storage_span(o), span)
            ] + [
                {"output": i, "with": "a parameter/buffer"} for i, o in enumerate(outs) if isinstance(o, torch.Tensor)
                if any(overlaps(storage_span(o), s) for s in param_spans)
            ]
            mutated = [j for j, (x, p) in enumerate(zip(inputs, pristine, strict=True))
                       if isinstance(x, torch.Tensor) and not torch.equal(x, p)]
            guards = [j for j, g in enumerate(guarded)
                      if g[1] is not None and not guards_intact(g[1], g[2], guard, g[0].numel())]
            mutated_params = _equal_state(torch, state_before, params_of)
            name = f"out-{index}-{variant}" if judged is None or index in judged else None
            if name:
                send_groups(torch, blobs, name, {"outputs": [o if isinstance(o, torch.Tensor) else None for o in outs]})
            channel.send("trial", index=index, variant=variant, blob=name, outputs=[describe(o) for o in outs],
                         changed_after_return=changed_after_return, aliasing=aliasing, mutated_inputs=mutated,
                         mutated_parameters=mutated_params, guard_damage=guards,
                         threads_before=threads_pre, threads_after=thread_counts(),
                         flags=snapshot_flags({"torch": torch}), context=context.snapshot(),
                         changed=changed_identities(identities, snapshot_identities()))
            del out, outs, snapshot, guarded, inputs
    if job.get("light"):
        channel.send("done")
        return
    channel.send("mark", phase="trials-done")
    template = load_values(torch, shared / "template", device)
    flush = l2_flush_buffer(torch, device)
    options = {k: v for k, v in job["timing"].items() if k in ("warmup", "min_calls", "max_calls", "target_s")}
    threads_pre = thread_counts()
    restored: list[str] = []

    def reset() -> None:
        restored.extend(context.restore(context_before))

    with alone_on_gpu(job, channel, clock.full_sync):
        channel.send("timing-start")
        with torch.no_grad():
            result = time_callable(clock, call, template, job["timing"]["seed_base"], flush=flush, reset=reset,
                                   watch=watch, **options)
        channel.send("timing-end")
        channel.send("timing", which="candidate", result=result, threads_before=threads_pre,
                     threads_after=thread_counts(), flags=snapshot_flags({"torch": torch}), context=context.snapshot(),
                     restored=sorted(set(restored))[:20], changed=changed_identities(identities, snapshot_identities()))
        if device == "cuda":
            # Its kernel durations are compared with the timed series: they are measured alone too.
            with torch.no_grad():
                channel.send("kernels", which="candidate", kernels=_trace_kernels(torch, call, template, work))
    # After the timed calls, whose inputs, fingerprints and comparisons an operator's replaced kernel would change.
    channel.send("probe", phase="operators", checked=bool(kernels_before),
                 replaced=replaced_kernels(kernels_before, aten_kernels(torch), torch_folder))
    install_compile_off_gpu(job, channel, clock.full_sync)
    if device == "cuda":
        yield_point(job, channel, clock.full_sync)
        try:
            _state_probe(torch, call, reference, shared, clock, work, channel, blobs, restart)
        except Exception as exc:
            channel.send("state-probe", error=f"{type(exc).__name__}: {exc}"[:1000])
    shape_inputs = shared / "inputs-shape"
    if shape_inputs.exists():
        # Last, because a kernel that assumes the task's shapes may corrupt the CUDA context here; the
        # parent counts a death after this mark as the probe's failure, not the run's.
        channel.send("mark", phase="shape-probe")
        yield_point(job, channel, clock.full_sync)
        install_compile_off_gpu(job, channel, clock.full_sync)
        try:
            inputs = load_values(torch, shape_inputs, device)
            with torch.no_grad():
                outs = _as_list(call(inputs))
            clock.full_sync()
            send_groups(torch, blobs, "out-shape", {"outputs": [o if isinstance(o, torch.Tensor) else None for o in outs]})
            channel.send("shape-trial", blob="out-shape", outputs=[describe(o) for o in outs])
        except Exception as exc:
            channel.send("shape-trial", error=f"{type(exc).__name__}: {exc}"[:1000])
    if (shared / "inputs-init").exists():
        channel.send("mark", phase="init-probe")
        yield_point(job, channel, clock.full_sync)
        try:
            outs = _init_probe(torch, job, embedded, candidate, shared, work, device)
            clock.full_sync()
            send_groups(torch, blobs, "out-init", {"outputs": [o if isinstance(o, torch.Tensor) else None for o in outs]})
            channel.send("init-trial", blob="out-init", outputs=[describe(o) for o in outs])
        except Exception as exc:
            channel.send("init-trial", error=f"{type(exc).__name__}: {exc}"[:1000])
    channel.send("done")


def _init_probe(torch: Any, job: dict[str, Any], embedded: dict[str, Any], candidate: Any, shared: Path, work: Path,
                device: str) -> list[Any]:
    """Build reference and candidate again at the init-size variant (same weights) and call the candidate once."""
    sized = load_module(job["init_variant"]["code"], "ka_task_init", work)
    reference, init_inputs = _build_reference(torch, sized, None, embedded["form"], job["weight_seed"], device)
    reference.load_state_dict(torch.load(shared / "weights-init.pt", map_location=device))
    inputs = load_values(torch, shared / "inputs-init", device)
    with torch.no_grad():
        if embedded["form"] == "cuda-binding":
            build, _ = derive_call(reference, init_inputs, parse_forward_signature(embedded["kernel_code"]),
                                   len(sized.get_inputs()))
            return _as_list(candidate.forward(*build(inputs)))
        torch.manual_seed(job["weight_seed"])
        model_new = candidate.ModelNew(*init_inputs).to(device)
        copy_matching_state(reference, model_new)
        return _as_list(model_new(*inputs))


def changed_positions(torch: Any, inputs: list[Any], seed: int, per_input: int = 8) -> tuple[list[Any], int]:
    """A copy of ``inputs`` with ``per_input`` elements of each floating tensor changed at random positions.

    Each changed element moves away from zero by 0.5 to 1.5 times the input's largest magnitude (plus 0.1),
    keeping its sign, so positive-only inputs stay positive. The input's structure holds
    (``tensors.conform``): only non-zero elements of a zero pattern change, and a symmetric input changes
    with its mirror element. ``seed`` is drawn by the caller after the candidate ran, from the OS's
    randomness, so the candidate cannot know which elements will change.

    Example:
        >>> import torch
        >>> x = torch.ones(1000)
        >>> y, n = changed_positions(torch, [x], seed=5)
        >>> (n, int((y[0] != x).sum()), bool((y[0] >= 1).all()))
        (8, 8, True)
    """
    import random

    rng = random.Random(seed)
    out, changed = [], 0
    for x in inputs:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            out.append(x)
            continue
        y = x.detach().clone()
        flat = y.view(-1) if y.is_contiguous() else y.reshape(-1)
        scale = float(flat.abs().max()) + 0.1
        pattern, mirror = zero_pattern(x), is_symmetric(x)
        n = x.shape[-1] if mirror else 1
        for position in _positions(rng, flat, per_input, None if pattern is None else pattern.reshape(-1)):
            old = float(flat[position])
            new = (1.0 if old >= 0 else -1.0) * (abs(old) + scale * rng.uniform(0.5, 1.5))
            flat[position] = new
            if mirror:
                row, col = divmod(position % (n * n), n)
                flat[position - position % (n * n) + col * n + row] = new
            changed += 1
        out.append(flat.view(x.shape) if y.is_contiguous() else flat.reshape(x.shape))
    return out, changed


def _positions(rng: Any, flat: Any, count: int, allowed: Any | None) -> list[int]:
    """``count`` distinct positions of ``flat`` drawn by ``rng``, among the ``allowed`` ones (a flat mask)."""
    if allowed is None:
        return rng.sample(range(flat.numel()), min(count, flat.numel()))
    chosen: list[int] = []
    for _ in range(64 * count):
        position = rng.randrange(flat.numel())
        if position not in chosen and bool(allowed[position]):
            chosen.append(position)
            if len(chosen) == count:
                break
    return chosen


STATE_PROBE_BLOBS: dict[str, str] = {key: f"state-probe-{key}" for key in ("first", "second", "ref_x", "ref_changed")}
"""The statefulness probe's blobs, one list of outputs each: the parent reads these names, not names a message gives."""


def _state_probe(torch: Any, call: Any, reference: Any, shared: Path, clock: Clock, work: Path, channel: Channel,
                 blobs: BlobChannel, restart: Restart) -> None:
    """Does an output depend on earlier calls? Call on X, then on X with a few unpredictable elements changed.

    Sends both candidate outputs and the in-process fp32 references of X and X' (blobs ``STATE_PROBE_BLOBS``),
    each from the device as soon as it is computed: none is held in this process's memory (four outputs of a
    billion elements are 16 GB). The parent checks the first against the trusted reference and that the outputs
    the change moved moved. For a stateful task every call starts from the first state (``restart``), as the
    references did.
    """
    x = load_values(torch, shared / "inputs-0", "cuda")

    def send(key: str, values: list[Any]) -> None:
        send_groups(torch, blobs, STATE_PROBE_BLOBS[key],
                    {"outputs": [v if isinstance(v, torch.Tensor) else None for v in values]})

    restart()
    with torch.no_grad():
        first = _as_list(call([t.clone() if isinstance(t, torch.Tensor) else t for t in x]))
    clock.full_sync()
    send("first", first)
    del first
    changed, count = changed_positions(torch, x, int.from_bytes(_URANDOM(8), "little"))
    for key, inputs in (("ref_x", x), ("ref_changed", changed)):
        with torch.no_grad():
            restart()
            values = _as_list(reference(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]))
        clock.full_sync()
        send(key, values)
        del values
    restart()
    with torch.no_grad():
        kernels = _trace_kernels(torch, call, changed, work, keep_output=True)
    send("second", _as_list(kernels.pop()))
    channel.send("state-probe", changed_elements=count, kernels=kernels)


_URANDOM = os.urandom


def role_profile(job: dict[str, Any], embedded: dict[str, Any], channel: Channel, blobs: BlobChannel) -> None:
    """Run the candidate on the task's own inputs for a profiler: warm-up, then profiled calls.

    With a ``gate_file`` it imports torch and the task, then waits for that file before touching CUDA (the
    parent creates it once it holds the GPU gate).

    Under ``ncu`` (``job['torch_profile']`` false) this only makes the launches ncu records; otherwise it
    reports ``torch.profiler`` key averages in the archive's torch-profile format.
    """
    import torch

    device = job["device"]
    work = Path(job["work"])
    pin_flags(torch)
    install_build_memo()
    install_ccache()
    install_baton_guard()
    install_pch()
    task, functional = _load_task(embedded, work)
    if job.get("gate_file"):
        # The CUDA context (and, for torch.profiler, CUPTI's first start) cost seconds and launch no kernel, so
        # they come before the gate, as the run child's do: on the H100 a profile held the gate about 20 s.
        if device == "cuda" and job.get("torch_profile", True):
            _warm_without_kernels(torch, device)
        elif device == "cuda":
            torch.empty(1, device=device)  # under ncu: a context only, no profiler of torch's beside ncu's
        await_signal(Path(job["gate_file"]), job.get("signal_key"), job.get("gate_timeout_s", 3600),
                     what="the GPU's gate")
    reference, init_inputs = _build_reference(torch, task, functional, embedded["form"], job["weight_seed"], device)
    candidate = _load_candidate(torch, embedded, work, job.get("build_dir"))
    if embedded["form"] == "cuda-binding":
        if functional is not None and hasattr(functional, "module_fn"):
            def call(inputs: list[Any]) -> Any:
                return reference(*inputs, fn=candidate.forward)
        else:
            build, _ = derive_call(reference, init_inputs, parse_forward_signature(embedded["kernel_code"]),
                                   len(task.get_inputs()))

            def call(inputs: list[Any]) -> Any:
                return candidate.forward(*build(inputs))
    else:
        torch.manual_seed(job["weight_seed"])
        model_new = candidate.ModelNew(*init_inputs).to(device)
        copy_matching_state(reference, model_new)

        def call(inputs: list[Any]) -> Any:
            return model_new(*inputs)
    inputs = make_inputs(task.get_inputs, job["weight_seed"], "task", device)
    with torch.no_grad():
        for _ in range(job.get("warmup", 2)):
            call(inputs)
        torch.cuda.synchronize()
        if not job.get("torch_profile", True):
            for _ in range(job.get("calls", 5)):
                call(inputs)
            torch.cuda.synchronize()
            channel.send("done")
            return
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True) as prof:
            for _ in range(job.get("calls", 5)):
                call(inputs)
            torch.cuda.synchronize()
    events: dict[str, dict[str, Any]] = {}
    for avg in prof.key_averages():
        entry: dict[str, Any] = {}
        for key in ("cpu_time_total", "device_time_total", "self_cpu_time_total", "self_device_time_total",
                    "cpu_memory_usage", "device_memory_usage", "self_cpu_memory_usage", "self_device_memory_usage",
                    "count"):
            value = getattr(avg, key, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                entry[key] = value
        events[str(avg.key)] = entry
    channel.send("torch-profile", events=events)
    channel.send("done")


ROLES = {"trusted": role_trusted, "compile": role_compile, "run": role_run, "profile": role_profile}


def child_main(role: str, job_path: str, channel_fd: int | None, embedded: dict[str, Any],
               blob_fd: int | None = None, blob_memory_fd: int | None = None) -> int:
    """Entry point of a child process: run ``role`` on the job file, report through the channel."""
    die_with_parent()
    if role in ("trusted", "run"):
        # Undumpable before the job (seeds, the signal key) is in memory: the compile child's candidate code,
        # which starts once this file is gone, cannot read it from here (``verify.harness.signals``).
        make_non_dumpable()
    channel = Channel(channel_fd)
    blobs = BlobChannel(blob_fd, blob_memory_fd)
    job = json.loads(Path(job_path).read_text())
    # Seeds live in the job; once read, it is gone, so candidate code cannot read the timed inputs' seeds
    # from a file and precompute their outputs.
    Path(job_path).unlink(missing_ok=True)
    if role == "run" and job.get("light"):
        set_dumpable()
    try:
        ROLES[role](job, embedded, channel, blobs)
    except BaseException as error:
        channel.send("error", role=role, message=f"{type(error).__name__}: {error}"[:4000],
                     traceback=traceback.format_exc()[-6000:])
        return 3
    if role in ("trusted", "run"):
        # Everything is reported; skip interpreter and CUDA teardown (seconds), the parent kills the group.
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
