"""The zygote: one process per verification that imports torch once, from which each child is forked.

Every child of a verification (compile, trusted, run) used to start Python and import torch on its own:
three imports and the flop counter's first use, about 6 CPU-seconds a kernel, which a batch of several
scripts per GPU pays on a shared host. The parent now starts one zygote, a fresh interpreter (exec'd, with
a scrubbed environment and no seeds: it never holds anything of the parent's), which imports torch, pays
the flop counter's first use on the ``meta`` device and then forks a child for each request. A forked
child gets the environment, folder, log and pipes it asks for, a new session, and runs the same role code
as an exec'd one.

What a forked child must not inherit, it does not: the zygote never initialises CUDA (so the child creates
its own context) and runs no CPU operator (so no OpenMP team exists to be lost in the fork); the request
socket and the zygote's wake-up pipe are closed before the role starts, so the child holds the same kinds of
descriptors an exec'd one does; numpy's BLAS threads, which a fork drops, are started again, so the run
child's thread counts match an exec'd child's. ``KA_ZYGOTE=0`` turns it off; a zygote that fails to start or
dies makes the parent start its children by exec, as before.

A batch keeps one zygote per slot instead (``serve(..., slot=True)``, ``verify.batch.zygotes``): it is started
from a script holding the harness and no kernel, and serves the slot's scripts one after another, each over
its own connection (``KA_ZYGOTE_FD``). A request then carries the kernel (``embedded``, in a sealed memory
file the child reads before anything of the kernel runs) and the harness's digest, which must be the zygote's
own. When a script's connection closes, the children forked for it are killed. Since candidate code descends
from it, a zygote is not dumpable (no same-user ``ptrace`` or ``/proc/PID/mem``); each child is made dumpable
again, as an exec'd one is.

Example:
    >>> zygote_enabled({"KA_ZYGOTE": "0"}), zygote_enabled({})
    (False, True)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from verify.harness.common import die_with_parent, make_non_dumpable, set_dumpable
from verify.harness.fused import compile_fused

ZYGOTE_ENV = "KA_ZYGOTE"
"""``0`` starts every child by exec instead of forking it from a zygote."""

ZYGOTE_START_S = 600.0
"""How long a request may wait for the zygote's imports (seconds; a loaded host takes tens)."""

ZYGOTE_FD_ENV = "KA_ZYGOTE_FD"
"""A descriptor the script inherits: its connection to the batch slot's zygote (``verify.batch.zygotes``)."""

RunMain = Callable[[list[str], "dict[str, Any] | None"], int]
"""The script's entry point as a zygote calls it: the arguments after ``[python, script]``, and the kernel a
slot's request carried (None: the zygote's own script's)."""


class ZygoteError(RuntimeError):
    """The zygote could not fork a child (it failed to start, died, or refused the request)."""


def zygote_enabled(env: dict[str, str] | os._Environ[str]) -> bool:
    """Whether children are forked from a zygote: on unless ``KA_ZYGOTE=0``, and only where fork exists."""
    return env.get(ZYGOTE_ENV, "1") != "0" and hasattr(os, "fork") and hasattr(socket, "send_fds")


