"""A zygote for tests: its forked children run the file named first in their arguments, as ``python FILE`` would.

Started with ``--slot`` it is a batch slot's zygote for harness ``DIGEST``, and a child's file finds the kernel
its request carried in its global ``EMBEDDED``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verify.harness.zygote import Zygote

REPO = Path(__file__).resolve().parents[2]
DIGEST = "test-harness"
HOST = """
import runpy, sys
from verify.harness.zygote import serve

def run(rest, embedded):
    runpy.run_path(sys.argv[0], init_globals={"EMBEDDED": embedded}, run_name="__main__")
    return 0

sys.exit(serve(int(sys.argv[sys.argv.index("--channel") + 1]), run, slot="--slot" in sys.argv, digest=DIGEST))
""".replace("DIGEST", repr(DIGEST))


def with_repo(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on ``PYTHONPATH``, so the host finds ``verify``."""
    return env | {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def start_host(folder: Path, env: dict[str, str]) -> Zygote:
    """A zygote in ``folder`` whose children run plain Python files (``[python, FILE, ...]``)."""
    return Zygote.start([sys.executable, str(host_script(folder))], env=with_repo(env), cwd=folder)


def host_script(folder: Path) -> Path:
    """The test zygote's script, written into ``folder``."""
    (folder / "host.py").write_text(HOST)
    return folder / "host.py"


TASK = '''import torch


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(64, 64), torch.randn(64, 64)]


def get_init_inputs():
    return []
'''
# An honest kernel that also writes down, at import, which descriptors its process holds (in the folder PROBE).
KERNEL = '''import json, os
import torch

_FDS = {}
for _fd in os.listdir("/proc/self/fd"):
    try:
        _FDS[_fd] = os.readlink("/proc/self/fd/" + _fd)
    except OSError:
        pass
with open(os.path.join(PROBE, "fds-%d.json" % os.getpid()), "w") as _out:
    json.dump(_FDS, _out)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)
'''
