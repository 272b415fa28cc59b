"""clang-tidy output as one finding per diagnostic: file, line, column, severity, check, message.

clang-tidy prints each diagnostic as ``FILE:LINE:COL: SEVERITY: MESSAGE [CHECK]`` followed by the source
line and a caret line (``   9 | #define ...`` / ``     |    ^``), which are skipped. ``note:`` lines
(the "first parameter in the range is 'A'" that explain a warning) become findings of severity
``note``; diagnostics with no ``[check]`` (compiler errors on some versions) have ``check=None``; lines
like ``error: unable to handle compilation`` have no file. Windows paths (``C:\\src\\k.cu``) work.

The archive wraps the output as ``{'stdout': ..., 'stderr': ..., 'errored': bool}``; ``parse_clang_tidy``
accepts that wrapper (string or dict) or plain text.

Example:
    >>> r = parse_clang_tidy("C:\\\\k\\\\base.cu:14:37: warning: 2 adjacent parameters [bugprone-easily-swappable-parameters]\\n"
    ...                      "   14 | __global__ void f(float* a, float* b) {\\n"
    ...                      "      |                     ^\\n")
    >>> f = r.findings[0]
    >>> f.file, f.line, f.column, f.severity, f.check
    ('C:\\\\k\\\\base.cu', 14, 37, 'warning', 'bugprone-easily-swappable-parameters')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from profiles.literal import ProfileError, expect_mapping, parse_literal, quiet_literal_eval


@dataclass(frozen=True, slots=True)
class ClangTidyFinding:
    """One diagnostic clang-tidy printed."""

    file: str | None
    line: int | None
    column: int | None
    severity: str
    check: str | None
    message: str


@dataclass(frozen=True, slots=True)
class ClangTidyReport:
    """A clang-tidy run: its findings, the counts it reported, and whether it errored."""

    findings: tuple[ClangTidyFinding, ...]
    errored: bool | None = None
    warnings_generated: int | None = None
    suppressed: int | None = None
    stderr: str | None = None


SEVERITIES = ("fatal error", "error", "warning", "note", "remark")
_SEVERITY = "|".join(SEVERITIES)
# One diagnostic per line: an optional FILE:LINE:COL: location, severity, message, [check]. Source-context
# and caret lines (``   9 | code``, ``     |   ^``) are indented, so only lines starting with a non-blank
# are tried.
_DIAGNOSTIC = re.compile(
    rf"(?:(?P<file>[^\s|].*?):(?P<line>\d+):(?P<column>\d+): )?(?P<severity>{_SEVERITY}): (?P<message>.*)"
)
_CHECK = re.compile(r"[\w.,\-]+")
_GENERATED = re.compile(r"(\d+) warnings?(?: and \d+ errors?)? generated")
_SUPPRESSED = re.compile(r"Suppressed (\d+) warnings?")


# Line breaks ``str.splitlines`` knows besides "\n": in text without them a line ends at "\n", so the last
# line with a word is found from the end without splitting the whole text.
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


# ``_DIAGNOSTIC`` in two steps that find the same groups: its lazy file part makes the smallest file for
# which the rest matches, which is the leftmost match of the rest from the second character on (a search
# that jumps from colon to colon), about three times faster on the archive's long paths.
_FILE_START = re.compile(r"[^\s|]")
_LOCATED = re.compile(rf":(\d+):(\d+): ({_SEVERITY}): (.*)")
_UNLOCATED = re.compile(rf"({_SEVERITY}): (.*)")


def _diagnostic(line: str) -> tuple[str | None, str | None, str | None, str, str] | None:
    """``_DIAGNOSTIC.match(line).groups()`` for one line (no line breaks in it), or None."""
    if _FILE_START.match(line):
        located = _LOCATED.search(line, 1)
        if located is not None:
            return line[: located.start()], located[1], located[2], located[3], located[4]
    unlocated = _UNLOCATED.match(line)
    return None if unlocated is None else (None, None, None, unlocated[1], unlocated[2])


FindingRow = tuple["str | None", "int | None", "int | None", str, "str | None", str]
"""(file, line, column, severity, check, message) of one finding, as ``ClangTidyFinding`` holds them."""


def _finding(file: str | None, line: str | None, column: str | None, severity: str, message: str) -> FindingRow:
    message, check = message.rstrip("\r"), None
    if message.endswith("]"):
        start = message.rfind(" [")
        if start >= 0 and _CHECK.fullmatch(message, start + 2, len(message) - 1):
            message, check = message[:start], message[start + 2 : -1]
    return file, int(line) if line else None, int(column) if column else None, severity, check, message


# ``_finding(*_diagnostic(line))`` of every line at once, for text whose only line break is "\n" (each match
# begins at the "\n" before its line; the text is searched with one put in front). The file part grows by
# colon-separated pieces (possessive runs: no backtracking inside a piece), so it ends at the leftmost colon
# from the line's second character on where the rest matches, as ``_LOCATED.search(line, 1)`` finds it. A
# message ending in `` [check]`` matches the first branch, which backtracks from the line's end to its last
# `` [`` (a check has no space, so no earlier one can match), as ``_finding`` splits it.
_DIAGNOSTIC_LINES = re.compile(
    rf"\n(?:([^\s|][^\n:]*+(?::[^\n:]*+)*?):(\d+):(\d+): )?({_SEVERITY}): "
    r"(?:([^\n]*) \[([\w.,\-]+)\](?![^\n])|([^\n]*))"
)


def _output_rows(text: str) -> list[FindingRow]:
    """The findings in clang-tidy's text output, in order, as rows."""
    if not any(br in text for br in _OTHER_BREAKS):
        return [
            (file or None, int(line) if line else None, int(column) if column else None, severity, check or None,
             checked if check else plain)
            for file, line, column, severity, checked, check, plain in _DIAGNOSTIC_LINES.findall("\n" + text)
        ]
    rows = []
    for candidate in text.splitlines():
        if not candidate or candidate[0] in " \t|":
            continue
        groups = _diagnostic(candidate)
        if groups is not None:
            rows.append(_finding(*groups))
    return rows


