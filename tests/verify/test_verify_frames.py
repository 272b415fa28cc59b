"""Tensor frames between processes: exact round trips, a real pipe, and malformed frames reading as None."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from verify.harness.common import BlobChannel, buffer_address, copy_payload, read_blobs
from verify.harness.frames import pack_groups, unpack_groups


def _backing(buffer: object) -> str:
    """What /proc/self/maps says backs ``buffer``'s first byte ("" for anonymous memory)."""
    address = buffer_address(buffer)
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if start <= address < end:
            return fields[5] if len(fields) > 5 else ""
    raise AssertionError("not mapped")


def _join(parts: list) -> bytearray:
    return bytearray(b"".join(bytes(p) for p in parts))


def test_every_dtype_shape_and_none_round_trips_bit_for_bit() -> None:
    values = [torch.randn(3, 4, dtype=torch.float64), torch.randn(5).to(torch.bfloat16), torch.tensor(7.5),
              torch.zeros(0, 3), torch.tensor([True, False]), torch.arange(6, dtype=torch.int64).reshape(2, 3).t(),
              torch.randn(2, dtype=torch.complex64), "not a tensor", None, torch.randn(2).to(torch.float8_e4m3fn)]
    got = unpack_groups(torch, _join(pack_groups(torch, {"outputs": values, "other": None})))
    assert got is not None and got["other"] is None
    out = got["outputs"]
    for sent, back in zip(values[:7], out[:7], strict=True):
        assert back.dtype == sent.dtype and back.shape == sent.shape and torch.equal(back, sent)
    assert out[7:] == [None, None, None]  # non-tensors and dtypes outside the table read as None


def _frame(header: object, raw: bytes = b"") -> bytearray:
    encoded = json.dumps(header).encode()
    return bytearray(len(encoded).to_bytes(8, "little") + encoded + raw)


@pytest.mark.parametrize("payload", [
    _frame({"outputs": [{"dtype": "object", "shape": [1], "nbytes": 8}]}, b"\0" * 8),
    _frame({"outputs": [{"dtype": "float32", "shape": [4], "nbytes": 8}]}, b"\0" * 8),
    _frame({"outputs": [{"dtype": "float32", "shape": [4], "nbytes": 16}]}, b"\0" * 8),
    _frame({"outputs": [{"dtype": "float32", "shape": [1], "nbytes": 4}]}, b"\0" * 12),
    _frame({"outputs": [{"dtype": "float32", "shape": [-1], "nbytes": 4}]}, b"\0" * 4),
    _frame(["not", "a", "dict"]),
    _frame({"outputs": ["x"]}),
    bytearray(b"\xff" * 8 + b"{}"),
    bytearray(b""),
    None,
])
def test_a_malformed_frame_reads_as_none(payload: bytearray | None) -> None:
    assert unpack_groups(torch, payload) is None


def test_a_large_reference_crosses_a_real_pipe_intact() -> None:
    big = torch.randn(6_000_000, dtype=torch.float64)
    read_fd, write_fd = os.pipe()
    got: dict[str, bytearray] = {}

    def reader() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as stream:
            got.update(read_blobs(stream))

    thread = threading.Thread(target=reader)
    thread.start()
    channel = BlobChannel(write_fd)
    channel.send_parts("ref-0", pack_groups(torch, {"ref64": [big], "ref32": [big.float()]}))
    channel.send("note", b"plain bytes still work")
    os.close(write_fd)
    thread.join(timeout=60)
    refs = unpack_groups(torch, got["ref-0"])
    assert refs is not None and torch.equal(refs["ref64"][0], big) and torch.equal(refs["ref32"][0], big.float())
    assert bytes(got["note"]) == b"plain bytes still work"


