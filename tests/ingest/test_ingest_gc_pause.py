"""The cyclic garbage collector is off for an ingest's bulk work and back as it was afterwards."""

from __future__ import annotations

import gc
import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path

import pytest

from ingest.adapter import IngestRequest
from ingest.gc_pause import gc_paused
from ingest.runner import ingest_source
from ingest.workers import init_worker

SAKANA_SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "sakana-archive" / "sample.jsonl"


def test_the_collector_is_restored_even_when_the_block_fails() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # "as it was": a caller that had it off keeps it off
    finally:
        gc.enable()


def test_a_parser_worker_runs_without_the_collector() -> None:
    # Forked as the adapter's pool is: a spawned worker would import this process's __main__, which other tests
    # in the same session may have pointed at the Streamlit app.
    method = "fork" if "fork" in get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(1, mp_context=get_context(method), initializer=init_worker,
                             initargs=(os.getpid(),)) as pool:
        assert pool.submit(gc.isenabled).result() is False
    assert gc.isenabled()


def test_an_ingest_pauses_the_collector_and_gives_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not SAKANA_SAMPLE.is_file():
        pytest.skip(f"{SAKANA_SAMPLE} not found (../shared/data)")
    import dataclasses

    import ingest.runner
    from ingest.registry import get_adapter

    seen: list[bool] = []
    adapter = get_adapter("sakana")

    def watching_read(request: IngestRequest):  # type: ignore[no-untyped-def]
        for bundle in adapter.read(request):
            seen.append(gc.isenabled())
            yield bundle

    watching = dataclasses.replace(adapter, read=watching_read)
    monkeypatch.setattr(ingest.runner, "get_adapter", lambda name: watching)
    summary = ingest_source(tmp_path / "a.duckdb", "sakana", IngestRequest("sakana", str(SAKANA_SAMPLE)))
    assert summary.rows_added > 0
    assert seen and not any(seen)
    assert gc.isenabled()
