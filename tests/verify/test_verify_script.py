"""The one generator: a valid standalone script embedding task, kernel and harness; it runs on CPU too."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_text import HOSTILE_TEXTS, PAYLOAD_MARKER

from verify.harness import MODULES
from verify.runner import VerifyOptions, verify_code
from verify.script import (
    embedded_values,
    harness_names,
    inline_module,
    render_script,
    safe_file_name,
    write_script,
)

TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
    def forward(self, x):
        return torch.relu(self.lin(x))
def get_inputs():
    return [torch.randn(8, 16)]
def get_init_inputs():
    return [16]
'''
HONEST = TASK.replace("class Model(", "class ModelNew(").split("def get_inputs")[0]


def _render(kernel: str = HONEST, form: str = "model-new") -> str:
    return render_script(task_code=TASK, functional_code=None, kernel_code=kernel, form=form,
                         meta={"kernel_name": "k1", "task_name": "relu_linear", "kernel_id": "abc"})


def test_script_is_valid_python_and_embeds_task_kernel_and_every_harness_module() -> None:
    text = _render()
    tree = ast.parse(text)
    names = {n.targets[0].id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
    assert {"TASK_CODE", "KERNEL_CODE", "FUNCTIONAL_CODE", "KERNEL_FORM", "EMBEDDED"} <= names
    assert repr(TASK) in text and repr(HONEST) in text
    for module in MODULES:
        assert f"harness: {module} " in text
    assert "from verify" not in text and "import verify" not in text
    assert text.count("from __future__ import annotations") == 1


def test_harness_modules_do_not_clash_when_inlined() -> None:
    clashes = {name: mods for name, mods in harness_names().items() if len(mods) > 1}
    assert clashes == {}


def test_inline_module_drops_intra_harness_imports() -> None:
    source = "from __future__ import annotations\nfrom verify.harness.common import (\n    a,\n    b,\n)\ndef f():\n" \
             "    from verify.harness.static import c\n    return c\n"
    out = inline_module(source)
    assert "verify.harness" not in out and "__future__" not in out
    ast.parse(out)


def test_unverifiable_kernels_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="form"):
        render_script(task_code=TASK, functional_code=None, kernel_code="x", form="unreleased")
    with pytest.raises(ValueError, match="reference code"):
        render_script(task_code="", functional_code=None, kernel_code="x", form="model-new")


def test_script_help_and_static_only_run_standalone(tmp_path: Path) -> None:
    script = write_script(_render(), tmp_path / "eval.py")
    helped = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "untrusted" in helped.stdout and "--static-only" in helped.stdout
    static = subprocess.run([sys.executable, str(script), "--static-only"], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path)
    report = json.loads(static.stdout.strip().splitlines()[-1])
    assert report["status"] == "static-only" and report["kernel"]["name"] == "k1"
    assert report["checks"]["not-a-kernel"]["verdict"] == "fail"
    assert "checks (threat row, verdict, evidence)" in static.stdout


@pytest.mark.slow
def test_full_verification_on_cpu_through_the_script() -> None:
    options = VerifyOptions(trials=2, device="cpu", target_seconds=0.05)
    honest = verify_code(TASK, HONEST, "model-new", options)
    assert honest["status"] == "flagged", honest.get("error")  # PyTorch-only: not a kernel, nothing else
    assert {n for n, c in honest["checks"].items() if c["verdict"] not in ("pass", "skip")} == {"not-a-kernel"}
    assert honest["checks"]["correctness"]["verdict"] == "pass"
    assert honest["trials"][0]["max_abs"] < 1e-5
    mutating = HONEST.replace("return torch.relu(self.lin(x))", "y = torch.relu(self.lin(x))\n        x.zero_()\n        return y")
    caught = verify_code(TASK, mutating, "model-new", options)
    assert caught["status"] == "failed" and caught["checks"]["input-mutation"]["verdict"] == "fail"


@pytest.mark.slow
def test_a_report_counts_the_answers_its_judge_gave_again() -> None:
    # Calls that differ in their last bits: stale-memory and launch-errors ask about each of the two deep trials'
    # first call, which the trial's own statistics judged already. Identical calls are never judged element by element.
    options = VerifyOptions(trials=3, device="cpu", target_seconds=0.05)
    noisy = HONEST.replace("return torch.relu(self.lin(x))",
                           "y = torch.relu(self.lin(x))\n        return y * (1 + 1e-7 * torch.rand_like(y))")
    assert noisy != HONEST
    report = verify_code(TASK, noisy, "model-new", options)
    assert report["checks"]["correctness"]["verdict"] == "pass" and report["judge_reused"] == 2 * 2
    assert verify_code(TASK, HONEST, "model-new", options)["judge_reused"] == 0


LOSS_TASK = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, a, b):
        return torch.mean((a - b) ** 2)
def get_inputs():
    return [torch.randn(64, 32), torch.randn(64, 32)]
def get_init_inputs():
    return []
'''
TRANSPOSE_TASK = LOSS_TASK.replace("return torch.mean((a - b) ** 2)", "return (a - b).t()")


@pytest.mark.slow
@pytest.mark.parametrize("task", [LOSS_TASK, TRANSPOSE_TASK], ids=["0-dim loss", "transposed view"])
def test_outputs_without_a_byte_view_are_judged(task: str) -> None:
    """A loss's 0-dim result and a transposed view cannot be viewed as bytes directly: on the H100 every honest
    kernel of the showcase's two loss tasks failed 'runs' with "self.dim() cannot be 0 to view Float as Byte"."""
    report = verify_code(task, task + "\nModelNew = Model\n", "model-new",
                         VerifyOptions(trials=2, device="cpu", target_seconds=0.05, shape_probe=False))
    assert report["checks"]["runs"]["verdict"] == "pass", report["checks"]["runs"]
    assert report["checks"]["correctness"]["verdict"] == "pass", report["checks"]["correctness"]
    assert report["status"] != "failed", {n: c for n, c in report["checks"].items() if c["verdict"] == "fail"}


