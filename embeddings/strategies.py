"""Strategy tags: static analysis of a kernel's code against the rules in ``strategy_rules.toml``.

Each tag comes with evidence: the 1-based line of the first match in the kernel's code and that line,
trimmed. Code is searched with comments removed (``embeddings.source.strip_comments``), so a comment
that mentions ``__shared__`` or ``torch.matmul`` earns nothing.

Example:
    >>> [t.tag for t in tag_kernel("__global__ void k(float* __restrict__ x) { atomicAdd(x, 1.f); }", "cuda-binding")]
    ['atomics', 'restrict']
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ahocorasick_rs import MATCHKIND_STANDARD, AhoCorasick

from embeddings.source import matching_brace, strip_comments

RULES_FILE = Path(__file__).with_name("strategy_rules.toml")
LIBRARY_TAG = "library-call"
EVIDENCE_CHARS = 200


@dataclass(frozen=True)
class TagRule:
    """One row of the strategy rules: a named pattern and the kernel forms it applies to."""

    name: str
    patterns: tuple[re.Pattern[str], ...]
    forms: frozenset[str]
    description: str

    def first(self, text: str) -> int | None:
        """Position of the earliest match of any pattern, or None."""
        positions = [p for p in (word_search(pattern, text) for pattern in self.patterns) if p is not None]
        return min(positions) if positions else None

    def applies_to(self, form: str) -> bool:
        """Whether this rule is searched in kernels of ``form``."""
        return "*" in self.forms or form in self.forms


@dataclass(frozen=True)
class FusionRule:
    """Kernel fusion: a ``__global__`` body that does work of two or more operation families."""

    name: str
    description: str
    name_pattern: re.Pattern[str]
    families: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]


@dataclass(frozen=True)
class StrategyRules:
    """Every regex rule in file order, and the fusion rule."""

    tags: tuple[TagRule, ...]
    fusion: FusionRule

    def describe(self) -> dict[str, str]:
        """Tag name -> description (first row wins for names that several rows share)."""
        out: dict[str, str] = {}
        for rule in self.tags:
            out.setdefault(rule.name, rule.description)
        out.setdefault(self.fusion.name, self.fusion.description)
        return out


@dataclass(frozen=True)
class Tag:
    """A tag earned by a kernel, with the line that earned it."""

    tag: str
    line: int
    evidence: str


def _compile(path: Path, name: str, patterns: list[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as error:
            raise ValueError(f"{path}: rule {name!r} has a bad pattern {pattern!r}: {error}") from None
    return tuple(compiled)


_WORD = re.compile(r"\w")


def word_search(pattern: re.Pattern[str], text: str, start: int = 0, end: int | None = None) -> int | None:
    """Position of the first match that does not begin inside a word (a leading ``\\b`` done fast).

    Example:
        >>> word_search(re.compile("at::mm"), "cat::mm(x); at::mm(y)")
        12
    """
    end = len(text) if end is None else end
    match = pattern.search(text, start, end)
    while match is not None:
        begin = match.start()
        if not (begin and _WORD.match(text, begin) and _WORD.match(text, begin - 1)):
            return begin
        match = pattern.search(text, begin + 1, end)
    return None


@cache
def load_rules(path: Path = RULES_FILE) -> StrategyRules:
    """The strategy rules from ``path``, regexes compiled once.

    Raises:
        ValueError: a rule's pattern does not compile (the message names the rule and the file).
    """
    data = tomllib.loads(path.read_text())
    tags = []
    for row in data.get("tag", []):
        patterns = _compile(path, row.get("name", "?"), row["patterns"])
        tags.append(TagRule(row["name"], patterns, frozenset(row.get("forms", ["*"])), row.get("description", "")))
    fusion = data["fusion"]
    families = tuple((name, _compile(path, name, patterns)) for name, patterns in fusion["families"].items())
    return StrategyRules(
        tuple(tags),
        FusionRule(fusion["name"], fusion.get("description", ""), re.compile(fusion["name_pattern"]), families),
    )


_GLOBAL = re.compile(r"__global__[^{;]*?(\w+)\s*\([^{;]*\{")


def _line_at(code: str, position: int) -> tuple[int, str]:
    """The 1-based line number at ``position`` and that line, trimmed."""
    start = code.rfind("\n", 0, position) + 1
    end = code.find("\n", position)
    line = code[start : end if end >= 0 else len(code)].strip()
    return code.count("\n", 0, position) + 1, line[:EVIDENCE_CHARS]


SHORT_PREFIX = 4
"""Prefixes shorter than this (``.``, ``#``, ``int``, ``for``) are looked up with ``str.find``: code is full of
them, and the automaton would report every occurrence where only the first is wanted."""


class PatternSet:
    """Many patterns searched in one text together: where each first matches (at a word start).

    Every pattern starts with literal text (``literal_prefix``); one Aho-Corasick pass over the text finds
    where each prefix first occurs, and only the patterns whose prefix occurs are then searched, each once,
    from there. Scanning the text once for all the prefixes, rather than once per pattern, is what keeps
    tagging 30,000 kernels cheap. A pattern without a literal prefix is searched on its own.

    Example:
        >>> found = PatternSet([re.compile(r"float[24]\\b"), re.compile(r"__ldg\\s*\\("), re.compile("wmma::")])
        >>> sorted(found.first_matches("float x; float4 y = __ldg(p);").items())
        [(0, 9), (1, 20)]
    """

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self.patterns = tuple(patterns)
        by_prefix: dict[str, list[int]] = {}
        self._unprefixed: list[int] = []
        for index, pattern in enumerate(self.patterns):
            prefix = literal_prefix(pattern.pattern)
            if prefix:
                by_prefix.setdefault(prefix, []).append(index)
            else:
                self._unprefixed.append(index)
        self._short = tuple((prefix, tuple(indexes)) for prefix, indexes in by_prefix.items() if len(prefix) < SHORT_PREFIX)
        self._long = tuple(prefix for prefix in by_prefix if len(prefix) >= SHORT_PREFIX)
        self._by_long = tuple(tuple(by_prefix[prefix]) for prefix in self._long)
        self._automaton = AhoCorasick(list(self._long), matchkind=MATCHKIND_STANDARD) if self._long else None

    def _first_long(self, text: str) -> dict[int, int]:
        """Index in ``_long`` -> where that prefix first occurs in ``text``."""
        if self._automaton is None:
            return {}
        try:
            hits = self._automaton.find_matches_as_indexes(text, overlapping=True)
        except UnicodeEncodeError:  # a lone surrogate, which the automaton cannot take: scan prefix by prefix
            return {i: at for i, prefix in enumerate(self._long) if (at := text.find(prefix)) >= 0}
        return {prefix: start for prefix, start, _ in reversed(hits)}  # reversed: the earliest start stays

    def first_matches(self, text: str) -> dict[int, int]:
        """Pattern index -> position of its first word-start match in ``text`` (``word_search``), for the
        patterns that match."""
        found: dict[int, int] = {}
        patterns = self.patterns
        starts = [(self._by_long[prefix], start) for prefix, start in self._first_long(text).items()]
        starts += [(indexes, start) for prefix, indexes in self._short if (start := text.find(prefix)) >= 0]
        starts.append((self._unprefixed, 0))
        for indexes, start in starts:
            for index in indexes:
                hit = word_search(patterns[index], text, start)
                if hit is not None:
                    found[index] = hit
        return found


@cache
def _tag_matcher(rules: StrategyRules, form: str) -> tuple[PatternSet, tuple[str, ...]]:
    """The patterns of the rules that apply to ``form``, and the tag each one earns."""
    patterns = [(pattern, rule.name) for rule in rules.tags if rule.applies_to(form) for pattern in rule.patterns]
    return PatternSet([pattern for pattern, _ in patterns]), tuple(name for _, name in patterns)


@cache
def _family_matcher(fusion: FusionRule) -> tuple[PatternSet, tuple[int, ...]]:
    """The fusion rule's family patterns, and the family (its index) of each one."""
    patterns = [(pattern, family) for family, (_, group) in enumerate(fusion.families) for pattern in group]
    return PatternSet([pattern for pattern, _ in patterns]), tuple(family for _, family in patterns)


_META = frozenset(".^$*+?{}[]|()")
_QUANTIFIERS = frozenset("*+?{")


@cache
def literal_prefix(pattern: str) -> str:
    """The literal text every match of ``pattern`` starts with ('' if none): what ``PatternSet`` looks for.

    Example:
        >>> literal_prefix(r"__shfl(?:_down)?_sync"), literal_prefix(r"float[24]"), literal_prefix(r"ab?c")
        ('__shfl', 'float', 'a')
    """
    chars: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern) and not pattern[index + 1].isalnum():
            chars.append(pattern[index + 1])
            index += 2
        elif char == "\\" or char in _META:
            break
        else:
            chars.append(char)
            index += 1
        if index < len(pattern) and pattern[index] in _QUANTIFIERS:
            chars.pop()
            break
    return "".join(chars)


