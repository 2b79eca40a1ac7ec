"""A CTranslate2 Whisper folder converts on numpy alone, reads model.bin once, and writes the
same bytes safetensors would (``oasr.conversion.arrays``, ``oasr.io.safetensors_file``)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import save

from oasr.conversion.run import convert
from oasr.io.safetensors_file import write_safetensors
from oasr.models.whisper_config import WhisperConfig, WhisperLayout


def test_a_ctranslate2_folder_converts_without_importing_torch(tiny_en_ct2, tmp_path):
    code = (
        "import sys\n"
        "from oasr.conversion.run import convert\n"
        f"r = convert([{str(tiny_en_ct2)!r}], {str(tmp_path / 'out')!r})\n"
        "print(r[0].status, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["converted", "False"], done.stderr


def test_the_recorded_hash_comes_from_the_one_read_of_model_bin(tiny_en_ct2, tmp_path, monkeypatch):
    def second_pass(path, *args):
        raise AssertionError(f"{path} read a second time to hash it")

    monkeypatch.setattr("oasr.io.files.sha256_file", second_pass)
    monkeypatch.setattr("oasr.conversion.run.sha256_file", second_pass, raising=False)
    convert([tiny_en_ct2], tmp_path / "out")
    recorded = json.loads((tmp_path / "out" / "oasr_config.json").read_text())["provenance"]["source_files"]
    assert recorded == {"model.bin": hashlib.sha256((tiny_en_ct2 / "model.bin").read_bytes()).hexdigest()}


def test_the_bundle_writer_writes_safetensors_bytes(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "b.weight": rng.standard_normal((3, 5)).astype(np.float16),
        "a.unaligned": np.frombuffer(b"\0" + rng.standard_normal(6).astype(np.float32).tobytes(), np.float32, 6, 1),
        "c.ids": np.arange(4, dtype=np.int64),
        "d.flags": np.array([True, False]),
        "e.scalar": np.array(2.5, dtype=np.float64),
        "f.strided": rng.standard_normal((4, 4)).astype(np.float32)[:, ::2],
        "g.bf16": torch.randn(2, 3).to(torch.bfloat16),
        "h.int8": torch.arange(-3, 3, dtype=torch.int8),
    }
    write_safetensors(tensors, tmp_path / "w.safetensors", metadata={"format": "pt"})
    as_torch = {k: v if isinstance(v, torch.Tensor) else torch.from_numpy(v.copy()) for k, v in tensors.items()}
    assert (tmp_path / "w.safetensors").read_bytes() == save(as_torch, metadata={"format": "pt"})


@pytest.mark.parametrize(
    "config",
    [
        WhisperConfig(n_mels=80, n_audio_ctx=24, n_audio_state=16, n_audio_head=2, n_audio_layer=2,
                      n_vocab=51865, n_text_ctx=12, n_text_state=16, n_text_head=2, n_text_layer=3),
        WhisperConfig(n_mels=128, n_audio_ctx=1500, n_audio_state=64, n_audio_head=4, n_audio_layer=1,
                      n_vocab=100, n_text_ctx=448, n_text_state=64, n_text_head=4, n_text_layer=1),
    ],
)
def test_the_whisper_layout_is_the_models(config):
    from oasr.models.weights import meta_model

    model = meta_model("whisper", config)
    layout = WhisperLayout(config)
    expected = {name: (tuple(shape), str(dtype).removeprefix("torch.")) for name, (shape, dtype) in model.expected_tensors().items()}
    assert layout.expected_tensors() == expected
    assert layout.computed_buffers == model.computed_buffers and layout.capabilities == model.capabilities
    from oasr.models.whisper import sinusoids

    ours = layout.computed_buffer_values()["encoder.positional_embedding"]
    assert np.allclose(ours, sinusoids(config.n_audio_ctx, config.n_audio_state).numpy(), atol=5e-4, rtol=0)
