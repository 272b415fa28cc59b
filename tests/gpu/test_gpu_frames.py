"""GPU suite for ``verify.harness.frames``: device tensors cross into the parent's memory file through the staging
buffers (``KA_STAGE_FRAMES=1``) with exactly the bytes the registered mapping (the default since harness 1.12) and
``pack_groups`` give.

The CPU tests (``tests/verify/test_verify_frames.py``) hold the chunking on host tensors; these hold it where the
chunks cross from the device asynchronously, for every dtype the frames carry, chunk boundaries inside elements,
tensors the staging does not take (not contiguous), and a source changed on the device right after the send.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verify.harness import frames
from verify.harness.common import BlobChannel, read_blobs

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


def _sent(groups: dict, *, stage: bool, pin: bool = True) -> bytes:
    read_fd, write_fd = os.pipe()
    memory = os.memfd_create("ka-gpu-test", os.MFD_CLOEXEC)
    frames.send_groups(torch, BlobChannel(write_fd, memory), "out-0", groups, stage=stage, pin=pin)
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


@pytest.mark.parametrize("stage_bytes", [7, 64, 4096])
@pytest.mark.parametrize("n", [1, 5, 1001])
def test_staged_frames_are_the_registered_mappings_bytes(monkeypatch: pytest.MonkeyPatch, stage_bytes: int,
                                                         n: int) -> None:
    monkeypatch.setattr(frames, "STAGE_BYTES", stage_bytes)
    monkeypatch.setattr(frames, "_STAGING", [])
    groups = _groups(n)
    staged = _sent(groups, stage=True)
    assert frames._STAGING and frames._STAGING[0].is_pinned() and frames._STAGING[0].numel() == stage_bytes
    assert staged == _sent(groups, stage=False) == bytes(b"".join(bytes(p) for p in frames.pack_groups(torch, groups)))
    assert staged == _sent(groups, stage=False, pin=False)


def test_a_reference_of_several_chunks_arrives_whole_though_the_device_changes_it_next() -> None:
    n = 3 * frames.STAGE_BYTES // 8 + 12345
    ref64 = torch.randn(n, device="cuda", dtype=torch.float64)
    expected64, expected32 = ref64.cpu(), ref64.float().cpu()
    read_fd, write_fd = os.pipe()
    memory = os.memfd_create("ka-gpu-test", os.MFD_CLOEXEC)
    frames.send_groups(torch, BlobChannel(write_fd, memory), "ref-0", {"ref64": [ref64], "ref32": [ref64.float()]},
                       stage=True)
    ref64.mul_(-3.0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb", buffering=0) as stream:
        got = frames.unpack_groups(torch, read_blobs(stream, memory, copy=True)["ref-0"])
    os.close(memory)
    assert got is not None
    assert torch.equal(got["ref64"][0], expected64) and torch.equal(got["ref32"][0], expected32)


def test_saved_inputs_cross_through_the_staging_buffers_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(frames.STAGE_FRAMES_ENV, "1")
    values = [torch.randn(frames.STAGE_BYTES // 4 + 3, device="cuda"), 3, torch.arange(10, device="cuda")]
    frames.save_values(torch, values, tmp_path / "inputs")
    back = frames.load_values(torch, tmp_path / "inputs", device="cuda")
    assert torch.equal(back[0], values[0]) and back[1] == 3 and torch.equal(back[2], values[2])