def parse_clang_tidy_output(text: str) -> tuple[ClangTidyFinding, ...]:
    """The findings in clang-tidy's text output, in order.

    Example:
        >>> [(f.line, f.severity, f.check) for f in parse_clang_tidy_output("k.cu:3:5: warning: w [c]\\n  3 | x\\nerror: e")]
        [(3, 'warning', 'c'), (None, 'error', None)]
    """
    return tuple(ClangTidyFinding(*row) for row in _output_rows(text))


_STRING = r"'[^'\\\n\r]*(?:\\.[^'\\\n\r]*)*'" + "|" + r'"[^"\\\n\r]*(?:\\.[^"\\\n\r]*)*"'
_WRAPPER = re.compile(
    rf"\{{'stdout': ({_STRING}), 'stderr': ({_STRING}), 'errored': (True|False|None)\}}", re.DOTALL
)


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_PLAIN_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}
_OTHER_ESCAPE = re.compile(r"\\[^nt\\'\"]")


def _string_value(token: str) -> str:
    """The value of a quoted string token of ``_STRING``: the usual escapes (newline, tab, backslash, quotes)
    replaced directly, anything else (``\\x``, ``\\N{...}``, NUL, lone surrogates) by ``ast.literal_eval``,
    so the value is always the one it gives."""
    body = token[1:-1]
    if "\\" not in body and "\x00" not in body and body.isascii():
        return body
    if _OTHER_ESCAPE.search(body) is None and "\x00" not in body:
        if body.isascii():  # the same escapes decoded in C, twice as fast as the substitution below
            return body.encode("ascii").decode("unicode_escape")
        try:
            body.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return _ESCAPE.sub(lambda m: _PLAIN_ESCAPES[m[1]], body)
    return quiet_literal_eval(token)


def _token_end(text: str, start: int) -> int | None:
    """The end of the quoted ``_STRING`` token at ``start`` when it holds no raw line break, else None.

    A token ends at the first quote preceded by an even run of backslashes (each pair is one escaped
    backslash). Found with ``str.find``, it is the span ``_STRING`` matches; a raw line break (only legal after
    a backslash) sends the wrapper to the regex.
    """
    quote = text[start : start + 1]
    if quote not in ("'", '"'):
        return None
    at = start + 1
    while (end := text.find(quote, at)) >= 0:
        before = end - 1
        while text[before] == "\\":
            before -= 1
        if (end - 1 - before) % 2 == 0:
            if text.find("\n", start, end) >= 0 or text.find("\r", start, end) >= 0:
                return None
            return end + 1
        at = end + 1
    return None


_ERRORED = {"True": True, "False": False, "None": None}
"""The wrapper's ``errored`` literals (``_WRAPPER``'s last group) and their values."""
_ERRORED_TAILS = {f", 'errored': {literal}}}": value for literal, value in _ERRORED.items()}


