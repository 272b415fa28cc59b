"""The task taxonomy on real KernelBench references (CUDA-L1's ref_code is KernelBench v0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from embeddings_testing import cuda_l1_record

from embeddings.taxonomy import CATEGORIES, describe_task, load_taxonomy

EXPECTED = [
    (1, 1, "matmul/GEMM", ["matmul"]),
    (1, 3, "matmul/GEMM", ["bmm"]),
    (1, 11, "matmul/GEMM", ["einsum"]),
    (1, 19, "activation", ["relu"]),
    (1, 23, "activation", ["softmax"]),
    (1, 33, "normalisation", ["batchnorm2d"]),
    (1, 40, "normalisation", ["layernorm"]),
    (1, 42, "pooling", ["maxpool2d"]),
    (1, 47, "reduction", ["sum"]),
    (1, 55, "convolution", ["conv2d"]),
    (1, 57, "transposed convolution", ["convtranspose2d"]),
    (1, 82, "convolution", ["conv2d"]),
    (1, 95, "loss", ["cross_entropy"]),
    (1, 94, "loss", ["mean"]),
    (2, 1, "convolution", ["conv2d", "relu"]),
    (2, 2, "transposed convolution", ["convtranspose2d", "clamp"]),
    (2, 12, "matmul/GEMM", ["linear", "leakyrelu"]),
    (3, 1, "full architecture", ["linear", "relu"]),
    (3, 11, "full architecture", None),
    (3, 35, "recurrent", ["lstm", "linear"]),
    (3, 43, "attention", None),
]


@pytest.mark.parametrize(("level", "task", "category", "operators"), EXPECTED)
def test_real_kernelbench_tasks_get_their_category(
    cuda_l1_rows: list[dict[str, Any]], level: int, task: int, category: str, operators: list[str] | None
) -> None:
    facts = describe_task(cuda_l1_record(cuda_l1_rows, level, task)["ref_code"], level)
    assert facts.category == category
    if operators is not None:
        assert facts.operators == operators


def test_every_cuda_l1_task_gets_a_known_category(cuda_l1_rows: list[dict[str, Any]]) -> None:
    categories = {describe_task(r["ref_code"], r["level_id"]).category for r in cuda_l1_rows}
    assert categories <= set(CATEGORIES)
    assert len(categories) >= 11


def test_category_comes_from_the_code_not_the_level() -> None:
    code = "import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n        self.c = nn.Conv3d(1, 2, 3)\n"
    assert describe_task(code, level=1).category == "convolution"
    assert describe_task(code, level=3).category == "convolution"


def test_missing_or_broken_code_gets_no_category() -> None:
    assert describe_task(None).category is None
    assert describe_task("class Model(:").category is None
    assert describe_task("import torch\nx = 1\n").category == "other"


def test_rules_are_data_with_checked_names(tmp_path: Path) -> None:
    taxonomy = load_taxonomy()
    assert {r.name for r in taxonomy.rules} == set(CATEGORIES) - {"other"}
    assert [r.priority for r in taxonomy.rules] == sorted(r.priority for r in taxonomy.rules)
    bad = tmp_path / "rules.toml"
    bad.write_text('[[category]]\nname = "gemm"\npriority = 1\nany = ["mm"]\n')
    with pytest.raises(ValueError, match="unknown category 'gemm'"):
        load_taxonomy(bad)
    bad.write_text('[[category]]\nname = "loss"\npriority = 1\n')
    with pytest.raises(ValueError, match="states no condition"):
        load_taxonomy(bad)
