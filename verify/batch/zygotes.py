"""One zygote per batch slot: the torch import every eval script's children need, paid once per slot.

An eval script forks its children from a zygote (``verify.harness.zygote``). On its own it starts one per
verification, and that zygote's torch import (11-12 s on a loaded 16-core host, session 20) stands between the
script's start and its first GPU work. A slot runs its scripts one after another, so its zygote can serve all of
them: it is started once from a script holding the harness and no kernel (``verify.script.render_zygote_script``),
never runs candidate code itself, and forks each script's children from the same clean state. Each script
inherits its own connection (``KA_ZYGOTE_FD``); when the script ends, or is killed, the zygote kills what it
still runs for it.

Candidate code descends from the zygote, so the slot checks it before every script after the first: a zygote
that does not answer a ping within ``PING_S`` (stopped, or killed by a candidate) is replaced, and that script
starts its own zygote meanwhile. ``KA_SLOT_ZYGOTE=0`` turns slot zygotes off; ``KA_ZYGOTE=0`` turns off both.

Two more imports go the same way (harness 1.27). The slots' zygotes are forked from one seed per batch process
(``KA_SLOT_SEED=0``: each starts on its own), which imports torch and compiles the judge's fused passes once:
nine slots used to import torch side by side at a batch's start, 10-13 s before the first child could start on a
16-core H200 host (session 36). And each script's parent, the judge, is forked from its slot's zygote instead of
started as ``python script.py`` (``KA_FORK_PARENTS=0``: started so), so it imports nothing either: it gets the
script's kernel as the children do, in a sealed memory file, checked against the zygote's harness digest, and
stays undumpable from its first instruction, where a started parent is dumpable until its ``main`` makes it
not. A parent dies with its zygote, as its children do: the batch then runs that script again alone on the host,
started the old way (``verify.batch.workers.verify_one``).

Example:
    >>> slot_zygotes_enabled({"KA_SLOT_ZYGOTE": "0"}), slot_zygotes_enabled({"KA_ZYGOTE": "0"})
    (False, False)
    >>> seeds_enabled({"KA_SLOT_SEED": "0"}), parent_forks_enabled({"KA_FORK_PARENTS": "0"}), seeds_enabled({})
    (False, False, True)
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from verify.harness.parent import scrubbed_environment
from verify.harness.zygote import (
    ZYGOTE_FD_ENV,
    Zygote,
    ZygoteChild,
    ZygoteError,
    launch_zygote,
    log_tail,
    stop_zygote,
    zygote_enabled,
)

_log = logging.getLogger(__name__)

SLOT_ZYGOTE_ENV = "KA_SLOT_ZYGOTE"
"""``0``: every eval script of a batch starts its own zygote (``verify.harness.zygote``)."""

PING_S = 10.0
"""How long a slot's zygote, once it has imported torch, may take to answer a ping before it is replaced."""


SEED_ENV = "KA_SLOT_SEED"
"""``0``: each slot's zygote starts Python and imports torch on its own instead of being forked from the seed."""

FORK_PARENTS_ENV = "KA_FORK_PARENTS"
"""``0``: each script's parent starts as ``python script.py`` instead of being forked from the slot's zygote."""


def slot_zygotes_enabled(env: dict[str, str] | os._Environ[str]) -> bool:
    """Whether a batch's slots keep a zygote: unless ``KA_SLOT_ZYGOTE=0`` or zygotes are off altogether."""
    return env.get(SLOT_ZYGOTE_ENV, "1") != "0" and zygote_enabled(env)


def seeds_enabled(env: dict[str, str] | os._Environ[str]) -> bool:
    """Whether slot zygotes are forked from a seed: unless ``KA_SLOT_SEED=0`` or slot zygotes are off."""
    return env.get(SEED_ENV, "1") != "0" and slot_zygotes_enabled(env)


def parent_forks_enabled(env: dict[str, str] | os._Environ[str]) -> bool:
    """Whether scripts' parents are forked from their slot's zygote: unless ``KA_FORK_PARENTS=0`` or slot zygotes
    are off."""
    return env.get(FORK_PARENTS_ENV, "1") != "0" and slot_zygotes_enabled(env)


def _zygote_folder(prefix: str, script: Path | None = None) -> tuple[tempfile.TemporaryDirectory[str], Path]:
    """A zygote's own folder (its ``home`` inside) and its script: ``script``, else the harness with no kernel
    (``verify.script.render_zygote_script``) written there."""
    from verify.script import render_zygote_script

    folder = tempfile.TemporaryDirectory(prefix=prefix)
    (Path(folder.name) / "home").mkdir(mode=0o700)
    if script is None:
        script = Path(folder.name) / "zygote.py"
        script.write_text(render_zygote_script())
    return folder, script


