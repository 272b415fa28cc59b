"""The 2-D map: UMAP (cosine) fitted once per archive state, later kernels placed with ``transform``.

UMAP gets the k-NN graph computed by ``embeddings.knn`` (``precomputed_knn``), so the graph behind the
``neighbours`` table and the map is computed once. The fitted reducer is pickled into
``layouts.fitted_model``; its search index is pynndescent's for large archives, or an exact cosine index
(``embeddings.knn.ExactCosineIndex``) when the graph was exact.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> v = rng.normal(size=(40, 8)).astype(np.float32)
    >>> from embeddings.knn import knn_graph
    >>> coords, reducer = fit_layout(v, knn_graph(v, layout_neighbours(40)), seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import pickle
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from embeddings.knn import ExactCosineIndex, KnnGraph, unit

N_NEIGHBOURS = 15
MIN_DIST = 0.1
MIN_POINTS = 4

def layout_neighbours(n: int) -> int:
    """UMAP's n_neighbors for ``n`` points: 15, or fewer for tiny archives."""
    return max(2, min(N_NEIGHBOURS, n - 1))


def umap_params(n: int, seed: int | None) -> dict[str, Any]:
    """The UMAP settings recorded with a layout."""
    return {
        "n_neighbors": layout_neighbours(n),
        "min_dist": MIN_DIST,
        "metric": "cosine",
        "n_components": 2,
        "random_state": seed,
    }


def fit_layout(vectors: np.ndarray, graph: KnnGraph, seed: int | None = None) -> tuple[np.ndarray, Any]:
    """Fit UMAP on unit ``vectors`` with the precomputed ``graph``; returns (n x 2 coordinates, reducer).

    Raises:
        ValueError: fewer than ``MIN_POINTS`` vectors (no meaningful map).
    """
    n = vectors.shape[0]
    if n < MIN_POINTS:
        raise ValueError(f"a map needs at least {MIN_POINTS} kernels with code; the archive has {n}")
    vectors = unit(vectors)
    params = umap_params(n, seed)
    k = params["n_neighbors"]
    index = graph.search_index if graph.search_index is not None else ExactCosineIndex(vectors)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import umap

        reducer = umap.UMAP(
            **params,
            precomputed_knn=(graph.indices[:, :k], graph.distances[:, :k], index),
            low_memory=True,
            n_jobs=1 if seed is not None else -1,
        )
        coords = reducer.fit_transform(vectors)
    return np.asarray(coords, dtype=np.float64), reducer


def place(reducer: Any, vectors: np.ndarray) -> np.ndarray:
    """Coordinates of new kernels in an existing map (UMAP ``transform``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(reducer.transform(unit(vectors)), dtype=np.float64)


def prewarm(blob: bytes, dim: int) -> Future[Any]:
    """Load a stored reducer and compile its ``transform`` in a background thread.

    Unpickling a 30k-point reducer and numba's first compile of ``transform`` take seconds, and need
    nothing but the blob: started before encoding, they overlap with loading and running the encoder
    (LLVM and torch both release the GIL). ``umap`` is imported here, in the caller's thread, so the
    two threads never import the same modules at once.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import umap  # noqa: F401

    def load_and_compile() -> Any:
        reducer = load_reducer(blob)
        place(reducer, np.random.default_rng(0).standard_normal((2, dim)).astype(np.float32))
        return reducer

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="umap-prewarm")
    try:
        return executor.submit(load_and_compile)
    finally:
        executor.shutdown(wait=False)


def dump_reducer(reducer: Any) -> bytes:
    """The fitted reducer as bytes for ``layouts.fitted_model``."""
    return pickle.dumps(reducer, protocol=pickle.HIGHEST_PROTOCOL)


def load_reducer(blob: bytes) -> Any:
    """A reducer stored by :func:`dump_reducer` (only ever one this archive wrote itself)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import umap  # noqa: F401  (registers the classes pickle needs)

        return pickle.loads(blob)
