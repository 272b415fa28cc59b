"""The kernel page under AppTest on the hand-made archive."""

from __future__ import annotations

import pytest
from explorer_testing import (
    HOSTILE_VALUES,
    KERNEL_TABS,
    add_derived_rows,
    assert_clean,
    code_boxes,
    every_tab,
    frames,
    texts,
)
from handmade_archive import Handmade


def test_kernel_page_shows_code_reference_measurements_profiles_and_lineage(open_app, handmade: Handmade) -> None:
    runs = every_tab(open_app, handmade.path, "kernel", KERNEL_TABS, kernel=handmade.kernels["a1"])
    for at in runs:
        assert_clean(at)
    at = runs[0]
    assert at.title[0].value == "a1\\_kernel"
    codes = code_boxes(at)
    assert any("// kernel a1" in c for c in codes)
    assert any("torch.relu" in c for c in codes)
    profiles = texts(runs[2])
    found = frames(runs)
    columns = [set(f.columns) for f in found]
    ncu = next(f for f in found if "metric" in f)
    assert ncu["metric"].tolist() == ["SM Busy"] and ncu["value"].tolist() == [42.7]
    assert "SOLBottleneck" in profiles
    assert set(next(f for f in found if "event" in f)["event"]) == {"aten::copy_", "k()"}
    groups = next(f for f in found if "findings" in f)
    assert groups.to_dict("records") == [
        {"check_name": "bugprone-macro-parentheses", "severity": "warning", "findings": 1}]
    scores = next(f for f in found if "meaning" in f)
    assert scores["name"].tolist() == ["demo.score"] and scores["value"].tolist() == [7.0]
    lineage = next(f for f in found if "lineage_step" in f and "kernel_name" in f)
    assert lineage["kernel_name"].tolist() == ["a1_kernel", "a2_kernel"]
    assert any({"speedup_eager", "speedup_compile", "gpu"} <= c for c in columns)
    assert [m.value for m in at.metric][:5] == ["unverified", "1", "1 of 1", "2.50x", "1.20x"]
    downloads = at.get("download_button")
    assert [d.proto.label for d in downloads] == ["Download kernel source", "Download eval script"]
    assert "kernel-archive embed" in texts(runs[4])


def test_failed_kernel_shows_its_error_text(open_app, handmade: Handmade) -> None:
    at = open_app(handmade.path, "kernel", kernel=handmade.kernels["b2"], tab="Measurements")
    assert_clean(at)
    assert "max_diff 3.2 over tolerance" in code_boxes(at)
    assert [m.value for m in at.metric][:3] == ["unverified", "1", "0 of 1"]


def test_related_kernels_and_tags_appear_once_embedded(open_app, handmade: Handmade) -> None:
    ids = [handmade.kernels[label] for label in ("a1", "a2", "b1")]
    add_derived_rows(handmade.path, ids, tagged={ids[0]: "shared-memory-tiling"})
    runs = every_tab(open_app, handmade.path, "kernel", ("Related", "Static analysis & tags"), kernel=ids[0])
    found = frames(runs)
    neighbours = next(f for f in found if "distance" in f)
    assert neighbours["kernel_id"].tolist() == ids[1:]
    tags = next(f for f in found if "evidence" in f and "tag" in f)
    assert tags.to_dict("records") == [{"tag": "shared-memory-tiling", "line": 2,
                                        "evidence": "__global__ void k() {}"}]


def test_without_an_id_the_page_explains_how_to_pick_one(open_app, handmade: Handmade) -> None:
    at = open_app(handmade.path, "kernel")
    assert_clean(at)
    assert "Pick a kernel" in texts(at)


@pytest.mark.parametrize("value", HOSTILE_VALUES[:-1])
def test_hostile_kernel_ids_get_a_friendly_not_found(open_app, handmade: Handmade, value: str) -> None:
    at = open_app(handmade.path, "kernel", kernel=value)
    assert_clean(at)
    assert "No kernel with that id is in this archive." in texts(at)
    assert not at.code and not code_boxes(at)


def test_verification_history_lists_runs_and_checks_worst_first(open_app, handmade: Handmade) -> None:
    from archive_db.bundle import Bundle
    from archive_db.connection import connect
    from archive_db.writer import ArchiveWriter, utcnow

    kernel_id = handmade.kernels["a1"]
    bundle = Bundle()
    bundle.add("verifications", verification_id="v1", kernel_id=kernel_id, started_at=utcnow(), status="flagged",
               mode="full", harness_version="test", gpu="H100", trials=5, kernel_ms_median=0.5,
               report={"kernels": {"candidate": [{"device_us": 300.0}, {"device_us": 100.0}]}})
    for check, verdict in (("aliasing", "pass"), ("timer-patching", "fail"), ("lower-precision", "warn")):
        bundle.add("verification_checks", verification_id="v1", check_name=check, verdict=verdict,
                   evidence=f"evidence for {check}")
    with connect(handmade.path) as con, ArchiveWriter(con) as writer:
        writer.write(bundle)
    header = open_app(handmade.path, "kernel", kernel=kernel_id)
    assert_clean(header)
    assert [m.value for m in header.metric][0] == "flagged"
    assert "timer-patching" in header.metric[0].proto.help
    assert "timer\\-patching" in texts(header)
    at = open_app(handmade.path, "kernel", kernel=kernel_id, tab="Verification")
    assert_clean(at)
    assert "evidence for timer-patching" in texts(at)
    runs = next(d.value for d in at.dataframe if "status" in d.value and "mode" in d.value)
    assert runs[["status", "gpu", "trials"]].to_dict("records") == [{"status": "flagged", "gpu": "H100", "trials": 5}]
    assert (runs["gpu_ms"].iloc[0], runs["gpu_busy"].iloc[0]) == (pytest.approx(0.4), pytest.approx(0.8))
    checks = next(d.value for d in at.dataframe if "verdict" in d.value)
    assert checks["verdict"].tolist() == ["fail", "warn", "pass"]
