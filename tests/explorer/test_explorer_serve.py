"""``kernel-archive serve``: the Streamlit command it becomes."""

from __future__ import annotations

import subprocess
import sys

from explorer import APP_FILE
from kernel_archive.cli.commands.serve import streamlit_command


def test_serve_runs_the_explorer_headless_on_the_given_address() -> None:
    command = streamlit_command(8600, "127.0.0.1")
    assert command[:5] == [sys.executable, "-m", "streamlit", "run", str(APP_FILE)]
    assert {"--server.headless=true", "--server.port=8600", "--server.address=127.0.0.1",
            "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"} <= set(command)


def test_serve_help_teaches_by_example() -> None:
    done = subprocess.run([sys.executable, "-m", "kernel_archive", "serve", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0
    assert "kernel-archive serve --db" in done.stdout and "--port" in done.stdout
