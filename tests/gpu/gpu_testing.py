"""Where the GPU suite's real rows are (a uniquely named module, importable from every test here)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GPU_DATA = Path(os.environ.get("KA_GPU_DATA", REPO / ".gpu_data"))
"""Rows copied from ../shared/data by tests/gpu/copy_gpu_data.py (the device machine gets only the repo)."""
