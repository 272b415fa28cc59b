"""Train / test split by task: a task, and every problem that shares its name, lands in one split.

The split key of a task is its lower-cased name when it has one, else its task_id: KernelBench's
``v0`` and ``main`` versions of a problem are different tasks (their sizes differ) but their kernels
are often the same code, so they share a split and no kernel text leaks from train into test. The
split is ``test`` when the first 8 bytes of sha256("kernel-archive-split-v1:" + key), read as a
fraction of 2**64, fall below ``test_size``: stable across runs, machines and archive contents.

Example:
    >>> split_of(split_key("1_Square_matrix_multiplication_", "abc"), 0.0)
    'train'
"""

from __future__ import annotations

import hashlib

SPLIT_SALT = "kernel-archive-split-v1:"
SPLITS: tuple[str, ...] = ("train", "test")


def split_key(task_name: str | None, task_id: str) -> str:
    """The key a task is split by: its name (lower-cased, stripped), else its task_id."""
    name = (task_name or "").strip().lower()
    return f"name:{name}" if name else f"task:{task_id}"


def split_fraction(key: str) -> float:
    """A stable pseudo-random number in [0, 1) for ``key``."""
    digest = hashlib.sha256((SPLIT_SALT + key).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_of(key: str, test_size: float) -> str:
    """``test`` for a ``test_size`` share of keys, else ``train``."""
    return "test" if split_fraction(key) < test_size else "train"
