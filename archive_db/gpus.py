"""Canonical GPU names, so that 'NVIDIA H100 80GB HBM3', 'h100' and 'H100_Modal' compare equal.

The table is data: add a row to teach the archive a new GPU.

Example:
    >>> canonical_gpu("NVIDIA H100 80GB HBM3")
    'H100'
"""

from __future__ import annotations

import re

GPU_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"gh200", "GH200"),
    (r"h200", "H200"),
    (r"h100", "H100"),
    (r"h800", "H800"),
    (r"h20\b", "H20"),
    (r"gb200", "GB200"),
    (r"b200", "B200"),
    (r"a100", "A100"),
    (r"a800", "A800"),
    (r"a10g", "A10G"),
    (r"a6000", "RTX A6000"),
    (r"l40s", "L40S"),
    (r"l40\b", "L40"),
    (r"\bl4\b", "L4"),
    (r"v100", "V100"),
    (r"t4\b", "T4"),
    (r"rtx ?4090", "RTX 4090"),
    (r"rtx ?3090", "RTX 3090"),
    (r"rtx ?5090", "RTX 5090"),
)


def canonical_gpu(name: str | None) -> str | None:
    """Map a free-form GPU description to a short canonical name; unknown names pass through trimmed."""
    if name is None:
        return None
    text = name.strip()
    if not text:
        return None
    lowered = text.lower().replace("_", " ").replace("-", " ")
    for pattern, canonical in GPU_PATTERNS:
        if re.search(pattern, lowered):
            return canonical
    return text


def gpu_from_path(path: str) -> str | None:
    """The GPU a file name or path mentions (``h100.jsonl`` -> ``H100``), or None."""
    lowered = path.lower().replace("_", " ").replace("-", " ")
    for pattern, canonical in GPU_PATTERNS:
        if re.search(pattern, lowered):
            return canonical
    return None
