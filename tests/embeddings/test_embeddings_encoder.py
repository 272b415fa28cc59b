"""The encoder: the packaged default model found offline, model keys, and real unit vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embeddings.encoder import DEFAULT_MODEL, Encoder, EncoderSpec, packaged_model_path


def test_default_model_is_the_packaged_folder() -> None:
    folder = packaged_model_path()
    assert (folder / "modules.json").is_file() and (folder / "model.safetensors").is_file()
    spec = EncoderSpec.resolve(None, "cpu")
    assert spec.location == str(folder) and spec.offline
    assert spec.key == f"{DEFAULT_MODEL}:64:int8"
    assert EncoderSpec.resolve("sentence-transformers/all-MiniLM-L6-v2", "cuda").key == f"{DEFAULT_MODEL}:64:float32"


def test_local_folder_and_hub_names_resolve(tmp_path: Path) -> None:
    assert EncoderSpec.resolve(str(packaged_model_path()), "cpu", "float32", 256).key == "model:256:float32"
    hub = EncoderSpec.resolve("BAAI/bge-small-en-v1.5", "cpu")
    assert hub.location == "BAAI/bge-small-en-v1.5" and not hub.offline


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="int8"):
        EncoderSpec.resolve(None, "cuda", "int8")
    with pytest.raises(ValueError, match="device"):
        EncoderSpec.resolve(None, "tpu")


def test_encodes_unit_vectors_in_input_order() -> None:
    encoder = Encoder(EncoderSpec.resolve(None, "cpu"))
    texts = ["__global__ void matmul_kernel(float* a)", "x", "def forward(self, x): return torch.relu(x)"]
    vectors = encoder.encode(texts)
    assert vectors.shape == (3, encoder.dim) == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    again = encoder.encode(texts[::-1])
    assert np.allclose(again[::-1], vectors, atol=1e-5)
    seen: list[int] = []
    encoder.encode(texts * 300, advance=seen.append)
    assert sum(seen) == 900 and len(seen) == 2