@pytest.mark.slow
def test_a_candidate_that_patches_the_harness_itself_is_caught() -> None:
    patching = "import sys\n_main = sys.modules['__main__']\n_main.fingerprints_agree = lambda a, b, rtol: True\n" \
               "_main.summarize.__code__ = (lambda values: {'median': 0.0}).__code__\n" + HONEST
    report = verify_code(TASK, patching, "model-new", VerifyOptions(trials=1, device="cpu", target_seconds=0.05))
    check = report["checks"]["timer-patching"]
    assert check["verdict"] == "fail", check
    evidence = " ".join(check["evidence"])
    assert "fingerprints_agree" in evidence and "summarize.__code__" in evidence


SIZED_TASK = TASK.replace("def get_inputs():\n    return [torch.randn(8, 16)]", "batch_size = 8\ndef get_inputs():\n    return [torch.randn(batch_size, 16)]")


@pytest.mark.slow
def test_the_shape_probe_records_a_kernel_hard_wired_to_the_task_shapes() -> None:
    options = VerifyOptions(trials=1, device="cpu", target_seconds=0.05)
    honest = verify_code(SIZED_TASK, HONEST, "model-new", options)
    assert honest["shape_probe"] == {"right": True, "evidence": "at other shapes (batch_size 8 -> 5): right"}
    assert "shape-specialised" not in honest["properties"]
    wired = HONEST.replace("return torch.relu(self.lin(x))", "return torch.relu(self.lin(x.view(8, 16)))")
    report = verify_code(SIZED_TASK, wired, "model-new", options)
    assert report["shape_probe"]["right"] is False, report["shape_probe"]
    assert "raised RuntimeError" in report["shape_probe"]["evidence"]
    assert "shape-specialised" in report["properties"]
    assert report["checks"]["correctness"]["verdict"] == "pass"
    assert report["status"] == honest["status"]


def test_every_verify_option_reaches_the_scripts_parser() -> None:
    from verify.harness.parent import _parser

    options = VerifyOptions(trials=3, sanitize=True, compile_baseline=False, shape_probe=False, seed=5)
    args = _parser().parse_args(options.arguments())
    assert (args.trials, args.sanitize, args.no_compile_baseline, args.shape_probe, args.seed) == (3, True, True, False, 5)
    assert _parser().parse_args(VerifyOptions().arguments()).shape_probe is True


