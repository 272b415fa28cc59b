"""Tensors between processes as raw bytes: a JSON header, then each tensor's bytes, no pickling.

References (up to hundreds of MB of float64) and candidate outputs cross from a child to the parent.
``torch.save``/``torch.load`` copied them three times through a zip writer; a frame is the header plus the
tensors' own bytes, read back into one buffer that the tensors then share (``torch.frombuffer``, no further
copy). ``send_groups`` writes the frames straight from the device into the parent's shared memory file, and
``save_values`` a task's inputs into a file for the run child, each tensor crossing to the host once. The
reader trusts nothing: dtypes come from a fixed table, sizes must add up, and anything malformed reads as None
(the check that needed it then fails closed).

Example:
    >>> import torch
    >>> parts = pack_groups(torch, {"ref64": [torch.arange(3.0, dtype=torch.float64)], "ref32": None})
    >>> out = unpack_groups(torch, bytearray(b"".join(bytes(p) for p in parts)))
    >>> out["ref64"][0].tolist(), out["ref32"]
    ([0.0, 1.0, 2.0], None)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from verify.harness.common import allocate

FRAME_DTYPES: tuple[str, ...] = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                                 "uint8", "bool", "complex64", "complex128")


def _dtype_name(torch: Any, dtype: Any) -> str | None:
    name = str(dtype).removeprefix("torch.")
    return name if name in FRAME_DTYPES and getattr(torch, name) == dtype else None


def _layout(torch: Any, groups: dict[str, list[Any] | None]) -> tuple[bytes, list[Any]]:
    """The encoded header (length prefix included) and the tensors whose bytes follow it, in order."""
    header: dict[str, Any] = {}
    tensors: list[Any] = []
    for name, values in groups.items():
        if values is None:
            header[name] = None
            continue
        items: list[dict[str, Any] | None] = []
        for value in values:
            dtype = _dtype_name(torch, value.dtype) if isinstance(value, torch.Tensor) else None
            if dtype is None:
                items.append(None)
                continue
            items.append({"dtype": dtype, "shape": list(value.shape), "nbytes": value.numel() * value.element_size()})
            if value.numel():
                tensors.append(value.detach())
        header[name] = items
    encoded = json.dumps(header).encode("utf-8")
    return len(encoded).to_bytes(8, "little") + encoded, tensors


def pack_groups(torch: Any, groups: dict[str, list[Any] | None]) -> list[Any]:
    """Header and byte views of named lists of tensors (non-tensors and unknown dtypes become None); tensors on
    a device are copied to the CPU first."""
    head, tensors = _layout(torch, groups)
    parts: list[Any] = [head]
    for value in tensors:
        parts.append(memoryview(value.to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy()))
    return parts


def tensor_bytes(values: list[Any] | None) -> int:
    """The bytes of the tensors in ``values`` (anything else counts nothing).

    Example:
        >>> import torch
        >>> tensor_bytes([torch.zeros(4, 2), None, torch.zeros(3, dtype=torch.float64)])
        56
    """
    return sum(v.numel() * v.element_size() for v in values or [] if hasattr(v, "element_size"))


def frames_size(torch: Any, groups: dict[str, list[Any] | None]) -> int:
    """The bytes ``pack_groups`` would produce for ``groups``."""
    return _size(*_layout(torch, groups))


def _size(head: bytes, tensors: list[Any]) -> int:
    return len(head) + sum(t.numel() * t.element_size() for t in tensors)


def write_groups(torch: Any, groups: dict[str, list[Any] | None], buffer: Any) -> None:
    """Write ``pack_groups``'s bytes into ``buffer`` (writable, exactly ``frames_size`` bytes), each tensor copied
    straight from its device: a tensor on the GPU crosses to the host once, into ``buffer`` itself.

    Example:
        >>> import torch
        >>> groups = {"out": [torch.arange(4, dtype=torch.int16), None]}
        >>> buffer = bytearray(frames_size(torch, groups))
        >>> write_groups(torch, groups, buffer)
        >>> bytes(buffer) == b"".join(bytes(p) for p in pack_groups(torch, groups))
        True
    """
    _write(torch, *_layout(torch, groups), buffer)


def _write(torch: Any, head: bytes, tensors: list[Any], buffer: Any) -> None:
    view = memoryview(buffer).cast("B")
    view[:len(head)] = head
    at = len(head)
    for value in tensors:
        target = torch.frombuffer(view, dtype=value.dtype, count=value.numel(), offset=at)
        target.view(value.shape).copy_(value)
        at += value.numel() * value.element_size()
        del target
    if at != len(view):
        raise ValueError(f"frames of {at} bytes written into a buffer of {len(view)}")


def unpack_groups(torch: Any, payload: bytearray | bytes | None) -> dict[str, list[Any] | None] | None:
    """The named lists of ``pack_groups`` (tensors share ``payload``'s memory); None when malformed."""
    if payload is None:
        return None
    try:
        view = memoryview(payload)
        size = int.from_bytes(view[:8], "little")
        header = json.loads(bytes(view[8:8 + size]).decode("utf-8"))
        offset = 8 + size
        groups: dict[str, list[Any] | None] = {}
        for name, items in header.items():
            if items is None:
                groups[name] = None
                continue
            values: list[Any] = []
            for item in items:
                if item is None:
                    values.append(None)
                    continue
                dtype = getattr(torch, item["dtype"]) if item["dtype"] in FRAME_DTYPES else None
                shape = [int(d) for d in item["shape"]]
                nbytes = int(item["nbytes"])
                numel = 1
                for d in shape:
                    numel *= d
                if dtype is None or min(shape, default=0) < 0 or nbytes != numel * dtype.itemsize \
                        or offset + nbytes > len(view):
                    return None
                if nbytes == 0:
                    values.append(torch.empty(shape, dtype=dtype))
                else:
                    raw = torch.frombuffer(view[offset:offset + nbytes], dtype=torch.uint8)
                    values.append(raw.view(dtype).reshape(shape))
                offset += nbytes
            groups[name] = values
        return groups if offset == len(view) else None
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError):
        return None


