"""Content-hash keys: the same problem meets in one task row, different problems never do."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hostile_text import HOSTILE_TEXTS

from archive_db.keys import (
    KEY_LENGTH,
    git_blob_sha1,
    kernel_key,
    measurement_key,
    named_task_key,
    normalise_python,
    short_hash,
    task_key,
)


def sakana_reference(data: Path, level: int) -> str:
    with open(data / "sakana-archive" / "sample.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    return next(r for r in rows if r["Level_ID"] == level)["PyTorch_Code_Module"]


def cuda_l1_reference(data: Path, level: int, task: int = 1) -> str:
    with open(data / "cuda-l1" / "h100.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    return next(r for r in rows if r["level_id"] == level and r["task_id"] == task)["ref_code"]


def task_index(data: Path) -> list[dict[str, str]]:
    with open(data / "kernelbench" / "task_index.tsv", encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    header = ["level", "problem_id", "name", "path", "size_bytes_main", "blob_sha1_main", "blob_sha1_v0",
              "blob_sha1_v0.1", "name_in_v0"]
    return list(csv.DictReader(lines, fieldnames=header, delimiter="\t"))


@pytest.mark.parametrize("level", [1, 3])
def test_real_references_that_differ_only_in_layout_share_a_task(shared_data: Path, level: int) -> None:
    sakana, cuda_l1 = sakana_reference(shared_data, level), cuda_l1_reference(shared_data, level)
    assert sakana != cuda_l1  # blank lines and trailing newlines differ upstream
    assert git_blob_sha1(sakana) != git_blob_sha1(cuda_l1)
    assert task_key(sakana) == task_key(cuda_l1)


def test_a_changed_initialisation_is_a_different_task(shared_data: Path) -> None:
    # level 2 task 1: the archive scales the bias init by 0.02, KernelBench v0 does not.
    sakana, cuda_l1 = sakana_reference(shared_data, 2), cuda_l1_reference(shared_data, 2)
    assert "torch.randn(bias_shape)*0.02" in sakana and "*0.02" not in cuda_l1
    assert task_key(sakana) != task_key(cuda_l1)


def test_a_changed_size_is_a_different_task(shared_data: Path) -> None:
    reference = sakana_reference(shared_data, 1)
    assert "N = 2048" in reference
    assert task_key(reference) != task_key(reference.replace("N = 2048", "N = 4096"))


def test_comments_docstrings_and_layout_do_not_matter() -> None:
    plain = "import torch\nclass Model:\n    def forward(self, x):\n        return x + 1\nN = 8\n"
    decorated = (
        '"""A module docstring."""\nimport torch\n\n\nclass Model:\n    """Adds one."""\n\n'
        "    def forward(self, x):  # the op\n        '''doc'''\n        return (x + 1)\n\n\nN = 8  # size\n"
    )
    assert normalise_python(plain) == normalise_python(decorated)
    assert task_key(plain) == task_key(decorated)
    assert task_key(plain) != task_key(plain.replace("x + 1", "x - 1"))
    assert task_key(plain) != task_key(plain.replace('N = 8', 'N = 8.0'))


def test_code_that_does_not_parse_is_keyed_by_its_words() -> None:
    broken = "class Model(:\n    pass"
    assert normalise_python(broken) == "class Model(: pass"
    assert task_key(broken) == task_key("class   Model(:\n\n    pass\n")


def test_blob_ids_match_git_and_the_kernelbench_index(shared_data: Path, tmp_path: Path) -> None:
    cuda_l1 = cuda_l1_reference(shared_data, 1)
    v0 = next(r for r in task_index(shared_data) if r["level"] == "1" and r["problem_id"] == "1")
    assert git_blob_sha1(cuda_l1) == v0["blob_sha1_v0"]  # CUDA-L1 used KernelBench v0 byte for byte
    if shutil.which("git"):
        file = tmp_path / "ref.py"
        file.write_bytes(cuda_l1.encode("utf-8"))
        out = subprocess.run(["git", "hash-object", str(file)], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == git_blob_sha1(cuda_l1)


def test_kernel_and_measurement_keys_depend_on_every_part() -> None:
    base = kernel_key("sakana", "t1", "k_base", "__global__ void k() {}")
    assert len(base) == KEY_LENGTH
    assert base == kernel_key("sakana", "t1", "k_base", "__global__ void k() {}")
    variants = {
        kernel_key("cuda-l1", "t1", "k_base", "__global__ void k() {}"),
        kernel_key("sakana", "t2", "k_base", "__global__ void k() {}"),
        kernel_key("sakana", "t1", "k_edit_1", "__global__ void k() {}"),
        kernel_key("sakana", "t1", "k_base", "__global__ void k() { }"),
        kernel_key("sakana", "t1", "k_base", None),
    }
    assert base not in variants and len(variants) == 5
    m = measurement_key(base, {"source": "sakana", "gpu": "H100", "correct": True})
    assert m == measurement_key(base, {"correct": True, "gpu": "H100", "source": "sakana"})
    assert m == measurement_key(base, {"source": "sakana", "gpu": "H100", "correct": False}), "values merge"
    assert m != measurement_key(base, {"source": "sakana", "gpu": "H100 SXM", "correct": True})
    assert m != measurement_key(base, {"source": "sakana", "gpu": "H100", "timing_mode": "server"})
    assert m != measurement_key(base, {"source": "verify", "gpu": "H100", "verification_id": "v1"})
    assert m != measurement_key(kernel_key("sakana", "t2", "k_base", None), {"source": "sakana", "gpu": "H100"})


def test_named_tasks_are_keyed_by_source_and_name() -> None:
    assert named_task_key("cuda-l2", "4096_4096_64") == named_task_key("cuda-l2", "4096_4096_64")
    assert named_task_key("cuda-l2", "4096_4096_64") != named_task_key("robust-kbench", "4096_4096_64")
    assert short_hash("a", 1) != short_hash(["a", 1], None)


def _json_key(*parts: object) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:KEY_LENGTH]


KEY_TEXTS = (
    "", "plain", 'say "hi"', "back\\slash\\", "tab\tnew\nline\rcr\r\n", "é ü 漢字 \U0001f600",
    "\ud800 lone \udfff surrogates", "\x7f del and \x85 nel \u2028 ls", "\\u0041 written out",
    *(f"control {chr(c)} {c}" for c in range(0x20)),
    *HOSTILE_TEXTS,
)


@pytest.mark.parametrize("text", KEY_TEXTS)
def test_short_hash_of_any_text_is_the_hash_of_its_json(text: str) -> None:
    # Keys already in archives were made with json.dumps: the byte-level escaping must give the same ids.
    assert short_hash("kernel", "src", text, "name") == _json_key("kernel", "src", text, "name")
    identity = {"source": text, "gpu": None, "timing_mode": "eager"}
    assert short_hash("measurement", "k1", identity) == _json_key("measurement", "k1", identity)


def test_short_hash_of_other_parts_goes_through_json() -> None:
    assert short_hash("x", 1, 2.5, None, ["a"]) == _json_key("x", 1, 2.5, None, ["a"])
    assert short_hash("x", {"n": 1}) == _json_key("x", {"n": 1})
