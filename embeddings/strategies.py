"""Strategy tags: static analysis of a kernel's code against the rules in ``strategy_rules.toml``.

Each tag comes with evidence: the 1-based line of the first match in the kernel's code and that line,
trimmed. Code is searched with comments removed (``embeddings.source.strip_comments``), so a comment
that mentions ``__shared__`` or ``torch.matmul`` earns nothing.

Example:
    >>> [t.tag for t in tag_kernel("__global__ void k(float* __restrict__ x) { atomicAdd(x, 1.f); }", "cuda-binding")]
    ['atomics', 'restrict']
"""

from __future__ import annotations

import bisect
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

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
_SEPARATOR = "\n\0\n"


def _line_at(code: str, position: int) -> tuple[int, str]:
    """The 1-based line number at ``position`` and that line, trimmed."""
    start = code.rfind("\n", 0, position) + 1
    end = code.find("\n", position)
    line = code[start : end if end >= 0 else len(code)].strip()
    return code.count("\n", 0, position) + 1, line[:EVIDENCE_CHARS]


class _Corpus:
    """Many texts joined into one string, so each pattern is searched once for all of them (set-wise)."""

    def __init__(self, texts: list[str]) -> None:
        self.text = _SEPARATOR.join(texts)
        self.starts: list[int] = []
        position = 0
        for text in texts:
            self.starts.append(position)
            position += len(text) + len(_SEPARATOR)
        self.ends = [start + len(text) for start, text in zip(self.starts, texts, strict=True)]

    def first_matches(self, pattern: re.Pattern[str]) -> dict[int, int]:
        """Text index -> offset in that text of the first word-start match of ``pattern``."""
        found: dict[int, int] = {}
        prefix = literal_prefix(pattern.pattern)
        text = self.text
        position = 0
        while True:
            if prefix:
                begin = text.find(prefix, position)
            else:
                match = pattern.search(text, position)
                begin = match.start() if match else -1
            if begin < 0:
                return found
            index = bisect.bisect_right(self.starts, begin) - 1
            end = self.ends[index]
            hit = word_search(pattern, text, begin, end)
            if hit is not None:
                found[index] = hit - self.starts[index]
            position = end + 1


_META = frozenset(".^$*+?{}[]|()")
_QUANTIFIERS = frozenset("*+?{")


@cache
def literal_prefix(pattern: str) -> str:
    """The literal text every match of ``pattern`` starts with ('' if none), used to jump with str.find.

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


def _kernel_bodies(text: str) -> list[tuple[int, str, str]]:
    """(offset, name, body) of each ``__global__`` function in ``text``."""
    out = []
    for match in _GLOBAL.finditer(text):
        out.append((match.start(), match.group(1), text[match.end() - 1 : matching_brace(text, match.end() - 1)]))
    return out


def tag_kernels(kernels: Iterable[tuple[str, str | None, str]], rules: StrategyRules | None = None) -> dict[str, list[Tag]]:
    """Strategy tags of many kernels at once, given as (kernel_id, code, form); every id gets a list.

    Each pattern is searched once over all kernels joined together, so the work in Python grows with the
    number of matches, not with kernels x patterns.
    """
    rules = rules or load_rules()
    ids: list[str] = []
    texts: list[str] = []
    forms: list[str] = []
    for kernel_id, code, form in kernels:
        ids.append(kernel_id)
        texts.append(strip_comments(code, form) if code else "")
        forms.append(form)
    found: list[dict[str, int]] = [{} for _ in ids]
    for form in sorted(set(forms)):
        members = [i for i, f in enumerate(forms) if f == form]
        corpus = _Corpus([texts[i] for i in members])
        for rule in rules.tags:
            if not rule.applies_to(form):
                continue
            for pattern in rule.patterns:
                for local, position in corpus.first_matches(pattern).items():
                    seen = found[members[local]]
                    if rule.name not in seen or position < seen[rule.name]:
                        seen[rule.name] = position
    bodies: list[tuple[int, int, str]] = []
    for index, text in enumerate(texts):
        if "__global__" not in text:
            continue
        for offset, name, body in _kernel_bodies(text):
            if rules.fusion.name_pattern.search(name):
                found[index].setdefault(rules.fusion.name, offset)
            else:
                bodies.append((index, offset, body))
    if bodies:
        corpus = _Corpus([body for _, _, body in bodies])
        hits = [0] * len(bodies)
        for _, patterns in rules.fusion.families:
            family_hits: set[int] = set()
            for pattern in patterns:
                family_hits.update(corpus.first_matches(pattern))
            for local in family_hits:
                hits[local] += 1
        for local, (index, offset, _) in enumerate(bodies):
            seen = found[index]
            if hits[local] >= 2 and offset < seen.get(rules.fusion.name, len(texts[index]) + 1):
                seen[rules.fusion.name] = offset
    return {
        kernel_id: [Tag(name, *_line_at(texts[i], position)) for name, position in sorted(found[i].items())]
        for i, kernel_id in enumerate(ids)
    }


def tag_kernel(code: str | None, form: str, rules: StrategyRules | None = None) -> list[Tag]:
    """The strategy tags of one kernel, sorted by tag name."""
    return tag_kernels([("", code, form)], rules)[""]
