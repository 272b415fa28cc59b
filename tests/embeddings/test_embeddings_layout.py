"""The map's UMAP: numba's on-disk cache is on for UMAP's compiled functions, so placing kernels in a
later process loads machine code instead of compiling it again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba.core.caching import FunctionCache

from embeddings.knn import knn_graph
from embeddings.layout import fit_layout, import_umap, layout_neighbours, place


def test_umap_functions_cache_their_machine_code() -> None:
    import_umap()
    from umap.layouts import clip, rdist
    from umap.umap_ import compute_membership_strengths, smooth_knn_dist

    for function in (smooth_knn_dist, compute_membership_strengths, clip, rdist):
        assert isinstance(function._cache, FunctionCache), function.__name__


def test_placing_kernels_writes_the_cache_for_the_next_process() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(60, 16)).astype(np.float32)
    coords, reducer = fit_layout(vectors, knn_graph(vectors, layout_neighbours(60)), seed=0)
    placed = place(reducer, rng.normal(size=(3, 16)).astype(np.float32))
    assert coords.shape == (60, 2) and placed.shape == (3, 2) and np.isfinite(placed).all()
    from umap.umap_ import smooth_knn_dist

    assert smooth_knn_dist.stats.cache_misses or smooth_knn_dist.stats.cache_hits
    index = Path(smooth_knn_dist._cache._cache_file._index_path)
    assert index.suffix == ".nbi" and index.exists()