def _wrapper_tokens(text: str) -> tuple[str, str, bool | None] | None:
    """``_WRAPPER.fullmatch(text)``'s groups (``errored`` read) where both strings hold no raw line break, else
    None: the regex walks the text a character at a time (about 1 s of CPU over the benchmark ingest's 170 MB of
    clang-tidy output), ``str.find`` jumps from quote to quote.

    Example:
        >>> _wrapper_tokens("{'stdout': 'it\\\\'s', 'stderr': '', 'errored': False}")
        ("'it\\\\'s'", "''", False)
    """
    head, middle = "{'stdout': ", ", 'stderr': "
    if not text.startswith(head):
        return None
    stdout_end = _token_end(text, len(head))
    if stdout_end is None or not text.startswith(middle, stdout_end):
        return None
    stderr_start = stdout_end + len(middle)
    stderr_end = _token_end(text, stderr_start)
    if stderr_end is None or (tail := text[stderr_end:]) not in _ERRORED_TAILS:
        return None
    return text[len(head) : stdout_end], text[stderr_start:stderr_end], _ERRORED_TAILS[tail]


def _wrapper(text: str) -> Any:
    """The archive's wrapper dict; its usual exact form is read without parsing the whole literal."""
    tokens = _wrapper_tokens(text)
    if tokens is None:
        match = _WRAPPER.fullmatch(text)
        if match is None:
            return parse_literal(text)
        tokens = match[1], match[2], _ERRORED[match[3]]
    try:
        stdout, stderr = (_string_value(token) for token in tokens[:2])
    except (ValueError, SyntaxError):
        return parse_literal(text)  # a bad escape: let the general reader report it
    return {"stdout": stdout, "stderr": stderr, "errored": tokens[2]}


def _last_int(pattern: re.Pattern[str], text: str, word: str) -> int | None:
    """The number in the last line that contains ``word`` and matches ``pattern``."""
    if not any(br in text for br in _OTHER_BREAKS):
        end = len(text)
        while (hit := text.rfind(word, 0, end)) >= 0:
            start = text.rfind("\n", 0, hit) + 1
            stop = text.find("\n", hit)
            match = pattern.search(text, start, len(text) if stop < 0 else stop)
            if match:
                return int(match[1])
            end = start
        return None
    for line in reversed([line for line in text.splitlines() if word in line]):
        match = pattern.search(line)
        if match:
            return int(match[1])
    return None


def _read_report(report: str | Mapping[str, Any]) -> tuple[list[FindingRow], str | None, str, bool | None]:
    """The finding rows of a report, the text its counts are read from, its stderr and whether it errored.

    Raises:
        ProfileError: as ``parse_clang_tidy``.
    """
    if isinstance(report, str) and not report.lstrip().startswith("{'stdout'"):
        return _output_rows(report), None, report, None
    data = expect_mapping(_wrapper(report) if isinstance(report, str) else report, "a clang-tidy report")
    unknown = set(data) - {"stdout", "stderr", "errored"}
    if unknown:
        raise ProfileError(f"a clang-tidy report has keys stdout, stderr, errored, not {sorted(map(str, unknown))}")
    stdout, stderr, errored = data.get("stdout") or "", data.get("stderr") or "", data.get("errored")
    if not isinstance(stdout, str) or not isinstance(stderr, str):
        raise ProfileError("a clang-tidy report's stdout and stderr must be text")
    if errored is not None and not isinstance(errored, bool):
        raise ProfileError(f"a clang-tidy report's 'errored' must be True or False, got {errored!r}")
    return _output_rows(stdout) + _output_rows(stderr), stderr or None, stderr + "\n" + stdout, errored


def parse_clang_tidy(report: str | Mapping[str, Any]) -> ClangTidyReport:
    """A clang-tidy run from the archive's wrapper dict (string or dict) or from plain output text.

    Raises:
        ProfileError: a wrapper that is not a literal dict with text ``stdout``/``stderr``.
    """
    rows, stderr, both, errored = _read_report(report)
    return ClangTidyReport(
        tuple(ClangTidyFinding(*row) for row in rows),
        errored=errored,
        warnings_generated=_last_int(_GENERATED, both, "generated"),
        suppressed=_last_int(_SUPPRESSED, both, "Suppressed"),
        stderr=stderr,
    )


def clang_tidy_rows(report: str | Mapping[str, Any]) -> list[FindingRow]:
    """``parse_clang_tidy(report).findings`` as plain rows: the bulk path (``profiles.columnar``), which skips
    building a ``ClangTidyFinding`` per finding and the counts the archive does not store as rows.

    Example:
        >>> clang_tidy_rows("k.cu:3:5: warning: w [c]\\n3 warnings generated.")
        [('k.cu', 3, 5, 'warning', 'c', 'w')]

    Raises:
        ProfileError: as ``parse_clang_tidy``.
    """
    return _read_report(report)[0]