def tag_kernels(kernels: Iterable[tuple[str, str | None, str]], rules: StrategyRules | None = None) -> dict[str, list[Tag]]:
    """Strategy tags of many kernels at once, given as (kernel_id, code, form); every id gets a list.

    Each kernel's code is scanned once for the literal prefixes of all the patterns (``PatternSet``), so the
    work grows with the code's length and its matches, not with the number of patterns.
    """
    rules = rules or load_rules()
    fusion = rules.fusion
    families, family_of = _family_matcher(fusion)
    by_form: dict[str, tuple[PatternSet, tuple[str, ...]]] = {}  # hashing the rules for the cache costs more
    out: dict[str, list[Tag]] = {}
    for kernel_id, code, form in kernels:
        text = strip_comments(code, form) if code else ""
        matcher, names = by_form.get(form) or by_form.setdefault(form, _tag_matcher(rules, form))
        seen: dict[str, int] = {}
        for index, position in matcher.first_matches(text).items():
            name = names[index]
            if name not in seen or position < seen[name]:
                seen[name] = position
        if "__global__" in text:
            for match in _GLOBAL.finditer(text):
                offset = match.start()
                if offset >= seen.get(fusion.name, len(text) + 1):
                    break  # kernels come in order: none after this one can give an earlier line
                if fusion.name_pattern.search(match[1]):
                    seen[fusion.name] = offset
                    continue
                body = text[match.end() - 1 : matching_brace(text, match.end() - 1)]
                if len({family_of[index] for index in families.first_matches(body)}) >= 2:
                    seen[fusion.name] = offset
        out[kernel_id] = [Tag(name, *_line_at(text, position)) for name, position in sorted(seen.items())]
    return out


def tag_kernel(code: str | None, form: str, rules: StrategyRules | None = None) -> list[Tag]:
    """The strategy tags of one kernel, sorted by tag name."""
    return tag_kernels([("", code, form)], rules)[""]