def _through(channel_memory: bool, reader_memory: bool, send: object, copy: bool = False,
             held: Callable[[str, int], None] | None = None) -> dict[str, object]:
    """Everything ``send`` writes, then read: payloads in memory leave only headers in the pipe, so no thread."""
    read_fd, write_fd = os.pipe()
    memory = os.memfd_create("ka-test", os.MFD_CLOEXEC)
    send(BlobChannel(write_fd, memory if channel_memory else None))  # type: ignore[operator]
    os.close(write_fd)
    with os.fdopen(read_fd, "rb", buffering=0) as stream:
        got = read_blobs(stream, memory if reader_memory else None, copy=copy, held=held)
    os.close(memory)
    return got


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create is Linux-only")
def test_references_in_shared_memory_arrive_intact_mapped_and_private() -> None:
    big = torch.randn(3_000_000, dtype=torch.float64)

    def send(channel: BlobChannel) -> None:
        channel.send_parts("ref-0", pack_groups(torch, {"ref64": [big], "ref32": [big.float()]}))
        channel.send("empty", b"")
        channel.send_parts("ref-1", pack_groups(torch, {"ref64": [big * 2], "ref32": None}))

    got = _through(True, True, send)
    assert sorted(got) == ["empty", "ref-0", "ref-1"] and bytes(got["empty"]) == b""  # type: ignore[arg-type]
    first, second = unpack_groups(torch, got["ref-0"]), unpack_groups(torch, got["ref-1"])  # type: ignore[arg-type]
    assert first is not None and second is not None and second["ref32"] is None
    assert torch.equal(first["ref64"][0], big) and torch.equal(first["ref32"][0], big.float())
    assert torch.equal(second["ref64"][0], big * 2)
    first["ref64"][0].zero_()  # the parent's mapping is copy-on-write: a judge may write, the next blob is intact
    assert torch.equal(second["ref64"][0], big * 2)


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create is Linux-only")
def test_a_memory_frame_without_the_memory_or_outside_it_ends_the_reading() -> None:
    def send(channel: BlobChannel) -> None:
        channel.send("plain", b"kept")
        channel.send("in-memory", b"x" * 100)

    inline = _through(False, False, lambda c: c.send("plain", b"kept"))  # type: ignore[union-attr]
    assert bytes(inline["plain"]) == b"kept"  # type: ignore[arg-type]
    # A candidate's channel has no memory: a frame claiming one is malformed, and nothing after it is read.
    got = _through(True, False, send)
    assert got == {}

    def outside(channel: BlobChannel) -> None:
        channel.send("in-memory", b"x" * 100)
        os.ftruncate(channel._memory, 10)  # type: ignore[arg-type]  # the file shrank under the frame

    assert _through(True, True, outside) == {}


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create is Linux-only")
def test_a_candidates_outputs_are_copied_out_on_arrival_and_their_pages_released() -> None:
    out = torch.randn(20_000)  # small enough for the pipe's buffer: sent in full before anything reads
    read_fd, write_fd = os.pipe()
    memory = os.memfd_create("ka-test", os.MFD_CLOEXEC)
    channel = BlobChannel(write_fd, memory)
    channel.send_parts("out-0", pack_groups(torch, {"outputs": [out]}))
    os.close(write_fd)
    assert os.fstat(memory).st_blocks * 512 >= out.numel() * 4
    with os.fdopen(read_fd, "rb", buffering=0) as stream:
        got = read_blobs(stream, memory, copy=True)
    os.pwrite(memory, b"\xff" * 4096, 4096)  # the candidate rewrites its outputs after sending them
    blocks = os.fstat(memory).st_blocks
    os.close(memory)
    assert "ka-test" not in _backing(got["out-0"]), "the payload is the parent's own memory, not the file's"
    outputs = unpack_groups(torch, got["out-0"])
    assert outputs is not None and torch.equal(outputs["outputs"][0], out)
    assert blocks * 512 <= 2 * 4096, "the copied payload's pages went back (only the rewritten page is held)"


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create is Linux-only")
@pytest.mark.parametrize(("in_memory", "copy"), [(True, True), (True, False), (False, False)])
def test_a_skipped_payload_is_read_past_unkept_and_its_pages_go_back(in_memory: bool, copy: bool) -> None:
    big = torch.randn(300_000)  # in the pipe too, read past in pieces: sent by a thread, as a child would
    sent = {"out-0-a": big[:1000], "out-3-a": big, "out-3-b": big * 2, "out-30-a": big[:7], "out-shape": big[:5]}
    read_fd, write_fd = os.pipe()
    memory = os.memfd_create("ka-test", os.MFD_CLOEXEC)
    places: dict[str, tuple[int, int]] = {}
    asked: list[str] = []

    def send() -> None:
        channel = BlobChannel(write_fd, memory if in_memory else None)
        for name, tensor in sent.items():
            channel.send_parts(name, pack_groups(torch, {"outputs": [tensor]}))
        os.close(write_fd)

    def skip(name: str) -> bool:
        asked.append(name)
        return name.startswith("out-3-")

    thread = threading.Thread(target=send)
    thread.start()
    held: dict[str, int] = {}
    with os.fdopen(read_fd, "rb", buffering=0) as stream:
        got = read_blobs(stream, memory if in_memory else None, copy=copy, skip=skip, places=places,
                         held=lambda name, nbytes: held.__setitem__(name, nbytes))
    thread.join(timeout=60)
    assert held == {name: len(got[name]) for name in got}, "each kept payload's bytes, none of the skipped ones"
    blocks = os.fstat(memory).st_blocks
    assert asked == list(sent), "asked once for each payload, in order"
    assert sorted(got) == ["out-0-a", "out-30-a", "out-shape"]
    for name in got:
        loaded = unpack_groups(torch, got[name])  # type: ignore[arg-type]
        assert loaded is not None and torch.equal(loaded["outputs"][0], sent[name]), name
    if in_memory and not copy:
        assert sorted(places) == sorted(got) and all(size > 0 for _, size in places.values())
        assert blocks * 512 < big.numel() * 4, "the skipped payloads' pages went back, the mapped ones stayed"
    else:
        assert places == {} and blocks * 512 <= len(sent) * 4096, "at most each payload's last partial page"
    os.close(memory)


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create is Linux-only")
def test_identical_outputs_are_held_once_and_any_other_apart() -> None:
    out = torch.randn(5_000)
    other = out.clone()
    other[-1] += 1.0
    sent = {"out-0-a": out, "out-0-b": out.clone(), "out-0-c": other, "out-1-a": out.clone(), "out-2-a": out * 2}

    def send(channel: BlobChannel) -> None:
        for name, tensor in sent.items():
            channel.send_parts(name, pack_groups(torch, {"outputs": [tensor]}))

    held: list[tuple[str, int]] = []
    got = _through(True, True, send, copy=True, held=lambda name, nbytes: held.append((name, nbytes)))
    assert got["out-0-b"] is got["out-0-a"], "a byte-identical payload is the earlier buffer itself"
    size = len(got["out-0-a"])
    assert held == [("out-0-a", size), ("out-0-b", 0), ("out-0-c", size), ("out-1-a", size), ("out-2-a", size)], \
        "a twin holds no new bytes"
    assert got["out-0-c"] is not got["out-0-a"] and got["out-2-a"] is not got["out-1-a"]
    assert got["out-1-a"] is not got["out-0-a"], "only the last payload of a size is compared"
    for name, tensor in sent.items():
        loaded = unpack_groups(torch, got[name])  # type: ignore[arg-type]
        assert loaded is not None and torch.equal(loaded["outputs"][0], tensor), name


