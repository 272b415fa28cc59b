"""The kernel page's downloads: the source file name, and the eval script from verify (made on demand)."""

from __future__ import annotations

import dataclasses

from handmade_archive import Handmade

from archive_db.connection import connect
from archive_db.queries import kernel_detail
from explorer.downloads import Download, eval_script, source_file_name


def test_source_file_names_are_safe_and_carry_the_form_suffix() -> None:
    assert source_file_name({"name": "../../etc/passwd", "form": "model-new"}) == "etc_passwd.py"
    assert source_file_name({"name": "<script>", "form": "cuda-binding"}) == "script.cu"
    assert source_file_name({"name": "", "form": "unreleased"}) == "kernel.txt"


def test_eval_script_is_verifys_script_for_this_kernel(handmade: Handmade) -> None:
    with connect(handmade.path, read_only=True) as con:
        detail = kernel_detail(con, handmade.kernels["a1"])
    assert detail is not None
    script = eval_script(detail)
    assert isinstance(script, Download)
    assert script.file_name == f"eval_{handmade.kernels['a1']}.py"
    text = script.data() if callable(script.data) else script.data
    compile(text, script.file_name, "exec")
    assert "// kernel a1" in text and "torch.relu" in text


def test_kernels_verify_cannot_run_get_a_reason_not_a_script(handmade: Handmade) -> None:
    with connect(handmade.path, read_only=True) as con:
        detail = kernel_detail(con, handmade.kernels["a1"])
    assert detail is not None
    no_code = dataclasses.replace(detail, kernel={**detail.kernel, "code": None})
    no_reference = dataclasses.replace(detail, task={**detail.task, "reference_code": None})
    unreleased = dataclasses.replace(detail, kernel={**detail.kernel, "form": "cuda-source"})
    assert "timings, not its code" in eval_script(no_code)
    assert "reference code" in eval_script(no_reference)
    assert "cannot be verified" in eval_script(unreleased)