class Seed:
    """A batch process's zygote of slot zygotes, shared by its slots while any holds it (``Seed.take``).

    It is started once from the zygote script (``--role zygote --slot-seed``), imports torch and compiles the judge's
    fused passes, and forks each slot's zygote on request. It ends when its connection closes, and the slots'
    zygotes die with it (a candidate can kill it, as any process of its user: the scripts it takes with it run
    again alone, and the next slot zygote is forked from a new seed).
    """

    _lock = threading.Lock()
    _current: Seed | None = None

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.python = python
        self.users = 0
        self._folder, script = _zygote_folder("ka-seed-")
        home = Path(self._folder.name) / "home"
        self.zygote = Zygote.start([python, str(script), "--slot-seed"], env=scrubbed_environment(env, str(home)),
                                   cwd=home)

    @classmethod
    def take(cls, python: str, env: dict[str, str]) -> Seed | None:
        """The running seed for ``python`` (started now if there is none, or it died), counted as one more user;
        None where seeds are off or none can start."""
        if not seeds_enabled(env):
            return None
        with cls._lock:
            current = cls._current
            if current is None or current.python != python or current.zygote.process.poll() is not None:
                if current is not None and current.users == 0:
                    current.close()
                try:
                    current = cls._current = Seed(python, env)
                except OSError:
                    return None
            current.users += 1
            return current

    def give_back(self) -> None:
        """One user fewer; the last one stops the seed (its slot zygotes go on: each ends with its own slot)."""
        with Seed._lock:
            self.users -= 1
            if self.users > 0:
                return
            if Seed._current is self:
                Seed._current = None
        self.close()

    def fork_slot_zygote(self, argv: list[str], *, env: dict[str, str], cwd: Path,
                         log: Any) -> tuple[socket.socket, ZygoteChild]:
        """Fork one slot's zygote, ``argv --channel FD``: this side of its control socket, and the process.

        Raises:
            ZygoteError: the seed could not fork it (it failed to start, died, or did not answer in time).
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            child = self.zygote.spawn([*argv, "--channel", "-1"], env=env, cwd=cwd, log_fd=log.fileno(),
                                      fds={len(argv) + 1: theirs.fileno()}, judge=True)
        except ZygoteError:
            ours.close()
            raise
        finally:
            theirs.close()
        return ours, child

    def close(self) -> None:
        """Stop the seed; idempotent."""
        self.zygote.close()
        self._folder.cleanup()


class SlotZygote:
    """A batch slot's zygote: ``connection()`` before each script, ``close()`` when the slot ends.

    ``env`` is the environment the slot's scripts get; the zygote gets its allowlisted part, as a script's
    own zygote does, with its home in a folder of its own. ``script`` runs the zygote (default: the harness
    with no kernel, ``verify.script.render_zygote_script``).
    """

    def __init__(self, python: str, env: dict[str, str], script: Path | None = None, seed: Seed | None = None) -> None:
        self._folder, script = _zygote_folder("ka-slot-zygote-", script)
        folder = Path(self._folder.name)
        argv = [python, str(script), "--role", "zygote", "--slot"]
        zygote_env = scrubbed_environment(env, str(folder / "home"))
        self.forked = False
        if seed is not None:
            log = open(folder / "zygote.log", "wb")  # noqa: SIM115 - closed by close()
            try:
                self._control, self.process = seed.fork_slot_zygote(argv, env=zygote_env, cwd=folder / "home", log=log)
                self._log, self.forked = log, True
            except ZygoteError as error:
                log.close()
                _log.warning("the batch's seed forked no slot zygote (%s); this one starts on its own", error)
        if not self.forked:
            self._control, self.process, self._log = launch_zygote(argv, env=zygote_env, cwd=folder / "home",
                                                                   log_path=folder / "zygote.log")
        self.ready = False
        self.served = 0
        self._pings = 0

    def connection(self) -> socket.socket | None:
        """A new connection for the next script to inherit; None when this zygote is gone or does not answer.

        Until the zygote has imported torch there is no ping: the first script's requests wait in its
        connection, as they would for a zygote of its own.
        """
        self._drain(0.0)  # first: a zygote killed since it said it was ready still counts as having been ready
        if self.process.poll() is not None or (self.ready and not self._ping()):
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self._control, [json.dumps({"connect": True}).encode()], [theirs.fileno()])
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        self.served += 1
        return ours

    def _ping(self) -> bool:
        self._pings += 1
        try:
            self._control.send(json.dumps({"ping": self._pings}).encode())
        except OSError:
            return False
        return self._drain(PING_S, pong=self._pings)

    def _drain(self, wait_s: float, pong: int | None = None) -> bool:
        """Read the control messages waiting, for up to ``wait_s``; whether the awaited ``pong`` came."""
        deadline = time.monotonic() + wait_s
        while True:
            ready, _, _ = select.select([self._control], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return False
            try:
                data = self._control.recv(65536)
            except OSError:
                return False
            if not data:
                return False
            with contextlib.suppress(ValueError):
                message = json.loads(data)
                self.ready = self.ready or bool(message.get("ready"))
                if pong is not None and message.get("pong") == pong:
                    return True

    def log_tail(self) -> str:
        """The end of the zygote's log (its import errors)."""
        return log_tail(self._log)

    def close(self) -> None:
        """Stop the zygote and whatever it still runs; idempotent."""
        stop_zygote(self._control, self.process, self._log)
        self._folder.cleanup()


