"""Reading kernel source: comments blanked with line numbers kept, CUDA found inside Python files."""

from __future__ import annotations

from typing import Any

from embeddings_testing import cuda_l1_record

from embeddings.source import embedded_cuda, matching_brace, strip_comments


def test_comment_stripping_keeps_every_line(sakana_rows: list[dict[str, Any]]) -> None:
    for row in sakana_rows:
        code = row["CUDA_Code"]
        stripped = strip_comments(code, "cuda-binding")
        assert stripped.count("\n") == code.count("\n")
        assert "//" not in stripped.replace("://", "")


def test_strings_survive_and_python_comments_go() -> None:
    code = 'x = "a // b # c"  # note\nsrc = """\n// kernel note\n__global__ void k() {}\n"""\ny = a // b\n'
    stripped = strip_comments(code, "model-new")
    assert stripped.splitlines() == ['x = "a // b # c"  ', 'src = """', "", "__global__ void k() {}", '"""',
                                     "y = a // b"]


def test_cuda_sources_are_found_in_a_real_model_new_file(cuda_l1_rows: list[dict[str, Any]]) -> None:
    inline = [r for r in cuda_l1_rows if r["custom_code"] not in (None, "None") and "load_inline" in r["custom_code"]]
    assert len(inline) > 50
    for record in inline:
        sources = embedded_cuda(record["custom_code"])
        assert sources, (record["level_id"], record["task_id"])
    assert embedded_cuda(cuda_l1_record(cuda_l1_rows, 1, 1)["custom_code"]) == []


def test_matching_brace() -> None:
    text = "void f() { if (x) { y(); } } int z;"
    assert text[: matching_brace(text, text.index("{"))] == "void f() { if (x) { y(); } }"
    assert matching_brace("{ {", 0) == 3


def test_matching_brace_counts_as_a_brace_by_brace_scan_does() -> None:
    """``matching_brace`` counts the braces between closing ones with ``str.count``; every text and start gives
    what a scan of each brace in turn gives (a start that is not ``{`` included)."""
    import random
    import re

    def scanned(text: str, open_at: int) -> int:
        depth = 0
        for match in re.finditer(r"[{}]", text[open_at:]):
            depth += 1 if match.group(0) == "{" else -1
            if depth == 0:
                return open_at + match.end()
        return len(text)

    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice("{}a\n") for _ in range(rng.randrange(40)))
        for open_at in range(len(text) + 1):
            assert matching_brace(text, open_at) == scanned(text, open_at), (text, open_at)


def test_unrolled_cpp_tokens_match_the_per_character_ones() -> None:
    """``_CPP_TOKENS`` is written unrolled for speed; it must find exactly the tokens of the plain form."""
    import random
    import re

    from embeddings.source import _CPP_TOKENS

    plain = re.compile(r'"(?:\\.|[^"\\\n])*"' r"|'(?:\\.|[^'\\\n])*'" r"|//[^\n]*" r"|/\*[\s\S]*?\*/")
    rng = random.Random(0)
    texts = ["", "/**/", "/*/", "/***/ x", '"a\\"b" // c', "'\\'' /* x\n*/", '"open\n"', "a /* never closed"]
    texts += ["".join(rng.choice("\"'\\/*\na ") for _ in range(rng.randint(1, 14))) for _ in range(20_000)]
    for text in texts:
        assert [m.span() for m in _CPP_TOKENS.finditer(text)] == [m.span() for m in plain.finditer(text)], repr(text)
