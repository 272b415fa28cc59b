"""Strategy tags with their evidence lines, on real kernels from the archive sample and CUDA-L1."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from embeddings_testing import cuda_l1_record

from embeddings.strategies import LIBRARY_TAG, literal_prefix, load_rules, tag_kernel, tag_kernels
from embeddings.taxonomy import CATEGORIES


def _row(rows: list[dict[str, Any]], kernel_name: str) -> str:
    return next(r["CUDA_Code"] for r in rows if r["Kernel_Name"] == kernel_name)


def _tags(code: str, form: str = "cuda-binding") -> dict[str, tuple[int, str]]:
    return {t.tag: (t.line, t.evidence) for t in tag_kernel(code, form)}


@pytest.mark.parametrize(
    ("kernel_name", "tag", "evidence"),
    [
        ("tiled_opt_base", "shared-memory-tiling", "__shared__ float As[TILE_SIZE][TILE_SIZE];"),
        ("warp_shfl_matmul_base", "warp-shuffles", "__shfl_down_sync"),
        ("streamed_conv2d_relu_bias_base", "streams", "cudaStream_t streams["),
        ("atomic_reduction_optimization_base_base", "atomics", "atomicAdd"),
        ("strided_conv2d_relu_bias_base", "grid-stride-loops", "for ("),
        ("strided_conv2d_relu_bias_base", "kernel-fusion", "__global__ void conv2d_relu_bias_kernel_strided("),
        ("aligned_vectorized_matmul_base_base", "vectorised-loads", ""),
        ("block_size_optimized_base", "loop-unrolling", "#pragma unroll"),
        ("block_size_optimized_base", "restrict", "__restrict__"),
    ],
)
def test_real_archive_kernels_get_tags_with_their_line(
    sakana_rows: list[dict[str, Any]], kernel_name: str, tag: str, evidence: str
) -> None:
    code = _row(sakana_rows, kernel_name)
    found = _tags(code)
    assert tag in found, sorted(found)
    line, text = found[tag]
    assert evidence in text
    assert code.splitlines()[line - 1].strip().startswith(text[:40])


def test_plain_tiled_matmul_has_no_library_call_or_tensor_cores(sakana_rows: list[dict[str, Any]]) -> None:
    found = _tags(_row(sakana_rows, "tiled_opt_base"))
    assert LIBRARY_TAG not in found and "tensor-cores" not in found and "atomics" not in found


def test_cuda_l1_matmul_calling_torch_matmul_is_a_library_call(cuda_l1_rows: list[dict[str, Any]]) -> None:
    code = cuda_l1_record(cuda_l1_rows, 1, 1)["custom_code"]
    line, evidence = _tags(code, "model-new")[LIBRARY_TAG]
    assert evidence == "return torch.matmul(A, B)"
    assert code.splitlines()[line - 1].strip() == evidence


def test_archive_kernel_built_on_aten_is_a_library_call(sakana_rows: list[dict[str, Any]]) -> None:
    code = _row(sakana_rows, "optimized_mlp_forward_base")
    assert "__global__" not in code
    _, evidence = _tags(code)[LIBRARY_TAG]
    assert re.search(r"(at|torch)::\w+\(|\.(mm|matmul|addmm)\(", evidence)


def test_comments_and_word_fragments_earn_nothing() -> None:
    code = (
        "// we could use __shared__ memory and atomicAdd here\n"
        "/* float4 loads, #pragma unroll */\n"
        "__global__ void k(float* x) { x[0] = my_atomicAdd_free(1.f); }\n"
    )
    assert _tags(code) == {}


def test_python_rules_apply_only_to_model_new() -> None:
    code = "y = F.conv2d(x, w)\n"
    assert LIBRARY_TAG in _tags(code, "model-new")
    assert LIBRARY_TAG not in _tags(code, "cuda-binding")


def test_set_wise_tagging_matches_one_at_a_time(sakana_rows: list[dict[str, Any]], cuda_l1_rows: list[dict[str, Any]]) -> None:
    kernels = [(f"s{i}", r["CUDA_Code"], "cuda-binding") for i, r in enumerate(sakana_rows)]
    kernels += [(f"c{i}", r["custom_code"], "model-new") for i, r in enumerate(cuda_l1_rows[:60])
                if r["custom_code"] not in (None, "None")]
    together = tag_kernels(kernels)
    assert set(together) == {k for k, _, _ in kernels}
    for kernel_id, code, form in kernels:
        assert together[kernel_id] == tag_kernel(code, form), kernel_id


def test_rules_are_data_with_descriptions(tmp_path: Path) -> None:
    rules = load_rules()
    described = rules.describe()
    expected = {"shared-memory-tiling", "vectorised-loads", "warp-shuffles", "loop-unrolling", "kernel-fusion",
                "tensor-cores", "cuda-graphs", "streams", "atomics", "grid-stride-loops", "cooperative-groups",
                "restrict", LIBRARY_TAG}
    assert expected <= set(described)
    assert all(described[name] for name in described)
    assert all(literal_prefix(p.pattern) for rule in rules.tags for p in rule.patterns)
    assert not set(described) & set(CATEGORIES)
    bad = tmp_path / "rules.toml"
    bad.write_text('[[tag]]\nname = "x"\npatterns = ["("]\n[fusion]\nname = "f"\nname_pattern = "f"\n[fusion.families]\n')
    with pytest.raises(ValueError, match="rule 'x' has a bad pattern"):
        load_rules(bad)


def test_literal_prefix() -> None:
    assert literal_prefix(r"__shared__\b") == "__shared__"
    assert literal_prefix(r"torch\.cuda\.Stream\s*\(") == "torch.cuda.Stream"
    assert literal_prefix(r"float[24]\b") == "float"
    assert literal_prefix(r"atomics?") == "atomic"
    assert literal_prefix(r"(?:a|b)") == ""


def _tags_one_pattern_at_a_time(code: str, form: str) -> list[tuple[str, int, str]]:
    """The tags as the rules define them, each pattern searched on its own (what PatternSet must reproduce)."""
    from embeddings.source import matching_brace, strip_comments
    from embeddings.strategies import _GLOBAL, _line_at, word_search

    rules = load_rules()
    text = strip_comments(code, form)
    seen: dict[str, int] = {}
    for rule in rules.tags:
        if rule.applies_to(form):
            for pattern in rule.patterns:
                hit = word_search(pattern, text)
                if hit is not None and hit < seen.get(rule.name, len(text) + 1):
                    seen[rule.name] = hit
    fusion = rules.fusion
    for match in _GLOBAL.finditer(text):
        body = text[match.end() - 1 : matching_brace(text, match.end() - 1)]
        families = sum(any(word_search(p, body) is not None for p in group) for _, group in fusion.families)
        if (fusion.name_pattern.search(match[1]) or families >= 2) and fusion.name not in seen:
            seen[fusion.name] = match.start()
    return [(name, *_line_at(text, position)) for name, position in sorted(seen.items())]


def test_tags_equal_each_pattern_searched_on_its_own(sakana_rows: list[dict[str, Any]],
                                                     cuda_l1_rows: list[dict[str, Any]]) -> None:
    kernels = [(r["CUDA_Code"], form) for r in sakana_rows for form in ("cuda-binding", "model-new")]
    kernels += [(r["custom_code"], "model-new") for r in cuda_l1_rows if r["custom_code"] not in (None, "None")]
    kernels += [("x\ud800 = 1; __global__ void fuse_k(float* __restrict__ a) { a[0] += b * c; }", "cuda-binding")]
    assert sum(bool(tag_kernel(code, form)) for code, form in kernels) > len(kernels) // 2
    for code, form in kernels:
        assert [(t.tag, t.line, t.evidence) for t in tag_kernel(code, form)] == _tags_one_pattern_at_a_time(code, form)


def test_pattern_set_finds_each_patterns_first_word_start_match() -> None:
    from embeddings.strategies import SHORT_PREFIX, PatternSet, word_search

    patterns = [re.compile(p) for p in (r"cublas\w*\s*\(", r"cublasLt\w*", r"\.(?:mm|bmm)\s*\(", r"int[24]\b",
                                        r"(?:red|blue)\b", r"#\s*pragma\s+unroll\b")]
    matcher = PatternSet(patterns)
    assert any(len(literal_prefix(p.pattern)) < SHORT_PREFIX for p in patterns)
    texts = ["print(x); int4 v; cublasLtMatmul(h); cublasSgemm(h); a.mm(b); #pragma unroll", "blue red", "",
             "uint2 x; int2 y; x.bmm (z)", "sur\ud800rogate int4 #  pragma unroll 4 cublasLtX"]
    for text in texts:
        expected = {i: hit for i, p in enumerate(patterns) if (hit := word_search(p, text)) is not None}
        assert matcher.first_matches(text) == expected, text
    assert matcher.first_matches(texts[0])[1] == texts[0].index("cublasLt")
    assert 3 not in matcher.first_matches("uint4 x;")  # int4 inside uint4 does not begin a word
