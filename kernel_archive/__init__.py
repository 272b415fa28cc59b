"""kernel-archive: collect, understand, re-verify and publish LLM-generated GPU kernels."""

__version__ = "0.1.0"
