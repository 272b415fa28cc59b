"""profiles.ncu: the archive's NCU dict and raw ``ncu --csv --page details`` output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiles import NcuMetric, ProfileError, parse_ncu, parse_ncu_csv, parse_ncu_dict
from profiles.literal import parse_literal
from profiles.ncu import _fast_ncu_dict, parse_ncu_csv_by_kernel


def _sample_profiles(shared_data: Path) -> list[str]:
    rows = [json.loads(line) for line in (shared_data / "sakana-archive" / "sample.jsonl").open()]
    return [row["NCU_Profile"] for row in rows if row["NCU_Profile"]]


def test_archive_dict_has_27_metrics_of_5_launches(shared_data: Path) -> None:
    profiles = [parse_ncu_dict(text) for text in _sample_profiles(shared_data)]
    assert len(profiles) == 62
    assert {len(p.metrics) for p in profiles} == {27}
    assert {m.n for p in profiles for m in p.metrics} == {5}
    first = profiles[0]
    assert first.metric("Achieved Occupancy") == NcuMetric("Achieved Occupancy", "%", 98.36600000000001,
                                                          0.00022399999999992226, 5)
    assert first.metric("Memory Throughput").unit == "byte/second"
    assert first.rules[0].name == "HighPipeUtilization" and first.rules[0].type == "WRN"


def test_fast_path_equals_the_general_reader(shared_data: Path) -> None:
    for text in _sample_profiles(shared_data):
        fast = _fast_ncu_dict(text)
        assert fast is not None
        assert fast == parse_ncu_dict(parse_literal(text))


_M = "'{name}': {{'unit': '%', 'avg_value': {v}, 'variance': 0.0, 'n': 5}}"
_R = "'{name}': {{'type': 'WRN', 'description': {d}}}"


@pytest.mark.parametrize(
    ("text", "fast"),
    [
        ("{'metrics': {}, 'rules': {}}", True),
        ("{'metrics': {" + _M.format(name="a", v=1) + "}, 'rules': {}}", True),
        ("{'metrics': {}, 'rules': {" + _R.format(name="r", d="'d'") + "}}", True),
        ("{'metrics': {" + _M.format(name="a", v=1) + ", " + _M.format(name="b", v="1e999") + ", "
         + _M.format(name="a", v=2) + "}, 'rules': {" + _R.format(name="r", d="None") + "}}", True),
        # metric-like text in a double-quoted rule description: the general path reads it
        ("{'metrics': {" + _M.format(name="a", v=1) + "}, 'rules': {" + _R.format(name="r", d='"x, ' + _M.format(
            name="m", v=3) + '"') + "}}", False),
        ("{'metrics': {" + _M.format(name="a", v=1) + "},  'rules': {}}", False),
        ("{'metrics': {" + _M.format(name="a", v=1) + "}, 'rules': {}} ", False),
        ("{'metrics': {" + _M.format(name="a", v=1) + _M.format(name="b", v=1) + "}, 'rules': {}}", False),
        ("{'metrics': {}, 'rules': {" + _R.format(name="r", d="'d'") + "}, 'x': 1}", False),
    ],
)
def test_fast_path_reads_what_the_general_reader_reads(text: str, fast: bool) -> None:
    """The fast path splits the text at its items; where it takes a text, it reads what the general reader reads."""
    from profiles.ncu import ncu_rows

    assert (_fast_ncu_dict(text) is not None) == fast
    try:
        general = parse_ncu_dict(parse_literal(text))
    except ProfileError:
        assert not fast
        return
    assert parse_ncu_dict(text) == general
    assert ncu_rows(text) == ([(m.name, m.unit, m.value, m.variance, m.n) for m in general.metrics],
                              [(r.name, r.type, r.description) for r in general.rules])


def test_general_reader_handles_layouts_the_fast_path_does_not() -> None:
    text = ("{'rules': {}, 'metrics': {'SM Busy': {'unit': '%', 'avg_value': 5, 'variance': None, 'n': 5.0}, "
            "'Odd \\'name\\'': {'unit': None, 'avg_value': -1.5, 'variance': 0.0, 'n': 1}}}")
    assert _fast_ncu_dict(text) is None
    profile = parse_ncu_dict(text)
    assert profile.metrics == (NcuMetric("SM Busy", "%", 5.0, None, 5), NcuMetric("Odd 'name'", None, -1.5, 0.0, 1))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "must be a dict"),
        ("{'metrics': {}, 'extra': 1}", "not \\['extra'\\]"),
        ("{'metrics': {'a': {'unit': '%', 'avg_value': 'high', 'variance': 0, 'n': 1}}, 'rules': {}}",
         "avg_value must be a number"),
        ("{'metrics': {'a': {'unit': '%', 'avg_value': 1.0, 'variance': 0, 'n': 1.5}}, 'rules': {}}",
         "n must be a whole number"),
        ("{'metrics': __import__('os').getcwd()}", "not a Python literal"),
    ],
)
def test_malformed_dicts_are_profile_errors(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_ncu_dict(text)


# Raw `ncu --csv --page details` output of one kernel profiled over 5 launches (`-c 5`), in the column
# layout Nsight Compute 2023.2+ prints (ID, Process ID, Process Name, Host Name, Kernel Name, Context,
# Stream, Block Size, Grid Size, Device, CC, Section Name, Metric Name, Metric Unit, Metric Value, Rule
# Name, Rule Type, Rule Description, Estimated Speedup Type, Estimated Speedup), as found in public
# parsers' fixtures (e.g. the nsightful and ncu2markdown test suites on GitHub) and NVIDIA's docs:
# rule rows have an empty Metric Name, values carry thousands separators, and ncu's own log lines
# (==PROF==) surround the table. The Issue Slots Busy launches are chosen so that their mean and
# population variance are the archive's (42.712, 9.6e-05) for the sample's first kernel.
HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
    '"Rule Description","Estimated Speedup Type","Estimated Speedup"'
)
KERNEL = "matmul_tiled_kernel(const float *, const float *, float *, int)"


def _row(launch: int, section: str, metric: str, unit: str, value: str, rule: tuple[str, ...] = ("",) * 5) -> str:
    fields = [str(launch), "4242", "python3.11", "127.0.0.1", KERNEL, "1", "7", "(32, 32, 1)", "(128, 128, 1)",
              "0", "9.0", section, metric, unit, value, *rule]
    return ",".join(f'"{field}"' for field in fields)


def _ncu_csv() -> str:
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3.11)",
             '==PROF== Profiling "matmul_tiled_kernel" - 0: 0%....50%....100% - 9 passes', HEADER]
    busy = ["42.70", "42.70", "42.72", "42.72", "42.72"]
    throughput = ["3,194,949,494.95", "3,194,949,494.95", "3,194,949,494.95", "3,194,949,494.95", "3,194,949,494.95"]
    for launch in range(5):
        lines += [
            _row(launch, "Compute Workload Analysis", "Issue Slots Busy", "%", busy[launch]),
            _row(launch, "Memory Workload Analysis", "Memory Throughput", "byte/second", throughput[launch]),
            _row(launch, "Occupancy", "Block Limit Registers", "block", "2"),
            _row(launch, "Launch Statistics", "Function Cache Configuration", "", "CachePreferNone"),
            _row(launch, "Occupancy", "", "", "", ("AchievedOccupancy", "OPT",
                 "The difference between calculated theoretical (100.0%) and measured achieved occupancy (98.4%) "
                 "can be the result of warp scheduling overheads.", "local", "1.63")),
        ]
    lines.append("==PROF== Disconnected from process 4242")
    return "\n".join(lines) + "\n"


def test_raw_csv_aggregates_launches_like_the_archive() -> None:
    profile = parse_ncu_csv(_ncu_csv())
    busy = profile.metric("Issue Slots Busy")
    assert busy is not None and busy.n == 5 and busy.unit == "%"
    assert busy.value == pytest.approx(42.712)
    assert busy.variance == pytest.approx(9.6e-05)
    throughput = profile.metric("Memory Throughput")
    assert throughput is not None and throughput.value == pytest.approx(3_194_949_494.95)
    assert throughput.variance == pytest.approx(0.0, abs=1e-3)
    assert profile.metric("Function Cache Configuration") is None
    assert profile.text_values == {"Function Cache Configuration": "CachePreferNone"}
    assert [(r.name, r.type, r.estimated_speedup) for r in profile.rules] == [("AchievedOccupancy", "OPT", 1.63)]
    assert profile.kernel_name == KERNEL
    assert parse_ncu(_ncu_csv()) == profile


def test_raw_csv_with_two_kernels_needs_a_choice() -> None:
    other = _ncu_csv().replace(KERNEL, "bias_relu_kernel(float *, int)")
    both = _ncu_csv() + "\n".join(line for line in other.splitlines() if line.startswith('"0"'))
    assert set(parse_ncu_csv_by_kernel(both)) == {KERNEL, "bias_relu_kernel(float *, int)"}
    with pytest.raises(ProfileError, match="several kernels"):
        parse_ncu_csv(both)
    assert parse_ncu_csv(both, kernel="bias_relu").metric("Issue Slots Busy").n == 1


def test_same_metric_in_two_sections_is_kept_apart() -> None:
    text = "\n".join([HEADER, _row(0, "GPU Speed Of Light Throughput", "Memory Throughput", "%", "85.6"),
                      _row(0, "Memory Workload Analysis", "Memory Throughput", "byte/second", "1,000")])
    names = [m.name for m in parse_ncu_csv(text).metrics]
    assert names == ["Memory Throughput", "Memory Throughput [Memory Workload Analysis]"]


def test_older_layout_without_rule_columns() -> None:
    text = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Kernel Time","Context","Stream",'
            '"Section Name","Metric Name","Metric Unit","Metric Value"\n'
            '"0","1","p","h","k","2024-Jan-01 00:00:00","1","7","Occupancy","Achieved Occupancy","%","61.5"\n')
    assert parse_ncu_csv(text).metrics == (NcuMetric("Achieved Occupancy", "%", 61.5, 0.0, 1),)


def test_not_an_ncu_table() -> None:
    with pytest.raises(ProfileError, match="no ncu CSV table"):
        parse_ncu_csv("==ERROR== the application returned an error code (1)\n")


def test_bulk_rows_equal_the_parsed_profile(shared_data: Path) -> None:
    """``ncu_rows`` (the ingest's bulk path) holds exactly what ``parse_ncu_dict`` gives, fast path or not."""
    from profiles.ncu import ncu_rows

    rows = [json.loads(line) for line in (shared_data / "sakana-archive" / "sample.jsonl").open()]
    texts = [row["NCU_Profile"] for row in rows if row["NCU_Profile"]]
    texts.append("{'metrics': {'a': {'unit': '%', 'avg_value': 1, 'variance': 0, 'n': 5}, 'a': {'unit': None, "
                 "'avg_value': 1e400, 'variance': None, 'n': None}}, 'rules': {'r': {'type': None, 'description': 'd'}}}")
    texts.append('{"metrics": {"b": {"unit": "%", "avg_value": 2.5}}, "rules": {}}')  # not str(dict): general path
    for text in texts:
        parsed = parse_ncu_dict(text)
        assert ncu_rows(text) == ([(m.name, m.unit, m.value, m.variance, m.n) for m in parsed.metrics],
                                  [(r.name, r.type, r.description) for r in parsed.rules])
