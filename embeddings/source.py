"""Reading kernel source text: comments blanked (line numbers kept), CUDA found inside Python files.

Kernels come as CUDA/C++ files (``cuda-binding``, ``cuda-source``) or as Python files defining
``class ModelNew`` that often carry CUDA source in string literals for ``load_inline`` (``model-new``).
Both the strategy tags and the embedding normaliser need the code without comments, and the tags need
the original line numbers, so comments are replaced by blanks of the same line structure.

Example:
    >>> strip_comments("int a; // note\\n/* x\\n y */ int b;", "cuda-binding")
    'int a; \\n\\n int b;'
"""

from __future__ import annotations

import re

PYTHON_FORMS = frozenset({"model-new"})

# Each token written "unrolled" (runs of plain characters between escapes; a block comment as runs of
# non-stars between stars): the same matches as ``"(?:\\.|[^"\\\n])*"`` and ``/\*[\s\S]*?\*/``, without a
# step of the regex engine per character, which halves the time of stripping the archive's kernels.
_CPP_TOKENS = re.compile(
    r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
    r"|//[^\n]*"
    r"|/\*[^*]*\*+(?:[^/*][^*]*\*+)*/"
)
_PY_TOKENS = re.compile(
    r'[rRbBuUfF]{0,2}"""[\s\S]*?"""'
    r"|[rRbBuUfF]{0,2}'''[\s\S]*?'''"
    r'|[rRbBuUfF]{0,2}"""[\s\S]*'  # unterminated (a broken file): the rest of it
    r"|[rRbBuUfF]{0,2}'''[\s\S]*"
    r'|[rRbBuUfF]{0,2}"(?:\\.|[^"\\\n])*"'
    r"|[rRbBuUfF]{0,2}'(?:\\.|[^'\\\n])*'"
    r"|#[^\n]*"
)
_TRIPLE = re.compile(r'^([rRbBuUfF]{0,2})("""|\'\'\')([\s\S]*?)\2?$')


def _blank(text: str) -> str:
    """The same number of newlines as ``text`` (a comment's footprint)."""
    return "\n" * text.count("\n")


def _strip_cpp_match(match: re.Match[str]) -> str:
    token = match.group(0)
    return _blank(token) if token.startswith("/") else token


def strip_cpp_comments(code: str) -> str:
    """C/C++/CUDA code with ``//`` and ``/* */`` comments removed, newlines kept."""
    return _CPP_TOKENS.sub(_strip_cpp_match, code)


def _strip_py_match(match: re.Match[str]) -> str:
    token = match.group(0)
    if token.startswith("#"):
        return ""
    triple = _TRIPLE.match(token)
    if triple:
        prefix, quote, body = triple.groups()
        closing = quote if token.endswith(quote) and len(token) >= len(prefix) + 6 else ""
        return f"{prefix}{quote}{strip_cpp_comments(body)}{closing}"
    return token


def strip_python_comments(code: str) -> str:
    """Python code with ``#`` comments removed; C++ comments inside triple-quoted strings removed too."""
    return _PY_TOKENS.sub(_strip_py_match, code)


def strip_comments(code: str, form: str) -> str:
    """Comments blanked according to the kernel's form, line numbers unchanged."""
    if form in PYTHON_FORMS:
        return strip_python_comments(code)
    return strip_cpp_comments(code)


_CUDA_MARKERS = ("__global__", "__device__", "<<<", "PYBIND11_MODULE", "torch::Tensor", "at::Tensor")


def embedded_cuda(code: str) -> list[str]:
    """The CUDA/C++ sources held in string literals of a Python file, in file order.

    Example:
        >>> embedded_cuda('src = \"\"\"__global__ void k() {}\"\"\"\\nx = 1')
        ['__global__ void k() {}']
    """
    found: list[str] = []
    for match in _PY_TOKENS.finditer(code):
        token = match.group(0)
        triple = _TRIPLE.match(token)
        body = triple.group(3) if triple else None
        if body is None and not token.startswith("#"):
            body = token.strip("rRbBuUfF")[1:-1]
        if body and any(marker in body for marker in _CUDA_MARKERS):
            found.append(body)
    return found


_BRACES = re.compile(r"[{}]")


def matching_brace(text: str, open_at: int) -> int:
    """Index just past the ``}`` closing the ``{`` at ``open_at`` (or len(text) if unbalanced).

    Example:
        >>> matching_brace("f() { if (x) { y; } } z", 4)
        21
    """
    if not text.startswith("{", open_at):
        return _matching_brace_scan(text, open_at)
    depth, at = 1, open_at + 1
    while (close := text.find("}", at)) >= 0:
        # every ``{`` before the next ``}`` opens a level that ``}`` and later ones must close first
        depth += text.count("{", at, close) - 1
        if depth == 0:
            return close + 1
        at = close + 1
    return len(text)


def _matching_brace_scan(text: str, open_at: int) -> int:
    depth = 0
    for match in _BRACES.finditer(text, open_at):
        depth += 1 if match.group(0) == "{" else -1
        if depth == 0:
            return match.end()
    return len(text)
