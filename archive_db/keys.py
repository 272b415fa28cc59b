"""Content-hash keys: how a task, kernel or measurement is named in the archive.

Every key is a hash of content, so ingesting the same facts twice yields the same keys and adds nothing.

Example:
    >>> task_key("import torch\\nclass Model: pass\\n") == task_key("import torch\\n\\n\\nclass Model:\\n    pass")
    True
"""

from __future__ import annotations

import ast
import hashlib
import json
import json.encoder
import re
from typing import Any

KEY_LENGTH = 16
_encode_basestring = json.encoder.encode_basestring  # what json.dumps(..., ensure_ascii=False) escapes strings with


def sha256(text: str | bytes) -> str:
    """Full hex sha256 of text (UTF-8) or bytes."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def short_hash(*parts: Any) -> str:
    """A 16-hex-digit key from any JSON-serialisable parts, order-sensitive.

    Parts that are strings (a kernel's key, with its whole code) or dicts of strings (a measurement's identity)
    are joined as ``json.dumps`` would write them, each string escaped as its encoder does, without the
    encoder's general machinery.

    Example:
        >>> blob = json.dumps(["kernel", 'x = "1"\\n'], ensure_ascii=False, separators=(",", ":"))
        >>> short_hash("kernel", 'x = "1"\\n') == hashlib.sha256(blob.encode()).hexdigest()[:KEY_LENGTH]
        True
    """
    texts = [_plain_json(part) for part in parts]
    if None in texts:
        blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))
        return sha256(blob)[:KEY_LENGTH]
    return hashlib.sha256(b"[" + b",".join(texts) + b"]").hexdigest()[:KEY_LENGTH]  # type: ignore[arg-type]


_RARE_CONTROLS = bytes(c for c in range(0x20) if chr(c) not in "\t\n\r")
"""Control characters ``json.dumps`` writes as ``\\b``, ``\\f`` or ``\\u00XX``: rare in code, left to its encoder."""


def _json_string(text: str) -> bytes:
    """``text`` as ``json.dumps(..., ensure_ascii=False)`` writes it, in UTF-8 (lone surrogates kept as
    ``sha256`` keeps them).

    Escaping is done on the bytes, where each replacement is one C pass: the encoder builds its result a
    character at a time, about 0.3 s of the 30,615-row benchmark ingest's kernel keys (115 MB of code). Every
    character it escapes is ASCII, and no byte of a multi-byte UTF-8 sequence is, so the two agree.

    Example:
        >>> text = 'printf("%d\\\\n", x);\\n\\x01 é'
        >>> _json_string(text) == json.dumps(text, ensure_ascii=False).encode()
        True
    """
    data = text.encode("utf-8", "surrogatepass")
    if len(data.translate(None, _RARE_CONTROLS)) != len(data):
        return _encode_basestring(text).encode("utf-8", "surrogatepass")
    escaped = data.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
    return b'"' + escaped.replace(b"\r", b"\\r").replace(b"\t", b"\\t") + b'"'


def _plain_json(part: Any) -> bytes | None:
    """``part`` as ``short_hash``'s ``json.dumps`` writes it (UTF-8), for a string or a dict of strings and Nones
    (a measurement's identity); None for anything else.

    Example:
        >>> _plain_json({"gpu": "H100", "a": None}), _plain_json(1.5)
        (b'{"a":null,"gpu":"H100"}', None)
    """
    if type(part) is str:
        return _json_string(part)
    if type(part) is dict and all(type(k) is str and (v is None or type(v) is str) for k, v in part.items()):
        items = sorted(part.items())
        return b"{" + b",".join(_json_string(k) + b":" + (b"null" if v is None else _json_string(v))
                               for k, v in items) + b"}"
    return None


def git_blob_sha1(text: str) -> str:
    """The id git gives a file with this content, to match KernelBench's task index."""
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _StripDocstrings(ast.NodeTransformer):
    def _strip(self, node: ast.AST) -> ast.AST:
        self.generic_visit(node)
        body = getattr(node, "body", None)
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _strip


def normalise_python(code: str) -> str:
    """Python code with comments, docstrings and layout removed (``ast.unparse``).

    Two references that differ only in formatting, comments or docstrings normalise to the same text;
    a changed size, init or operator does not. Code that does not parse is whitespace-collapsed.
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return re.sub(r"\s+", " ", code).strip()
    return ast.unparse(_StripDocstrings().visit(tree))


def task_key(reference_code: str) -> str:
    """The task id: a hash of the normalised reference code."""
    return sha256(normalise_python(reference_code))[:KEY_LENGTH]


def named_task_key(source: str, name: str) -> str:
    """The task id of a problem a source names but gives no reference code for."""
    return short_hash("named-task", source, name)


def kernel_key(source: str, task_id: str, name: str, code: str | None) -> str:
    """The kernel id: one implementation of one task from one source."""
    return short_hash("kernel", source, task_id, name, code)


MEASUREMENT_IDENTITY = ("source", "gpu", "timing_mode", "verification_id")
"""What names a measurement besides its kernel: one source's values for a kernel on one GPU (and timing mode)
are one measurement however many files carry them, so its files merge into one row (archive_db.writer);
each run of our verifier is its own."""


def measurement_key(kernel_id: str, fields: dict[str, Any]) -> str:
    """The measurement id: a hash of the kernel and ``MEASUREMENT_IDENTITY`` (other fields are ignored).

    Example:
        >>> measurement_key("k1", {"source": "s", "gpu": "H100"}) == measurement_key(
        ...     "k1", {"source": "s", "gpu": "H100", "speedup_eager": 2.0})
        True
    """
    return short_hash("measurement", kernel_id, {name: fields.get(name) for name in MEASUREMENT_IDENTITY})
