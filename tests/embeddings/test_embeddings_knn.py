"""The k-NN graph and the exact cosine index against brute force."""

from __future__ import annotations

import numpy as np

from embeddings.knn import ExactCosineIndex, knn_graph, top_k, unit


def _brute(vectors: np.ndarray, k: int) -> np.ndarray:
    v = unit(vectors)
    sims = v @ v.T
    np.fill_diagonal(sims, -np.inf)
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]


def test_graph_puts_self_first_then_exact_neighbours_by_distance() -> None:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    graph = knn_graph(vectors, 11)
    assert graph.indices.shape == graph.distances.shape == (300, 11)
    assert (graph.indices[:, 0] == np.arange(300)).all() and (graph.distances[:, 0] == 0).all()
    assert (graph.indices[:, 1:] == _brute(vectors, 10)).all()
    assert (np.diff(graph.distances, axis=1) >= -1e-6).all()
    v = unit(vectors)
    expected = 1 - np.einsum("ij,ij->i", v, v[graph.indices[:, 1]])
    assert np.allclose(graph.distances[:, 1], expected, atol=1e-5)


def test_top_k_excludes_the_query_itself_and_caps_k() -> None:
    v = unit(np.eye(4, dtype=np.float32) + 0.1)
    indices, distances = top_k(v, v, 10, exclude=np.arange(4))
    assert indices.shape == (4, 3)
    assert all(i not in row for i, row in enumerate(indices))


def test_exact_index_answers_like_pynndescent_query() -> None:
    rng = np.random.default_rng(2)
    base = unit(rng.normal(size=(200, 8)).astype(np.float32))
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    indices, distances = ExactCosineIndex(base).query(queries, k=4, epsilon=0.1)
    sims = unit(queries) @ base.T
    assert indices.dtype == np.int32 and indices.shape == (5, 4)
    assert (indices[:, 0] == sims.argmax(axis=1)).all()
    assert np.allclose(distances[:, 0], 1 - sims.max(axis=1), atol=1e-5)
