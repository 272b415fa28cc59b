"""profiles.torch_profile: the torch-profiler event dict of robust-kbench and the archive."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from profiles import ProfileError, TorchEvent, parse_torch_profile
from profiles.literal import parse_literal
from profiles.torch_profile import _fast_torch_profile, events_from_key_averages


def _real_profiles(shared_data: Path) -> list[str]:
    csv.field_size_limit(1 << 26)
    with open(shared_data / "robust-kbench" / "highlighted-results.csv", newline="") as handle:
        return [row["Torch Profile"] for row in csv.DictReader(handle) if row["Torch Profile"]]


def test_real_robust_kbench_profiles(shared_data: Path) -> None:
    profiles = _real_profiles(shared_data)
    assert len(profiles) == 10  # two of the 12 rows have no torch profile
    events = parse_torch_profile(profiles[0])
    assert [e.name for e in events][:3] == ["aten::to", "aten::_to_copy", "aten::copy_"]
    copy = events[2]
    assert copy.self_cpu_time_total_us == pytest.approx(729763.28, rel=1e-6)
    assert copy.device_time_total_us == pytest.approx(8226.342, rel=1e-6)
    assert events[0].device_memory_usage == 50331648
    kernel = next(e for e in events if e.name.startswith("layernorm_transform_kernel"))
    assert kernel.cpu_time_total_us == 0 and kernel.self_device_time_total_us > 0
    for text in profiles:
        assert _fast_torch_profile(text) == parse_torch_profile(parse_literal(text))


def test_pre_2_4_cuda_key_names_are_read_as_device() -> None:
    events = parse_torch_profile("{'aten::mm': {'cpu_time_total': 5, 'cuda_time_total': 4.5, "
                                 "'self_cuda_time_total': 4.5, 'cuda_memory_usage': 1024, 'count': 3}}")
    assert events == (TorchEvent("aten::mm", cpu_time_total_us=5.0, device_time_total_us=4.5,
                                 self_device_time_total_us=4.5, device_memory_usage=1024, calls=3),)


def test_negative_memory_is_kept() -> None:
    text = ("{'aten::empty': {'cpu_time_total': 1.0, 'device_time_total': 0.0, 'self_cpu_time_total': 1.0, "
            "'self_device_time_total': 0.0, 'cpu_memory_usage': 0, 'device_memory_usage': -512, "
            "'self_cpu_memory_usage': 0, 'self_device_memory_usage': -512}}")
    assert parse_torch_profile(text)[0].self_device_memory_usage == -512


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{'aten::mm': {'cpu_time_total': 'slow'}}", "must be a number"),
        ("{'aten::mm': {'flops': 10}}", "unknown key"),
        ("{'aten::mm': [1, 2]}", "must be a dict"),
        ("{'aten::mm': {'device_memory_usage': 1.5}}", "whole number"),
    ],
)
def test_malformed_profiles(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_torch_profile(text)


def test_events_from_a_real_cpu_profiler_run() -> None:
    torch = pytest.importorskip("torch")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ones(64, 64) @ torch.ones(64, 64)
    events = events_from_key_averages(prof.key_averages())
    names = {e.name for e in events}
    assert "aten::mm" in names or "aten::matmul" in names
    assert all(e.calls and e.calls >= 1 for e in events)
    assert all(e.cpu_time_total_us is not None and e.cpu_time_total_us >= 0 for e in events)


_EVENT = ("'cpu_time_total': {t}, 'device_time_total': 1.0, 'self_cpu_time_total': 0.5, 'self_device_time_total': "
          "1.0, 'cpu_memory_usage': 0, 'device_memory_usage': {m}, 'self_cpu_memory_usage': 0, "
          "'self_device_memory_usage': 0")


@pytest.mark.parametrize(
    ("text", "fast"),
    [
        ("{}", True), ("}", False), ("{'a': {" + _EVENT.format(t=1, m=-5) + "}}", True),
        ("{'a': {" + _EVENT.format(t="1e999", m=0) + "}, 'b': {" + _EVENT.format(t=2.5, m=3) + "}, 'a': {"
         + _EVENT.format(t=7, m=8) + "}}", True),  # a repeated name keeps its first place and its last values
        ("{'a': {" + _EVENT.format(t=1, m=0) + "},  'b': {" + _EVENT.format(t=1, m=0) + "}}", False),  # 2 spaces
        ("{'a': {" + _EVENT.format(t=1, m=0) + "}} ", False), ("{'x': {'count': 3, 'cuda_time_total': 2}}", False),
        ("{'m': {}}", False), ("{'a': {" + _EVENT.format(t=1, m=0) + "}{'b': {" + _EVENT.format(t=1, m=0) + "}}", False),
    ],
)
def test_bulk_rows_equal_the_parsed_events(text: str, fast: bool) -> None:
    """``torch_rows`` (the ingest's bulk path, one split instead of a match and a search) holds exactly the
    events ``parse_torch_profile`` gives, and refuses what it refuses."""
    from profiles.torch_profile import EVENT_FIELDS, torch_rows

    assert (_fast_torch_profile(text) is not None) == fast
    try:
        events = parse_torch_profile(text)
    except ProfileError as error:
        with pytest.raises(ProfileError, match=re.escape(str(error))):
            torch_rows(text)
        return
    assert torch_rows(text) == [tuple(getattr(e, name) for name in EVENT_FIELDS) for e in events]


def test_bulk_rows_of_real_profiles(shared_data: Path) -> None:
    from profiles.torch_profile import EVENT_FIELDS, torch_rows

    for text in _real_profiles(shared_data):
        rows = torch_rows(text)
        assert rows and rows == [tuple(getattr(e, name) for name in EVENT_FIELDS) for e in parse_torch_profile(text)]
