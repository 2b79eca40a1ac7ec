"""CTranslate2 / faster-whisper directories: ``model.bin`` + ``config.json`` + tokenizer assets.

``model.bin`` is read directly (memory-mapped), without ctranslate2. Its layout, binary version 6:
u32 version, string spec name, u32 spec revision, u32 variable count, then per variable a string
name, u8 rank, u32 dims, u8 dtype id, u32 byte count and the raw bytes; then u32 alias count and
(alias, target) string pairs. A string is a u16 length (with the NUL) and the bytes with a NUL.
Quantized variables carry a sibling ``*_scale``: int8 rows are ``q / scale[row]``, int16 ``q / scale``.
"""

from __future__ import annotations

import functools
import json
import mmap
import re
import struct
from pathlib import Path

import torch

from oasr.conversion.base import DETECT_KEYED_VALUE, CheckpointConverter
from oasr.errors import ConversionError
from oasr.models.whisper import WhisperConfig, whisper_specs
from oasr.conversion.tensor_map import TensorTable

_DTYPES = (torch.float32, torch.int8, torch.int16, torch.int32, torch.float16, torch.bfloat16)
_BINARY_VERSION = 6

_ATTN_OUT = {"linear_1/weight": "out.weight", "linear_1/bias": "out.bias"}


def _ln(src: str, dst: str) -> dict[str, str]:
    return {f"{src}/gamma": f"{dst}.weight", f"{src}/beta": f"{dst}.bias"}


def _linear(src: str, dst: str) -> dict[str, str]:
    return {f"{src}/weight": f"{dst}.weight", f"{src}/bias": f"{dst}.bias"}


_E = "encoder/layer_{bid}"
_D = "decoder/layer_{bid}"
_EB = "encoder.blocks.{bid}"
_DB = "decoder.blocks.{bid}"
_TABLE = {
    **_linear("encoder/conv1", "encoder.conv1"),
    **_linear("encoder/conv2", "encoder.conv2"),
    "encoder/position_encodings/encodings": "encoder.positional_embedding",
    **_ln("encoder/layer_norm", "encoder.ln_post"),
    **_ln(f"{_E}/self_attention/layer_norm", f"{_EB}.attn_ln"),
    # Fused QKV; Whisper's key has no bias, so that chunk must be zero.
    f"{_E}/self_attention/linear_0/weight": (f"{_EB}.attn.query.weight", f"{_EB}.attn.key.weight", f"{_EB}.attn.value.weight"),
    f"{_E}/self_attention/linear_0/bias": (f"{_EB}.attn.query.bias", None, f"{_EB}.attn.value.bias"),
    **_linear(f"{_E}/self_attention/linear_1", f"{_EB}.attn.out"),
    **_ln(f"{_E}/ffn/layer_norm", f"{_EB}.mlp_ln"),
    **_linear(f"{_E}/ffn/linear_0", f"{_EB}.mlp.0"),
    **_linear(f"{_E}/ffn/linear_1", f"{_EB}.mlp.2"),
    "decoder/embeddings/weight": "decoder.token_embedding.weight",
    "decoder/projection/weight": "decoder.token_embedding.weight",  # an alias: tied output projection
    "decoder/position_encodings/encodings": "decoder.positional_embedding",
    **_ln("decoder/layer_norm", "decoder.ln"),
    **_ln(f"{_D}/self_attention/layer_norm", f"{_DB}.attn_ln"),
    f"{_D}/self_attention/linear_0/weight": (f"{_DB}.attn.query.weight", f"{_DB}.attn.key.weight", f"{_DB}.attn.value.weight"),
    f"{_D}/self_attention/linear_0/bias": (f"{_DB}.attn.query.bias", None, f"{_DB}.attn.value.bias"),
    **_linear(f"{_D}/self_attention/linear_1", f"{_DB}.attn.out"),
    **_ln(f"{_D}/attention/layer_norm", f"{_DB}.cross_attn_ln"),
    **_linear(f"{_D}/attention/linear_0", f"{_DB}.cross_attn.query"),
    # Fused cross-attention KV.
    f"{_D}/attention/linear_1/weight": (f"{_DB}.cross_attn.key.weight", f"{_DB}.cross_attn.value.weight"),
    f"{_D}/attention/linear_1/bias": (None, f"{_DB}.cross_attn.value.bias"),
    **_linear(f"{_D}/attention/linear_2", f"{_DB}.cross_attn.out"),
    **_ln(f"{_D}/ffn/layer_norm", f"{_DB}.mlp_ln"),
    **_linear(f"{_D}/ffn/linear_0", f"{_DB}.mlp.0"),
    **_linear(f"{_D}/ffn/linear_1", f"{_DB}.mlp.2"),
}

