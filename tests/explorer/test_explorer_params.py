"""Parsing filter values and ids from the URL."""

from __future__ import annotations

import pytest
from explorer_testing import HOSTILE_VALUES

from explorer import params as url


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_values_never_pass_as_ids_or_numbers(value: str) -> None:
    assert url.clean_id(value) is None
    assert url.parse_float(value) is None
    assert url.parse_bool(value) is None
    cleaned = url.clean_text(value)
    assert cleaned is None or (len(cleaned) <= url.MAX_PARAM_CHARS and cleaned.isprintable())


def test_ids_keep_their_shape() -> None:
    assert url.clean_id(" 0123abcdef012345 ") == "0123abcdef012345"
    assert url.clean_id("a" * 129) is None


def test_numbers_must_be_finite_and_in_range() -> None:
    assert url.parse_float("2.5") == 2.5
    assert url.parse_float("nan") is None and url.parse_float("inf") is None
    assert url.parse_float("-1") is None and url.parse_float("1e7") is None


def test_pick_known_keeps_known_values_in_their_type_and_reports_the_rest() -> None:
    kept, dropped = url.pick_known(["1", "3,2", "9", "<b>"], [1, 2, 3])
    assert kept == [1, 3, 2]
    assert dropped == ["9", "<b>"]


def test_encode_leaves_out_empty_values() -> None:
    assert url.encode({"q": None, "level": [1, 2], "hand": True, "off": False, "sort": "compile", "t": ()}) == {
        "level": ["1", "2"], "hand": "1", "sort": "compile"}
