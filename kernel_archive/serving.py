"""The explorer served in the background for a browser to drive: benches, screenshots and browser tests.

Example:
    >>> CHROMIUM_ARGS[:2]
    ['--headless', '--no-sandbox']
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium (`playwright install` cannot download browsers on these machines)."""
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
SOCKET_DIR_MAX = 60
"""The longest ``TMPDIR`` Chromium can start under: it makes a Unix socket
``TMPDIR/org.chromium.Chromium.XXXXXX/SingletonSocket``, and a socket's path may not pass 107 bytes."""


def chromium_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment to launch Chromium with: ``environ`` (default this process's), with ``TMPDIR`` set to
    ``/tmp`` when it is longer than ``SOCKET_DIR_MAX`` bytes (Chromium would exit, "Socket path too long").

    Example:
        >>> chromium_env({"TMPDIR": "/t/" + "x" * 80})["TMPDIR"], chromium_env({"TMPDIR": "/t/short"})["TMPDIR"]
        ('/tmp', '/t/short')
    """
    env = dict(os.environ if environ is None else environ)
    if len(os.fsencode(env.get("TMPDIR", ""))) > SOCKET_DIR_MAX:
        env["TMPDIR"] = "/tmp"
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(db: str | os.PathLike[str], *, cwd: str | os.PathLike[str] | None = None,
            wait_s: float = 90.0) -> Iterator[str]:
    """``kernel-archive serve --db DB`` on a free port until the block ends; yields its URL once it answers."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "kernel_archive", "serve", "--db", str(db), "--port", str(port)],
                              cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
