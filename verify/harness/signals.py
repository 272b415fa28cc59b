"""Signal files from the parent to its children that candidate code cannot forge.

The parent tells a child when it may go on through files in the verification's folder: the GPU is this
verification's (``gpu-ours``), the compile is done (``go``), the memory plan (``plan``), each gate grant
(``gate-<role>-N``), the trusted child is gone (``trusted-done``), the GPU alone is handed over
(``overhead-go``). Candidate code runs as the same user before some of them are sent (the compile child
imports a model-new file), so it could create such a file: a run child released while its trusted child still
times the baselines could slow them down, and a trusted child's forged grant would time them beside other
kernels' work. A signal therefore carries an HMAC of its name and payload under a key of the child's role,
made fresh for each verification. The key reaches a child only in its job file, which it deletes once read
and before any candidate code starts, and lives only in non-dumpable processes until that child's own
candidate is imported. A file without the right MAC is not the signal: the child keeps waiting.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> path = Path(tempfile.mkdtemp()) / "go"
    >>> _ = path.write_text("forged")
    >>> read_signal(path, "k") is None
    True
    >>> send_signal(path, "k", "{}"); read_signal(path, "k")
    '{}'
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from pathlib import Path

from verify.harness.common import wait_until


def new_key() -> str:
    """A fresh signal key for one child of one verification."""
    return secrets.token_hex(16)


def signal_mac(key: str, name: str, payload: str = "") -> str:
    """The HMAC-SHA256 of a signal's file name and payload under ``key``."""
    return hmac.new(key.encode(), f"{name}\0{payload}".encode(), hashlib.sha256).hexdigest()


def send_signal(path: Path, key: str | None, payload: str = "") -> None:
    """Write the signal file ``path`` whole (a temporary file renamed into place); without a key, ``payload``
    alone (a child started with no key, as tests build by hand, then waits for the file to exist)."""
    text = payload if key is None else json.dumps({"mac": signal_mac(key, path.name, payload), "payload": payload})
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def read_signal(path: Path, key: str | None) -> str | None:
    """The signal's payload if ``path`` holds it with the right MAC under ``key`` (any file without a key), else
    None."""
    try:
        text = path.read_text()
    except OSError:
        return None
    if key is None:
        return text
    try:
        entry = json.loads(text)
        mac, payload = entry["mac"], entry["payload"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(mac, str) or not isinstance(payload, str):
        return None
    return payload if hmac.compare_digest(mac, signal_mac(key, path.name, payload)) else None


def signalled(path: Path, key: str | None) -> bool:
    """Whether the signal ``path`` has been sent (with the right MAC)."""
    return read_signal(path, key) is not None


def wait_signal(path: Path, key: str | None, timeout_s: float, poll_s: float = 0.01) -> str | None:
    """Wait for the signal ``path``; its payload, or None after ``timeout_s``."""
    found: list[str] = []

    def arrived() -> bool:
        payload = read_signal(path, key)
        if payload is not None:
            found.append(payload)
        return bool(found)

    wait_until(arrived, timeout_s, poll_s=poll_s)
    return found[0] if found else None


def await_signal(path: Path, key: str | None, timeout_s: float, *, what: str, poll_s: float = 0.01) -> str:
    """``wait_signal``, failing closed: a child that was never told to go on stops (``TimeoutError``, naming
    ``what`` it waited for) rather than going on without it."""
    payload = wait_signal(path, key, timeout_s, poll_s=poll_s)
    if payload is None:
        raise TimeoutError(f"the parent never sent {what} ({path.name}) in {timeout_s:.0f} s")
    return payload
