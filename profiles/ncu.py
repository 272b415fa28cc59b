"""Nsight Compute profiles: the archive's aggregated dict and raw ``ncu --csv --page details`` output.

The AI CUDA Engineer Archive (and robust-kbench) store one dict per kernel, already aggregated over the
profiled launches (``ncu -c 5``)::

    {'metrics': {'Achieved Occupancy': {'unit': '%', 'avg_value': 98.366, 'variance': 0.000224, 'n': 5}},
     'rules': {'HighPipeUtilization': {'type': 'WRN', 'description': 'All compute pipelines ...'}}}

Raw ``ncu --csv --page details`` output has one row per (launch, section, metric), and rule rows whose
``Metric Name`` is empty. ``parse_ncu_csv`` groups the launches of a kernel into the same shape: the
mean, the population variance (``ddof=0``, which reproduces the archive's numbers) and the count. Values
carry thousands separators (``"3,194,949,494.95"``); they are read as en-US numbers. Metrics whose
value is not a number (e.g. ``CachePreferNone``) are kept in ``NcuProfile.text_values`` only.

Example:
    >>> p = parse_ncu_dict("{'metrics': {'SM Busy': {'unit': '%', 'avg_value': 42.7, 'variance': 0.0, 'n': 5}}, 'rules': {}}")
    >>> p.metrics[0]
    NcuMetric(name='SM Busy', unit='%', value=42.7, variance=0.0, n=5)
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from profiles.literal import ProfileError, expect_mapping, parse_literal


@dataclass(frozen=True, slots=True)
class NcuMetric:
    """One metric of one kernel: the mean over ``n`` launches and its variance."""

    name: str
    unit: str | None
    value: float | None
    variance: float | None
    n: int | None


@dataclass(frozen=True, slots=True)
class NcuRule:
    """A guidance rule Nsight Compute fired (``type``: INF, WRN, OPT or ERR)."""

    name: str
    type: str | None
    description: str | None
    estimated_speedup: float | None = None


@dataclass(frozen=True, slots=True)
class NcuProfile:
    """The metrics and rules of one profiled kernel."""

    metrics: tuple[NcuMetric, ...]
    rules: tuple[NcuRule, ...] = ()
    kernel_name: str | None = None
    text_values: dict[str, str] = field(default_factory=dict)

    def metric(self, name: str) -> NcuMetric | None:
        """The metric called ``name``, or None."""
        return next((m for m in self.metrics if m.name == name), None)


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProfileError(f"{what} must be a number, got {value!r}")
    number = float(value)
    return number if math.isfinite(number) else None


def _count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ProfileError(f"{what} must be a whole number, got {value!r}")
    return int(value)


def _text(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ProfileError(f"{what} must be text, got {value!r}")


# The exact text ``str(dict)`` gives for the archive's layout, read by regular expressions in one pass:
# about five times faster than parsing the literal, and only ever used when the whole text matches.
_STR = r"'[^'\\\n\r]*'|\"[^\"\\\n\r]*\""
_INT = r"0+|[1-9]\d*"  # a Python int literal has no leading zeros; a float may
_NUM = rf"-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|{_INT})|None"


def _metric_pattern(group: str) -> str:
    return (
        rf"{group}{_STR}): \{{'unit': {group}{_STR}|None), 'avg_value': {group}{_NUM}), "
        rf"'variance': {group}{_NUM}), 'n': {group}{_INT}|None)\}}"
    )


def _rule_pattern(group: str) -> str:
    return rf"{group}{_STR}): \{{'type': {group}{_STR}|None), 'description': {group}{_STR}|None)\}}"


# The canonical text is ``{'metrics': {METRIC, METRIC, ...}, 'rules': {RULE, ...}}``. It is split at each metric
# (the first right after "{'metrics': {", each other one after ", "), and what follows the last metric at each
# rule; it is canonical when nothing lies between the items and each section closes as it should: one pass,
# where matching the whole text and then finding its items took two. An item matched at a given place has only
# one possible end, so the split finds the items a match of the whole would hold. (Metric-like text inside a
# rule's double-quoted description would break the split: such a text takes the general path, which reads it
# the same.)
_METRICS_OPEN, _RULES_OPEN, _RULES_EMPTY = "{'metrics': {", "}, 'rules': {", "}, 'rules': {}}"
_METRIC_SPLIT = re.compile(r"(?:\A\{'metrics': \{|, )" + _metric_pattern("("))
_RULE_SPLIT = re.compile(r"(?:\A\}, 'rules': \{|, )" + _rule_pattern("("))
_METRIC_STRIDE, _RULE_STRIDE = 6, 4
"""Items of each split per metric or rule: the text before it, then its groups."""


def _unquote(token: str) -> str | None:
    return None if token == "None" else token[1:-1]


MetricRow = tuple[str, "str | None", "float | None", "float | None", "int | None"]
"""(name, unit, value, variance, n) of one metric, as ``NcuMetric`` holds them."""
RuleRow = tuple[str, "str | None", "str | None"]
"""(name, type, description) of one rule, as ``NcuRule`` holds them."""


def _split_items(pattern: re.Pattern[str], text: str, stride: int, end: str) -> list[str] | None:
    """The groups of the items ``pattern`` splits ``text`` into, each item's in a row of ``stride - 1``, when
    nothing lies between them and ``end`` follows the last; [] when none is found; None otherwise."""
    parts = pattern.split(text)
    if len(parts) == 1:
        return []
    if any(parts[0:-1:stride]) or (end and parts[-1] != end):
        return None
    return parts


def _fast_ncu_items(text: str) -> tuple[dict[str, MetricRow], dict[str, RuleRow]] | None:
    metric_parts = _split_items(_METRIC_SPLIT, text, _METRIC_STRIDE, "")
    if metric_parts is None:
        return None
    if metric_parts:
        tail = metric_parts[-1]
    elif text.startswith(_METRICS_OPEN):
        tail = text[len(_METRICS_OPEN) :]
    else:
        return None
    if not tail.startswith(_RULES_OPEN):
        return None
    rule_parts = _split_items(_RULE_SPLIT, tail, _RULE_STRIDE, "}}")
    if rule_parts is None or (not rule_parts and tail != _RULES_EMPTY):
        return None
    metrics: dict[str, MetricRow] = {}
    for name, unit, value, variance, n in zip(*(metric_parts[k::_METRIC_STRIDE] for k in range(1, 6)), strict=True):
        key = name[1:-1]
        metrics[key] = (
            key,
            _unquote(unit),
            None if value == "None" else _finite(float(value)),
            None if variance == "None" else _finite(float(variance)),
            None if n == "None" else int(n),
        )
    rules: dict[str, RuleRow] = {}
    for name, type_, description in zip(*(rule_parts[k::_RULE_STRIDE] for k in range(1, 4)), strict=True):
        rules[name[1:-1]] = (name[1:-1], _unquote(type_), _unquote(description))
    return metrics, rules


def _fast_ncu_dict(text: str) -> NcuProfile | None:
    items = _fast_ncu_items(text)
    if items is None:
        return None
    metrics, rules = items
    return NcuProfile(tuple(NcuMetric(*row) for row in metrics.values()), tuple(NcuRule(*row) for row in rules.values()))


def ncu_rows(profile: str) -> tuple[list[MetricRow], list[RuleRow]]:
    """``parse_ncu_dict(profile)`` as plain metric and rule tuples: the bulk path (``profiles.columnar``),
    which skips building an ``NcuMetric`` per metric.

    Example:
        >>> ncu_rows("{'metrics': {'SM Busy': {'unit': '%', 'avg_value': 42.7, 'variance': 0.0, 'n': 5}}, 'rules': {}}")
        ([('SM Busy', '%', 42.7, 0.0, 5)], [])

    Raises:
        ProfileError: as ``parse_ncu_dict``.
    """
    items = _fast_ncu_items(profile)
    if items is not None:
        return list(items[0].values()), list(items[1].values())
    parsed = parse_ncu_dict(profile)
    return ([(m.name, m.unit, m.value, m.variance, m.n) for m in parsed.metrics],
            [(r.name, r.type, r.description) for r in parsed.rules])


def _finite(number: float) -> float | None:
    return number if math.isfinite(number) else None


def parse_ncu_dict(profile: str | Mapping[str, Any]) -> NcuProfile:
    """Read the archive's NCU dict (the Python-literal string, or the dict itself).

    Raises:
        ProfileError: not a literal, or not shaped like ``{'metrics': {...}, 'rules': {...}}``.
    """
    if isinstance(profile, str):
        fast = _fast_ncu_dict(profile)
        if fast is not None:
            return fast
    data = expect_mapping(parse_literal(profile) if isinstance(profile, str) else profile, "an NCU profile")
    unknown = set(data) - {"metrics", "rules"}
    if unknown:
        raise ProfileError(f"an NCU profile has keys 'metrics' and 'rules', not {sorted(map(str, unknown))}")
    metrics = []
    for name, entry in expect_mapping(data.get("metrics") or {}, "'metrics'").items():
        where = f"metric {name!r}"
        entry = expect_mapping(entry, where)
        metrics.append(
            NcuMetric(
                name=str(name),
                unit=_text(entry.get("unit"), f"{where} unit"),
                value=_number(entry.get("avg_value"), f"{where} avg_value"),
                variance=_number(entry.get("variance"), f"{where} variance"),
                n=_count(entry.get("n"), f"{where} n"),
            )
        )
    rules = []
    for name, entry in expect_mapping(data.get("rules") or {}, "'rules'").items():
        where = f"rule {name!r}"
        entry = expect_mapping(entry, where)
        rules.append(
            NcuRule(
                name=str(name),
                type=_text(entry.get("type"), f"{where} type"),
                description=_text(entry.get("description"), f"{where} description"),
            )
        )
    return NcuProfile(tuple(metrics), tuple(rules))


CSV_REQUIRED_COLUMNS = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
"""Columns ``parse_ncu_csv`` needs; the others of ``ncu --csv --page details`` are optional."""


def _csv_number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "")
    if cleaned in {"", "n/a", "N/A"}:
        return None
    try:
        number = float(cleaned)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _table_rows(text: str) -> Iterable[dict[str, str]]:
    """Rows of the CSV table inside ncu's output, skipping ``==PROF==``/``==WARNING==`` log lines."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') and "Metric Name" in line), None)
    if start is None:
        raise ProfileError(
            "no ncu CSV table found: expected a header line starting with \"ID\" and naming "
            f"{', '.join(CSV_REQUIRED_COLUMNS)} (run ncu with --csv --page details)"
        )
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    missing = [c for c in CSV_REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise ProfileError(f"the ncu CSV header lacks column(s) {', '.join(missing)}")
    return reader


class _Accumulator:
    """Launch values of one kernel, grouped by metric, in first-seen order."""

    def __init__(self, kernel_name: str) -> None:
        self.kernel_name = kernel_name
        self.values: dict[str, list[float]] = {}
        self.units: dict[str, str | None] = {}
        self.sections: dict[str, str | None] = {}
        self.text_values: dict[str, str] = {}
        self.rules: dict[str, NcuRule] = {}

    def add_metric(self, section: str | None, name: str, unit: str, raw_value: str) -> None:
        key = name
        if key in self.sections and self.sections[key] != section:
            key = f"{name} [{section}]"
        self.sections.setdefault(key, section)
        value = _csv_number(raw_value)
        if value is None:
            if raw_value.strip():
                self.text_values[key] = raw_value.strip()
            return
        self.values.setdefault(key, []).append(value)
        self.units.setdefault(key, unit or None)

    def add_rule(self, row: dict[str, str]) -> None:
        name = row["Rule Name"].strip()
        if name and name not in self.rules:
            self.rules[name] = NcuRule(
                name=name,
                type=(row.get("Rule Type") or "").strip() or None,
                description=(row.get("Rule Description") or "").strip() or None,
                estimated_speedup=_csv_number(row.get("Estimated Speedup") or ""),
            )

    def profile(self) -> NcuProfile:
        metrics = []
        for name, values in self.values.items():
            n = len(values)
            mean = sum(values) / n
            variance = sum((v - mean) ** 2 for v in values) / n
            metrics.append(NcuMetric(name, self.units.get(name), mean, variance, n))
        return NcuProfile(tuple(metrics), tuple(self.rules.values()), self.kernel_name, dict(self.text_values))


def parse_ncu_csv_by_kernel(text: str) -> dict[str, NcuProfile]:
    """Each kernel's profile in raw ``ncu --csv --page details`` output, launches aggregated.

    Raises:
        ProfileError: no ncu CSV table in ``text``, or the table lacks a needed column.
    """
    kernels: dict[str, _Accumulator] = {}
    for row in _table_rows(text):
        kernel = (row.get("Kernel Name") or "").strip()
        acc = kernels.setdefault(kernel, _Accumulator(kernel))
        metric = (row.get("Metric Name") or "").strip()
        if metric:
            acc.add_metric(row.get("Section Name"), metric, (row.get("Metric Unit") or "").strip(),
                           row.get("Metric Value") or "")
        if (row.get("Rule Name") or "").strip():
            acc.add_rule(row)
    return {name: acc.profile() for name, acc in kernels.items()}


def parse_ncu_csv(text: str, kernel: str | None = None) -> NcuProfile:
    """The profile of one kernel in raw ``ncu --csv --page details`` output.

    ``kernel`` picks the kernel whose name contains it; without it the output must hold one kernel.

    Example:
        >>> out = '''"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"
        ... "0","k(float*)","Memory Workload Analysis","Memory Throughput","byte/second","3,000,000,000.00"
        ... "1","k(float*)","Memory Workload Analysis","Memory Throughput","byte/second","1,000,000,000.00"'''
        >>> parse_ncu_csv(out).metrics[0]
        NcuMetric(name='Memory Throughput', unit='byte/second', value=2000000000.0, variance=1e+18, n=2)

    Raises:
        ProfileError: no table, no matching kernel, or several kernels and no ``kernel`` to choose.
    """
    profiles = parse_ncu_csv_by_kernel(text)
    if kernel is not None:
        profiles = {name: p for name, p in profiles.items() if kernel in name}
    if len(profiles) == 1:
        return next(iter(profiles.values()))
    if not profiles:
        raise ProfileError(f"no kernel {'matching ' + repr(kernel) + ' ' if kernel else ''}in the ncu output")
    names = ", ".join(sorted(profiles))
    raise ProfileError(f"the ncu output profiles several kernels ({names}); pass kernel= to choose one")


def parse_ncu(text: str, kernel: str | None = None) -> NcuProfile:
    """Either NCU format: the archive's dict (text starting with ``{``) or raw ncu CSV output."""
    if text.lstrip().startswith("{"):
        return parse_ncu_dict(text)
    return parse_ncu_csv(text, kernel)
