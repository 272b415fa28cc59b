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

import importlib
import pickle
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np

from embeddings.knn import ExactCosineIndex, KnnGraph, unit

N_NEIGHBOURS = 15
MIN_DIST = 0.1
MIN_POINTS = 4
_UMAP_MODULES = ("umap.umap_", "umap.layouts", "umap.utils", "umap.distances", "umap.sparse", "umap.spectral")


@cache
def import_umap() -> ModuleType:
    """``umap``, imported quietly, with numba's on-disk cache switched on for its compiled functions.

    UMAP asks numba to cache almost none of its functions, so every process compiled ``transform``
    afresh: seconds of an incremental ``embed`` that places 100 kernels. ``Dispatcher.enable_caching``
    is what ``@njit(cache=True)`` itself calls; numba keys the cache on the source file and its own
    version, and writes it next to the module (or in the user's cache folder when that is read-only).
    """
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        umap = importlib.import_module("umap")
        for name in _UMAP_MODULES:
            for value in vars(importlib.import_module(name)).values():
                if isinstance(value, Dispatcher) and isinstance(value._cache, NullCache):
                    value.enable_caching()
    return umap


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
    umap = import_umap()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
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
    (LLVM and torch both release the GIL); from the second process on, numba's cache (``import_umap``)
    turns the compile into a load. ``umap`` is imported here, in the caller's thread, so the two
    threads never import the same modules at once.
    """
    import_umap()

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
    import_umap()  # registers the classes pickle needs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pickle.loads(blob)