class Zygote:
    """The parent's handle on a zygote: ``spawn`` forks a child, whose exit the zygote reports back.

    ``Zygote.start`` starts the verification's own zygote; ``Zygote.connect`` uses a batch slot's, through
    the connection the script inherited.

    Example:
        >>> import sys, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> zygote = Zygote.start([sys.executable, "-c", "pass"], env={}, cwd=folder)  # exits at once: no zygote
        >>> try:
        ...     zygote.spawn(["x"], env={}, cwd=folder, log_fd=1)
        ... except ZygoteError as error:
        ...     print("refused")
        refused
        >>> zygote.close()
    """

    def __init__(self, connection: socket.socket, *, process: subprocess.Popen[bytes] | None = None,
                 log: Any = None, digest: str | None = None, embedded: dict[str, Any] | None = None) -> None:
        self.process = process
        self._log = log
        self._socket = connection
        self.digest = digest
        self._embedded_fd = _sealed_json(embedded) if embedded is not None else None
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._replies: list[dict[str, Any]] = []
        self._exits: dict[int, tuple[int, float | None]] = {}
        self._gone = False
        self._broken = ""
        self.forked = 0
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def start(cls, argv: list[str], *, env: dict[str, str], cwd: str | os.PathLike[str]) -> Zygote:
        """Start ``argv --role zygote`` in ``cwd`` with ``env``: the verification's own zygote."""
        ours, process, log = launch_zygote([*argv, "--role", "zygote"], env=env, cwd=cwd,
                                           log_path=Path(cwd) / "zygote.log")
        return cls(ours, process=process, log=log)

    @classmethod
    def connect(cls, fd: int, *, digest: str, embedded: dict[str, Any]) -> Zygote:
        """Use the batch slot's zygote through the inherited connection ``fd``; requests carry ``embedded``
        (this script's kernel) and ``digest`` (its harness's, ``verify.script.harness_digest``).

        Raises:
            OSError: ``fd`` is not an open ``SOCK_SEQPACKET`` socket.
        """
        connection = socket.socket(fileno=fd)
        if connection.family != socket.AF_UNIX or connection.type != socket.SOCK_SEQPACKET:
            connection.detach()
            raise OSError(f"descriptor {fd} is not a zygote connection")
        connection.set_inheritable(False)
        return cls(connection, digest=digest, embedded=embedded)

    @property
    def shared(self) -> bool:
        """Whether this is a batch slot's zygote (it serves other scripts before and after this one)."""
        return self.process is None

    def _read(self) -> None:
        while True:
            try:
                data = self._socket.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            with contextlib.suppress(ValueError):
                message = json.loads(data)
                with self._changed:
                    if "exit" in message:
                        self._exits[int(message["exit"])] = (int(message["code"]), message.get("cpu_s"))
                    else:
                        self._replies.append(message)
                    self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: str | os.PathLike[str], log_fd: int,
              fds: dict[int, int] | None = None, fd_env: dict[str, int] | None = None, judge: bool = False,
              timeout_s: float = ZYGOTE_START_S) -> ZygoteChild:
        """Fork a child that runs ``argv`` (this script's own ``[python, script, ...]``) as an exec would.

        ``fds`` maps an index of ``argv`` to a descriptor of this process: the child gets the descriptor and
        finds its own number for it at that index (``--channel FD``); ``fd_env`` does the same for an environment
        variable. Its stdout and stderr go to ``log_fd``. A ``judge`` (a script's parent, a slot's zygote) runs
        no candidate code and stays undumpable, as the zygote is, from its first instruction on.
        """
        fds, fd_env = dict(fds or {}), dict(fd_env or {})
        request = {"argv": argv, "env": env, "cwd": str(cwd), "fd_args": list(fds), "fd_env": list(fd_env),
                   "embedded": self._embedded_fd is not None, "harness": self.digest, "judge": judge}
        passed = [log_fd, *fds.values(), *fd_env.values(),
                  *([self._embedded_fd] if self._embedded_fd is not None else [])]
        with self._lock:
            if self._gone or self._broken:
                raise ZygoteError(self._broken or f"the zygote is gone: {self.log_tail()}")
            try:
                socket.send_fds(self._socket, [json.dumps(request).encode()], passed)
            except OSError as error:
                raise ZygoteError(f"the zygote took no request: {error}") from error
            with self._changed:
                self._changed.wait_for(lambda: self._replies or self._gone, timeout_s)
                reply = self._replies.pop(0) if self._replies else None
            if reply is None or "pid" not in reply:
                # A late reply would answer the next request: a zygote that missed one takes no more.
                self._broken = (f"the zygote forked no child ({(reply or {}).get('error', 'no reply')}): "
                                f"{self.log_tail()}")
                raise ZygoteError(self._broken)
        self.forked += 1
        return ZygoteChild(self, int(reply["pid"]), argv)

    def exit_of(self, pid: int, timeout_s: float | None) -> tuple[int, float | None] | None:
        """A forked child's exit code and CPU seconds (its own and its waited-for children's, user and system),
        waiting up to ``timeout_s``; None while it runs."""

        def known() -> bool:
            return pid in self._exits or (self._gone and not _alive(pid))

        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._changed:
            while not known() and (deadline is None or time.monotonic() < deadline):
                # Once the zygote is gone nothing notifies: poll until the orphan's end (PR_SET_PDEATHSIG).
                steps = [t for t in (0.05 if self._gone else None,
                                     None if deadline is None else deadline - time.monotonic()) if t is not None]
                self._changed.wait(min(steps) if steps else None)
            if pid in self._exits:
                return self._exits[pid]
            if self._gone and not _alive(pid):
                # Forked children die with their zygote (PR_SET_PDEATHSIG, SIGKILL).
                return -signal.SIGKILL, None
            return None

    def cpu_s(self) -> float | None:
        """The zygote's own CPU seconds so far (user and system: its imports, its forks); None once it is gone,
        and for a slot's, which other scripts share."""
        if self.process is None:
            return None
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 3)
        except (OSError, IndexError, ValueError):
            return None

    def log_tail(self) -> str:
        """The end of the zygote's own log (its import errors)."""
        if self._log is None:
            return "(the batch slot's zygote: its log is the batch's)"
        return log_tail(self._log)

    def close(self) -> None:
        """Stop the zygote (and whatever is left of its process group); idempotent. A slot's zygote is only
        disconnected: it kills what it still runs for this script and serves the slot's next one."""
        stop_zygote(self._socket, self.process, self._log)
        if self._embedded_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._embedded_fd)
            self._embedded_fd = None


