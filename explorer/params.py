"""Filters and deep links read from the URL (``st.query_params``), validated before they reach a query.

Unknown or malformed values are dropped and reported, never passed on as they are: a page gets
either a known value or nothing. Every value that does reach a query is bound as a parameter.

Example:
    >>> parse_float("2.5"), parse_float("1e999"), parse_float("'; DROP TABLE kernels; --")
    (2.5, None, None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

MAX_PARAM_CHARS = 200
ID_PATTERN = re.compile(r"[0-9A-Za-z_.:-]{1,128}")
T = TypeVar("T")


def clean_text(value: str | None, max_chars: int = MAX_PARAM_CHARS) -> str | None:
    """``value`` stripped, without control characters and at most ``max_chars`` long; None if empty."""
    if value is None:
        return None
    text = "".join(ch for ch in str(value) if ch.isprintable()).strip()[:max_chars]
    return text or None


def clean_id(value: str | None) -> str | None:
    """An archive id (kernel_id, task_id) if ``value`` has the shape of one, else None."""
    if value is None:
        return None
    text = str(value).strip()
    return text if ID_PATTERN.fullmatch(text) else None


def parse_float(value: str | None, lo: float = 0.0, hi: float = 1e6) -> float | None:
    """A finite float within [lo, hi], or None."""
    try:
        number = float(str(value).strip()[:40])
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and lo <= number <= hi else None


def parse_bool(value: str | None) -> bool | None:
    """``1/true/yes/on`` -> True, ``0/false/no/off`` -> False, anything else None."""
    text = (value or "").strip().lower()
    return {"1": True, "true": True, "yes": True, "on": True,
            "0": False, "false": False, "no": False, "off": False}.get(text)


def pick_known(raw: Iterable[str], known: Sequence[T]) -> tuple[list[T], list[str]]:
    """The values of ``raw`` that name one of ``known`` (compared as text), and the ones that did not."""
    by_text: dict[str, T] = {str(k): k for k in known}
    kept: list[T] = []
    dropped: list[str] = []
    for value in raw:
        text = str(value).strip()
        for part in text.split(",") if "," in text else [text]:
            if part in by_text and by_text[part] not in kept:
                kept.append(by_text[part])
            elif part:
                dropped.append(part[:40])
    return kept, dropped


def encode(values: dict[str, Any]) -> dict[str, str | list[str]]:
    """Filter values as query parameters, leaving out the empty ones."""
    encoded: dict[str, str | list[str]] = {}
    for key, value in values.items():
        if value is None or value is False or value == "" or (isinstance(value, list | tuple) and not value):
            continue
        if isinstance(value, list | tuple):
            encoded[key] = [str(v) for v in value]
        elif value is True:
            encoded[key] = "1"
        else:
            encoded[key] = str(value)
    return encoded
