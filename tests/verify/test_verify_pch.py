"""Precompiled torch headers shared by JIT builds (``verify/harness/pch.py``), with real GCC builds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from verify.batch.build_cache import BuildCache, Toolchain
from verify.harness.pch import PCH_ENV, drop_extension_name, install_pch, ninja_cxx, pch_folder, pch_key

REPO = Path(__file__).resolve().parents[2]
NINJA = """ninja_required_version = 1.3
cxx = c++

cflags = -DTORCH_EXTENSION_NAME=ka_one -DTORCH_API_INCLUDE_EXTENSION_H -isystem {include} -fPIC -std=c++20
post_cflags = -O3
ldflags = -shared

rule compile
  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags
"""


def _torch_include() -> str:
    import torch

    return str(Path(torch.__file__).parent / "include")


def test_the_flags_come_from_torchs_ninja_file_without_the_extension_name(tmp_path: Path) -> None:
    (tmp_path / "build.ninja").write_text(NINJA.format(include="/opt/with space/include".replace(" ", "\\ ")))
    assert ninja_cxx(tmp_path) == ("c++", ["-DTORCH_API_INCLUDE_EXTENSION_H", "-isystem", "/opt/with space/include",
                                          "-fPIC", "-std=c++20", "-O3"])
    assert drop_extension_name(["-DTORCH_EXTENSION_NAME=x"]) == []
    (tmp_path / "build.ninja").write_text("rule link\n")
    assert ninja_cxx(tmp_path) is None


def test_the_key_follows_the_flags_and_ignores_the_extension_name(tmp_path: Path) -> None:
    header = Path(_torch_include()) / "torch" / "extension.h"
    one = pch_key("c++", ["-fPIC", "-O3"], header)
    assert one is not None and one == pch_key("c++", ["-fPIC", "-O3"], header)
    assert one != pch_key("c++", ["-fPIC"], header)
    for name in ("ka_one", "ka_two"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "build.ninja").write_text(NINJA.format(include=_torch_include()).replace("ka_one", name))
    assert ninja_cxx(tmp_path / "ka_one") == ninja_cxx(tmp_path / "ka_two")


def test_nothing_is_made_or_used_without_a_folder_or_a_torch_header(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PCH_ENV, raising=False)
    assert install_pch(build=True) is False
    (tmp_path / "build.ninja").write_text(NINJA.format(include=str(tmp_path / "no-torch-here")))
    assert pch_folder(tmp_path, tmp_path / "pch", build=True) is None
    assert not (tmp_path / "pch").exists()


def test_a_header_being_made_elsewhere_is_not_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    monkeypatch.setenv("KA_PCH_AFTER", "1")
    (tmp_path / "build.ninja").write_text(NINJA.format(include=_torch_include()))
    root = tmp_path / "pch"
    root.mkdir()
    found = ninja_cxx(tmp_path)
    assert found is not None
    key = pch_key(found[0], found[1], Path(_torch_include()) / "torch" / "extension.h")
    with open(root / f"{key}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert pch_folder(tmp_path, root, build=True) is None
    assert not (root / str(key)).exists() and (root / f"{key}.builds").read_text() == "."


def test_a_batch_cache_shares_headers_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = BuildCache(tmp_path / "builds", Toolchain(torch="2", cuda=None, python="3", nvcc=None, arch=None))
    monkeypatch.delenv("KA_PCH", raising=False)
    monkeypatch.delenv(PCH_ENV, raising=False)
    assert PCH_ENV not in cache.environment()
    monkeypatch.setenv("KA_PCH", "1")
    assert cache.environment()[PCH_ENV].endswith(os.path.join("kernel-archive", "pch"))
    monkeypatch.setenv(PCH_ENV, str(tmp_path / "pch"))
    assert cache.environment()[PCH_ENV] == str(tmp_path / "pch")
    monkeypatch.delenv("KA_PCH")
    assert cache.environment()[PCH_ENV] == str(tmp_path / "pch")
    monkeypatch.setenv("KA_PCH", "0")
    assert PCH_ENV not in cache.environment()


BUILD = """
import sys
import torch
from torch.utils.cpp_extension import load, load_inline
from verify.harness.pch import install_pch
install_pch(build=sys.argv[2] == "make")
name, how = sys.argv[1], sys.argv[3]
body = "torch::Tensor f(torch::Tensor x) {{ return x + %d; }}" % len(name)
if how == "inline":
    module = load_inline(name=name, cpp_sources=[body], functions=["f"], extra_cflags=["-H"], verbose=True)
else:
    # Something included before torch's header: the precompiled one cannot be used, the header is read instead.
    source = sys.argv[4]
    open(source, "w").write("#include <vector>\\n#include <torch/extension.h>\\n" + body
                            + "\\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def(\\"f\\", &f); }}\\n")
    module = load(name=name, sources=[source], extra_cflags=["-H"], verbose=True)
print("RESULT", module.f(torch.ones(2)).tolist(), flush=True)
"""


@pytest.mark.slow
def test_the_first_build_makes_the_header_and_later_builds_use_it_or_read_the_header(tmp_path: Path) -> None:
    script = tmp_path / "build.py"
    script.write_text(BUILD.format())
    env = {k: v for k, v in os.environ.items() if k != "CPATH"} | {
        "PYTHONPATH": str(REPO), PCH_ENV: str(tmp_path / "pch"), "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"),
        "KA_PCH_AFTER": "2"}

    def build(name: str, make: bool, how: str = "inline") -> str:
        done = subprocess.run([sys.executable, str(script), name, "make" if make else "use", how,
                               str(tmp_path / f"{name}.cpp")], env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"RESULT [{1 + len(name)}.0, {1 + len(name)}.0]" in done.stdout
        return done.stdout + done.stderr

    build("ka_pch_a", make=False)
    assert not (tmp_path / "pch").exists(), "only a compile step counts its build and makes a header"
    build("ka_pch_bb", make=True)
    assert not list((tmp_path / "pch").glob("*/torch")), "the first build with these flags makes no header"
    build("ka_pch_bbb", make=True)
    made = [p for p in (tmp_path / "pch").glob("*/torch/extension.h.gch")]
    assert len(made) == 1 and not list((tmp_path / "pch").glob("*.failed"))
    log = build("ka_pch_cccc", make=False)
    assert f"! {made[0]}" in log, "GCC's -H marks a precompiled header it used with '!'"
    log = build("ka_pch_ddddd", make=False, how="load")
    assert f"! {made[0]}" not in log and "extension.h" in log
