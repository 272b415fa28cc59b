"""Benchmark: how references, outputs and inputs cross from the GPU to another process (harness 1.12, issue 13).

In a verification the trusted child sends each trial's fp32 and float64 references to the parent, and the run
child each trial's outputs: for CUDA-L1's largest outputs (660M elements, level 1 task 59) 8 GB per trial, which
took 10 s of GPU-gate time per reference on an H100. Through harness 1.11 a tensor was copied to a fresh CPU
tensor, then written into the parent's shared memory file: two copies, each faulting in fresh pages.
``verify.harness.frames.send_groups`` copies it once, into a mapping of that file. This times each way, on the
real ``BlobChannel`` with a reader thread as the parent has:

- ``two copies``: harness 1.11 (``pack_groups`` then ``send_parts``);
- ``mapped``: one copy into the mapping, its pages faulted in by the copy;
- ``mapped, fallocate``: the pages allocated first in one call (harness 1.12-1.38);
- ``mapped, fallocate, pinned``: and page-locked for CUDA (``cudaHostRegister``), so the copy is one DMA
  (harness 1.12-1.38's default);
- ``mapped, populated``: the pages allocated and mapped first by several threads at once
  (``verify.harness.common.populate``, harness 1.39);
- ``mapped, populated, pinned``: and page-locked (harness 1.39's default).

A fresh page costs the process that takes it about 0.6 s/GB on these virtual machines, so it also times how the
parent copies a candidate's payload out of the memory file (``COPIES``).

It also times how the trusted child draws a task's inputs: on the CPU then copied over (harness 1.11) or drawn
on the device (``verify.harness.tensors.task_inputs``); how it saves them for the run child (``torch.save``, or
``verify.harness.frames.save_values``: frames written straight into a mapping of the file); and how the run child
loads them onto the device.

    python bench/transfers.py                  # table (needs a GPU; --device cpu exercises the logic)
    python bench/transfers.py --json           # last line: JSON

JSON keys: ``device``, ``send_gb_s`` (method -> size label -> GB/s), ``send_s`` (the same in seconds),
``copy_gb_s`` (how, one of ``COPIES`` -> size label -> GB/s of the parent's copy of 12 bytes an element),
``draw_s`` (size label -> {"cpu then copy", "on the device", "torch.save", "save_values", "torch.load, to device",
"load_values, to device"} -> seconds),
``shmem_hugepages`` (the kernel's setting for shared-memory huge pages).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

METHODS = ("two copies", "mapped", "mapped, fallocate", "mapped, populated", "mapped, fallocate, pinned",
           "mapped, populated, pinned")
SIZES = {"16M": 16 * 2**20, "128M": 128 * 2**20, "512M": 512 * 2**20}
"""Output elements; each is sent as a float64 and a float32 tensor, as a reference is (12 bytes an element)."""


def _sync(torch: Any) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def send_seconds(torch: Any, method: str, groups: dict[str, list[Any] | None]) -> float:
    """Seconds to send ``groups`` by ``method`` through a fresh ``BlobChannel`` with a memory file, read as the
    parent reads a trusted child's (mapped), the reader checked for the right bytes."""
    from verify.harness.common import BlobChannel, read_blobs
    from verify.harness.frames import pack_groups, send_groups, unpack_groups

    read_fd, write_fd = os.pipe()
    memory = os.memfd_create("ka-bench")
    got: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: got.update(read_blobs(os.fdopen(read_fd, "rb"), memory=memory)))
    reader.start()
    channel = BlobChannel(write_fd, memory)
    _sync(torch)
    start = time.perf_counter()
    if method == "two copies":
        channel.send_parts("ref", pack_groups(torch, {k: [t.cpu() for t in v or []] for k, v in groups.items()}))
    else:
        with _one_fallocate("fallocate" in method):
            send_groups(torch, channel, "ref", groups, preallocate="mapped," in method, pin="pinned" in method)
    seconds = time.perf_counter() - start
    os.close(write_fd)
    reader.join()
    back = unpack_groups(torch, got.get("ref"))
    first = groups["ref32"][0]  # type: ignore[index]
    if back is None or not torch.equal(back["ref32"][0][:1000], first.reshape(-1)[:1000].cpu()):  # type: ignore[index]
        raise RuntimeError(f"{method}: the reader did not get the bytes sent")
    del back
    os.close(memory)
    return seconds


@contextlib.contextmanager
def _one_fallocate(on: bool) -> Iterator[None]:
    """Within it (when ``on``), ``BlobChannel.send_into`` preallocates as harness 1.38 did: one ``fallocate``."""
    from verify.harness import common

    populate = common.populate
    if on:
        common.populate = lambda mapping, threads=None: False
    try:
        yield
    finally:
        common.populate = populate


COPIES = ("bytearray, one thread", "in pieces, one thread", "in pieces")
"""How the parent copies a candidate's payload out: into a zero-filled ``bytearray`` by one read (harness
1.21-1.38), and ``copy_payload`` (1.39) with ``PIECE_THREADS`` set to 1 and as it is."""


