"""The showcase run folder (kernel_archive/showcase): its layout, sidecars, expectations and that it compiles.

The GPU half (every kernel verified against its expectation) is ``scripts/showcase_smoke.py --gpu``.
"""

from __future__ import annotations

import ast
import re
import shutil
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scripts_testing import load_script

REPO = Path(__file__).resolve().parents[1]
SHOWCASE = REPO / "kernel_archive" / "showcase"
SIDECAR_KEYS = {"strategies": list, "generation": int, "expected": str, "expected_reason": str, "notes": str}
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


SMOKE = load_script("scripts/showcase_smoke.py", "showcase_smoke")
KERNELS = SMOKE.discover()
TASKS = sorted(p.stem for p in (SHOWCASE / "tasks").glob("*.py"))


def _task_code(task: str) -> str:
    return (SHOWCASE / "tasks" / f"{task}.py").read_text(encoding="utf-8")


def _level(task: str) -> int | None:
    sidecar = SHOWCASE / "tasks" / f"{task}.toml"
    return tomllib.loads(sidecar.read_text())["level"] if sidecar.is_file() else None


def _input_count(code: str) -> int:
    tree = ast.parse(code)
    get_inputs = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs")
    returned = next(n for n in ast.walk(get_inputs) if isinstance(n, ast.Return))
    assert isinstance(returned.value, ast.List), "get_inputs must return a list literal"
    return len(returned.value.elts)


def test_counts_meet_the_showcase_targets() -> None:
    from embeddings.taxonomy import describe_task

    categories = {task: describe_task(_task_code(task), _level(task)).category for task in TASKS}
    assert len(TASKS) >= 14, TASKS
    assert None not in categories.values(), categories
    assert len(set(categories.values())) >= 10, categories
    assert len(KERNELS) >= 80, len(KERNELS)
    assert {k.task for k in KERNELS} == set(TASKS), "every task has kernels and every kernel folder a task"
    assert all(count >= 3 for count in Counter(k.task for k in KERNELS).values())


def test_the_named_categories_are_covered() -> None:
    from embeddings.taxonomy import describe_task

    categories = {describe_task(_task_code(task), _level(task)).category for task in TASKS}
    wanted = {"matmul/GEMM", "convolution", "transposed convolution", "pooling", "normalisation", "activation",
              "reduction", "loss", "attention", "full architecture"}
    assert wanted <= categories, wanted - categories
    assert {_level(task) for task in TASKS} == {1, 2, 3}


@pytest.mark.parametrize("task", TASKS)
def test_task_is_a_kernelbench_reference(task: str) -> None:
    tree = ast.parse(_task_code(task))
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "Model" in classes
    assert {"get_inputs", "get_init_inputs"} <= functions
    assert _input_count(_task_code(task)) >= 1
    assert NAME.match(task)


def test_names_are_unique_identifiers() -> None:
    keys = [k.key for k in KERNELS]
    assert len(keys) == len(set(keys))
    assert all(NAME.match(k.name) and NAME.match(k.task) for k in KERNELS), [k for k in keys if not NAME.match(k)]
    stems = Counter((k.task, k.name) for k in KERNELS)
    assert not [s for s, n in stems.items() if n > 1], "a kernel exists as both .cu and .py"
    extension_names = [SMOKE.load_inline_name(k.path.read_text()) for k in KERNELS if k.form == "model-new"]
    assert len(extension_names) == len(set(extension_names)), "load_inline names must be unique (build caches)"


def test_the_folder_is_not_an_importable_package() -> None:
    assert not list(SHOWCASE.rglob("__init__.py"))
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["kernel_archive"]
    for path in (p for p in SHOWCASE.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        relative = path.relative_to(REPO / "kernel_archive")
        assert any(relative.match(p) for p in patterns), f"{relative} is not in the wheel's package data"
    for example in ("showcase/results/matmul/naive.json", "showcase/results/matmul/naive.ncu.csv",
                    "showcase/results/matmul/naive.torch.json", "showcase/results/matmul/naive.clang-tidy.txt"):
        assert any(Path(example).match(p) for p in patterns), f"collect's {example} would not ship"


def _known_tags() -> set[str]:
    from embeddings.strategies import load_rules

    return set(load_rules().describe())


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.key)
def test_sidecar_has_the_required_keys(kernel: Any) -> None:
    meta = kernel.meta
    for key, kind in SIDECAR_KEYS.items():
        assert isinstance(meta.get(key), kind), f"{kernel.key}: {key} must be a {kind.__name__}"
    assert meta["expected"] in SMOKE.VERDICTS
    assert meta["expected_reason"].strip() and meta["notes"].strip()
    assert set(meta["strategies"]) <= _known_tags(), set(meta["strategies"]) - _known_tags()
    if meta["generation"] == 0:
        assert "parent" not in meta
    else:
        parent = next((k for k in KERNELS if k.task == kernel.task and k.name == meta.get("parent")), None)
        assert parent is not None, f"{kernel.key}: parent {meta.get('parent')!r} is not a kernel of {kernel.task}"
        assert meta["generation"] == parent.meta["generation"] + 1


