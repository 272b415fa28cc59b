"""Benchmark: what the shared precompiled torch header saves a JIT build (harness 1.22, issue 13).

A cold batch is bound by the host's CPU (``docs/verify-batch.md``), and every ``load_inline`` build compiles a
``main.cpp`` that includes ``<torch/extension.h>``. This builds ``--builds`` distinct one-function C++ extensions
twice, alternating: without a precompiled header, and with the one ``verify.harness.pch`` made first in a fresh
folder. Each build runs in its own Python process, as in a compile step, and is measured by the CPU seconds of
that process and everything it waited for (ninja, the compiler). It needs no GPU.

    python bench/pch.py              # table
    python bench/pch.py --json       # last line: JSON

JSON keys: ``builds``, ``cpu_s_without`` and ``cpu_s_with`` (median CPU seconds of one build), ``wall_s_without`` and
``wall_s_with``, ``saved_share`` (1 - with / without, CPU), ``make_cpu_s`` (the build that also made the header),
``pch_bytes`` (its size on disk), ``python``, ``compiler``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BUILD = """
import sys
from torch.utils.cpp_extension import load_inline
from verify.harness.pch import install_pch
install_pch(build=sys.argv[2] == "make")
load_inline(name=sys.argv[1], cpp_sources=["torch::Tensor f(torch::Tensor x) { return x + %d; }" % len(sys.argv[1])],
            functions=["f"], verbose=False)
"""


def build(name: str, mode: str, folder: Path, pch_dir: Path | None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one extension build in its own process; ``mode`` is make, use or none."""
    env = {k: v for k, v in os.environ.items() if k not in ("CPATH", "KA_PCH_DIR")}
    env |= {"PYTHONPATH": str(REPO), "TORCH_EXTENSIONS_DIR": str(folder / "ext")}
    if pch_dir is not None:
        env |= {"KA_PCH_DIR": str(pch_dir), "KA_PCH_AFTER": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", BUILD, name, mode], env=env, capture_output=True, text=True,
                          timeout=1800)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the build of {name} ({mode}) failed:\n{done.stderr[-3000:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def run(builds: int) -> dict[str, Any]:
    """Make the header once, then ``builds`` builds without it and with it, alternated."""
    with tempfile.TemporaryDirectory(prefix="ka-bench-pch-") as name:
        folder = Path(name)
        pch_dir = folder / "pch"
        make_cpu, _ = build("ka_bench_pch_make", "make", folder, pch_dir)
        made = list(pch_dir.glob("*/torch/extension.h.gch"))
        if not made:
            raise SystemExit(f"no precompiled header was made in {pch_dir}: {list(pch_dir.glob('*'))}")
        rows: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
        for i in range(builds):
            rows["without"].append(build(f"ka_bench_pch_n{i:03d}", "none", folder, None))
            rows["with"].append(build(f"ka_bench_pch_w{i:03d}x", "use", folder, pch_dir))
        compiler = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
        cpu = {way: statistics.median(c for c, _ in values) for way, values in rows.items()}
        wall = {way: statistics.median(w for _, w in values) for way, values in rows.items()}
        return {"builds": builds, "cpu_s_without": round(cpu["without"], 2), "cpu_s_with": round(cpu["with"], 2),
                "wall_s_without": round(wall["without"], 2), "wall_s_with": round(wall["with"], 2),
                "saved_share": round(1 - cpu["with"] / cpu["without"], 3), "make_cpu_s": round(make_cpu, 2),
                "pch_bytes": made[0].stat().st_size, "python": sys.version.split()[0],
                "compiler": compiler[0] if compiler else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--builds", type=int, default=3, help="builds each way (default 3)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = parser.parse_args()
    result = run(max(1, args.builds))
    print(f"{'way':<32} {'CPU s / build':>14} {'wall s / build':>15}")
    print(f"{'without a precompiled header':<32} {result['cpu_s_without']:>14.2f} {result['wall_s_without']:>15.2f}")
    print(f"{'with the shared one':<32} {result['cpu_s_with']:>14.2f} {result['wall_s_with']:>15.2f}")
    print(f"saved {result['saved_share']:.0%} of a build's CPU over {result['builds']} builds each way; making the header "
          f"took one build {result['make_cpu_s']:.1f} CPU s; it holds {result['pch_bytes'] / 2**20:.0f} MiB "
          f"({result['compiler']})")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
