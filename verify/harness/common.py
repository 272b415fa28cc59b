"""What every harness role shares: the version, the result channel, flag and identity snapshots.

The result channel is a pipe the parent creates (non-inheritable) and hands to one child by number; the
child marks it non-inheritable again at once, so nothing the candidate starts can write to it. Messages
are JSON lines. The child only ever *reports* (tensors saved to files, raw timings); the parent judges.

Example:
    >>> sorted(snapshot_flags({}))[:1]
    []
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

HARNESS_VERSION = "1.42"

# Attributes whose identity must not change once the candidate is imported (timer and harness patching).
# (torch.manual_seed is left out: torch._dynamo rebinds it when it is first imported.)
GUARDED_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("time", "perf_counter"),
    ("time", "perf_counter_ns"),
    ("time", "monotonic"),
    ("time", "time"),
    ("time", "sleep"),
    ("torch", "allclose"),
    ("torch", "equal"),
    ("torch", "isclose"),
    ("torch", "save"),
    ("torch", "load"),
    ("torch.cuda", "synchronize"),
    ("torch.cuda", "Event"),
    ("torch.cuda", "current_stream"),
    ("torch.cuda", "Stream"),
    ("torch.cuda.Event", "record"),
    ("torch.cuda.Event", "elapsed_time"),
    ("torch.cuda.Event", "synchronize"),
    ("torch.cuda.Event", "query"),
    ("torch.Tensor", "clone"),
    ("torch.Tensor", "copy_"),
    ("torch.Tensor", "cpu"),
    ("torch.Tensor", "to"),
    ("torch.Tensor", "__eq__"),
    ("torch.nn.Module", "__call__"),
    ("torch.nn.Module", "load_state_dict"),
    ("torch.profiler", "profile"),
    ("json", "dumps"),
    ("os", "write"),
    ("builtins", "print"),
    ("builtins", "open"),
)

# Backend settings a candidate must not flip: (label, getter expression). Evaluated with torch imported.
BACKEND_FLAGS: tuple[tuple[str, str], ...] = (
    ("cuda.matmul.allow_tf32", "torch.backends.cuda.matmul.allow_tf32"),
    ("cuda.matmul.allow_fp16_reduced_precision_reduction",
     "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction"),
    ("cuda.matmul.allow_bf16_reduced_precision_reduction",
     "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction"),
    ("cudnn.enabled", "torch.backends.cudnn.enabled"),
    ("cudnn.allow_tf32", "torch.backends.cudnn.allow_tf32"),
    ("cudnn.benchmark", "torch.backends.cudnn.benchmark"),
    ("cudnn.deterministic", "torch.backends.cudnn.deterministic"),
    ("float32_matmul_precision", "torch.get_float32_matmul_precision()"),
    ("deterministic_algorithms", "torch.are_deterministic_algorithms_enabled()"),
    ("default_dtype", "str(torch.get_default_dtype())"),
    ("grad_enabled", "torch.is_grad_enabled()"),
    ("flash_sdp", "torch.backends.cuda.flash_sdp_enabled()"),
    ("mem_efficient_sdp", "torch.backends.cuda.mem_efficient_sdp_enabled()"),
    ("math_sdp", "torch.backends.cuda.math_sdp_enabled()"),
    ("num_threads", "torch.get_num_threads()"),
)

# The pinned settings every role runs under (TF32 off: the fp32 reference must be true fp32).
PINNED_FLAGS: dict[str, Any] = {
    "cuda.matmul.allow_tf32": False,
    "cudnn.allow_tf32": False,
    "cudnn.benchmark": False,
    "float32_matmul_precision": "highest",
}


def torch_cpp_extension() -> Any | None:
    """``torch.utils.cpp_extension`` (torch's JIT builder, whose parts the harness wraps), or None without torch.

    Example:
        >>> getattr(torch_cpp_extension(), "no_such_part", None) is None
        True
    """
    try:
        from torch.utils import cpp_extension
    except ImportError:
        return None
    return cpp_extension


def stream_capturing() -> bool:
    """Whether this thread's CUDA stream is capturing a CUDA graph, when a device-wide synchronize would end the capture
    (a candidate that compiles or builds inside ``torch.cuda.graph``); False without torch or a GPU.

    Example:
        >>> stream_capturing()
        False
    """
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_available() and cuda.is_current_stream_capturing())
    except (RuntimeError, AttributeError):
        return False


def snapshot_flags(namespace: dict[str, Any]) -> dict[str, Any]:
    """The value of every backend flag, evaluated in ``namespace`` (needs ``torch`` there to read any)."""
    if "torch" not in namespace:
        return {}
    values: dict[str, Any] = {}
    for label, expression in BACKEND_FLAGS:
        try:
            value = eval(expression, {"torch": namespace["torch"]})  # noqa: S307 - fixed expressions above
        except Exception as error:  # an older torch lacks some flags
            value = f"unreadable: {type(error).__name__}"
        values[label] = value if isinstance(value, bool | int | float | str) else str(value)
    return values


def pin_flags(torch: Any) -> None:
    """Set the pinned backend flags (TF32 off, no cudnn autotuning, highest fp32 matmul precision)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("highest")


def _resolve(path: str) -> Any:
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def _harness_functions() -> dict[str, Any]:
    """Every function and method the harness itself defines (in the script: the __main__ module's)."""
    found: dict[str, Any] = {}
    for module_name in {__name__, "__main__"} | {m for m in sys.modules if m.startswith("verify.harness.")}:
        module = sys.modules.get(module_name)
        if module is None or not getattr(module, "__file__", None):
            continue
        for name, value in list(vars(module).items()):
            if getattr(value, "__module__", None) != module_name:
                continue
            if inspect_function(value):
                found[f"{module_name}.{name}"] = value
            elif isinstance(value, type):
                for attr, member in vars(value).items():
                    if inspect_function(member):
                        found[f"{module_name}.{name}.{attr}"] = member
    return found


def inspect_function(value: Any) -> bool:
    """Whether ``value`` is a plain Python function (one whose code object could be swapped)."""
    return hasattr(value, "__code__") and callable(value)


def snapshot_identities() -> dict[str, int]:
    """``id()`` of every guarded attribute and of the harness's own functions and their code objects.

    A candidate that replaces the timer, ``synchronize``, a comparison, or any harness function (or its
    ``__code__``) changes one of these.
    """
    ids: dict[str, int] = {}
    for owner, attr in GUARDED_ATTRIBUTES:
        try:
            ids[f"{owner}.{attr}"] = id(getattr(_resolve(owner), attr))
        except (ImportError, AttributeError):
            continue
    for name, function in _harness_functions().items():
        ids[name] = id(function)
        ids[f"{name}.__code__"] = id(function.__code__)
    return ids


def changed_identities(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """Names whose object changed between two identity snapshots."""
    return sorted(name for name, ident in before.items() if after.get(name) != ident)


def thread_origin(thread: threading.Thread) -> str:
    """The module whose code a Python thread runs: its target's, else its class's (``run`` overridden).

    The module's name is followed by the file its code object comes from (``module:file``): a function's
    ``__module__`` can be reassigned, its code's file only by building a new code object.

    Example:
        >>> thread_origin(threading.current_thread()).split(":")[0]
        'threading'
    """
    target = getattr(thread, "_target", None)
    function = getattr(target, "__func__", target)
    if function is None:
        function = type(thread).run
        module = type(thread).__module__
    else:
        module = getattr(function, "__module__", None) or type(thread).__module__
    code = getattr(function, "__code__", None)
    return f"{module}:{getattr(code, 'co_filename', '?')}"


def thread_counts() -> dict[str, Any]:
    """Python threads (by name, with the module each runs) and OS threads of this process."""
    try:
        os_threads = len(os.listdir("/proc/self/task"))
    except OSError:
        os_threads = -1
    threads = threading.enumerate()
    return {
        "python": sorted(t.name for t in threads),
        "origins": {t.name: thread_origin(t) for t in threads},
        "os": os_threads,
    }


class Channel:
    """The child's end of the result channel: JSON lines written to a pipe the parent reads."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        if fd is not None:
            os.set_inheritable(fd, False)
        self._write = os.write

    def send(self, kind: str, **payload: Any) -> None:
        """Write one message; ``kind`` names it (hello, compiled, trial, timing, probe, error, done)."""
        line = json.dumps({"kind": kind, **payload}, default=_jsonable, allow_nan=True) + "\n"
        data = line.encode("utf-8")
        if self._fd is None:
            sys.stdout.write(line)
            return
        while data:
            written = self._write(self._fd, data)
            data = data[written:]


MEMORY_FRAME = 1 << 31
"""Set in a frame's name length: its payload is in the shared memory file, at the offset and size that follow."""


class BlobChannel:
    """A second pipe for binary payloads (references, outputs): frames of name length, name, size, bytes.

    References never touch the file system, so a candidate compiling at the same time cannot read them.
    With ``memory`` (an anonymous ``memfd`` the parent created and passed to this child alone), a payload is
    written there instead and the pipe carries only its name, offset and size (see ``read_blobs``). On the
    H100 the pipe moved references at about 420 MB/s, 5-7 s for each trial of a large task; on the 2-core CI
    host, 67M float64 and fp32 elements take 1.98 s through the pipe and 0.38 s through memory.
    """

    def __init__(self, fd: int | None, memory: int | None = None) -> None:
        self._fd = fd
        self._memory = memory
        self._memory_end = 0
        for number in (fd, memory):
            if number is not None:
                os.set_inheritable(number, False)
        if fd is not None:
            try:
                import fcntl

                # A 1 MiB pipe (Linux's default limit) instead of 64 KiB: 16x fewer writes for a reference.
                fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ
            except (ImportError, OSError):
                pass

    def send(self, name: str, payload: bytes) -> None:
        """Write one named payload."""
        self.send_parts(name, [payload])

    def send_into(self, name: str, total: int, fill: Callable[[Any], None], *, preallocate: bool = True) -> bool:
        """Write one payload of ``total`` bytes by ``fill(mapping)``, straight into a shared mapping of the memory
        file; False, with nothing written, when this channel has no memory file.

        ``preallocate`` gives the mapping its pages first, several threads at once (``populate``; one
        ``fallocate`` call where the kernel cannot), rather than one fault per page as ``fill`` first touches them.
        """
        if self._fd is None:
            raise RuntimeError("no blob channel: run through the parent")
        if self._memory is None:
            return False
        offset = self._memory_end
        os.ftruncate(self._memory, offset + total)
        if total:
            mapping = mmap.mmap(self._memory, total, flags=mmap.MAP_SHARED, offset=offset)
            if preallocate and not populate(mapping):
                allocate(self._memory, offset, total)
            try:
                fill(mapping)
            finally:
                # A failed fill's traceback may still hold a view of the mapping, which then goes with it.
                with contextlib.suppress(BufferError):
                    mapping.close()
        self._memory_end = -(-(offset + total) // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
        self._write_frames([self._memory_frame(name, offset, total)])
        return True

    def _memory_frame(self, name: str, offset: int, total: int) -> bytes:
        encoded = name.encode("utf-8")
        return (len(encoded) | MEMORY_FRAME).to_bytes(4, "little") + encoded + offset.to_bytes(8, "little") \
            + total.to_bytes(8, "little")

    def _write_frames(self, frames: list[Any]) -> None:
        for part in frames:
            view = memoryview(part).cast("B")
            while view:
                written = os.write(self._fd, view)  # type: ignore[arg-type]
                view = view[written:]

    def send_parts(self, name: str, parts: list[Any]) -> None:
        """Write one named payload given as parts (bytes or memoryviews), without joining them first."""
        total = sum(memoryview(p).nbytes for p in parts)

        def fill(mapping: Any) -> None:
            at = 0
            for part in parts:
                view = memoryview(part).cast("B")
                mapping[at:at + view.nbytes] = view
                at += view.nbytes

        if not self.send_into(name, total, fill):
            encoded = name.encode("utf-8")
            self._write_frames([len(encoded).to_bytes(4, "little") + encoded + total.to_bytes(8, "little"), *parts])


def _read_into(fd: int, view: memoryview, offset: int) -> None:
    got = 0
    while got < len(view):
        read = os.preadv(fd, [view[got:]], offset + got)
        if not read:
            raise EOFError
        got += read


def _same_bytes(a: memoryview, b: memoryview) -> bool:
    # Compared as 8-byte words: memoryview's own comparison goes element by element, 4x slower a byte.
    body = len(a) - len(a) % 8
    return len(a) == len(b) and a[:body].cast("Q") == b[:body].cast("Q") and a[body:] == b[body:]


def _fresh(size: int) -> mmap.mmap:
    # A private anonymous mapping, not a bytearray: bytearray(n) zero-fills every page in one thread first.
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)


def _read_in_pieces(fd: int, view: memoryview, offset: int) -> None:
    in_pieces(len(view), lambda start, stop: _read_into(fd, view[start:stop], offset + start))


def copy_payload(fd: int, offset: int, size: int, twin: bytearray | mmap.mmap | None = None,
                 piece: int = 1 << 26) -> bytearray | mmap.mmap:
    """The ``size`` bytes at ``offset`` of ``fd``, each read once into this process's memory (a private
    anonymous mapping, its pages faulted in by several threads at once: ``in_pieces``); ``twin`` itself when they
    equal it byte for byte.

    A candidate's calls on the same inputs (a trial's three variants, for a deterministic kernel) often return
    identical outputs: held once, they cost a billion-element output 4 GB less each. The bytes are read ``piece``
    at a time and compared as they come, so a payload that differs keeps what was read, never reading it twice.
    Nothing may then write into a payload in place: the judge only reads them.

    Example:
        >>> import os, tempfile
        >>> fd = os.open(tempfile.mkdtemp(), os.O_TMPFILE | os.O_RDWR)
        >>> _ = os.write(fd, b"abcdabce")
        >>> first = copy_payload(fd, 0, 3)
        >>> copy_payload(fd, 4, 3, first) is first, bytes(copy_payload(fd, 5, 3, first, piece=2))
        (True, b'bce')
    """
    if not size:
        return bytearray()
    if twin is None or len(twin) != size:
        buffer = _fresh(size)
        _read_in_pieces(fd, memoryview(buffer), offset)
        return buffer
    same, scratch, got = memoryview(twin), memoryview(bytearray(min(piece, size))), 0
    while got < size:
        part = scratch[:min(piece, size - got)]
        _read_into(fd, part, offset + got)
        if not _same_bytes(part, same[got:got + len(part)]):
            buffer = _fresh(size)
            view = memoryview(buffer)
            view[:got] = same[:got]
            view[got:got + len(part)] = part
            _read_in_pieces(fd, view[got + len(part):], offset + got + len(part))
            return buffer
        got += len(part)
    return twin


def read_blobs(stream: Any, memory: int | None = None, copy: bool = False,
               skip: Callable[[str], bool] | None = None,
               places: dict[str, tuple[int, int]] | None = None,
               held: Callable[[str, int], None] | None = None) -> dict[str, Any]:
    """Read every frame a ``BlobChannel`` wrote, until end of file (payloads as writable buffers).

    A payload in ``memory`` is mapped copy-on-write (no copy), or with ``copy`` read into the parent's own
    buffer the moment its frame arrives and released from the file: a candidate's process could otherwise
    rewrite its outputs after sending them, or truncate the file under a mapping (SIGBUS). A copied payload
    byte-identical to the last one of its size is that payload's buffer (``copy_payload``). A memory frame
    without ``memory``, or one that points outside it, ends the reading as a malformed frame does. A payload
    whose name ``skip`` accepts (asked as its frame arrives) is read past, and its pages given back, unkept.
    ``places`` collects each mapped payload's offset and size, for giving its pages back later (the parent's
    ``ChildProcess.release_blob``). ``held(name, nbytes)`` is told, as each kept payload arrives, how many bytes
    of host memory it newly holds: its size, or 0 for a copy that is its twin's buffer.
    """
    blobs: dict[str, Any] = {}
    last_of_size: dict[int, bytearray | mmap.mmap] = {}

    def payload(n: int) -> bytearray:
        buffer = bytearray(n)
        view, got = memoryview(buffer), 0
        while got < n:
            read = stream.readinto(view[got:])
            if not read:
                raise EOFError
            got += read
        return buffer

    def exactly(n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = stream.read(n - got)
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def mapped(offset: int, size: int) -> Any:
        if memory is None or offset % mmap.ALLOCATIONGRANULARITY or offset + size > os.fstat(memory).st_size:
            raise EOFError
        if size == 0:
            return bytearray()
        if not copy:
            return mmap.mmap(memory, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE,
                             offset=offset)
        buffer = copy_payload(memory, offset, size, last_of_size.get(size))
        last_of_size[size] = buffer
        punch_hole(memory, offset, size)
        return buffer

    while True:
        try:
            length = int.from_bytes(exactly(4), "little")
            name = exactly(length & ~MEMORY_FRAME).decode("utf-8")
            unkept = skip is not None and skip(name)
            if length & MEMORY_FRAME:
                offset = int.from_bytes(exactly(8), "little")
                size = int.from_bytes(exactly(8), "little")
                if unkept:
                    if memory is None:
                        raise EOFError
                    punch_hole(memory, offset, size)
                    continue
                twin = last_of_size.get(size)
                blobs[name] = mapped(offset, size)
                if places is not None and not copy:
                    places[name] = (offset, size)
                if held is not None:
                    held(name, 0 if copy and blobs[name] is twin else size)
            elif unkept:
                left = int.from_bytes(exactly(8), "little")
                while left:
                    left -= len(exactly(min(left, 1 << 20)))
            else:
                blobs[name] = payload(int.from_bytes(exactly(8), "little"))
                if held is not None:
                    held(name, len(blobs[name]))
        except (EOFError, ValueError, OSError):
            return blobs


def _libc() -> Any:
    """This process's C library through ctypes, loaded once (``errno`` kept for the caller)."""
    global _LIBC
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


_LIBC: Any = None


def allocate(fd: int, offset: int, size: int) -> bool:
    """fallocate(0): give a memory file's range its pages now, in one call (zeroed by the kernel)."""
    try:
        import ctypes

        fallocate = _libc().fallocate
        fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        return fallocate(fd, 0, offset, size) == 0
    except Exception:
        return False


PIECE_THREADS = 4
"""Threads (the caller's included) that share the pages of one large payload: a page the kernel gives a process
fresh costs about 0.6 s/GB on these virtual machines, in whichever thread first touches it, so a payload's
pages are touched in pieces at once (``populate``, ``copy_payload``)."""

PIECE_BYTES = 32 << 20
"""The smallest piece worth its own thread."""


def in_pieces(size: int, work: Callable[[int, int], None], threads: int | None = None) -> None:
    """Run ``work(start, stop)`` over ``[0, size)`` in page-aligned pieces, one a thread, this thread taking the
    first: at most ``threads`` (default ``PIECE_THREADS``, fewer on a host with fewer cores) and none smaller
    than ``PIECE_BYTES``. The first error any piece raised is raised once all have ended.

    Example:
        >>> seen = []
        >>> in_pieces(3 * PIECE_BYTES, lambda a, b: seen.append((a, b)), threads=2)
        >>> sorted(seen) == [(0, PIECE_BYTES + PIECE_BYTES // 2), (PIECE_BYTES + PIECE_BYTES // 2, 3 * PIECE_BYTES)]
        True
    """
    limit = PIECE_THREADS if threads is None else threads
    with contextlib.suppress(AttributeError, OSError):
        limit = min(limit, len(os.sched_getaffinity(0)))
    count = max(1, min(limit, size // PIECE_BYTES))
    if count == 1:
        work(0, size)
        return
    bounds = [0, *(size * i // count // 4096 * 4096 for i in range(1, count)), size]
    errors: list[BaseException] = []

    def run(start: int, stop: int) -> None:
        try:
            work(start, stop)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(error)

    helpers = [threading.Thread(target=run, args=(bounds[i], bounds[i + 1]), name=f"ka-pieces-{i}", daemon=True)
               for i in range(1, count)]
    for helper in helpers:
        helper.start()
    run(bounds[0], bounds[1])
    for helper in helpers:
        helper.join()
    if errors:
        raise errors[0]


def buffer_address(buffer: Any) -> int:
    """The address of a writable buffer's first byte, its export released at once (an ``mmap`` can still close).

    Example:
        >>> import ctypes
        >>> data = bytearray(b"ka")
        >>> ctypes.string_at(buffer_address(data), 2)
        b'ka'
    """
    import ctypes

    anchor = ctypes.c_char.from_buffer(buffer)
    address = ctypes.addressof(anchor)
    del anchor
    return address


def populate(mapping: Any, threads: int | None = None) -> bool:
    """madvise(MADV_POPULATE_WRITE) over a writable shared mapping, in pieces at once (``in_pieces``): every page
    allocated and mapped now; False when the kernel refused it (before Linux 5.14, or out of memory).

    Example:
        >>> import mmap
        >>> fd = os.memfd_create("example")
        >>> os.ftruncate(fd, 1 << 20)
        >>> with mmap.mmap(fd, 1 << 20) as mapping:
        ...     populate(mapping), os.fstat(fd).st_blocks * 512
        (True, 1048576)
    """
    import ctypes

    if not len(mapping):
        return True
    address = buffer_address(mapping)
    refused: list[int] = []

    def advise(start: int, stop: int) -> None:
        if _libc().madvise(ctypes.c_void_p(address + start), ctypes.c_size_t(stop - start), 23) != 0:
            refused.append(ctypes.get_errno())

    try:
        in_pieces(len(mapping), advise, threads)
    except Exception:
        return False
    return not refused


def punch_hole(fd: int, offset: int, size: int) -> bool:
    """fallocate(PUNCH_HOLE | KEEP_SIZE): give a memory file's pages back once their payload is copied out."""
    try:
        import ctypes

        fallocate = _libc().fallocate
        fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        return fallocate(fd, 0x02 | 0x01, offset, size) == 0
    except Exception:
        return False


def die_with_parent() -> bool:
    """prctl(PR_SET_PDEATHSIG, SIGKILL): this child dies when the process that started it dies.

    A batch killed mid-kernel must not leave children waiting on the GPU for their timeouts.
    """
    try:
        import signal

        if _libc().prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except Exception:
        return False
    if os.getppid() == 1:
        os._exit(3)
    return True


def make_non_dumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0): same-user processes can no longer ptrace or read this process's memory."""
    return set_dumpable(False)


def set_dumpable(dumpable: bool = True) -> bool:
    """prctl(PR_SET_DUMPABLE): whether same-user processes may ptrace or read this process's memory (a
    process forked from an undumpable one is made dumpable again, as an exec would)."""
    try:
        return _libc().prctl(4, int(dumpable), 0, 0, 0) == 0
    except Exception:
        return False


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def read_messages(raw: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    """Parse a channel's bytes into messages; lines that are not JSON objects are returned as rejects."""
    messages: list[dict[str, Any]] = []
    rejects: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            rejects.append(line[:200])
            continue
        if isinstance(message, dict) and isinstance(message.get("kind"), str):
            messages.append(message)
        else:
            rejects.append(line[:200])
    return messages, rejects


def wait_until(condition: Any, timeout_s: float, poll_s: float = 0.01) -> bool:
    """Poll ``condition()`` until it holds or ``timeout_s`` passes; whether it held.

    Example:
        >>> wait_until(lambda: True, 1.0)
        True
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def now_ns() -> int:
    """Monotonic nanoseconds (captured at import, before any candidate code runs)."""
    return _PERF_NS()


_PERF_NS = time.perf_counter_ns
