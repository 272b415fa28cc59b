"""The GPU gate: which verifications may use one GPU at a time, and for what.

A batch runs several eval scripts per GPU; ``KA_GPU_GATE`` names the GPU's lock file. In the ``exclusive``
mode a verification holds the GPU alone from its first GPU work to its last. In the ``shared`` mode
(``KA_GPU_GATE_MODE=shared``) the untimed work of several verifications (references, screens, correctness
trials, probes) shares the GPU, and a child asks for the GPU alone (``alone_on_gpu``) around everything a
verdict reads as a time: the baselines, the trivial-kernel overheads, the candidate's timed series and the
profiled calls whose kernel durations the judge compares. A writer-first turnstile (a second lock file)
keeps a waiting timed series from being starved by a stream of untimed work, and children offer it the GPU
between pieces of untimed work (``yield_point``), so it waits for one piece, not for a whole phase; a child whose
piece was short goes on instead while a longer piece on another seat keeps the timed series waiting anyway
(``KA_GPU_FILL``, ``GpuGate.may_fill``). With ``seats`` (``KA_GPU_SEATS``) at most that many verifications hold the
gate at once, in either mode: a batch starts more eval scripts than that, and the others start their processes or
judge meanwhile.

Example:
    >>> gate = GpuGate(None)
    >>> gate.acquire(), gate.held
    (True, None)
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify.harness.signals import await_signal, send_signal

GATE_MODES: tuple[str, ...] = ("exclusive", "shared")
"""``exclusive``: one verification on the GPU at a time. ``shared``: untimed work overlaps; timed work is alone."""

GATE_POLL_S = 0.002
"""How often a waiting gate tries its lock again. Polling (not a blocking ``flock``) lets ``release`` from
another thread end a wait at once, and costs nothing measurable at this rate."""

SEAT_POLL_S = 0.01
"""How often a verification waiting for a seat tries the seats' lock files again."""

GATE_REQUESTS = 64
"""Requests a child may make. An honest run child makes four and two per JIT build; after this many every
request is answered with the GPU alone, which is the ``exclusive`` mode's behaviour."""

GATE_WANTS: tuple[str, ...] = ("alone", "shared", "away", "yield", "over")
"""What a child may ask its parent's ``GateKeeper`` for."""

GATE_YIELDS = 256
"""Yield points a child may offer (``yield_point``). An honest run child offers three before the candidate's import
and one per trial variant and probe (under 45), a trusted child one before its stateful probe and one per reference;
past this many a yield is answered without letting go, which is how the gate behaved before it had yields."""

GATE_FILL_FACTOR = 2.0
"""``KA_GPU_FILL``'s default. At a yield point while a timed series waits, a sharer whose piece just ended was no
longer than this x how long the longest running piece on another seat has run goes on with its next piece instead of
standing back: the timed series waits for that piece anyway, and the sharer's seat does work meanwhile. Replayed on
session 52's passes (``bench/gate_replay.py``, policy ``fill-guess``) this gained 4-9% with ``GATE_FILLS``, 14-20%
without it; ``0`` stands back as before."""

GATE_FILLS = 8
"""Yield points in a row at which a child may go on while timed series wait; at the next it stands back, so a timed
series waits for a bounded number of a sharer's pieces."""


def parse_fill(value: str | None) -> float:
    """``KA_GPU_FILL`` as a factor; unset or empty is ``GATE_FILL_FACTOR``, 0 never goes on.

    Example:
        >>> parse_fill("3"), parse_fill("0"), parse_fill(None)
        (3.0, 0.0, 2.0)
    """
    if not value:
        return GATE_FILL_FACTOR
    try:
        factor = float(value)
    except ValueError:
        factor = -1.0
    if not factor >= 0.0 or factor == float("inf"):
        raise ValueError(f"KA_GPU_FILL must be a factor of 0 or more, not {value!r}")
    return factor