def launch_zygote(argv: list[str], *, env: dict[str, str], cwd: str | os.PathLike[str],
                  log_path: Path) -> tuple[socket.socket, subprocess.Popen[bytes], BinaryIO]:
    """Start a zygote's command ``argv --channel FD`` in a new session, its output in ``log_path``: this side of
    its socket, the process, and the open log (the caller closes both)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    log = open(log_path, "wb")  # noqa: SIM115 - the caller closes it
    process = subprocess.Popen(
        [*argv, "--channel", str(theirs.fileno())], env=env, cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=log,
        stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),), start_new_session=True, close_fds=True,
    )
    theirs.close()
    return ours, process, log


def stop_zygote(connection: socket.socket, process: subprocess.Popen[bytes] | None, log: BinaryIO | None) -> None:
    """Undo ``launch_zygote``: close the socket and the log, and kill the zygote's process group (when ``process``
    is ours; its forked children die with it)."""
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
    if process is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    connection.close()
    if log is not None:
        log.close()


def log_tail(log: BinaryIO) -> str:
    """The end of a zygote's log (its import errors)."""
    with contextlib.suppress(ValueError):
        log.flush()
    try:
        return Path(log.name).read_text(errors="replace")[-2000:].strip() or "(empty log)"
    except OSError:
        return "(no log)"


def _sealed_json(value: Any) -> int:
    """A memory file holding ``value`` as JSON, sealed so that no process that gets it can change it."""
    import fcntl

    fd = os.memfd_create("ka-embedded", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    data = json.dumps(value).encode()
    written = 0
    while written < len(data):
        written += os.write(fd, data[written:])
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    return fd


def _read_json(fd: int) -> Any:
    size = os.fstat(fd).st_size
    data = b""
    while len(data) < size:
        chunk = os.pread(fd, size - len(data), len(data))
        if not chunk:
            break
        data += chunk
    return json.loads(data)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ZygoteChild:
    """A forked child, with the part of ``subprocess.Popen``'s interface the parent uses."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self._zygote = zygote
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self.cpu_s: float | None = None

    def poll(self) -> int | None:
        """The exit code, or None while the child runs."""
        return self._update(0)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit code; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        code = self._update(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def _update(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            found = self._zygote.exit_of(self.pid, timeout)
            if found is not None:
                self.returncode, self.cpu_s = found
        return self.returncode


def warm_imports() -> None:
    """Import torch and pay the flop counter's first use on the ``meta`` device: no CUDA, no CPU operator."""
    with contextlib.suppress(Exception):
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False), torch.no_grad():
            torch.nn.Linear(4, 4, device="meta")(torch.ones(2, 4, device="meta"))


def serve(fd: int, run_main: RunMain, *, slot: bool = False, digest: str | None = None, seed: bool = False) -> int:
    """The zygote's loop: fork a child per request, report each child's exit; ends when the parent goes.

    ``run_main(argv, embedded)`` is the script's entry point, called in the forked child with the arguments
    after ``[python, script]`` and the kernel the request carried (None: the zygote's own script's).

    Without ``slot``, ``fd`` is the one connection, to the verification's parent. With ``slot``, ``fd`` is
    the batch slot's control socket: each message on it is a ``ping`` (answered ``pong``) or a ``connect``
    carrying one script's connection; every request must carry its kernel and the harness ``digest``.
    A ``seed`` is a batch's zygote of slot zygotes (``verify.batch.zygotes``): it also compiles the judge's
    fused passes, once for every slot zygote and the parents forked from them, and it ends when its one
    connection closes, not with the thread that started it (the batch's slots come and go).
    """
    import warnings

    if not seed:
        die_with_parent()
    make_non_dumpable()
    control = socket.socket(fileno=fd)
    warm_imports()
    if seed:
        compile_fused()
    # numpy's BLAS threads exist here; the fork keeps only the calling thread and the child starts them again.
    warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_write)
    connections: dict[int, socket.socket] = {} if slot else {control.fileno(): control}
    owners: dict[int, socket.socket | None] = {}  # a forked child's connection (None: closed)
    if slot:
        _send(control, {"ready": True})
    while True:
        watched = [wake_read, *([control] if slot else []), *connections.values()]
        ready, _, _ = select.select(watched, [], [], 1.0)
        if wake_read in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_read, 4096)
        _reap(owners)
        for sock in ready:
            if sock is wake_read:
                continue
            try:
                message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 16)
            except OSError:
                message, fds = b"", []
            if sock is control and slot:
                if not message:
                    return 0
                _control(control, message, fds, connections)
                continue
            if not message:
                if not slot:
                    return 0
                _disconnect(sock, connections, owners)
                continue
            reply = _fork(sock, message, fds, slot, digest, run_main,
                          [control.fileno(), wake_read, wake_write, *connections])
            if "pid" in reply:
                owners[reply["pid"]] = sock
            if not _send(sock, reply) and not slot:
                return 0


