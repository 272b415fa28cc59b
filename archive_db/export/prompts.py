"""The chat prompt of a task and the assistant message of a kernel, as SFT and DPO rows carry them.

A prompt is a system message and a user message holding the task's reference PyTorch module (and its
functional form when a source gave one) and what kind of file to write. What to write depends on the
kernel's form, declared as data in ``FORMS``.

Example:
    >>> msgs = prompt_messages("class Model: ...", None, "model-new")
    >>> [m["role"] for m in msgs]
    ['system', 'user']
    >>> completion_message("class ModelNew: ...", "model-new")[0]["content"].splitlines()[0]
    '```python'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FormSpec:
    """How a kernel form is asked for and fenced."""

    instruction: str
    fence: str


FORMS: dict[str, FormSpec] = {
    "cuda-binding": FormSpec(
        "Write a CUDA C++ extension (one .cu file) that computes the same result faster. Expose a "
        "`forward` function through PYBIND11_MODULE(TORCH_EXTENSION_NAME, m); it takes the inputs of "
        "`get_inputs()` followed by the module's parameters (in the order `module_fn` takes them, when given).",
        "cpp",
    ),
    "model-new": FormSpec(
        "Write a Python module that defines `class ModelNew(nn.Module)` with the same constructor "
        "arguments and outputs as `Model`, but faster, using custom CUDA kernels (for example through "
        "`torch.utils.cpp_extension.load_inline`).",
        "python",
    ),
    "cuda-source": FormSpec(
        "Write a CUDA source file (.cu) with kernels and a host launcher that computes the same result "
        "faster.",
        "cpp",
    ),
}
DEFAULT_FORM = "model-new"
SYSTEM_PROMPT = (
    "You are an expert GPU performance engineer. You write correct, fast CUDA kernels for PyTorch "
    "operators. Answer with the complete source file only."
)


def form_spec(form: str) -> FormSpec:
    """The spec of ``form`` (unknown forms are asked for as a ModelNew module)."""
    return FORMS.get(form, FORMS[DEFAULT_FORM])


def prompt_text(reference_code: str, functional_code: str | None, form: str) -> str:
    """The user message of a task for a kernel form."""
    parts = [
        "Here is a PyTorch module (`Model`) with its input generators (`get_inputs`, `get_init_inputs`):",
        f"```python\n{reference_code.strip()}\n```",
    ]
    if functional_code:
        parts += ["The same computation in functional form (`module_fn`):", f"```python\n{functional_code.strip()}\n```"]
    parts.append(form_spec(form).instruction)
    return "\n\n".join(parts)


def prompt_messages(reference_code: str, functional_code: str | None, form: str) -> list[dict[str, str]]:
    """The conversational prompt: a system and a user message."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": prompt_text(reference_code, functional_code, form)},
    ]


def completion_message(code: str, form: str) -> list[dict[str, str]]:
    """The conversational completion: one assistant message with the kernel in a fenced block."""
    return [{"role": "assistant", "content": f"```{form_spec(form).fence}\n{code.strip()}\n```"}]
