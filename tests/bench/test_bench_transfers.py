"""bench/transfers.py: every way of moving references and inputs is timed, and its JSON keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "transfers.py"


def test_the_transfers_bench_times_every_method_and_size(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--device", "cpu", "--scale", "256", "--work", str(tmp_path),
                           "--json"], capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result) == {"device", "send_gb_s", "send_s", "copy_gb_s", "draw_s", "shmem_hugepages"}
    assert set(result["send_s"]) == {"two copies", "mapped", "mapped, fallocate", "mapped, populated"}  # no pinning
    assert set(result["copy_gb_s"]) == {"bytearray, one thread", "in pieces, one thread", "in pieces"}
    assert all(set(sizes) == {"16M", "128M", "512M"} and all(v > 0 for v in sizes.values())
               for sizes in result["copy_gb_s"].values())
    assert all(set(sizes) == {"16M", "128M", "512M"} and all(s > 0 for s in sizes.values())
               for sizes in result["send_s"].values())
    parts = {"cpu then copy", "on the device", "torch.save", "save_values", "torch.load, to device",
             "load_values, to device"}
    assert set(result["draw_s"]) == {"16M", "128M"} and all(set(p) == parts for p in result["draw_s"].values())
    assert list(tmp_path.iterdir()) == []
    assert "send (GB/s" in done.stdout and "one input (s)" in done.stdout and "the parent copies" in done.stdout

