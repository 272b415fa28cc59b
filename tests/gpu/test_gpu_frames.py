"""GPU suite for ``verify.harness.frames``: device tensors cross into the parent's memory file, page-locked for the
copy (the default since harness 1.12) or not, with exactly the bytes ``pack_groups`` gives.

The CPU tests (``tests/verify/test_verify_frames.py``) hold the layout on host tensors; these hold it where the
copies start from the device, for every dtype the frames carry, a tensor that is not contiguous, a source changed
on the device right after the send, and a task's inputs saved from the device and loaded back onto it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verify.harness import frames
from verify.harness.common import BlobChannel, read_blobs

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


def _sent(groups: dict, *, pin: bool) -> bytes:
    read_fd, write_fd = os.pipe()
    memory = os.memfd_create("ka-gpu-test", os.MFD_CLOEXEC)
    frames.send_groups(torch, BlobChannel(write_fd, memory), "out-0", groups, pin=pin)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb", buffering=0) as stream:
        got = read_blobs(stream, memory, copy=True)
    os.close(memory)
    return bytes(got["out-0"])


def _groups(n: int) -> dict:
    x = torch.randn(n, device="cuda", dtype=torch.float64)
    return {"outputs": [x, x.float(), x.half(), x.bfloat16(), (x * 1000).long(), x > 0,
                        torch.complex(x.float(), -x.float()), (x * 100).to(torch.int16),
                        x.float().reshape(-1, 1).expand(-1, 3).t(), None],
            "none": None}


@pytest.mark.parametrize("n", [1, 5, 1001, 3_000_017])
def test_device_frames_are_pack_groups_bytes_pinned_or_not(n: int) -> None:
    groups = _groups(n)
    pinned = _sent(groups, pin=True)
    assert pinned == _sent(groups, pin=False) == bytes(b"".join(bytes(p) for p in frames.pack_groups(torch, groups)))


def test_a_reference_arrives_whole_though_the_device_changes_it_next() -> None:
    n = 50_000_017
    ref64 = torch.randn(n, device="cuda", dtype=torch.float64)
    expected64, expected32 = ref64.cpu(), ref64.float().cpu()
    read_fd, write_fd = os.pipe()
    memory = os.memfd_create("ka-gpu-test", os.MFD_CLOEXEC)
    frames.send_groups(torch, BlobChannel(write_fd, memory), "ref-0", {"ref64": [ref64], "ref32": [ref64.float()]})
    ref64.mul_(-3.0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb", buffering=0) as stream:
        got = frames.unpack_groups(torch, read_blobs(stream, memory, copy=True)["ref-0"])
    os.close(memory)
    assert got is not None
    assert torch.equal(got["ref64"][0], expected64) and torch.equal(got["ref32"][0], expected32)


def test_saved_inputs_load_back_onto_the_device_intact(tmp_path: Path) -> None:
    values = [torch.randn(16_000_003, device="cuda"), 3, torch.arange(10, device="cuda"),
              torch.randn(4, 6, device="cuda").t()]
    frames.save_values(torch, values, tmp_path / "inputs")
    back = frames.load_values(torch, tmp_path / "inputs", device="cuda")
    assert back[1] == 3 and all(torch.equal(b, v) for b, v in zip(back, values, strict=True) if torch.is_tensor(v))
    assert all(b.is_cuda for b in back if torch.is_tensor(b))
