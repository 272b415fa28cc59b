"""Near-duplicate kernels: the normalised code two kernels must share to count as one.

Definition (``NORMALISER_VERSION`` 1). A kernel's code is normalised by

1. removing comments: for Python files (form ``model-new``) every ``#`` comment token (Python's
   ``tokenize``), and inside Python string literals, which carry the inline CUDA source, C/C++ ``//``
   and ``/* */`` comments; for C/C++/CUDA files (every other form) ``//`` and ``/* */`` comments
   outside string and character literals;
2. removing every whitespace character (spaces, tabs, newlines), everywhere.

Two kernels of the same task are near-duplicates when their normalised codes are equal (compared by
sha256, ``code_fingerprint``). Renamed identifiers, reordered statements or changed constants make a
different kernel. Code that Python cannot tokenize is treated as C/C++.

Example:
    >>> a = "__global__ void k(float* x) { // scale\\n  x[0] *= 2; }"
    >>> b = "/* v2 */ __global__ void k(float* x){x[0]*=2;}"
    >>> code_fingerprint(a, "cuda-binding") == code_fingerprint(b, "cuda-binding")
    True
"""

from __future__ import annotations

import hashlib
import io
import re
import tokenize

NORMALISER_VERSION = 1
PYTHON_FORMS: frozenset[str] = frozenset({"model-new"})

# Runs of plain text, string/char literals, comments, or a lone slash: one match per piece, in order.
_C_PIECES = re.compile(
    r"""[^"'/]+|(?P<literal>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(?P<comment>//[^\n]*|/\*.*?\*/)|.""",
    re.DOTALL,
)
_PY_STRING = re.compile(r"""(?P<prefix>[A-Za-z]*)(?P<quote>\"\"\"|'''|"|')""")


def strip_c_comments(code: str) -> str:
    """C/C++ code without ``//`` and ``/* */`` comments (string and char literals are kept)."""
    if "/" not in code:
        return code
    return "".join(" " if m.group("comment") is not None else m.group(0) for m in _C_PIECES.finditer(code))


def _strip_string_body(literal: str) -> str:
    match = _PY_STRING.match(literal)
    if match is None:
        return literal
    head = match.end()
    tail = len(literal) - len(match.group("quote"))
    return literal[:head] + strip_c_comments(literal[head:tail]) + literal[tail:]


def _strip_python_comments(code: str) -> str:
    parts: list[str] = []
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            continue
        if token.type == tokenize.STRING:
            parts.append(_strip_string_body(token.string))
        else:
            parts.append(token.string)
        parts.append(" ")
    return "".join(parts)


def normalise_code(code: str, form: str) -> str:
    """``code`` with comments and all whitespace removed (see the module docstring)."""
    if form in PYTHON_FORMS:
        try:
            stripped = _strip_python_comments(code)
        except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
            stripped = strip_c_comments(code)
    else:
        stripped = strip_c_comments(code)
    return "".join(stripped.split())


def code_fingerprint(code: str, form: str) -> str:
    """sha256 (first 16 hex digits) of the normalised code: equal for near-duplicates."""
    return hashlib.sha256(normalise_code(code, form).encode("utf-8", "surrogatepass")).hexdigest()[:16]
