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

Example:
    >>> slot_zygotes_enabled({"KA_SLOT_ZYGOTE": "0"}), slot_zygotes_enabled({"KA_ZYGOTE": "0"})
    (False, False)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from verify.harness.parent import scrubbed_environment
from verify.harness.zygote import ZYGOTE_FD_ENV, launch_zygote, log_tail, stop_zygote, zygote_enabled

_log = logging.getLogger(__name__)

SLOT_ZYGOTE_ENV = "KA_SLOT_ZYGOTE"
"""``0``: every eval script of a batch starts its own zygote (``verify.harness.zygote``)."""

PING_S = 10.0
"""How long a slot's zygote, once it has imported torch, may take to answer a ping before it is replaced."""


def slot_zygotes_enabled(env: dict[str, str] | os._Environ[str]) -> bool:
    """Whether a batch's slots keep a zygote: unless ``KA_SLOT_ZYGOTE=0`` or zygotes are off altogether."""
    return env.get(SLOT_ZYGOTE_ENV, "1") != "0" and zygote_enabled(env)


class SlotZygote:
    """A batch slot's zygote: ``connection()`` before each script, ``close()`` when the slot ends.

    ``env`` is the environment the slot's scripts get; the zygote gets its allowlisted part, as a script's
    own zygote does, with its home in a folder of its own. ``script`` runs the zygote (default: the harness
    with no kernel, ``verify.script.render_zygote_script``).
    """

    def __init__(self, python: str, env: dict[str, str], script: Path | None = None) -> None:
        from verify.script import render_zygote_script

        self._folder = tempfile.TemporaryDirectory(prefix="ka-slot-zygote-")
        folder = Path(self._folder.name)
        (folder / "home").mkdir(mode=0o700)
        if script is None:
            script = folder / "zygote.py"
            script.write_text(render_zygote_script())
        self._control, self.process, self._log = launch_zygote(
            [python, str(script), "--role", "zygote", "--slot"], env=scrubbed_environment(env, str(folder / "home")),
            cwd=folder / "home", log_path=folder / "zygote.log")
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
        ({}, ())
        >>> zygotes.close()
    """

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.python = python
        self.env = env
        self.enabled = slot_zygotes_enabled({**os.environ, **env})
        self.current: SlotZygote | None = None
        self.replaced = 0

    @contextlib.contextmanager
    def for_script(self) -> Iterator[tuple[dict[str, str], tuple[int, ...]]]:
        """The environment and descriptors to add to one script's start; its connection closes after."""
        connection = self._connection() if self.enabled else None
        try:
            yield (({ZYGOTE_FD_ENV: str(connection.fileno())}, (connection.fileno(),)) if connection is not None
                   else ({}, ()))
        finally:
            if connection is not None:
                connection.close()

    def _connection(self) -> socket.socket | None:
        if self.current is None:
            try:
                self.current = SlotZygote(self.python, {**os.environ, **self.env})
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
        """Stop the slot's zygote; idempotent."""
        if self.current is not None:
            self.current.close()
            self.current = None
