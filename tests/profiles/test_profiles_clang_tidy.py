"""profiles.clang_tidy: clang-tidy output as one finding per diagnostic."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from profiles import ClangTidyFinding, parse_clang_tidy
from profiles.clang_tidy import parse_clang_tidy_output


def _sample_reports(shared_data: Path) -> list[str]:
    rows = [json.loads(line) for line in (shared_data / "sakana-archive" / "sample.jsonl").open()]
    return [row["Clang_Tidy"] for row in rows if row["Clang_Tidy"]]


def test_real_archive_reports(shared_data: Path) -> None:
    reports = [parse_clang_tidy(text) for text in _sample_reports(shared_data)]
    assert len(reports) == 62
    findings = [f for r in reports for f in r.findings]
    assert len(findings) == 1046
    assert {f.severity for f in findings} == {"warning", "note", "error"}
    assert all(f.check is None for f in findings if f.severity == "note")
    first = reports[0].findings[0]
    assert first == ClangTidyFinding(
        "/home/robert_sakana_ai/llm_cuda/experiments/20250202_optimize_b10_s4_e0_sweep/level_1/task_1/"
        "b1_s0_block_size_optimized/base/base.cu",
        9, 35, "warning", "bugprone-macro-parentheses", "macro argument should be enclosed in parentheses",
    )
    assert reports[0].errored is False
    assert reports[0].warnings_generated == 45286 and reports[0].suppressed == 45322
    assert sum(r.errored for r in reports) == 2


def test_no_source_context_line_becomes_a_finding(shared_data: Path) -> None:
    """Each finding is exactly a `FILE:LINE:COL: severity:` line of the real output, in order."""
    for text in _sample_reports(shared_data):
        wrapper = ast.literal_eval(text)
        expected = [
            line for line in (wrapper["stdout"] + "\n" + wrapper["stderr"]).splitlines()
            if re.match(r"^\S.*?:\d+:\d+: (warning|error|note): ", line)
        ]
        findings = parse_clang_tidy(text).findings
        assert len(findings) == len(expected)
        for line, f in zip(expected, findings, strict=True):
            assert line.startswith(f"{f.file}:{f.line}:{f.column}: {f.severity}: {f.message}")
            assert f.check is None or line.endswith(f" [{f.check}]")


def test_errored_report_keeps_its_compiler_error(shared_data: Path) -> None:
    errored = next(parse_clang_tidy(t) for t in _sample_reports(shared_data) if "'errored': True" in t)
    errors = [f for f in errored.findings if f.severity == "error"]
    assert len(errors) == 1 and errors[0].check == "clang-diagnostic-error"
    assert "Error while processing" in (errored.stderr or "")


def test_edge_cases_inline() -> None:
    text = "\n".join([
        r"C:\Users\me\kernels\k.cu:12:3: warning: use of old-style cast [cppcoreguidelines-pro-type-cstyle-cast]",
        "   12 |   (float)x;",
        "      |   ^~~~~~~",
        r"C:\Users\me\kernels\k.cu:4:10: fatal error: 'cuda_fp16.h' file not found",
        "k.cu:7:1: note: expanded from macro 'CHECK'",
        "error: unable to handle compilation, expected exactly one compiler job [clang-diagnostic-error]",
        "k.cu:9:2: warning: message with [brackets] inside [readability-magic-numbers,cppcoreguidelines-avoid-magic-numbers]",
        "2 warnings and 1 error generated.",
    ])
    findings = parse_clang_tidy_output(text)
    assert findings == (
        ClangTidyFinding(r"C:\Users\me\kernels\k.cu", 12, 3, "warning", "cppcoreguidelines-pro-type-cstyle-cast",
                         "use of old-style cast"),
        ClangTidyFinding(r"C:\Users\me\kernels\k.cu", 4, 10, "fatal error", None, "'cuda_fp16.h' file not found"),
        ClangTidyFinding("k.cu", 7, 1, "note", None, "expanded from macro 'CHECK'"),
        ClangTidyFinding(None, None, None, "error", "clang-diagnostic-error",
                         "unable to handle compilation, expected exactly one compiler job"),
        ClangTidyFinding("k.cu", 9, 2, "warning", "readability-magic-numbers,cppcoreguidelines-avoid-magic-numbers",
                         "message with [brackets] inside"),
    )
    assert parse_clang_tidy(text).warnings_generated == 2


def test_wrapper_as_dict_and_windows_line_endings() -> None:
    report = parse_clang_tidy({"stdout": "a.cu:1:2: warning: w [c]\r\n    1 | x\r\n", "stderr": "", "errored": False})
    assert report.findings == (ClangTidyFinding("a.cu", 1, 2, "warning", "c", "w"),)
    assert parse_clang_tidy("").findings == ()


# The fast paths (``_string_value``, ``_diagnostic``, ``_last_int`` without splitting) must give what the
# general ones give on anything, including what the archive never holds.
_TOKENS = [
    "''", "'plain'", "'a\\nb\\tc'", "'q\\'s'", '"d\\"q"', "'back\\\\slash'", "'\\\\n literal'", "'\\x41'",
    "'\\u00e9\\N{BULLET}'", "'\\r'", "'\\0'", "'\\q'", "'é and \\n'", "'\\\\\\''", "'tab\\t\\\\t'",
]
_LINES = [
    "k.cu:1:2: warning: w [c]", "C:\\k\\b.cu:14:37: note: n", "a:b:1:2: error: e [x-y]", "error: alone",
    "fatal error: f", "x:1:2: fatal error: deep", "|k.cu:1:2: warning: w", " k.cu:1:2: warning: w",
    "\xa0k.cu:1:2: warning: w", "k.cu:1:: warning: w", "k.cu:1:2:warning: w", "k.cu:1:2: remark: r: x:3:4: note: y",
    "warnings generated", "k:1:2: k:3:4: warning: twice", ":1:2: warning: no file", "a:12:3: notes: x",
]


def test_wrapper_strings_read_as_literal_eval_reads_them() -> None:
    from profiles.clang_tidy import _string_value
    from profiles.literal import quiet_literal_eval

    for token in _TOKENS:
        assert _string_value(token) == quiet_literal_eval(token), token


def test_diagnostic_lines_read_as_the_single_regex_reads_them() -> None:
    from profiles.clang_tidy import _DIAGNOSTIC, _diagnostic

    matched = 0
    for line in _LINES:
        match = _DIAGNOSTIC.match(line)
        assert _diagnostic(line) == (match.groups() if match else None), line
        matched += match is not None
    assert 0 < matched < len(_LINES)


def test_counts_from_the_last_matching_line_with_and_without_other_line_breaks() -> None:
    from profiles.clang_tidy import _GENERATED, _last_int

    text = "3 warnings generated.\nnot generated here\n5 warnings and 1 error generated.\ntail generated"
    assert _last_int(_GENERATED, text, "generated") == 5
    assert _last_int(_GENERATED, text.replace("\n", "\r\n"), "generated") == 5
    assert _last_int(_GENERATED, "7 warnings generated\u2028x generated", "generated") == 7
    assert _last_int(_GENERATED, "nothing here", "generated") is None


def test_one_search_over_the_output_reads_each_line_as_the_line_reader_does(shared_data: Path) -> None:
    """Text with only "\\n" line breaks is read by one regex search (``_DIAGNOSTIC_LINES``); it must give the
    findings that reading line by line (``_diagnostic`` and ``_finding``) gives."""
    import random

    from profiles.clang_tidy import _diagnostic, _finding

    def line_by_line(text: str) -> tuple[ClangTidyFinding, ...]:
        found = (_diagnostic(line) for line in text.split("\n") if line and line[0] not in " \t|")
        return tuple(ClangTidyFinding(*_finding(*groups)) for groups in found if groups is not None)

    pieces = [*_LINES, "   12 | x", "      |   ^", "", "k.cu:1:2: warning: a [b] [c-d]", "k.cu:1:2: note: x []",
              "error: no [check here]", "k.cu:1:2: warning: ends with ]", "a:1:2: warning: [only-check]"]
    rng = random.Random(0)
    texts = [ast.literal_eval(report)["stdout"] for report in _sample_reports(shared_data)]
    texts += ["\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 9))) + rng.choice(["", "\n"])
              for _ in range(3000)]
    assert sum(len(line_by_line(text)) for text in texts) > 1000
    for text in texts:
        assert parse_clang_tidy_output(text) == line_by_line(text), text


def test_bulk_rows_equal_the_parsed_report(shared_data: Path) -> None:
    """``clang_tidy_rows`` (the ingest's bulk path) holds exactly the findings ``parse_clang_tidy`` gives."""
    from profiles.clang_tidy import clang_tidy_rows

    reports = _sample_reports(shared_data) + ["\n".join(_LINES), "\r\n".join(_LINES), ""]
    reports.append({"stdout": "a.cu:1:2: warning: w [c]\r\n", "stderr": "error: e", "errored": True})
    for report in reports:
        findings = parse_clang_tidy(report).findings
        assert clang_tidy_rows(report) == [(f.file, f.line, f.column, f.severity, f.check, f.message) for f in findings]
    assert sum(len(clang_tidy_rows(report)) for report in reports) > 1000


def _wrappers() -> list[str]:
    """Wrapper texts around every token of ``_TOKENS`` and some that ``_STRING`` reads only by the regex (raw line
    breaks after a backslash) or not at all, with each ``errored`` ending and some broken ones."""
    tokens = [*_TOKENS, "'a\\\nb'", "'raw\nbreak'", "'\\\\\\\\'", "'\\\\\\'", '"it\'s"', "'unterminated", "''"]
    texts = [f"{{'stdout': {out}, 'stderr': {err}, 'errored': {flag}}}"
             for out in tokens for err in ("''", "'e\\n'", '"q\\""', "'x\\\r'") for flag in ("True", "False", "None")]
    return texts + ["{'stdout': '', 'stderr': '', 'errored': False} ", "{'stdout': '', 'stderr': ''}",
                    "{'stdout':'', 'stderr': '', 'errored': False}", "{'stdout': '', 'stderr': '', 'errored': 0}",
                    "{'stdout': 'a' 'b', 'stderr': '', 'errored': True}", "x", ""]


def test_wrapper_found_by_quote_jumps_is_the_one_the_regex_matches(shared_data: Path) -> None:
    from profiles.clang_tidy import _WRAPPER, _wrapper, _wrapper_tokens
    from profiles.literal import ProfileError, parse_literal

    texts = _wrappers()
    fast = 0
    for text in texts:
        tokens, match = _wrapper_tokens(text), _WRAPPER.fullmatch(text)
        if tokens is not None:
            fast += 1
            assert match is not None, text
            assert tokens == (match[1], match[2], {"True": True, "False": False}.get(match[3])), text
        try:
            expected = parse_literal(text)
        except ProfileError:
            continue
        assert _wrapper(text) == expected, text
    assert 0 < fast < len(texts)
    reports = [report for report in _sample_reports(shared_data) if report.startswith("{'stdout'")]
    assert reports and all(_wrapper_tokens(report) is not None for report in reports)  # the archive takes the fast path