@pytest.mark.slow
def test_candidate_code_finds_no_seeds_on_disk() -> None:
    snooping = (
        "import glob, os\n"
        "_root = os.path.dirname(os.getcwd())\n"
        "_keys = ['\"' + k + '\":' for k in ('seed' + '_base', 'weight' + '_seed', 'screen' + '_seed')]\n"
        "_found = [p for p in glob.glob(os.path.join(_root, '**', '*'), recursive=True)\n"
        "          if os.path.isfile(p) and any(k in open(p, errors='replace').read() for k in _keys)]\n"
        "if _found:\n"
        "    raise RuntimeError(f'seeds readable from candidate code: {_found}')\n"
    ) + HONEST
    report = verify_code(TASK, snooping, "model-new", VerifyOptions(trials=1, device="cpu", target_seconds=0.05))
    assert report["checks"]["compiles"]["verdict"] == "pass", report["checks"]["compiles"]
    assert report["checks"]["runs"]["verdict"] == "pass", report["checks"]["runs"]


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
def test_archive_text_reaches_the_script_only_as_inert_data(text: str) -> None:
    meta = {"kernel_name": text, "task_name": text, "source": text, "kernel_id": text, "task_id": text, "level": 1}
    script = render_script(task_code=TASK, functional_code=None, kernel_code=HONEST, form="model-new", meta=meta,
                           file_name=f"eval_{text}.py")
    tree = ast.parse(script)
    benign = render_script(task_code=TASK, functional_code=None, kernel_code=HONEST, form="model-new",
                           file_name="eval.py")
    docstring = (ast.get_docstring(tree) or "").replace(safe_file_name(f"eval_{text}.py"), "eval.py")
    assert docstring == ast.get_docstring(ast.parse(benign))
    embedded = {n.targets[0].id: n.value for n in tree.body
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
    assert ast.literal_eval(embedded["KERNEL_META"]) == meta
    # the only place the payload may appear is inside the KERNEL_META literal
    assert script.count(PAYLOAD_MARKER) == ast.get_source_segment(script, embedded["KERNEL_META"]).count(PAYLOAD_MARKER) \
        + (ast.get_docstring(tree) or "").count(PAYLOAD_MARKER)


@pytest.mark.parametrize("code", HOSTILE_TEXTS[:4], ids=range(4))
def test_hostile_names_and_codes_run_nothing_in_static_only(tmp_path: Path, code: str) -> None:
    meta = {"kernel_name": code, "task_name": code, "source": code, "kernel_id": code}
    text = render_script(task_code=TASK, functional_code=code, kernel_code=HONEST + "\n# " + code, form="model-new",
                         meta=meta, file_name=f"eval_{code}.py")
    script = write_script(text, tmp_path / "eval.py")
    static = subprocess.run([sys.executable, str(script), "--static-only"], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert static.returncode in (0, 1, 2), static.stderr
    report = json.loads(static.stdout.strip().splitlines()[-1])
    assert report["kernel"]["name"] == code
    assert not list(tmp_path.rglob(PAYLOAD_MARKER))


def test_meta_that_is_not_plain_data_is_embedded_as_text() -> None:
    script = render_script(task_code=TASK, functional_code=None, kernel_code=HONEST, form="model-new",
                           meta={"kernel_name": "k", "speedup": float("inf"), "when": object()})
    tree = ast.parse(script)
    meta = next(n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "KERNEL_META")
    assert ast.literal_eval(meta)["speedup"] == "inf"


STATEFUL_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench level 3 task 33's shape: a recurrent cell whose hidden state is a plain attribute."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
        return self.hidden * 2.0


batch_size = 4
input_size = 16
hidden_size = 8


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
'''


@pytest.mark.slow
def test_the_task_reference_offered_as_its_own_kernel_passes_on_a_stateful_task() -> None:
    # On the H100 the VanillaRNN task's own Model as ModelNew failed correctness, stale-memory, launch-errors,
    # hard-coding and caching: the references and the candidate's calls had advanced the hidden state apart.
    report = verify_code(STATEFUL_TASK, STATEFUL_TASK + "\nModelNew = Model\n", "model-new",
                         VerifyOptions(trials=3, device="cpu", target_seconds=0.05, shape_probe=False))
    checks = {name: check["verdict"] for name, check in report["checks"].items()}
    for name in ("correctness", "stale-memory", "hard-coding", "input-mutation"):
        assert checks[name] == "pass", (name, report["checks"][name])
    assert report["status"] != "failed", report["checks"]
    memo = STATEFUL_TASK + '''

class ModelNew(Model):
    """Answers every call after the first with the first call's answer (a memo, not a recurrence)."""

    def forward(self, x):
        if not hasattr(self, "memo"):
            self.memo = super().forward(x)
        return self.memo
'''
    caught = verify_code(STATEFUL_TASK, memo, "model-new",
                         VerifyOptions(trials=3, device="cpu", target_seconds=0.05, shape_probe=False))
    assert caught["status"] == "failed", caught["checks"]
    assert caught["checks"]["correctness"]["verdict"] == "fail"


@pytest.mark.parametrize("text", HOSTILE_TEXTS[:4])
def test_what_a_slot_zygote_is_sent_for_a_parent_is_the_scripts_own_embedded(text: str) -> None:
    """A forked parent judges the kernel the batch sends (``embedded_values``); a started one, what its file holds."""
    kwargs = {"task_code": f"# {text}\nclass Model: pass", "functional_code": None,
              "kernel_code": f"# {text}\nclass ModelNew: pass", "form": "model-new",
              "meta": {"kernel_name": text, "speedup": 1.5, "nested": {"a": [1]}}}
    tree = ast.parse(render_script(**kwargs))
    names = {"KERNEL_META": "meta", "KERNEL_FORM": "form", "TASK_CODE": "task_code",
             "FUNCTIONAL_CODE": "functional_code", "KERNEL_CODE": "kernel_code", "HARNESS_DIGEST": "harness_digest"}
    in_file = {names[node.targets[0].id]: ast.literal_eval(node.value) for node in tree.body
               if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id in names}
    sent = json.loads(json.dumps(embedded_values(**kwargs)))  # as the sealed memory file carries it
    assert in_file == sent and len(sent) == len(names)