# Scalars that describe the network (read into the config or fixed for Whisper), not weights.
_SCALARS = tuple(
    f"{side}/{name}"
    for side in ("encoder", "decoder")
    for name in (
        "num_heads", "activation", "alibi", "alibi_use_positive_positions", "scale_alibi",
        "alignment_heads", "alignment_layer", "pre_norm", "scale_embeddings",
        "start_from_zero_embedding", "multi_query_attention",
    )
)

_TOKENIZER_NAMES = ("tokenizer.json",)


def _read_model_bin(path: Path) -> tuple[str, dict[str, torch.Tensor]]:
    """Spec name and variables (aliases resolved, quantized weights dequantised)."""
    with open(path, "rb") as f:
        try:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except ValueError as e:  # empty file
            raise ConversionError(f"{path} is empty") from e
    pos = 0

    def take(fmt: str):
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(buf):
            raise ConversionError(f"{path} is truncated")
        values = struct.unpack_from(fmt, buf, pos)
        pos += size
        return values

    def string() -> str:
        nonlocal pos
        (n,) = take("<H")
        if pos + n > len(buf):
            raise ConversionError(f"{path} is truncated")
        raw = bytes(buf[pos : pos + n - 1])
        pos += n
        return raw.decode("utf-8")

    (version,) = take("<I")
    if version != _BINARY_VERSION:
        raise ConversionError(f"{path}: CTranslate2 binary version {version} is not supported (reads {_BINARY_VERSION})")
    spec = string()
    take("<I")  # spec revision
    (count,) = take("<I")
    raw: dict[str, torch.Tensor] = {}
    for _ in range(count):
        name = string()
        (rank,) = take("<B")
        shape = take(f"<{rank}I") if rank else ()
        dtype_id, nbytes = take("<BI")
        if dtype_id >= len(_DTYPES):
            raise ConversionError(f"{path}: {name} has unknown dtype id {dtype_id}")
        dtype = _DTYPES[dtype_id]
        if pos + nbytes > len(buf):
            raise ConversionError(f"{path} is truncated (in {name})")
        numel = nbytes // dtype.itemsize
        t = torch.frombuffer(buf, dtype=dtype, count=numel, offset=pos) if numel else torch.empty(0, dtype=dtype)
        if pos % dtype.itemsize:
            t = t.clone()  # unaligned data is copied once rather than used in place
            _release(buf, pos, nbytes)
        raw[name] = t.reshape(shape)
        pos += nbytes
    (n_alias,) = take("<I")
    for _ in range(n_alias):
        alias, target = string(), string()
        if target not in raw:
            raise ConversionError(f"{path}: alias {alias} points to missing {target}")
        raw[alias] = raw[target]
        if target + "_scale" in raw:  # a quantized alias shares its target's scale too
            raw[alias + "_scale"] = raw[target + "_scale"]
    return spec, _dequantize(raw)