def copy_seconds(nbytes: int, how: str) -> float:
    """Seconds the parent takes to copy one ``nbytes`` payload out of a memory file ``how`` (``COPIES``), checked
    for the right bytes."""
    from verify.harness import common

    memory = os.memfd_create("ka-bench")
    try:
        os.ftruncate(memory, nbytes)
        common.allocate(memory, 0, nbytes)
        os.pwrite(memory, b"payload", nbytes - 7)
        kept = common.PIECE_THREADS
        common.PIECE_THREADS = 1 if how == "in pieces, one thread" else kept
        try:
            start = time.perf_counter()
            if how == "bytearray, one thread":
                payload: Any = bytearray(nbytes)
                common._read_into(memory, memoryview(payload), 0)
            else:
                payload = common.copy_payload(memory, 0, nbytes)
            seconds = time.perf_counter() - start
        finally:
            common.PIECE_THREADS = kept
        if bytes(memoryview(payload)[-7:]) != b"payload":
            raise RuntimeError(f"{how}: the copy did not get the bytes written")
        return seconds
    finally:
        os.close(memory)


def draw_seconds(torch: Any, device: str, n: int, work: Path) -> dict[str, float]:
    """Seconds to draw one ``n``-element input as a task's ``get_inputs`` does, each way; then to save it for the
    run child and to load it there onto the device, each way."""
    from verify.harness.frames import load_values, save_values
    from verify.harness.tensors import task_inputs

    def get_inputs() -> list[Any]:
        return [torch.randn(n)]

    def timed(label: str, function: Any) -> Any:
        _sync(torch)
        start = time.perf_counter()
        value = function()
        _sync(torch)
        figures[label] = time.perf_counter() - start
        return value

    figures: dict[str, float] = {}
    timed("cpu then copy", lambda: [t.to(device) for t in (torch.manual_seed(1), get_inputs())[1]])
    x = timed("on the device", lambda: task_inputs(get_inputs, 1, device))
    timed("torch.save", lambda: torch.save([t.cpu() for t in x], work / "inputs.pt"))
    timed("save_values", lambda: save_values(torch, x, work / "inputs"))
    timed("torch.load, to device", lambda: [t.to(device) for t in torch.load(work / "inputs.pt", mmap=True)])
    timed("load_values, to device", lambda: [t.to(device) for t in load_values(torch, work / "inputs")])
    for name in ("inputs.pt", "inputs", "inputs.rest"):
        (work / name).unlink()
    return figures


def measure(device: str, scale: int, work: Path) -> dict[str, Any]:
    """Every method on every size (each size divided by ``scale``), and the input draws."""
    import torch

    methods = METHODS if device == "cuda" else tuple(m for m in METHODS if "pinned" not in m)
    send_s: dict[str, dict[str, float]] = {m: {} for m in methods}
    send_gb_s: dict[str, dict[str, float]] = {m: {} for m in methods}
    for label, elements in SIZES.items():
        n = max(1, elements // scale)
        ref64 = torch.randn(n, dtype=torch.float64, device=device)
        groups: dict[str, list[Any] | None] = {"ref64": [ref64], "ref32": [ref64.float()]}
        send_seconds(torch, methods[-1], groups)  # the first use of each path's code, and CUDA's pinned pool
        for method in methods:
            seconds = send_seconds(torch, method, groups)
            send_s[method][label] = seconds
            send_gb_s[method][label] = n * 12 / seconds / 1e9
        del ref64, groups
    copy_gb_s: dict[str, dict[str, float]] = {how: {} for how in COPIES}
    for label, elements in SIZES.items():
        nbytes = max(1, elements // scale) * 12
        # Alternated, the median of three: which of the host's pages a copy gets moves one copy by several times.
        rounds = [{how: copy_seconds(nbytes, how) for how in COPIES} for _ in range(3)]
        for how in COPIES:
            copy_gb_s[how][label] = nbytes / statistics.median(r[how] for r in rounds) / 1e9
    draw_s = {label: draw_seconds(torch, device, max(1, elements // scale), work) for label, elements in SIZES.items()
              if elements <= 128 * 2**20}
    setting = Path("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
    return {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "send_gb_s": send_gb_s,
            "send_s": send_s, "copy_gb_s": copy_gb_s, "draw_s": draw_s,
            "shmem_hugepages": setting.read_text().strip() if setting.exists() else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu only exercises the logic")
    parser.add_argument("--scale", type=int, default=None,
                        help="divide every size by this (default 1 on cuda, 64 on cpu)")
    parser.add_argument("--work", type=Path, default=Path("/tmp"), help="where the input file is saved")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = parser.parse_args()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device: run on a GPU machine, or pass --device cpu to exercise the logic")
    result = measure(args.device, args.scale or (1 if args.device == "cuda" else 64), args.work)
    labels = list(next(iter(result["send_s"].values())))
    print(f"{'send (GB/s, 12 bytes an element)':34s}" + "".join(f"{label:>10s}" for label in labels))
    for method, figures in result["send_gb_s"].items():
        print(f"{method:34s}" + "".join(f"{figures[label]:10.2f}" for label in labels))
    print(f"\n{'the parent copies (GB/s)':34s}" + "".join(f"{label:>10s}" for label in labels))
    for how, figures in result["copy_gb_s"].items():
        print(f"{how:34s}" + "".join(f"{figures[label]:10.2f}" for label in labels))
    sizes = list(result["draw_s"])
    print(f"\n{'one input (s)':34s}" + "".join(f"{label:>10s}" for label in sizes))
    for part in next(iter(result["draw_s"].values())):
        print(f"{part:34s}" + "".join(f"{result['draw_s'][label][part]:10.3f}" for label in sizes))
    print(f"\nshared-memory huge pages: {result['shmem_hugepages']}")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
