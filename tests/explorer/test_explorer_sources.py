"""The sources & stats page under AppTest on the hand-made archive."""

from __future__ import annotations

from explorer_testing import assert_clean, texts
from handmade_archive import Handmade


def test_sources_page_lists_sources_gpus_licenses_and_derived_data(open_app, handmade: Handmade) -> None:
    at = open_app(handmade.path, "sources")
    assert_clean(at)
    frames = dict(zip(["source_stats", "source_gpu", "origins", "derived"], [d.value for d in at.dataframe],
                      strict=True))
    assert frames["source_stats"]["source"].tolist() == ["alpha", "beta"]
    assert frames["source_stats"]["license"].tolist() == ["MIT", "MIT"]
    per_gpu = frames["source_gpu"]
    assert per_gpu[["source", "gpu", "kernels"]].to_dict("records") == [
        {"source": "alpha", "gpu": "A100", "kernels": 1}, {"source": "alpha", "gpu": "H100", "kernels": 4},
        {"source": "beta", "gpu": "A100", "kernels": 1}, {"source": "beta", "gpu": "H100", "kernels": 3}]
    assert frames["derived"]["rows"].tolist() == [0, 0, 0, 0, 0]
    assert {m.label: m.value for m in at.metric}["Kernels"] == "9"
    assert "kernel-archive embed" in texts(at)
