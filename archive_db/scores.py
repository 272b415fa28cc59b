"""What each named score in ``measurement_scores`` means, declared as data.

Example:
    >>> SCORES["cuda_l1.speedup_cuda_graph"].higher_is_better
    True
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScoreKind:
    """Metadata of a named score."""

    name: str
    description: str
    unit: str = "x"
    higher_is_better: bool = True


_KINDS = (
    ScoreKind("cuda_l1.speedup_default", "CUDA-L1: reference (eager) time / kernel time"),
    ScoreKind("cuda_l1.speedup_torch_compile_default", "CUDA-L1: torch.compile (default) time / kernel time"),
    ScoreKind(
        "cuda_l1.speedup_torch_compile_reduce_overhead",
        "CUDA-L1: torch.compile (mode=reduce-overhead) time / kernel time",
    ),
    ScoreKind("cuda_l1.speedup_cuda_graph", "CUDA-L1: CUDA-graph reference time / kernel time"),
    ScoreKind("cuda_l1.speedup_cudnn", "CUDA-L1: cuDNN-flagged reference time / kernel time"),
    ScoreKind("cuda_l1.score", "CUDA-L1 (level-keyed release): the released speedup score"),
    ScoreKind("verify.speedup_cuda_graph", "kernel-archive verify: CUDA-graph replay of the reference / kernel time"),
    ScoreKind("robust_kbench.cuda_api_cost", "robust-kbench: LLM API cost of generating the kernel", "USD", False),
    ScoreKind("robust_kbench.verifier_aggregated", "robust-kbench: aggregated LLM-verifier score", "score"),
)

CUDA_L2_BASELINES = (
    "torch.matmul",
    "cuBLAS-tn",
    "cuBLAS-nn",
    "cuBLAS-max",
    "cuBLASLt-heuristic-tn",
    "cuBLASLt-heuristic-nn",
    "cuBLASLt-heuristic-max",
    "cuBLASLt-auto-tuning-tn",
    "cuBLASLt-auto-tuning-nn",
    "cuBLASLt-auto-tuning-max",
)

SCORES: dict[str, ScoreKind] = {k.name: k for k in _KINDS} | {
    f"cuda_l2.speedup_vs_{b}": ScoreKind(f"cuda_l2.speedup_vs_{b}", f"CUDA-L2: {b} time / CUDA-L2 kernel time")
    for b in CUDA_L2_BASELINES
}


def describe(name: str) -> ScoreKind:
    """The declared kind of a score, or a neutral description for one not declared."""
    return SCORES.get(name, ScoreKind(name, name))
