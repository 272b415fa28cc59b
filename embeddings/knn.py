"""The k-nearest-neighbour graph of the embeddings (cosine), computed once and used twice.

The same graph feeds UMAP (as ``precomputed_knn``) and the archive's ``neighbours`` table. Up to
``EXACT_LIMIT`` vectors it is exact: blocked matrix products of unit vectors, a few seconds for 30,000
kernels. Above that it is approximate, through pynndescent (what UMAP itself would use).

Example:
    >>> import numpy as np
    >>> v = np.eye(3, dtype=np.float32)
    >>> graph = knn_graph(v, 2)
    >>> graph.indices[:, 0].tolist()
    [0, 1, 2]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

EXACT_LIMIT = 80_000
BLOCK = 2048


@dataclass
class KnnGraph:
    """Row i: the k nearest points to point i, itself first (distance 0), then by cosine distance."""

    indices: np.ndarray
    distances: np.ndarray
    search_index: Any = None


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (zero rows left as they are)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


def top_k(queries: np.ndarray, base: np.ndarray, k: int, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k of each unit query row among unit ``base`` rows, nearest first.

    ``exclude[i]`` (if given) is a base index that query i may not return (itself).
    Returns (indices, distances), each of shape (len(queries), min(k, available)).
    """
    import torch

    k = min(k, base.shape[0] - (1 if exclude is not None else 0))
    indices = np.empty((queries.shape[0], max(k, 0)), dtype=np.int64)
    distances = np.empty((queries.shape[0], max(k, 0)), dtype=np.float32)
    if k <= 0:
        return indices, distances
    base_t = torch.from_numpy(np.ascontiguousarray(base, dtype=np.float32))
    with torch.inference_mode():
        for start in range(0, queries.shape[0], BLOCK):
            block = torch.from_numpy(np.ascontiguousarray(queries[start : start + BLOCK], dtype=np.float32))
            sims = block @ base_t.T
            if exclude is not None:
                rows = torch.arange(sims.shape[0])
                sims[rows, torch.from_numpy(exclude[start : start + BLOCK])] = -torch.inf
            values, found = torch.topk(sims, k, dim=1, largest=True, sorted=True)
            indices[start : start + BLOCK] = found.numpy()
            distances[start : start + BLOCK] = 1.0 - values.numpy()
    np.clip(distances, 0.0, 2.0, out=distances)
    return indices, distances


def knn_graph(vectors: np.ndarray, k: int) -> KnnGraph:
    """The k-NN graph (self included as the first neighbour) of ``vectors`` under cosine distance."""
    vectors = unit(vectors)
    n = vectors.shape[0]
    if n > EXACT_LIMIT:
        from pynndescent import NNDescent

        index = NNDescent(vectors, metric="cosine", n_neighbors=k, low_memory=True, compressed=False)
        indices, distances = index.neighbor_graph
        return KnnGraph(indices.astype(np.int64), distances.astype(np.float32), index)
    others, distances = top_k(vectors, vectors, k - 1, exclude=np.arange(n))
    indices = np.concatenate([np.arange(n)[:, None], others], axis=1)
    distances = np.concatenate([np.zeros((n, 1), dtype=np.float32), distances], axis=1)
    return KnnGraph(indices, distances)


class ExactCosineIndex:
    """Exact cosine search over the fitted vectors, with the ``query`` interface UMAP's transform calls.

    UMAP places new points through its search index (pynndescent's ``NNDescent.query``); when the graph
    was computed exactly, this stands in for it, so ``transform`` uses exact neighbours too. ``vectors``
    must have unit rows; the array is kept as given (it is the same array UMAP keeps as its training data,
    so pickling the reducer stores it once).
    """

    _angular_trees = True

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors

    def query(self, queries: np.ndarray, k: int = 10, epsilon: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(indices, cosine distances) of the k nearest fitted vectors to each query row."""
        indices, distances = top_k(unit(np.asarray(queries, dtype=np.float32)), self.vectors, k)
        return indices.astype(np.int32), distances
