"""Selection, near-duplicates, splits and DPO pairing on the tiny export archive (tests/export/conftest.py)."""

from __future__ import annotations

import pytest

from archive_db.connection import connect
from archive_db.export import ExportFilter, ExportRequest, PairingPolicy, build_export
from archive_db.export.dedupe import code_fingerprint, normalise_code
from archive_db.export.split import split_key, split_of


def _build(path, request):
    with connect(path, read_only=True) as con:
        return build_export(con, request)


def _rows(result, split=None):
    return [row for _, s, t in result.iter_tables() if split in (None, s) for row in t.to_pylist()]


def test_c_comments_and_whitespace_do_not_matter_but_code_does() -> None:
    a = 'int f() { return 1; } // one\nconst char* s = "// kept";'
    b = '/* header */ int f(){return 1;}\n\tconst char* s = "// kept";'
    assert code_fingerprint(a, "cuda-binding") == code_fingerprint(b, "cuda-binding")
    assert normalise_code(a, "cuda-binding").endswith('"//kept";')
    assert code_fingerprint(a, "cuda-binding") != code_fingerprint(a.replace("1", "2"), "cuda-binding")


def test_python_comments_go_but_floor_division_stays() -> None:
    a = 'x = a // b  # halve\nsrc = """__global__ void k() { /* c */ }"""\n'
    b = 'x = a//b\nsrc = """__global__ void k() {  }"""  # inline cuda\n'
    assert code_fingerprint(a, "model-new") == code_fingerprint(b, "model-new")
    assert "a//b" in normalise_code(a, "model-new")
    assert code_fingerprint("x = a // b", "model-new") != code_fingerprint("x = a", "model-new")


def test_split_is_stable_and_keyed_by_name() -> None:
    assert split_key("1_Relu", "t1") == split_key(" 1_relu ", "t2")
    assert split_key(None, "t1") != split_key(None, "t2")
    keys = [split_key(f"task_{i}", str(i)) for i in range(2000)]
    share = sum(split_of(k, 0.2) == "test" for k in keys) / len(keys)
    assert 0.17 < share < 0.23
    assert [split_of(k, 0.2) for k in keys] == [split_of(k, 0.2) for k in keys]


def test_sft_keeps_correct_unflagged_kernels_once(export_archive) -> None:
    result = _build(export_archive.path, ExportRequest("sft", test_size=0.0))
    ids = export_archive.kernels
    got = {row["kernel_id"] for row in _rows(result)}
    assert got == {ids[k] for k in ("fast", "lib", "mid", "slow", "v0", "tanh_a", "tanh_b")}
    assert result.stats["near_duplicates_collapsed"] == 1
    assert result.stats["kernels_without_reference_task"] == 1
    assert result.stats["kernels_flagged"] == 1 and result.stats["kernels_verified"] == 1
    assert result.stats["kernels_failed_by_verifier"] == 1
    fast = next(r for r in _rows(result) if r["kernel_id"] == ids["fast"])
    assert fast["verification_status"] == "passed" and fast["rank_in_task"] == 1 and fast["license"] == "MIT"
    assert [m["role"] for m in fast["prompt"]] == ["system", "user"]
    assert "torch.relu" in fast["prompt"][1]["content"]
    assert fast["completion"][0]["role"] == "assistant" and "fmaxf" in fast["completion"][0]["content"]


@pytest.mark.parametrize(
    ("f", "expected"),
    [
        (ExportFilter(hand_written_only=True), {"fast", "mid", "slow", "v0", "tanh_a", "tanh_b"}),
        (ExportFilter(top_k=1), {"fast", "v0", "tanh_b"}),
        (ExportFilter(min_speedup=2.2), {"fast", "lib", "tanh_b"}),
        (ExportFilter(verified_only=True), {"fast"}),
        (ExportFilter(include_flagged=True, top_k=1), {"hack", "v0", "tanh_b"}),
        (ExportFilter(sources=("beta",)), {"mid", "tanh_b"}),
    ],
)
def test_sft_filters(export_archive, f, expected) -> None:
    result = _build(export_archive.path, ExportRequest("sft", f, test_size=0.0))
    assert {row["kernel_id"] for row in _rows(result)} == {export_archive.kernels[k] for k in expected}