@pytest.mark.parametrize("size", [1, 7, 8, 23, 64, 101])
def test_a_payload_is_its_twin_only_when_every_byte_matches(size: int, tmp_path: Path) -> None:
    payload = bytes(range(256)) * 2
    fd = os.open(tmp_path, os.O_TMPFILE | os.O_RDWR)
    try:
        os.write(fd, payload[:size])
        twin = copy_payload(fd, 0, size)
        assert bytes(twin) == payload[:size]
        assert copy_payload(fd, 0, size, twin, piece=5) is twin
        for at in sorted({0, size // 2, min(5, size - 1), size - 1}):
            changed = bytearray(payload[:size])
            changed[at] ^= 0xFF
            os.pwrite(fd, bytes(changed), 0)
            for piece in (1, 5, 8, 1 << 26):
                got = copy_payload(fd, 0, size, twin, piece=piece)
                assert got is not twin and got == changed, (at, piece)
        assert copy_payload(fd, 0, size, bytearray(size + 1)) == changed, "a twin of another size is not compared"
    finally:
        os.close(fd)


def test_the_statefulness_probe_crosses_as_four_blobs_and_a_missing_one_reads_as_none() -> None:
    from verify.harness.parent import _load_state_probe
    from verify.harness.roles import STATE_PROBE_BLOBS

    x, y = torch.randn(4, 5), torch.randn(3)
    sent = {"first": [x, None], "second": [x * 2, None], "ref_x": [x, y], "ref_changed": [x + 1, y]}
    blobs = {STATE_PROBE_BLOBS[key]: _join(pack_groups(torch, {"outputs": values})) for key, values in sent.items()}
    got = _load_state_probe(blobs)
    assert got is not None and got["first"][1] is None and got["second"][1] is None
    for key, values in sent.items():
        for a, b in zip(values, got[key], strict=True):
            assert (a is None and b is None) or torch.equal(a, b)
    assert _load_state_probe({k: v for k, v in blobs.items() if not k.endswith("-second")}) is None
    assert _load_state_probe(blobs | {STATE_PROBE_BLOBS["ref_x"]: bytearray(b"\x01")}) is None
    assert _load_state_probe({}) is None


def _mixed() -> dict[str, list | None]:
    """Odd sizes and mixed element sizes, so later tensors start at unaligned offsets; a transposed view too."""
    return {"outputs": [torch.arange(5, dtype=torch.int8), torch.randn(7, 3, dtype=torch.float64).t(), "x",
                        torch.tensor(2.5, dtype=torch.float16), torch.zeros(0, 4), torch.tensor([True] * 3)],
            "other": None, "more": [torch.randn(11, dtype=torch.complex64)]}


def test_write_groups_writes_exactly_the_bytes_pack_groups_would() -> None:
    from verify.harness.frames import frames_size, write_groups

    groups = _mixed()
    expected = _join(pack_groups(torch, groups))
    buffer = bytearray(frames_size(torch, groups))
    write_groups(torch, groups, buffer)
    assert buffer == expected
    with pytest.raises(ValueError, match="frames of"):
        write_groups(torch, groups, bytearray(len(expected) + 8))


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create is Linux-only")
@pytest.mark.parametrize("preallocate", [True, False])
@pytest.mark.parametrize("copy", [True, False])
def test_send_groups_writes_into_the_memory_file_and_reads_back_intact(preallocate: bool, copy: bool) -> None:
    from verify.harness.frames import send_groups

    groups, big = _mixed(), torch.randn(2_000_003, dtype=torch.float64)

    def send(channel: BlobChannel) -> None:
        send_groups(torch, channel, "out-0", groups, preallocate=preallocate)
        send_groups(torch, channel, "ref-0", {"ref64": [big], "ref32": [big.float()]}, preallocate=preallocate)
        channel.send_parts("after", [b"plain"])

    got = _through(True, True, send, copy=copy)
    assert bytes(got["out-0"]) == bytes(_join(pack_groups(torch, groups)))  # type: ignore[arg-type]
    refs = unpack_groups(torch, got["ref-0"])  # type: ignore[arg-type]
    assert refs is not None and torch.equal(refs["ref64"][0], big) and torch.equal(refs["ref32"][0], big.float())
    assert bytes(got["after"]) == b"plain"  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create is Linux-only")
@pytest.mark.parametrize("refused", [False, True])
def test_large_payloads_are_populated_and_copied_in_pieces_by_several_threads_byte_for_byte(
        refused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.harness import common
    from verify.harness.frames import send_groups

    monkeypatch.setattr(common, "PIECE_BYTES", 1 << 16)
    monkeypatch.setattr(common, "PIECE_THREADS", 5)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    workers: set[str] = set()
    advised: list[int] = []
    real_libc, real_read = common._libc(), common._read_into

    class Libc:
        def __getattr__(self, name: str) -> object:
            return getattr(real_libc, name)

        def madvise(self, address: object, size: object, advice: int) -> int:
            workers.add(threading.current_thread().name)
            advised.append(advice)
            return -1 if refused else real_libc.madvise(address, size, advice)

    def read_into(fd: int, view: memoryview, offset: int) -> None:
        workers.add(threading.current_thread().name)
        real_read(fd, view, offset)

    allocated: list[int] = []
    real_allocate = common.allocate
    monkeypatch.setattr(common, "_libc", lambda: Libc())
    monkeypatch.setattr(common, "_read_into", read_into)
    monkeypatch.setattr(common, "allocate", lambda fd, offset, size: allocated.append(size) or real_allocate(fd, offset, size))
    big = torch.randn(300_001, dtype=torch.float64)
    changed = big.clone()
    changed[-1] += 1

    def send(channel: BlobChannel) -> None:
        send_groups(torch, channel, "ref-0", {"ref64": [big], "ref32": [big.float()]})
        send_groups(torch, channel, "out-0-a", {"outputs": [big]})
        send_groups(torch, channel, "out-0-b", {"outputs": [changed]})

    for copy in (False, True):
        workers.clear()
        got = _through(True, True, send, copy=copy)
        refs = unpack_groups(torch, got["ref-0"])  # type: ignore[arg-type]
        assert refs is not None and torch.equal(refs["ref64"][0], big) and torch.equal(refs["ref32"][0], big.float())
        for name, sent in (("out-0-a", big), ("out-0-b", changed)):
            loaded = unpack_groups(torch, got[name])  # type: ignore[arg-type]
            assert loaded is not None and torch.equal(loaded["outputs"][0], sent), name
        assert got["out-0-b"] is not got["out-0-a"]
        assert len(workers) >= 5, "each piece of a large payload has its own thread"
    assert advised and set(advised) == {23}, "MADV_POPULATE_WRITE"
    assert bool(allocated) == refused, "one fallocate call where the kernel refuses it"


def test_in_pieces_covers_every_byte_once_in_page_aligned_pieces_and_raises_a_pieces_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from verify.harness import common

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(3)))
    size = 10 * common.PIECE_BYTES + 12_345
    seen: list[tuple[int, int, str]] = []
    common.in_pieces(size, lambda a, b: seen.append((a, b, threading.current_thread().name)), threads=16)
    spans = sorted((a, b) for a, b, _ in seen)
    assert len(spans) == 3, "no more threads than the cores this process may use"
    assert spans[0][0] == 0 and spans[-1][1] == size and all(x[1] == y[0] for x, y in zip(spans[:-1], spans[1:], strict=True))
    assert all(a % 4096 == 0 for a, _ in spans)
    assert {name for *_, name in seen} >= {threading.current_thread().name}, "the caller takes a piece itself"
    seen.clear()
    common.in_pieces(common.PIECE_BYTES + 1, lambda a, b: seen.append((a, b, "")), threads=16)
    assert seen == [(0, common.PIECE_BYTES + 1, "")], "no piece smaller than PIECE_BYTES"

    def fail(a: int, b: int) -> None:
        if a:
            raise OSError(f"piece at {a}")

    with pytest.raises(OSError, match="piece at"):
        common.in_pieces(size, fail, threads=3)


def test_send_groups_without_a_memory_file_sends_the_same_bytes_through_the_pipe() -> None:
    from verify.harness.frames import send_groups

    read_fd, write_fd = os.pipe()
    got: dict[str, bytearray] = {}
    thread = threading.Thread(target=lambda: got.update(read_blobs(os.fdopen(read_fd, "rb", buffering=0))))
    thread.start()
    groups = _mixed()
    send_groups(torch, BlobChannel(write_fd), "out-0", groups)
    os.close(write_fd)
    thread.join(timeout=60)
    assert bytes(got["out-0"]) == bytes(_join(pack_groups(torch, groups)))


def test_saved_values_load_back_with_their_numbers_and_the_tensors_frames_do_not_carry(tmp_path) -> None:
    from verify.harness.frames import load_values, save_values

    odd = torch.randn(3).to(torch.float8_e4m3fn)
    values = [torch.randn(5, 3).t(), 4, 0.5, None, odd, torch.arange(7, dtype=torch.int16), (2, 3)]
    save_values(torch, values, tmp_path / "inputs-0")
    back = load_values(torch, tmp_path / "inputs-0")
    assert torch.equal(back[0], values[0]) and back[0].shape == (3, 5)
    assert back[1:4] == [4, 0.5, None] and back[6] == (2, 3)
    assert back[4].dtype == odd.dtype and torch.equal(back[4].float(), odd.float())
    assert torch.equal(back[5], values[5])
    back[0].add_(1)  # a private mapping: the file keeps what the trusted child wrote
    assert torch.equal(load_values(torch, tmp_path / "inputs-0")[0], values[0])


def test_loading_values_that_do_not_match_their_frames_fails_with_the_path(tmp_path) -> None:
    from verify.harness.frames import load_values, save_values

    save_values(torch, [torch.ones(2), 1], tmp_path / "a")
    torch.save([None, 1, 2], tmp_path / "a.rest")
    with pytest.raises(ValueError, match="not the frames of 3 values"):
        load_values(torch, tmp_path / "a")
