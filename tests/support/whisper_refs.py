"""Reference Whisper models for the parity tests: tiny random checkpoints in each source format.

Every builder is deterministic (seeded) and fills *every* weight with random values of a useful
scale (LayerNorm gains near 1, non-zero biases, attention logits of order one), so that a swapped
or dropped tensor changes the outputs by far more than the tolerances. The one exception is the
encoder's positional embedding, which real checkpoints carry as the fixed sinusoid.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

# Small enough to build, convert and run in well under a second; shapes stay Whisper-consistent.
D_MODEL = 64
HEADS = 4
LAYERS = 2
AUDIO_CTX = 64  # encoder positions -> 2 * 64 = 128 mel frames
TEXT_CTX = 32
ENGLISH_VOCAB = 51864  # tiny.en's tokenizer.json
MULTILINGUAL_VOCAB = 51865


def reference_sinusoids(length: int, channels: int) -> torch.Tensor:
    """openai-whisper's own function (not oasr's) for the encoder positional embedding."""
    from whisper.model import sinusoids

    return sinusoids(length, channels).float()


@torch.no_grad()
def randomize_(module: torch.nn.Module, seed: int, skip: Iterable[str] = ()) -> None:
    """Overwrite every parameter and persistent buffer except ``skip`` with seeded random values."""
    gen = torch.Generator().manual_seed(seed)
    skip = set(skip)
    tensors = dict(module.named_parameters())
    tensors.update({k: v for k, v in module.state_dict().items() if k not in tensors})
    for name in sorted(tensors):
        t = tensors[name]
        if name in skip or not t.is_floating_point():
            continue
        leaf = name.rsplit(".", 1)[-1]
        is_norm = any(s in name for s in ("layer_norm", "_ln", ".ln.", "ln_post", "attn_ln", "mlp_ln"))
        noise = torch.randn(t.shape, generator=gen, dtype=torch.float32)
        if is_norm and leaf == "weight":
            value = 1.0 + 0.2 * noise
        elif leaf == "bias" or t.dim() == 1:
            value = 0.2 * noise
        elif "embed" in name or "embedding" in name:
            value = 0.5 * noise
        else:
            fan_in = t[0].numel()
            value = noise / math.sqrt(fan_in)
        t.copy_(value.to(t.dtype))


# -- Hugging Face transformers ------------------------------------------------------------------


def hf_config(*, n_mels: int = 80, vocab: int = MULTILINGUAL_VOCAB):
    from transformers import WhisperConfig

    english = vocab == ENGLISH_VOCAB
    return WhisperConfig(
        vocab_size=vocab,
        num_mel_bins=n_mels,
        d_model=D_MODEL,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=4 * D_MODEL,
        decoder_ffn_dim=4 * D_MODEL,
        max_source_positions=AUDIO_CTX,
        max_target_positions=TEXT_CTX,
        # The special ids of the real vocabularies (English-only ones sit one lower).
        bos_token_id=50257 if english else 50258,
        decoder_start_token_id=50257 if english else 50258,
        eos_token_id=50256 if english else 50257,
        pad_token_id=50256 if english else 50257,
        attn_implementation="eager",
    )


def hf_whisper(*, n_mels: int = 80, vocab: int = MULTILINGUAL_VOCAB, seed: int = 0):
    """A random ``WhisperForConditionalGeneration`` in fp32 eval mode, encoder positions = sinusoid.

    Returns (model, init_was_sinusoid): whether transformers' own init already gave the sinusoid
    (it does in transformers 5.24; the builder enforces it either way).
    """
    from transformers import WhisperForConditionalGeneration

    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(hf_config(n_mels=n_mels, vocab=vocab)).eval()
    positions = model.model.encoder.embed_positions.weight
    expected = reference_sinusoids(*positions.shape)
    init_was_sinusoid = bool(torch.allclose(positions, expected, atol=1e-6, rtol=0))
    randomize_(model, seed, skip={"model.encoder.embed_positions.weight", "proj_out.weight"})
    with torch.no_grad():
        positions.copy_(expected)
    # Real checkpoints tie the output projection to the token embedding.
    assert model.proj_out.weight.data_ptr() == model.model.decoder.embed_tokens.weight.data_ptr()
    return model, init_was_sinusoid


def save_hf(model, folder: Path, fmt: str = "safetensors", state_dict: dict | None = None) -> Path:
    """Write ``model`` as a Hugging Face directory.

    fmt: "safetensors" (one file), "sharded" (safetensors shards + index), "bin" (one
    pytorch_model.bin, as ``safe_serialization=False`` wrote it: every tensor, proj_out included),
    "sharded-bin" (pytorch_model-0000x-of-0000n.bin + pytorch_model.bin.index.json).
    ``state_dict`` replaces the model's tensors in what is written (e.g. a perturbed one).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if fmt in ("safetensors", "sharded"):
        kwargs = {"max_shard_size": "300KB"} if fmt == "sharded" else {}
        if state_dict is not None:
            kwargs["state_dict"] = state_dict
        model.save_pretrained(folder, **kwargs)
        return folder
    # transformers 5 writes safetensors only; a .bin is what older versions wrote with
    # safe_serialization=False: torch.save of the full state dict (tied proj_out included).
    model.config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    state = {k: v.detach().clone().contiguous() for k, v in (state_dict or model.state_dict()).items()}
    if fmt == "bin":
        torch.save(state, folder / "pytorch_model.bin")
        return folder
    if fmt == "sharded-bin":
        names = sorted(state)
        parts = [names[: len(names) // 2], names[len(names) // 2 :]]
        weight_map = {}
        for i, part in enumerate(parts, 1):
            shard = f"pytorch_model-{i:05d}-of-{len(parts):05d}.bin"
            torch.save({k: state[k] for k in part}, folder / shard)
            weight_map.update({k: shard for k in part})
        (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
        return folder
    raise ValueError(fmt)


@torch.no_grad()
def hf_encode(model, mel: torch.Tensor) -> torch.Tensor:
    return model.model.encoder(input_features=mel).last_hidden_state


@torch.no_grad()
def hf_logits(model, tokens: torch.Tensor, audio_features: torch.Tensor) -> torch.Tensor:
    out = model(encoder_outputs=(audio_features,), decoder_input_ids=tokens, use_cache=False)
    return out.logits.float()


# -- openai-whisper -----------------------------------------------------------------------------


def openai_dims(*, n_mels: int = 80, vocab: int = MULTILINGUAL_VOCAB):
    from whisper.model import ModelDimensions

    return ModelDimensions(
        n_mels=n_mels,
        n_audio_ctx=AUDIO_CTX,
        n_audio_state=D_MODEL,
        n_audio_head=HEADS,
        n_audio_layer=LAYERS,
        n_vocab=vocab,
        n_text_ctx=TEXT_CTX,
        n_text_state=D_MODEL,
        n_text_head=HEADS,
        n_text_layer=LAYERS,
    )


def openai_whisper(*, n_mels: int = 80, vocab: int = MULTILINGUAL_VOCAB, seed: int = 0):
    """A random ``whisper.model.Whisper`` (fp32, eval); its encoder positions stay the sinusoid."""
    from whisper.model import Whisper

    torch.manual_seed(seed)
    model = Whisper(openai_dims(n_mels=n_mels, vocab=vocab)).eval()
    randomize_(model, seed, skip={"encoder.positional_embedding"})
    return model


def save_openai(model, path: Path) -> Path:
    """The layout openai-whisper's ``load_model`` reads: {"dims": {...}, "model_state_dict": {...}}."""
    torch.save({"dims": dict(model.dims.__dict__), "model_state_dict": model.state_dict()}, path)
    return path


# -- CTranslate2 --------------------------------------------------------------------------------


def ct2_convert(hf_dir: Path, out_dir: Path, quantization: str) -> Path:
    """CTranslate2's own converter (what ``ct2-transformers-converter`` runs) on a Hugging Face dir."""
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(str(hf_dir)).convert(str(out_dir), quantization=quantization, force=True)
    return Path(out_dir)


def ct2_spec_variables(hf_dir: Path, quantization: str) -> dict[str, torch.Tensor]:
    """The variables CTranslate2 writes into model.bin for ``quantization`` (aliases resolved),
    taken from its own converter (the code path ``convert`` runs), in their stored dtypes."""
    from ctranslate2.converters import TransformersConverter

    spec = TransformersConverter(str(hf_dir))._load()
    spec.validate()
    spec.optimize(quantization=quantization)
    variables = dict(spec.variables(ordered=True))
    out = {}
    for name, value in variables.items():
        target = name
        while isinstance(value, str):  # an alias of another variable, sharing its scale
            target, value = value, variables[value]
        if target != name and target + "_scale" in variables:
            out[name + "_scale"] = _ct2_tensor(variables[target + "_scale"])
        out[name] = _ct2_tensor(value)
    return out


def _ct2_tensor(value) -> torch.Tensor:
    if hasattr(value, "tensor"):  # PyTorchVariable
        return value.tensor.detach().clone()
    return torch.from_numpy(np.array(value.numpy(), copy=True))  # NumpyVariable


def ct2_dequantize(variables: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """CTranslate2's documented dequantisation, written independently of oasr:
    int8 weights carry one scale per output row (q / scale[row], conv kernels per output channel),
    int16 weights one scale per tensor (q / scale). Float tensors come back as fp32."""
    out = {}
    for name, t in variables.items():
        if name.endswith("_scale"):
            continue
        scale = variables.get(name + "_scale")
        if scale is not None:
            s = scale.float()
            if t.dtype == torch.int8:
                t = t.float() / s.reshape(-1, *([1] * (t.dim() - 1)))
            elif t.dtype == torch.int16:
                t = t.float() / s
            else:
                raise AssertionError(f"{name}: a scale on a {t.dtype} tensor")
        elif t.is_floating_point():
            t = t.float()
        out[name] = t
    return out
