"""torch.profiler summaries: event name -> CPU/device times (microseconds) and memory (bytes).

robust-kbench (and the full AI CUDA Engineer Archive) store ``key_averages()`` as a Python-literal dict::

    {'aten::copy_': {'cpu_time_total': 738702.48, 'device_time_total': 8226.34,
                     'self_cpu_time_total': 729763.28, 'self_device_time_total': 8226.34,
                     'cpu_memory_usage': 0, 'device_memory_usage': 0,
                     'self_cpu_memory_usage': 0, 'self_device_memory_usage': 0}}

Profiles written before torch 2.4 say ``cuda`` where newer ones say ``device``; both are read.

Example:
    >>> e = parse_torch_profile("{'aten::mm': {'cpu_time_total': 10.0, 'device_time_total': 7.5}}")[0]
    >>> e.name, e.cpu_time_total_us, e.device_time_total_us, e.device_memory_usage
    ('aten::mm', 10.0, 7.5, None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from profiles.literal import ProfileError, expect_mapping, parse_literal


@dataclass(frozen=True, slots=True)
class TorchEvent:
    """One profiler event (an ATen op, a CUDA kernel, a runtime call), summed over its calls."""

    name: str
    cpu_time_total_us: float | None = None
    device_time_total_us: float | None = None
    self_cpu_time_total_us: float | None = None
    self_device_time_total_us: float | None = None
    cpu_memory_usage: int | None = None
    device_memory_usage: int | None = None
    self_cpu_memory_usage: int | None = None
    self_device_memory_usage: int | None = None
    calls: int | None = None


# (TorchEvent field, keys a profile may use for it, first match wins, is it a time?)
FIELDS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("cpu_time_total_us", ("cpu_time_total",), True),
    ("device_time_total_us", ("device_time_total", "cuda_time_total"), True),
    ("self_cpu_time_total_us", ("self_cpu_time_total",), True),
    ("self_device_time_total_us", ("self_device_time_total", "self_cuda_time_total"), True),
    ("cpu_memory_usage", ("cpu_memory_usage",), False),
    ("device_memory_usage", ("device_memory_usage", "cuda_memory_usage"), False),
    ("self_cpu_memory_usage", ("self_cpu_memory_usage",), False),
    ("self_device_memory_usage", ("self_device_memory_usage", "self_cuda_memory_usage"), False),
    ("calls", ("count", "calls"), False),
)
KNOWN_KEYS = frozenset(key for _, keys, _ in FIELDS for key in keys)


def _value(raw: Any, is_time: bool, what: str) -> float | int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ProfileError(f"{what} must be a number, got {raw!r}")
    if is_time:
        number = float(raw)
        return number if math.isfinite(number) else None
    if raw != int(raw):
        raise ProfileError(f"{what} must be a whole number, got {raw!r}")
    return int(raw)


# The exact text ``str(dict)`` gives for the current key set, read by regular expressions in one pass
# (about three times faster than parsing the literal); any other text takes the general path.
_STR = r"'[^'\\\n\r]*'|\"[^\"\\\n\r]*\""
_INT = r"-?(?:0+|[1-9]\d*)"
_NUM = r"-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|0+|[1-9]\d*)"
_CURRENT_KEYS = (
    "cpu_time_total", "device_time_total", "self_cpu_time_total", "self_device_time_total",
    "cpu_memory_usage", "device_memory_usage", "self_cpu_memory_usage", "self_device_memory_usage",
)


def _event_pattern(group: str) -> str:
    values = ", ".join(f"'{key}': {group}{_NUM if 'time' in key else _INT})" for key in _CURRENT_KEYS)
    return rf"{group}{_STR}): \{{{values}\}}"


EventRow = tuple[str, "float | None", "float | None", "float | None", "float | None",
                 "int | None", "int | None", "int | None", "int | None", "int | None"]
"""(name, then the other ``TorchEvent`` fields in order) of one event, as ``TorchEvent`` holds them."""
EVENT_FIELDS = ("name", *(name for name, _, _ in FIELDS))
"""The ``TorchEvent`` fields in the order of an ``EventRow``."""

# The canonical text is ``{EVENT, EVENT, ...}``. It is split at each event (the first right after the opening
# brace, each other one after ", ") and is canonical when nothing lies between the events and only the closing
# brace after the last: one pass, where matching the whole text and then finding its events took two (half the
# regex time). An event matched at a given place has only one possible end, so the split finds the events a
# match of the whole would hold.
_EVENT_SPLIT = re.compile(r"(?:\A\{|, )" + _event_pattern("("))
_STRIDE = 2 + len(_CURRENT_KEYS)
"""Items of ``_EVENT_SPLIT.split`` per event: the text before it, its name and its values."""


def _fast_torch_rows(text: str) -> list[EventRow] | None:
    parts = _EVENT_SPLIT.split(text)
    if len(parts) == 1:
        return [] if text == "{}" else None
    if parts[-1] != "}" or any(parts[0:-1:_STRIDE]):
        return None
    names = [name[1:-1] for name in parts[1::_STRIDE]]
    times = [[float(t) for t in parts[k::_STRIDE]] for k in range(2, 6)]
    if not all(math.isfinite(t) for column in times for t in column):
        times = [[t if math.isfinite(t) else None for t in column] for column in times]
    memory = [[int(m) for m in parts[k::_STRIDE]] for k in range(6, _STRIDE)]
    # A dict keeps a repeated event's first position and its last values, as the general reader does.
    return list(dict(zip(names, zip(names, *times, *memory, [None] * len(names), strict=True), strict=True)).values())


def _fast_torch_profile(text: str) -> tuple[TorchEvent, ...] | None:
    rows = _fast_torch_rows(text)
    return None if rows is None else tuple(TorchEvent(*row) for row in rows)


def torch_rows(profile: str) -> list[EventRow]:
    """``parse_torch_profile(profile)`` as plain rows: the bulk path (``profiles.columnar``), which skips building
    a ``TorchEvent`` per event.

    Example:
        >>> torch_rows("{'k': {'cpu_time_total': 2.5, 'device_time_total': 1.0, 'self_cpu_time_total': 0.5, "
        ...            "'self_device_time_total': 1.0, 'cpu_memory_usage': 0, 'device_memory_usage': 0, "
        ...            "'self_cpu_memory_usage': 0, 'self_device_memory_usage': 0}}")
        [('k', 2.5, 1.0, 0.5, 1.0, 0, 0, 0, 0, None)]

    Raises:
        ProfileError: as ``parse_torch_profile``.
    """
    rows = _fast_torch_rows(profile)
    if rows is not None:
        return rows
    return [tuple(getattr(event, name) for name in EVENT_FIELDS) for event in parse_torch_profile(profile)]  # type: ignore[misc]


def parse_torch_profile(profile: str | Mapping[str, Any]) -> tuple[TorchEvent, ...]:
    """The events of a torch-profile dict (the Python-literal string, or the dict itself).

    Unknown per-event keys are an error, so a changed format is noticed rather than silently dropped.

    Raises:
        ProfileError: not a literal, or not ``{event name: {key: number}}``.
    """
    if isinstance(profile, str):
        fast = _fast_torch_profile(profile)
        if fast is not None:
            return fast
    data = expect_mapping(parse_literal(profile) if isinstance(profile, str) else profile, "a torch profile")
    events = []
    for name, entry in data.items():
        entry = expect_mapping(entry, f"torch event {name!r}")
        unknown = set(entry) - KNOWN_KEYS
        if unknown:
            raise ProfileError(f"torch event {name!r} has unknown key(s) {sorted(map(str, unknown))}")
        values = {}
        for field_name, keys, is_time in FIELDS:
            key = next((k for k in keys if k in entry), None)
            values[field_name] = None if key is None else _value(entry[key], is_time, f"{name!r} {key}")
        events.append(TorchEvent(str(name), **values))
    return tuple(events)


def events_from_key_averages(averages: Iterable[Any]) -> tuple[TorchEvent, ...]:
    """Events from ``torch.profiler.profile().key_averages()`` (for profiling a kernel ourselves).

    Example:
        >>> import torch  # doctest: +SKIP
        >>> with torch.profiler.profile() as prof:  # doctest: +SKIP
        ...     torch.ones(4) @ torch.ones(4)
        >>> events_from_key_averages(prof.key_averages())[0].name  # doctest: +SKIP
        'aten::ones'
    """
    data: dict[str, dict[str, float | int]] = {}
    for avg in averages:
        entry: dict[str, float | int] = {}
        for _, keys, _ in FIELDS:
            for key in keys:
                value = getattr(avg, key, None)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    entry[key] = value
                    break
        data[str(avg.key)] = entry
    return parse_torch_profile(data)