def _send(sock: socket.socket, message: dict[str, Any]) -> bool:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        return False
    return True


def _control(control: socket.socket, message: bytes, fds: list[int], connections: dict[int, socket.socket]) -> None:
    """A slot's control message: a ping, or one script's connection to serve."""
    try:
        request = json.loads(message)
    except ValueError:
        request = None
    if isinstance(request, dict) and request.get("connect") and len(fds) == 1:
        connection = socket.socket(fileno=fds[0])
        connections[connection.fileno()] = connection
        return
    for received in fds:
        os.close(received)
    if isinstance(request, dict) and "ping" in request:
        _send(control, {"pong": request["ping"]})


def _disconnect(connection: socket.socket, connections: dict[int, socket.socket],
                owners: dict[int, socket.socket | None]) -> None:
    """A script's connection closed (it ended or was killed): kill what it still runs, each in its session."""
    for pid in [pid for pid, owner in owners.items() if owner is connection]:
        # Not reaped yet, so the pid (the child's session and process group) is still this child's.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        owners[pid] = None
    connections.pop(connection.fileno(), None)
    connection.close()


def _fork(connection: socket.socket, message: bytes, fds: list[int], slot: bool, digest: str | None,
          run_main: RunMain, zygote_fds: list[int]) -> dict[str, Any]:
    """Fork the child a request asks for; the reply (``pid``, or ``error``) for its sender."""
    try:
        request = json.loads(message)
    except ValueError:
        request = None
    error = ""
    if not isinstance(request, dict) or len(fds) != (1 + len(request.get("fd_args", [])) + len(request.get("fd_env", []))
                                                     + bool(request.get("embedded"))):
        error = "malformed request"
    elif slot and not request.get("embedded"):
        error = "a slot's zygote holds no kernel: the request must carry one"
    elif slot and request.get("harness") != digest:
        error = f"the slot's zygote runs harness {digest}, the script {request.get('harness')}"
    if error:
        for received in fds:
            os.close(received)
        return {"error": error}
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _become(request, fds, zygote_fds, run_main)
    for received in fds:
        os.close(received)
    return {"pid": pid}


def _reap(owners: dict[int, socket.socket | None]) -> None:
    """Wait for every child that ended; tell the script it was forked for, if still connected."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        owner = owners.pop(pid, None)
        if owner is not None:
            _send(owner, {"exit": pid, "code": os.waitstatus_to_exitcode(status),
                          "cpu_s": round(usage.ru_utime + usage.ru_stime, 3)})


def _become(request: dict[str, Any], fds: list[int], zygote_fds: list[int], run_main: RunMain) -> None:
    """In the forked child: take the request's descriptors, folder and environment, run the role, exit."""
    code = 1
    try:
        os.setsid()
        die_with_parent()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for own in zygote_fds:
            with contextlib.suppress(OSError):
                os.close(own)
        embedded: dict[str, Any] | None = None
        if request.get("embedded"):
            # Read while still undumpable, before anything of the kernel runs.
            embedded = _read_json(fds[-1])
            os.close(fds[-1])
            fds = fds[:-1]
        if not request.get("judge"):
            set_dumpable()
        log_fd, passed = fds[0], fds[1:]
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        argv = [str(a) for a in request["argv"]]
        by_arg, by_env = passed[:len(request["fd_args"])], passed[len(request["fd_args"]):]
        for index, received in zip(request["fd_args"], by_arg, strict=True):
            argv[int(index)] = str(received)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        os.environ.update({str(name): str(received)
                           for name, received in zip(request.get("fd_env", []), by_env, strict=True)})
        import tempfile

        tempfile.tempdir = None
        sys.argv = argv[1:]
        _restart_blas_threads()
        code = run_main(argv[2:], embedded)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            import atexit

            atexit._run_exitfuncs()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def _restart_blas_threads() -> None:
    """Start numpy's BLAS threads again: an exec'd child has them from its import, a forked one lost them."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return
    with contextlib.suppress(Exception):
        square = numpy.ones((512, 512))
        square @ square
