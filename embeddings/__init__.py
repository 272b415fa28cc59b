"""Code embeddings, related kernels, the 2-D code map, task categories and strategy tags.

Modules, one concept each:

- ``source``: comments blanked with line numbers kept; CUDA found inside Python files;
- ``normalise``: the text a kernel is embedded as (versioned by ``NORMALISER``);
- ``encoder``: the sentence-transformers model (offline default, int8 on CPU);
- ``knn``: the k-NN graph shared by the neighbours table and the map;
- ``layout``: UMAP fit / transform and the pickled reducer;
- ``pipeline``: ``kernel-archive embed`` (incremental);
- ``taxonomy`` + ``taxonomy_rules.toml``: task operators and category;
- ``strategies`` + ``strategy_rules.toml``: strategy tags with evidence;
- ``annotate``: the ingest hook that fills categories and tags.

Heavy libraries (torch, sentence-transformers, umap) are imported inside the functions that use them.

Example:
    >>> from embeddings.annotate import annotate  # the post-write hook of `kernel-archive ingest`
"""