PIN_FRAMES = True
"""Whether ``send_groups`` registers its mapping with CUDA (page-locked) before copying device tensors into it, so
the copy is one DMA rather than staged through the driver's own buffers."""


def send_groups(torch: Any, blobs: Any, name: str, groups: dict[str, list[Any] | None], *,
                preallocate: bool = True, pin: bool | None = None) -> None:
    """Send ``groups`` as blob ``name`` of the ``BlobChannel`` ``blobs``: written straight into its memory file
    where it has one (``write_groups``: a device tensor is copied to the host once), else as ``pack_groups``'s
    parts through the pipe. The reader sees the same bytes either way (``tests/verify/test_verify_frames.py``).
    """
    head, tensors = _layout(torch, groups)
    if not blobs.send_into(name, _size(head, tensors), lambda mapping: _fill(torch, head, tensors, mapping, pin),
                           preallocate=preallocate):
        blobs.send_parts(name, pack_groups(torch, groups))


def _fill(torch: Any, head: bytes, tensors: list[Any], mapping: Any, pin: bool | None) -> None:
    """``_layout``'s frames written into a mapping, page-locked first when a tensor is on the GPU (``PIN_FRAMES``)."""
    on_device = any(t.is_cuda for t in tensors)
    registered = _register(torch, mapping) if (PIN_FRAMES if pin is None else pin) and on_device else None
    try:
        _write(torch, head, tensors, mapping)
    finally:
        if registered is not None:
            torch.cuda.cudart().cudaHostUnregister(registered)


def save_values(torch: Any, values: list[Any], path: Path) -> None:
    """Save a list (a task's inputs) for another process: its tensors as frames in ``path``, written straight from
    their device into a mapping of the file, and everything else (numbers, tensors the frames do not carry) with
    ``torch.save`` in ``path`` + ``.rest``. ``load_values`` reads it back.

    ``torch.save`` of a task's inputs went through a CPU copy and a zip writer: 0.71-0.78 s for 128M elements on
    an H200 (``bench/transfers.py``), for each of the 12 input sets of a verification.

    Example:
        >>> import tempfile, torch
        >>> path = Path(tempfile.mkdtemp()) / "inputs"
        >>> save_values(torch, [torch.arange(3.0), 7, torch.tensor([1], dtype=torch.float8_e4m3fn)], path)
        >>> load_values(torch, path)[:2]
        [tensor([0., 1., 2.]), 7]
    """
    import mmap

    framed = [x if isinstance(x, torch.Tensor) and x.layout == torch.strided and _dtype_name(torch, x.dtype)
              else None for x in values]
    torch.save([None if f is not None else x for x, f in zip(values, framed, strict=True)],
               path.with_name(path.name + ".rest"))
    head, tensors = _layout(torch, {"values": framed})
    size = _size(head, tensors)
    with open(path, "w+b") as file:
        file.truncate(size)
        allocate(file.fileno(), 0, size)
        with mmap.mmap(file.fileno(), size, flags=mmap.MAP_SHARED) as mapping:
            _fill(torch, head, tensors, mapping, None)


def load_values(torch: Any, path: Path, device: str = "cpu") -> list[Any]:
    """The list ``save_values`` saved at ``path``, its tensors on ``device``. They are read from a private mapping
    of the file, so its pages are read once, by the copy to the device (on the CPU, the tensors share the mapping,
    and writes to them never reach the file)."""
    import mmap

    rest = torch.load(path.with_name(path.name + ".rest"))
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        mapping = mmap.mmap(file.fileno(), size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    groups = unpack_groups(torch, mapping)
    framed = groups.get("values") if groups else None
    if framed is None or len(framed) != len(rest):
        raise ValueError(f"{path}: not the frames of {len(rest)} values")
    merged = [r if f is None else f for f, r in zip(framed, rest, strict=True)]
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in merged]


def _register(torch: Any, mapping: Any) -> int | None:
    """Page-lock ``mapping`` for CUDA copies; its address, or None when CUDA refused (the copy is then staged).

    A refusal is also left as the runtime's last error, which the next kernel launch's check would raise as
    its own; it is cleared here.
    """
    base = torch.frombuffer(mapping, dtype=torch.uint8)
    address = base.data_ptr()
    del base
    try:
        if int(torch.cuda.cudart().cudaHostRegister(address, len(mapping), 0)) == 0:
            return address
    except Exception:
        return None
    _clear_cuda_error()
    return None


def _clear_cuda_error() -> None:
    """``cudaGetLastError()`` of the CUDA runtime this process already loaded (found in its own memory map)."""
    import ctypes

    try:
        maps = Path("/proc/self/maps").read_text().split()
        library = next(word for word in maps if "/libcudart" in word)
        ctypes.CDLL(library).cudaGetLastError()
    except Exception:
        return
