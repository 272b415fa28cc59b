"""Helpers for the embeddings tests (a uniquely named module, importable from every test here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON Lines file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cuda_l1_record(rows: list[dict[str, Any]], level: int, task: int) -> dict[str, Any]:
    """CUDA-L1's record of KernelBench (level, task)."""
    return next(r for r in rows if r["level_id"] == level and r["task_id"] == task)