def test_expectations_cover_every_verdict_and_the_required_examples() -> None:
    expected = Counter(k.meta["expected"] for k in KERNELS)
    assert set(expected) == set(SMOKE.VERDICTS), expected
    assert expected["passed"] > expected["flagged"] + expected["failed"]
    library = [k for k in KERNELS if "library-call" in k.meta["strategies"]]
    assert library and all(k.meta["expected"] == "flagged" for k in library)
    assert any("streams" in k.meta["strategies"] and k.meta["expected"] == "flagged" for k in KERNELS)
    assert any("tensor-cores" in k.meta["strategies"] for k in KERNELS)
    assert Counter(k.form for k in KERNELS)["model-new"] >= 10


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.key)
def test_kernel_source_is_well_formed(kernel: Any) -> None:
    from verify.harness.static import kernel_names
    from verify.harness.task import parse_forward_signature

    code = kernel.path.read_text(encoding="utf-8")
    if kernel.form == "cuda-binding":
        params = parse_forward_signature(code)
        assert len(params) >= _input_count(_task_code(kernel.task))
    else:
        tree = ast.parse(code)
        assert "ModelNew" in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        cuda, _cpp, functions, _first = SMOKE.load_inline_sources(code)
        assert functions and all(re.search(rf"\b{f}\s*\(", cuda) for f in functions)
        code = cuda
    if "library-call" not in kernel.meta["strategies"]:
        assert kernel_names(code), f"{kernel.key} defines no __global__ kernel"


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.key)
def test_honest_kernels_raise_no_static_finding(kernel: Any) -> None:
    """A kernel expected to pass must not trip the verifier's static scan (a docstring naming torch ops would)."""
    from verify.harness.static import scan_source

    findings = [f for f in scan_source(kernel.path.read_text(encoding="utf-8"), kernel.form)
                if f.verdict in ("warn", "fail")]
    if kernel.meta["expected"] == "passed":
        assert not findings, [(f.rule, f.line, f.evidence) for f in findings]


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k.form == "cuda-binding"], ids=lambda k: k.key)
def test_cuda_binding_call_derives_by_name(kernel: Any, tmp_path: Path) -> None:
    """The verifier can build the call from the module form, every tensor argument matched by name."""
    torch = pytest.importorskip("torch")
    from verify.harness.task import derive_call, load_module, parse_forward_signature

    code = _task_code(kernel.task)
    module = load_module(code, f"showcase_task_{kernel.task}", tmp_path)
    torch.manual_seed(0)
    init_inputs = module.get_init_inputs()
    model = module.Model(*init_inputs)
    _build, explanation = derive_call(model, init_inputs, parse_forward_signature(kernel.path.read_text()),
                                      _input_count(code))
    assert not [line for line in explanation if "by position" in line], explanation


def test_readme_lists_every_kernel() -> None:
    readme = (SHOWCASE / "README.md").read_text(encoding="utf-8")
    for kernel in KERNELS:
        assert f"`{kernel.path.name}`" in readme, kernel.key
    assert f"**{len(TASKS)} KernelBench-style tasks**" in readme
    assert f"**{len(KERNELS)} kernels**" in readme


def test_combined_unit_keeps_kernels_apart() -> None:
    text = SMOKE.combined_unit(KERNELS[:3])
    assert text.count("namespace ka_kernel_") == 3
    assert "PYBIND11_MODULE" not in text
    assert f'#line 1 "{KERNELS[0].path.relative_to(REPO).as_posix()}"' in text


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (the CUDA toolkit) is not installed")
def test_every_kernel_compiles_with_nvcc() -> None:
    pytest.importorskip("torch")
    results = SMOKE.compile_check(KERNELS, separate=False, jobs=1, arch="sm_90")
    assert [ok for _, ok, _ in results] == [True], results[0][2]


def test_smoke_table_marks_mismatches() -> None:
    rows = [
        {"kernel": "t/a", "expected": "passed", "got": "passed", "correctness": "pass", "kernel_ms": 0.5,
         "eager_ms": 1.0, "failing": []},
        {"kernel": "t/b", "expected": "flagged", "got": "passed", "correctness": "pass", "kernel_ms": None,
         "eager_ms": None, "failing": []},
    ]
    text = SMOKE.table(rows)
    assert "2.00x" in text
    assert [line.split()[0] for line in text.splitlines() if line.endswith("MISMATCH")] == ["t/b"]
    assert text.endswith("1/2 kernels got their expected verdict")


def test_shards_split_the_kernels_without_overlap() -> None:
    shards = [SMOKE.select_shard(KERNELS, f"{k}/3") for k in (1, 2, 3)]
    keys = [kernel.key for shard in shards for kernel in shard]
    assert sorted(keys) == sorted(k.key for k in KERNELS) and len(keys) == len(set(keys))
    for bad in ("3/2", "0/2", "x", "1/2/3"):
        with pytest.raises(ValueError, match="--shard"):
            SMOKE.select_shard(KERNELS, bad)
