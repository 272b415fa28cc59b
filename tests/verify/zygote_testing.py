"""A zygote for tests: its forked children run the file named first in their arguments, as ``python FILE`` would."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verify.harness.zygote import Zygote

REPO = Path(__file__).resolve().parents[2]
HOST = """
import runpy, sys
from verify.harness.zygote import serve

def run(rest):
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0

sys.exit(serve(int(sys.argv[sys.argv.index("--channel") + 1]), run))
"""


def with_repo(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on ``PYTHONPATH``, so the host finds ``verify``."""
    return env | {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def start_host(folder: Path, env: dict[str, str]) -> Zygote:
    """A zygote in ``folder`` whose children run plain Python files (``[python, FILE, ...]``)."""
    (folder / "host.py").write_text(HOST)
    return Zygote([sys.executable, str(folder / "host.py")], env=with_repo(env), cwd=folder)
