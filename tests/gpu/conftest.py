"""Every GPU test skips, with the reason, where torch sees no CUDA GPU (CI has none)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def _cuda() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
