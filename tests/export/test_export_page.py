"""The explorer's Export page on the sample archive: counts, preview, zip download and the token check."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "explorer" / "pages" / "export.py"


@pytest.fixture
def page(sample_archive_master: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("KERNEL_ARCHIVE_DB", str(sample_archive_master))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    app = AppTest.from_file(str(PAGE), default_timeout=120)
    return app.run()


def test_page_shows_counts_and_a_preview_and_zips(page) -> None:
    assert not page.exception
    labels = {m.label: m.value for m in page.metric}
    assert int(labels["Rows"].replace(",", "")) > 0
    preview = page.dataframe[0].value
    assert {"prompt", "completion", "task_id"} <= set(preview.columns)
    assert preview["prompt"].iloc[0].startswith("[system]")
    push = next(b for b in page.button if b.label == "Push to hub")
    assert push.disabled
    assert any("HF_TOKEN" in w.value for w in page.warning)

    page.button(key="ex_zip").click().run()
    assert not page.exception
    data = page.session_state["ex_zip_bytes"]
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "README.md" in names and "data/default/train-00000-of-00001.parquet" in names


def test_page_switches_to_dpo_with_its_policy(page) -> None:
    page.segmented_control(key="ex_kind").set_value("dpo").run()
    assert not page.exception
    assert {"chosen", "rejected"} <= set(page.dataframe[0].value.columns)
    assert page.number_input(key="ex_pairs").value == 16
