"""Canonical GPU names from free-form device strings and file names."""

from __future__ import annotations

import pytest

from archive_db.gpus import canonical_gpu, gpu_from_path


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("h100", "H100"),
        ("H100_Modal", "H100"),
        ("NVIDIA H100 PCIe", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L4", "L4"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA RTX A6000", "RTX A6000"),
        ("NVIDIA A10G", "A10G"),
        ("  AMD Instinct MI300X ", "AMD Instinct MI300X"),
        ("", None),
        ("   ", None),
        (None, None),
    ],
)
def test_canonical_gpu(raw: str | None, canonical: str | None) -> None:
    assert canonical_gpu(raw) == canonical


def test_canonical_names_are_fixed_points() -> None:
    for name in ("H100", "A100", "GB200", "B200", "GH200", "H200", "L40S", "RTX 4090", "T4"):
        assert canonical_gpu(name) == name


@pytest.mark.parametrize(
    ("path", "gpu"),
    [
        ("../shared/data/cuda-l1/h100.jsonl", "H100"),
        ("cuda-l1/a100.jsonl", "A100"),
        ("timing/main-H100_Modal/baseline_time_torch.json", "H100"),
        ("cuda_l2_h100_F32F16F16F32_speedup_offline.csv", "H100"),
        ("results/L40S_together/x.json", "L40S"),
        ("codes-unknown.json", None),
    ],
)
def test_gpu_from_path(path: str, gpu: str | None) -> None:
    assert gpu_from_path(path) == gpu