def test_keep_duplicates_keeps_both_copies(export_archive) -> None:
    result = _build(export_archive.path, ExportRequest("sft", test_size=0.0, keep_duplicates=True))
    assert export_archive.kernels["fast_dup"] in {row["kernel_id"] for row in _rows(result)}


def test_tasks_sharing_a_name_share_a_split(export_archive) -> None:
    for test_size in (0.3, 0.5, 0.7, 0.9):
        result = _build(export_archive.path, ExportRequest("sft", test_size=test_size))
        split_of_task = {}
        for _, split, table in result.iter_tables():
            for tid in table.column("task_id").to_pylist():
                assert split_of_task.setdefault(tid, split) == split
        tasks = export_archive.tasks
        assert split_of_task[tasks["T1"]] == split_of_task[tasks["T1v0"]]


def _pairs(result):
    inv = {}
    for row in _rows(result):
        inv.setdefault(row["pair_kind"], set()).add((row["chosen_kernel_id"], row["rejected_kernel_id"]))
    return inv


def test_dpo_pairs_follow_margin_and_verdicts(export_archive) -> None:
    ids = export_archive.kernels
    label = {v: k for k, v in ids.items()}
    policy = PairingPolicy(min_margin=0.1, max_pairs_per_task=64)
    result = _build(export_archive.path, ExportRequest("dpo", test_size=0.0, pairing=policy))
    pairs = {kind: {(label[c], label[r]) for c, r in p} for kind, p in _pairs(result).items()}
    assert pairs["faster"] == {("fast", "lib"), ("fast", "mid"), ("fast", "slow"), ("lib", "mid"), ("lib", "slow"),
                               ("tanh_b", "tanh_a")}
    assert pairs["incorrect"] == {(c, r) for c in ("fast", "lib", "mid", "slow") for r in ("wrong", "hack", "refuted")}
    assert result.stats["kernels_negative"] == 3, "a kernel nobody judged is not a negative"
    reasons = {label[row["rejected_kernel_id"]]: row["rejected_reason"] for row in _rows(result)
               if row["pair_kind"] == "incorrect"}
    assert reasons == {"wrong": "incorrect", "hack": "flagged", "refuted": "failed-verification"}
    for row in _rows(result):
        assert row["chosen"][0]["content"] != row["rejected"][0]["content"]
        if row["pair_kind"] == "faster":
            assert row["chosen_speedup"] >= row["rejected_speedup"] * 1.1


def test_dpo_draw_is_capped_shared_and_seeded(export_archive) -> None:
    def draw(seed):
        policy = PairingPolicy(max_pairs_per_task=4, incorrect_share=0.25, seed=seed)
        return _build(export_archive.path, ExportRequest("dpo", test_size=0.0, pairing=policy))

    first, again, other = draw(0), draw(0), draw(7)
    t1 = export_archive.tasks["T1"]
    rows = [r for r in _rows(first) if r["task_id"] == t1]
    assert len(rows) == 4
    assert sum(r["pair_kind"] == "incorrect" for r in rows) == 1
    assert _rows(first) == _rows(again)
    assert _pairs(first) != _pairs(other)


def test_published_origins_hide_local_paths() -> None:
    from archive_db.export.provenance import public_origins

    assert public_origins(["/home/alice/data/a100.jsonl", "C:\\Users\\bob\\h100.jsonl", "org/dataset",
                           "https://github.com/x/y @ abc123", "/tmp/other/a100.jsonl"]) == [
        "local file a100.jsonl", "local file h100.jsonl", "org/dataset", "https://github.com/x/y @ abc123"]


def test_overwrite_replaces_an_export_and_nothing_else(export_archive, tmp_path) -> None:
    from archive_db.export import OutputExists, export_to_folder

    out = tmp_path / "sft"
    export_to_folder(export_archive.path, ExportRequest("sft", test_size=0.0), out)
    with pytest.raises(OutputExists, match="--overwrite"):
        export_to_folder(export_archive.path, ExportRequest("sft"), out)
    _, again = export_to_folder(export_archive.path, ExportRequest("sft", test_size=0.99), out, overwrite=True)
    assert (again / "data/default/test-00000-of-00001.parquet").exists()
    assert not (again / "data/default/train-00000-of-00001.parquet").exists()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExists, match="notes.txt"):
        export_to_folder(export_archive.path, ExportRequest("sft"), out, overwrite=True)
    assert not list(tmp_path.glob(".sft.partial-*")), "no staging folder left behind"
