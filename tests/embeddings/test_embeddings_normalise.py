"""Code normalisation on real kernels: what is kept, what is dropped, and what comes first."""

from __future__ import annotations

from typing import Any

from embeddings_testing import cuda_l1_record

from embeddings.normalise import MAX_CHARS, NORMALISER, drop_checks, normalise, raw


def _sakana(rows: list[dict[str, Any]], kernel: str) -> str:
    """The archive row whose code defines ``__global__ void <kernel>(``."""
    return next(r["CUDA_Code"] for r in rows if f"__global__ void {kernel}(" in r["CUDA_Code"])


def test_cuda_binding_starts_with_the_kernel_not_the_includes(sakana_rows: list[dict[str, Any]]) -> None:
    code = _sakana(sakana_rows, "matmul_tiled_optimized_kernel")
    assert code.startswith("#include <torch/extension.h>")
    text = normalise(code, "cuda-binding")
    assert text.startswith("kernels: matmul_tiled_optimized_kernel | binds: forward: Optimized tiled matrix")
    assert "__global__ void matmul_tiled_optimized_kernel(" in text[:200]
    assert text.index("__global__") < text.index("torch::Tensor forward(")
    assert "matmul_tiled_optimized_kernel<<<blocksPerGrid, threadsPerBlock>>>" in text


def test_includes_macros_checks_and_comments_are_dropped(sakana_rows: list[dict[str, Any]]) -> None:
    code = _sakana(sakana_rows, "matmul_tiled_optimized_kernel")
    assert "TORCH_CHECK" in code and "CHECK_INPUT(A);" in code and "// " in code
    text = normalise(code, "cuda-binding", max_chars=100_000)
    for dropped in ("#include", "#define", "TORCH_CHECK", "CHECK_INPUT", "CHECK_FLOAT", "must be a CUDA tensor",
                    "Fast-path: no boundary checks needed", "//"):
        assert dropped not in text, dropped
    assert "#pragma unroll" in text
    assert "\n" not in text and "  " not in text


def test_every_archive_kernel_normalises_within_the_limit(sakana_rows: list[dict[str, Any]]) -> None:
    for row in sakana_rows:
        text = normalise(row["CUDA_Code"], "cuda-binding")
        assert 0 < len(text) <= MAX_CHARS
        assert ("__global__" in text) == ("__global__" in row["CUDA_Code"]), row["Kernel_Name"]
        assert "forward" in text


def test_model_new_puts_description_ops_and_forward_before_the_cuda(cuda_l1_rows: list[dict[str, Any]]) -> None:
    code = next(r["custom_code"] for r in cuda_l1_rows if r["custom_code"] and "load_inline" in r["custom_code"]
                and "tensor_matrix_multiply_kernel" in r["custom_code"])
    text = normalise(code, "model-new", max_chars=100_000)
    assert text.index("ops:") < text.index("kernels: tensor_matrix_multiply_kernel")
    assert text.index("def forward(self, A, B)") < text.index("__global__ void tensor_matrix_multiply_kernel(")
    assert "#include" not in text and "import torch" not in text
    assert text.count("__global__ void tensor_matrix_multiply_kernel(") == 1
    assert "Optimized tile sizes for our specific dimensions" not in text


def test_model_new_without_cuda_keeps_its_docstring_and_torch_calls(cuda_l1_rows: list[dict[str, Any]]) -> None:
    record = cuda_l1_record(cuda_l1_rows, 1, 1)
    text = normalise(record["custom_code"], "model-new")
    assert text.startswith("Simple model that performs a single square matrix multiplication")
    assert "ops: matmul" in text and "return torch.matmul(A, B)" in text
    assert "# Ensure inputs are on GPU" not in record["custom_code"].split("def forward")[0]
    assert "Ensure inputs are on GPU" not in text


def test_drop_checks_keeps_code_around_checks() -> None:
    code = 'int a = 1; TORCH_CHECK(x.is_cuda(), "x (must) be cuda"); CHECK_INPUT(y); int b = 2;'
    assert drop_checks(code) == "int a = 1; int b = 2;"
    assert drop_checks("MY_CHECK_INPUT(x); f();") == "MY_CHECK_INPUT(x); f();"


def test_broken_python_still_normalises() -> None:
    text = normalise("class ModelNew(:\n    # comment\n    x = torch.matmul(a, b)", "model-new")
    assert "torch.matmul(a, b)" in text and "comment" not in text


def test_normaliser_is_versioned_and_raw_is_the_identity() -> None:
    assert NORMALISER.startswith("kernel-code-v")
    assert raw("#include <x>\nint a;", "cuda-binding") == "#include <x>\nint a;"


def test_model_new_argument_names_come_before_its_operators(cuda_l1_rows: list[dict[str, Any]]) -> None:
    text = normalise(cuda_l1_record(cuda_l1_rows, 1, 64)["custom_code"], "model-new")  # ConvTranspose1d
    summary = text[: text.index("def forward")]
    assert "args: in_channels out_channels kernel_size stride padding output_padding groups bias x |" in summary
    assert summary.index("args:") < summary.index("ops: conv_transpose1d")


def test_math_module_calls_are_not_tensor_operators(cuda_l1_rows: list[dict[str, Any]]) -> None:
    code = cuda_l1_record(cuda_l1_rows, 1, 64)["custom_code"]
    assert "math.sqrt(5)" in code
    ops = normalise(code, "model-new").split("ops: ", 1)[1].split(" |", 1)[0].split()
    assert "sqrt" not in ops and "conv_transpose1d" in ops
    assert "ops: sqrt" in normalise("class ModelNew:\n    def forward(self, x):\n        return torch.sqrt(x)", "model-new")
