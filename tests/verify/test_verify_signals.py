"""Signal files from the parent to its children: only the parent's, under the child's key, count."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from verify.harness.signals import (
    await_signal,
    new_key,
    read_signal,
    send_signal,
    signal_mac,
    signalled,
    wait_signal,
)


def test_a_signal_counts_only_with_its_own_mac(tmp_path: Path) -> None:
    key = new_key()
    go, done = tmp_path / "go", tmp_path / "trusted-done"
    assert read_signal(go, key) is None and not signalled(go, key)
    for forged in ("", "go", "{}", json.dumps({"mac": "0" * 64, "payload": ""}), json.dumps([1, 2]),
                   json.dumps({"mac": signal_mac(new_key(), "go"), "payload": ""}),
                   json.dumps({"mac": signal_mac(key, "go"), "payload": 1})):
        go.write_text(forged)
        assert read_signal(go, key) is None, forged
    send_signal(go, key, '{"judged": [0, 1]}')
    assert read_signal(go, key) == '{"judged": [0, 1]}'
    # A signal copied to another name, or with its payload changed, is not that signal.
    done.write_text(go.read_text())
    entry = json.loads(go.read_text())
    go.write_text(json.dumps(entry | {"payload": '{"judged": [0]}'}))
    assert read_signal(done, key) is None and read_signal(go, key) is None
    assert new_key() != key and len(key) == 32
    assert not list(tmp_path.glob(".*.tmp"))


def test_without_a_key_any_file_is_the_signal(tmp_path: Path) -> None:
    path = tmp_path / "gpu-ours"
    path.write_text("anything")
    assert read_signal(path, None) == "anything" and signalled(path, None)
    send_signal(path, None, "payload")
    assert path.read_text() == "payload"


def test_waiting_ignores_a_forged_file_until_the_parent_sends_the_signal(tmp_path: Path) -> None:
    key, path = new_key(), tmp_path / "gate-run-1"
    path.write_text("forged")
    sender = threading.Timer(0.2, send_signal, (path, key, "granted"))
    started = time.monotonic()
    sender.start()
    try:
        assert wait_signal(path, key, 10.0, poll_s=0.005) == "granted"
    finally:
        sender.cancel()
    assert time.monotonic() - started >= 0.2
    assert wait_signal(tmp_path / "never", key, 0.05) is None


def test_a_child_never_signalled_stops_instead_of_going_on(tmp_path: Path) -> None:
    key, path = new_key(), tmp_path / "trusted-done"
    path.write_text("forged")
    with pytest.raises(TimeoutError, match=r"the run child's release \(trusted-done\)"):
        await_signal(path, key, 0.05, what="the run child's release")
    send_signal(path, key, "{}")
    assert await_signal(path, key, 0.05, what="the run child's release") == "{}"


class _Channel:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, object]]] = []

    def send(self, kind: str, **fields: object) -> None:
        self.sent.append((kind, fields))


@pytest.mark.parametrize(("signals", "handed"), [(("overhead-go",), True), (("trusted-done",), False),
                                                  (("overhead-go", "trusted-done"), True)])
def test_the_run_child_is_handed_the_gpu_only_by_the_parents_overhead_go(
        tmp_path: Path, signals: tuple[str, ...], handed: bool) -> None:
    from verify.harness.roles import _handed_the_gpu

    key = new_key()
    job = {"overhead_go_file": str(tmp_path / "overhead-go"), "wait_file": str(tmp_path / "trusted-done"),
           "signal_key": key, "wait_timeout_s": 10}
    # A forged hand-over (candidate code of the compile step, same user) is no hand-over: the child waits on.
    (tmp_path / "overhead-go").write_text("forged")
    channel = _Channel()
    for name in signals:
        send_signal(tmp_path / name, key)
    assert _handed_the_gpu(job, channel) is handed
    assert channel.sent == [("mark", {"phase": "overhead-ready"})]


def test_the_run_child_waiting_for_its_hand_over_goes_on_at_its_release(tmp_path: Path) -> None:
    from verify.harness.roles import _handed_the_gpu

    key = new_key()
    job = {"overhead_go_file": str(tmp_path / "overhead-go"), "wait_file": str(tmp_path / "trusted-done"),
           "signal_key": key, "wait_timeout_s": 10}
    sender = threading.Timer(0.2, send_signal, (tmp_path / "trusted-done", key, "{}"))
    sender.start()
    try:
        assert _handed_the_gpu(job, _Channel()) is False
    finally:
        sender.cancel()
