"""Verifying whole releases: plan, parallel builds with a shared cache, one worker per GPU, Ray beyond one host.

``plan`` orders and deduplicates the jobs (grouped by task, resumable), ``build_cache`` builds each kernel
once per toolchain into a content-addressed folder on every CPU core, ``weight`` finds the heavy kernels a batch may
put last, ``workers`` runs the eval scripts
one per GPU and streams each report to the caller, ``ray_backend`` does the same on a Ray cluster, and
``progress`` draws the live display and the summary. ``verify.pipeline.verify_jobs`` is the entry point.
See docs/verify-batch.md.

Example:
    >>> from verify.batch.plan import make_plan
    >>> make_plan([], done=()).todo
    []
"""