def parse_seats(value: str | None) -> int:
    """``KA_GPU_SEATS`` as a number of seats; unset or empty is 0, no limit.

    Example:
        >>> parse_seats("4"), parse_seats(None)
        (4, 0)
    """
    value = value or "0"
    if not value.isdigit():
        raise ValueError(f"KA_GPU_SEATS must be a whole number, not {value!r}")
    return int(value)


class GpuGate:
    """A reader-writer lock on one GPU's lock file, safe to call from the parent's threads.

    ``acquire`` takes a seat (with ``seats``: one of that many lock files beside the gate's, held until
    ``release``), then the mode's hold (``exclusive``: alone; ``shared``: beside other untimed work);
    ``alone`` and ``shared`` move between the two, ``away`` lets go while a child only builds,
    ``give_way`` lets a waiting timed series go first, and ``release`` ends it (later calls do nothing).
    Without a path every call succeeds and holds nothing.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "gpu.lock")
        >>> a, b = GpuGate(path, "shared"), GpuGate(path, "shared")
        >>> a.acquire(), b.acquire(), a.held, b.held
        (True, True, 'shared', 'shared')
        >>> b.release(); a.alone(), a.held
        (True, 'alone')
        >>> a.release()
    """

    def __init__(self, path: str | None, mode: str = "exclusive", seats: int = 0,
                 fill: float = GATE_FILL_FACTOR) -> None:
        if mode not in GATE_MODES:
            raise ValueError(f"KA_GPU_GATE_MODE must be one of {', '.join(GATE_MODES)}, not {mode!r}")
        if seats < 0:
            raise ValueError(f"KA_GPU_SEATS must be 0 (no limit) or more, not {seats}")
        self.path = path
        self.mode = mode
        self.seats = seats
        self.fill = fill
        self._seat_fd: int | None = None
        self._seat_index: int | None = None
        self._board: dict[int, int] = {}
        self.held: str | None = None
        self._fds: tuple[int, int] | None = None
        self._turn_held = False
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> GpuGate:
        """The gate ``KA_GPU_GATE``, ``KA_GPU_GATE_MODE``, ``KA_GPU_SEATS`` and ``KA_GPU_FILL`` describe (none without
        a path)."""
        environ = dict(os.environ) if environ is None else environ
        return cls(environ.get("KA_GPU_GATE") or None, environ.get("KA_GPU_GATE_MODE") or "exclusive",
                   parse_seats(environ.get("KA_GPU_SEATS")), parse_fill(environ.get("KA_GPU_FILL")))

    @property
    def sharing(self) -> bool:
        """Whether children should ask for the GPU alone around their timed work."""
        return bool(self.path) and self.mode == "shared"

    def acquire(self) -> bool:
        """Take a seat if the gate has seats, then this mode's hold: the GPU alone (``exclusive``) or beside
        others' untimed work (``shared``). False once released."""
        if self.path and self.seats and not self._seat():
            return False
        return self.alone() if self.mode == "exclusive" else self.shared()

    def mark_piece(self, start: float) -> None:
        """Write on this verification's seat when its child's current piece of shared work began (0: none runs), for
        the other seats' ``longest_piece_s``."""
        with self._lock:
            if self._seat_fd is not None and not self._closed:
                os.pwrite(self._seat_fd, struct.pack("<d", start), 0)

    def longest_piece_s(self, now: float | None = None) -> float:
        """How long the longest piece of shared work now running on another seat has run (``mark_piece``); 0 for
        none. A seat whose lock file no one holds is skipped, whatever a verification killed on it left written."""
        import fcntl

        if not self.path or self._seat_index is None:
            return 0.0
        now = time.monotonic() if now is None else now
        longest = 0.0
        for i in range(self.seats):
            if i == self._seat_index:
                continue
            with self._lock:
                if self._closed:
                    return 0.0
                if i not in self._board:
                    self._board[i] = os.open(f"{self.path}.seat-{i}", os.O_RDWR | os.O_CREAT, 0o600)
                fd = self._board[i]
            written = os.pread(fd, 8, 0)
            if len(written) < 8:
                continue
            (start,) = struct.unpack("<d", written)
            if not start > 0.0:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                longest = max(longest, now - start)
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
        return longest

    def may_fill(self, piece_s: float | None) -> bool:
        """Whether a sharer whose piece just took ``piece_s`` may go on while a timed series waits (``GATE_FILL_FACTOR``).

        Example:
            >>> GpuGate(None).may_fill(0.1)
            False
        """
        return bool(self.fill) and piece_s is not None and piece_s <= self.fill * self.longest_piece_s()

    def alone(self) -> bool:
        """Hold the GPU alone: wait until no other verification holds it in any way; False once released."""
        if not self.path:
            return True
        with self._lock:
            if self._closed:
                return False
            if self.held == "alone":
                return True
            if self.held == "shared":
                self._flock(0, "unlock")
                self.held = None
        self.mark_piece(0.0)
        return self._take("exclusive")

    def shared(self) -> bool:
        """Hold the GPU beside other verifications' untimed work (in the ``exclusive`` mode: alone)."""
        if not self.path:
            return True
        if self.mode == "exclusive":
            return self.alone()
        with self._lock:
            if self._closed:
                return False
            if self.held == "shared":
                return True
            if self.held == "alone":
                # A downgrade under the turnstile: no one else can be granted anything in between.
                self._flock(0, "shared")
                self._let_turn_go()
                self.held = "shared"
        if self.held != "shared" and not self._take("shared"):
            return False
        self.mark_piece(time.monotonic())
        return True

    def away(self) -> None:
        """Hold nothing for a while (a child builds on the CPU); in the ``exclusive`` mode keep the GPU."""
        if not self.path or self.mode == "exclusive":
            return
        self.mark_piece(0.0)
        with self._lock:
            if self._closed or self._fds is None:
                return
            self._flock(0, "unlock")
            self._let_turn_go()
            self.held = None

    def writer_waiting(self) -> bool:
        """Whether another verification waits for the GPU alone while this one shares it.

        A waiting writer holds the turnstile while the readers drain; a reader passing through it holds it
        for an instant, which at worst makes one ``give_way`` let go and come straight back.
        """
        if not self.sharing:
            return False
        with self._lock:
            if self._closed or self.held != "shared" or self._turn_held:
                return False
            if self._flock(1, "exclusive", block=False):
                self._flock(1, "unlock")
                return False
            return True

    def give_way(self) -> bool:
        """Let go of a shared hold while another verification's timed series waits, then share again.

        Returns whether the gate is held (shared) afterwards: False only once released. Without a waiting
        writer it returns at once, still holding.
        """
        if not self.writer_waiting():
            return not self._closed
        self.mark_piece(0.0)
        with self._lock:
            if self._closed or self.held != "shared":
                return not self._closed
            self._flock(0, "unlock")
            self.held = None
        if not self._take("shared"):
            return False
        self.mark_piece(time.monotonic())
        return True

    def release(self) -> None:
        """Let every other verification have the GPU (closing the files drops the locks); idempotent."""
        self.mark_piece(0.0)
        with self._lock:
            self._closed = True
            if self._fds is not None:
                for fd in self._fds:
                    os.close(fd)
                self._fds = None
            if self._seat_fd is not None:
                os.close(self._seat_fd)
                self._seat_fd = None
            for fd in self._board.values():
                os.close(fd)
            self._board.clear()
            self.held = None
            self._turn_held = False

    def _take(self, how: str) -> bool:
        """Through the turnstile, then the main lock ``how``; only an exclusive hold keeps the turnstile."""
        if not self._wait(1, "exclusive", turn=True) or not self._wait(0, how):
            return False
        with self._lock:
            if self._closed:
                return False
            if how == "shared":
                self._let_turn_go()
            self.held = "shared" if how == "shared" else "alone"
        return True

    def _seat(self) -> bool:
        """Wait for one of the seats' lock files (``<path>.seat-<i>``) and keep it; False once released."""
        import fcntl

        assert self.path
        fds = [os.open(f"{self.path}.seat-{i}", os.O_RDWR | os.O_CREAT, 0o600) for i in range(self.seats)]
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return False
                    for fd in fds:
                        try:
                            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        except BlockingIOError:
                            continue
                        self._seat_index = fds.index(fd)
                        fds.remove(fd)
                        self._seat_fd = fd
                        os.pwrite(fd, struct.pack("<d", 0.0), 0)
                        return True
                time.sleep(SEAT_POLL_S)
        finally:
            for fd in fds:
                os.close(fd)

    def _files(self) -> tuple[int, int]:
        if self._fds is None:
            assert self.path
            main = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            turn = os.open(self.path + ".turn", os.O_RDWR | os.O_CREAT, 0o600)
            self._fds = (main, turn)
        return self._fds

    def _flock(self, which: int, how: str, block: bool = True) -> bool:
        import fcntl

        operation = {"exclusive": fcntl.LOCK_EX, "shared": fcntl.LOCK_SH, "unlock": fcntl.LOCK_UN}[how]
        try:
            fcntl.flock(self._files()[which], operation | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True

    def _let_turn_go(self) -> None:
        if self._turn_held:
            self._flock(1, "unlock")
            self._turn_held = False

    def _wait(self, which: int, how: str, turn: bool = False) -> bool:
        while True:
            with self._lock:
                if self._closed:
                    return False
                if (turn and self._turn_held) or self._flock(which, how, block=False):
                    self._turn_held = self._turn_held or turn
                    return True
            time.sleep(GATE_POLL_S)


class GateKeeper:
    """The parent's side of a child's requests: move the gate as asked, then answer with a grant file.

    A child sends ``{"kind": "gate", "which": "alone" | "shared" | "away" | "yield" | "over", "n": N}`` and waits
    for the signal ``<grants>-N`` (``verify.harness.signals``, under ``key``). A candidate's run child is frozen (``SIGSTOP`` to its process group) while its
    parent waits for the GPU, so it cannot put work on a GPU another verification is timing on. A ``yield``
    lets a waiting timed series go first (``GpuGate.give_way``); it is marked only when it let go
    (``gate:<role>:yield``, then ``gate:<role>:shared``), or when it went on beside a longer piece on another seat
    (``gate:<role>:fill``, ``GpuGate.may_fill``, at most ``GATE_FILLS`` in a row), and never counts against
    ``GATE_REQUESTS``. ``over`` ends
    a child's hold on the GPU alone by handing it to the verification's next child: when ``hand_over`` (the
    parent's) says that child is ready and tells it to go, the GPU stays alone (``gate:<role>:over``), so the next
    child's series waits for no drain of the other verifications' untimed work; otherwise ``over`` is ``shared``.

    Example:
        >>> import tempfile
        >>> grants = Path(tempfile.mkdtemp()) / "grant"
        >>> keeper = GateKeeper(GpuGate(None), str(grants), "run")
        >>> keeper.handle({"kind": "gate", "which": "alone", "n": 1}), grants.with_name("grant-1").exists()
        ('alone', True)
    """

    def __init__(self, gate: GpuGate, grants: str, role: str, *, freeze: Callable[[bool], None] | None = None,
                 marks: list[tuple[float, str]] | None = None, hand_over: Callable[[], bool] | None = None,
                 key: str | None = None) -> None:
        self.gate = gate
        self.grants = grants
        self.role = role
        self.key = key
        self.freeze = freeze
        self.hand_over = hand_over
        self.marks = marks if marks is not None else []
        self._count = 0
        self._yields = 0
        self._fills = 0
        self.answers: list[tuple[float, float, str]] = []
        """Each request answered: when it came, when it was granted, and what (``held_pieces`` reads them)."""

    def handle(self, message: dict[str, Any]) -> str | None:
        """Act on one channel message if it is a gate request; what was granted, or None."""
        want, number = message.get("which"), message.get("n")
        if message.get("kind") != "gate" or want not in GATE_WANTS or type(number) is not int:
            return None
        asked = time.monotonic()
        self.gate.mark_piece(0.0)
        # The piece that just ended began with the last grant that left the child sharing.
        last = self.answers[-1] if self.answers else None
        ended = asked - last[1] if last is not None and last[2] in HELD_AFTER else None
        granted = self._give_way(number, ended) if want == "yield" else self._move(want, number)
        if granted is not None:
            self.answers.append((asked, time.monotonic(), granted))
        if granted in HELD_AFTER and self.gate.sharing:
            self.gate.mark_piece(self.answers[-1][1])
        return granted

    def _move(self, want: str, number: int) -> str | None:
        self._count += 1
        if self._count > GATE_REQUESTS:
            want = "alone"
        if want == "over":
            if self.gate.held == "alone" and self.hand_over is not None and self.hand_over():
                self.marks.append((time.monotonic(), f"gate:{self.role}:over"))
                self._grant(number)
                return "over"
            want = "shared"
        if want == "away":
            self.gate.away()
        else:
            waits = self.gate.held != want and self.gate.sharing
            if waits and self.freeze:
                self.freeze(True)
            try:
                granted = self.gate.alone() if want == "alone" else self.gate.shared()
            finally:
                if waits and self.freeze:
                    self.freeze(False)
            if not granted:
                return None
        self.marks.append((time.monotonic(), f"gate:{self.role}:{want}"))
        self._grant(number)
        return want

    def _grant(self, number: int) -> None:
        send_signal(Path(f"{self.grants}-{number}"), self.key)

    def _give_way(self, number: int, ended: float | None = None) -> str | None:
        self._yields += 1
        waits = self._yields <= GATE_YIELDS and self.gate.writer_waiting()
        if not waits:
            self._fills = 0
        elif self._fills < GATE_FILLS and self.gate.may_fill(ended):
            # The timed series waits for a longer piece on another seat anyway: this seat works meanwhile.
            self._fills += 1
            self.marks.append((time.monotonic(), f"gate:{self.role}:fill"))
        else:
            self._fills = 0
            self.marks.append((time.monotonic(), f"gate:{self.role}:yield"))
            if self.freeze:
                self.freeze(True)
            try:
                held = self.gate.give_way()
            finally:
                if self.freeze:
                    self.freeze(False)
            if not held:
                return None
            self.marks.append((time.monotonic(), f"gate:{self.role}:shared"))
        self._grant(number)
        return "yield"


HELD_AFTER: tuple[str, ...] = ("shared", "yield")
"""Grants after which a child holds a shared gate, so that a timed series waiting for the GPU alone waits for its next
request."""


def held_pieces(answers: Sequence[tuple[float, float, str]], events: Sequence[tuple[float, str]], *,
                start: float | None = None, end: float | None = None, origin: float = 0.0) -> list[list[Any]]:
    """A child's pieces of work under a shared gate, in time order: each runs from a grant that left it sharing
    (``HELD_AFTER``; or ``start``, when it was first let onto the GPU) to its next request (or ``end``, its exit).

    A timed series that asks for the GPU alone during a piece waits for the piece's end, so the longest pieces are
    what the waits for the GPU alone are made of. Each comes as ``[start, seconds, name]`` (``start`` since
    ``origin``), named by the child's messages inside it (the first and the last, ``-`` for none); ``answers`` is a
    ``GateKeeper``'s, ``events`` the child's messages as ``(time, name)`` on the same clock.

    Example:
        >>> answers = [(1.0, 1.0, "yield"), (3.0, 3.0, "yield"), (3.5, 3.6, "alone"), (4.0, 4.0, "shared")]
        >>> events = [(0.5, "hello"), (2.0, "trial"), (3.2, "trial"), (4.5, "done")]
        >>> held_pieces(answers, events, start=0.2, end=5.0)
        [[0.2, 0.8, 'hello'], [1.0, 2.0, 'trial'], [3.0, 0.5, 'trial'], [4.0, 1.0, 'done']]
    """
    spans: list[tuple[float, float]] = []
    opened = start
    for asked, answered, granted in answers:
        if opened is not None and asked >= opened:
            spans.append((opened, asked))
        opened = answered if granted in HELD_AFTER else None
    if opened is not None and end is not None and end >= opened:
        spans.append((opened, end))
    pieces: list[list[Any]] = []
    for began, ended in spans:
        inside = [name for at, name in events if began <= at <= ended]
        name = "-" if not inside else inside[0] if inside[0] == inside[-1] else f"{inside[0]} .. {inside[-1]}"
        pieces.append([round(began - origin, 3), round(ended - began, 3), name])
    return pieces


_REQUESTS = itertools.count(1)


@dataclass
class Hold:
    """What this child holds of a shared gate, as its own requests left it (``alone_on_gpu``, ``off_gpu``)."""

    alone: bool = False
    off: bool = False
    """Inside an ``off_gpu`` block."""
    away: bool = False
    """Inside an ``off_gpu`` block, and still holding nothing (``back_on_gpu`` ends that)."""


HOLD = Hold()
"""This process's hold: a child asks for the gate from one thread at a time, the one running its work."""


def _ask(job: dict[str, Any], channel: Any, want: str) -> None:
    number = next(_REQUESTS)
    channel.send("gate", which=want, n=number)
    await_signal(Path(f"{job['gate_grants']}-{number}"), job.get("signal_key"), job.get("gate_timeout_s", 3600),
                 what=f"the GPU gate's answer to a request for the GPU {want}", poll_s=GATE_POLL_S)


@contextlib.contextmanager
def alone_on_gpu(job: dict[str, Any], channel: Any, sync: Callable[[], None], *,
                 hand_over: bool = False) -> Iterator[None]:
    """Run the block with the GPU to this verification alone when the gate is shared; else just run it.

    ``sync`` finishes this process's GPU work before each change, so nothing of it runs into another
    verification's timed work, nor anything of another's into this block. ``hand_over``: this is the child's
    last GPU work, and its parent may hand the GPU alone to the verification's next child (``GateKeeper``).
    """
    if not job.get("gate_grants"):
        yield
        return
    sync()
    _ask(job, channel, "alone")
    HOLD.alone = True
    try:
        yield
    finally:
        sync()
        HOLD.alone = False
        _ask(job, channel, "over" if hand_over else "shared")


def yield_point(job: dict[str, Any], channel: Any, sync: Callable[[], None]) -> None:
    """Between two pieces of untimed work: let another verification's waiting timed series have the GPU.

    Costs one round trip to the parent when no one waits. ``sync`` finishes this process's GPU work first, so
    none of it runs into the other's timed series.
    """
    if job.get("gate_grants"):
        sync()
        _ask(job, channel, "yield")


@contextlib.contextmanager
def off_gpu(job: dict[str, Any], channel: Any, sync: Callable[[], None]) -> Iterator[None]:
    """Hold nothing of a shared gate during the block (a JIT build: CPU work), then share again.

    Inside a block with the GPU alone the block keeps it: work a timed series waits for is part of its time. Inside
    another ``off_gpu`` block it adds nothing: the outer block shares again at its end. ``back_on_gpu`` ends the
    let-go early, for GPU work in the middle of the block.
    """
    if not job.get("gate_grants") or HOLD.alone or HOLD.off:
        yield
        return
    sync()
    _ask(job, channel, "away")
    HOLD.off = HOLD.away = True
    try:
        yield
    finally:
        away, HOLD.off, HOLD.away = HOLD.away, False, False
        if away:
            _ask(job, channel, "shared")


def back_on_gpu(job: dict[str, Any], channel: Any) -> bool:
    """Share the GPU again inside an ``off_gpu`` block, for the rest of it: the block has GPU work after all.

    Returns whether it asked (False outside such a block, or when it already shares again).
    """
    if not (job.get("gate_grants") and HOLD.away):
        return False
    _ask(job, channel, "shared")
    HOLD.away = False
    return True