class SlotZygotes:
    """The zygote of one slot across its scripts: started at the first, replaced when it stops answering.

    Example:
        >>> import sys
        >>> zygotes = SlotZygotes(sys.executable, {"KA_SLOT_ZYGOTE": "0"})
        >>> with zygotes.for_script() as extra:
        ...     extra
        ({}, (), None)
        >>> zygotes.close()
    """

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.python = python
        self.env = env
        merged = {**os.environ, **env}
        self.enabled = slot_zygotes_enabled(merged)
        self.fork_parents = parent_forks_enabled(merged)
        self.current: SlotZygote | None = None
        self.replaced = 0
        self._seed = Seed.take(python, merged) if self.enabled else None

    @contextlib.contextmanager
    def for_script(self, fork_parent: bool = True) -> Iterator[tuple[dict[str, str], tuple[int, ...], Any]]:
        """The environment and descriptors to add to one script's start, and how to fork its parent from the
        slot's zygote (``verify.runner.verify_code``'s ``fork``; None: it starts as ``python script.py``); its
        connection closes after."""
        connection = self._connection() if self.enabled else None
        try:
            if connection is None:
                yield {}, (), None
            else:
                fork = (functools.partial(self._fork_parent, children=connection)
                        if fork_parent and self.fork_parents else None)
                yield {ZYGOTE_FD_ENV: str(connection.fileno())}, (connection.fileno(),), fork
        finally:
            if connection is not None:
                connection.close()

    def _fork_parent(self, command: list[str], env: dict[str, str], timeout_s: float, *, embedded: dict[str, Any],
                     children: socket.socket) -> tuple[int, str] | None:
        """Run a script's ``command`` as a parent forked from the slot's zygote (a ``verify.runner.ScriptStart``);
        ``children`` is the connection its children are forked over."""
        own = self.current.connection() if self.current is not None else None
        if own is None:
            return None
        zygote = Zygote.connect(own.detach(), digest=embedded["harness_digest"], embedded=embedded)
        try:
            with tempfile.TemporaryFile() as output:
                try:
                    parent = zygote.spawn(command, env=env, cwd=os.getcwd(), log_fd=output.fileno(),
                                          fd_env={ZYGOTE_FD_ENV: children.fileno()}, judge=True)
                except ZygoteError as error:
                    _log.warning("the slot's zygote forked no parent (%s); the script starts on its own", error)
                    return None
                try:
                    code = parent.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(parent.pid, signal.SIGKILL)
                    raise
                output.seek(0)
                return code, output.read()[-100_000:].decode(errors="replace")
        finally:
            zygote.close()

    def _connection(self) -> socket.socket | None:
        if self.current is None:
            try:
                self.current = SlotZygote(self.python, {**os.environ, **self.env}, seed=self._seed)
            except OSError:
                # Cannot start one here (the Python, a folder): every script of the slot starts its own.
                self.enabled = False
                return None
        connection = self.current.connection()
        if connection is None:
            # Gone or stopped: this script starts its own zygote, the next one a new slot zygote, unless this one
            # never got as far as its imports (then the next would fail the same way).
            if not self.current.ready:
                self.enabled = False
                _log.warning("a batch slot's zygote failed before it was ready; each script starts its own: %s",
                             self.current.log_tail())
            self.current.close()
            self.current = None
            self.replaced += 1
        return connection

    def close(self) -> None:
        """Stop the slot's zygote, and give the seed back; idempotent."""
        if self.current is not None:
            self.current.close()
            self.current = None
        if self._seed is not None:
            self._seed.give_back()
            self._seed = None
