"""The harness: the code the standalone eval script carries, kept as real modules so it is tested and linted.

``verify.script`` inlines these modules, in ``MODULES`` order, into one file that needs only the Python
standard library, torch and a CUDA toolchain. Each module may import earlier ones with a single-line
``from verify.harness.NAME import ...`` statement; the generator drops those lines because, once inlined,
every name lives in the same file.

Example:
    >>> MODULES[0]
    'common'
"""

from __future__ import annotations

MODULES: tuple[str, ...] = ("common", "signals", "fused", "zygote", "gate", "context", "static", "tensors", "frames", "memory", "task", "watch", "timing", "batons", "builds", "pch", "compiles", "float64", "roles",
                            "judge", "report", "parent")