def _release(buf: mmap.mmap, start: int, length: int) -> None:
    """Let go of the mapped pages wholly inside ``[start, start + length)``, whose data was copied.

    Nothing reads them again (the copy is used), so they need not count in the process's memory.
    """
    page = mmap.PAGESIZE
    lo = -(-start // page) * page
    hi = (start + length) // page * page
    if hi > lo and hasattr(mmap, "MADV_DONTNEED"):
        try:
            buf.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except OSError:
            pass


def _dequantize(raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    float_dtypes = {t.dtype for n, t in raw.items() if t.is_floating_point() and not n.endswith("_scale") and t.dim() > 0}
    target = torch.float16 if float_dtypes == {torch.float16} else torch.bfloat16 if float_dtypes == {torch.bfloat16} else torch.float32
    for name, t in raw.items():
        if name.endswith("_scale") and name[: -len("_scale")] in raw:
            continue
        scale = raw.get(name + "_scale")
        if scale is not None:
            q = t.float()
            if t.dtype == torch.int8:
                q = q / scale.float().reshape(-1, *([1] * (t.dim() - 1)))
            else:
                q = q / scale.float()
            t = q.to(target)
        out[name] = t
    return out


class CTranslate2WhisperConverter(CheckpointConverter):
    name = "ctranslate2"
    architecture = "whisper"
    markers = "model.bin whose header names WhisperSpec, beside config.json and tokenizer.json or vocabulary.*"
    detect_specificity = DETECT_KEYED_VALUE
    tensor_table = TensorTable(_TABLE)
    expected_unused_prefixes = _SCALARS

    @classmethod
    def detect(cls, path: Path) -> str | None:
        path = Path(path)
        model_bin = path / "model.bin"
        if not (model_bin.is_file() and (path / "config.json").is_file()):
            return None
        if not ((path / "tokenizer.json").is_file() or any(path.glob("vocabulary.*"))):
            return None
        try:
            with open(model_bin, "rb") as f:
                head = f.read(6 + 256)
            (n,) = struct.unpack_from("<H", head, 4)
            spec = head[6 : 6 + n - 1].decode("utf-8")
        except (struct.error, UnicodeDecodeError):
            return None
        return "model.bin header: WhisperSpec" if spec == "WhisperSpec" else None

    def source_files(self) -> list[Path]:
        return [self.path / "model.bin"]

    @functools.cached_property
    def _variables(self) -> dict[str, torch.Tensor]:
        file = self.path / "model.bin"
        spec, variables = _read_model_bin(file)
        if spec != "WhisperSpec":
            raise ConversionError(f"{file}: CTranslate2 spec {spec} is not supported (WhisperSpec is)")
        return variables

    @functools.cached_property
    def _ct2_config(self) -> dict:
        try:
            return json.loads((self.path / "config.json").read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConversionError(f"{self.path}/config.json is not valid JSON: {e}") from e

    def build_config(self) -> WhisperConfig:
        v = self._variables

        def layers(side: str) -> int:
            ids = {int(m.group(1)) for n in v if (m := re.match(rf"{side}/layer_(\d+)/", n))}
            return max(ids) + 1 if ids else 0

        try:
            conv1 = v["encoder/conv1/weight"]
            return WhisperConfig(
                n_mels=conv1.shape[1],
                n_audio_ctx=v["encoder/position_encodings/encodings"].shape[0],
                n_audio_state=conv1.shape[0],
                n_audio_head=int(v["encoder/num_heads"]),
                n_audio_layer=layers("encoder"),
                n_vocab=v["decoder/embeddings/weight"].shape[0],
                n_text_ctx=v["decoder/position_encodings/encodings"].shape[0],
                n_text_state=v["decoder/embeddings/weight"].shape[1],
                n_text_head=int(v["decoder/num_heads"]),
                n_text_layer=layers("decoder"),
            )
        except KeyError as e:
            raise ConversionError(f"{self.path}/model.bin lacks {e.args[0]}") from e

    def load_state_dict(self):
        return dict(self._variables)

    def build_specs(self, config):
        files = {n: self.path / n for n in _TOKENIZER_NAMES if (self.path / n).is_file()}
        c = self._ct2_config
        tokenizer, features, decoding = whisper_specs(
            config,
            files,
            suppress_ids=c.get("suppress_ids"),
            suppress_ids_begin=c.get("suppress_ids_begin"),
            alignment_heads=c.get("alignment_heads"),
        )
        return tokenizer, files, features, decoding

    def notes(self) -> list[str]:
        if (self.path / "tokenizer.json").is_file():
            return []
        return [
            f"{self.path} has vocabulary.* but no tokenizer.json: without BPE merges the model cannot turn tokens into text"
        ]
