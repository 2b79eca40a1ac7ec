"""CTranslate2 / faster-whisper directories: ``model.bin`` + ``config.json`` + tokenizer assets.

``model.bin`` is read directly (memory-mapped), without ctranslate2. Its layout, binary version 6:
u32 version, string spec name, u32 spec revision, u32 variable count, then per variable a string
name, u8 rank, u32 dims, u8 dtype id, u32 byte count and the raw bytes; then u32 alias count and
(alias, target) string pairs. A string is a u16 length (with the NUL) and the bytes with a NUL.
Quantized variables carry a sibling ``*_scale``: int8 rows are ``q / scale[row]``, int16 ``q / scale``.

Variables are numpy views of the mapped file, so a conversion needs no torch (``oasr.conversion.arrays``);
numpy has no bfloat16, so a bfloat16 model's variables are torch tensors.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import mmap
import re
import struct
from pathlib import Path

import numpy as np

from oasr.conversion import arrays
from oasr.conversion.base import DETECT_KEYED_VALUE, CheckpointConverter
from oasr.errors import ConversionError
from oasr.models.whisper_config import WhisperConfig, WhisperLayout, whisper_specs
from oasr.conversion.tensor_map import TensorTable

from .openai_whisper import check_whisper_config

_DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")  # by CTranslate2's dtype id
_BINARY_VERSION = 6

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


def _read_model_bin(buf: mmap.mmap, path: Path) -> tuple[str, dict]:
    """Spec name and variables (aliases resolved, quantized weights dequantised) of a mapped ``model.bin``."""
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
        if n == 0:
            raise ConversionError(f"{path}: corrupt header (a string of length 0 at byte {pos - 2})")
        if pos + n > len(buf):
            raise ConversionError(f"{path} is truncated")
        raw = bytes(buf[pos : pos + n - 1])
        pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConversionError(f"{path}: corrupt header (a name that is not UTF-8 at byte {pos - n})") from None

    (version,) = take("<I")
    if version != _BINARY_VERSION:
        raise ConversionError(f"{path}: CTranslate2 binary version {version} is not supported (reads {_BINARY_VERSION})")
    spec = string()
    take("<I")  # spec revision
    (count,) = take("<I")
    raw: dict = {}
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
        numel = math.prod(shape)
        itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
        if numel * itemsize != nbytes:
            raise ConversionError(
                f"{path}: {name} has shape {list(shape)} of {dtype} but {nbytes} bytes: the header is corrupt"
            )
        if name in raw:
            raise ConversionError(f"{path}: {name} is stored twice")
        stored = "uint16" if dtype == "bfloat16" else dtype  # the bits, viewed as bfloat16 below
        # Unaligned data stays in place too: numpy reads it, and the bundle writer copies bytes.
        t = np.frombuffer(buf, dtype="<" + np.dtype(stored).str[1:], count=numel, offset=pos).reshape(shape)
        if dtype == "bfloat16":
            import torch

            t = torch.from_numpy(t.copy()).view(torch.bfloat16)
        raw[name] = t
        pos += nbytes
    (n_alias,) = take("<I")
    for _ in range(n_alias):
        alias, target = string(), string()
        if target not in raw:
            raise ConversionError(f"{path}: alias {alias} points to missing {target}")
        if alias in raw:
            raise ConversionError(f"{path}: alias {alias} names a stored variable")
        raw[alias] = raw[target]
        if target + "_scale" in raw:  # a quantized alias shares its target's scale too
            raw[alias + "_scale"] = raw[target + "_scale"]
    return spec, _dequantize(raw, path)


def _float32(t) -> np.ndarray:
    return t.astype(np.float32) if arrays.is_numpy(t) else t.float().numpy()


def _dequantize(raw: dict, path: Path) -> dict:
    out = {}
    float_dtypes = {
        arrays.dtype_name(t) for n, t in raw.items() if arrays.is_floating(t) and not n.endswith("_scale") and len(t.shape) > 0
    }
    target = "float16" if float_dtypes == {"float16"} else "bfloat16" if float_dtypes == {"bfloat16"} else "float32"
    for name, t in raw.items():
        if name.endswith("_scale") and name[: -len("_scale")] in raw:
            continue
        scale = raw.get(name + "_scale")
        if scale is not None:
            # int8: one scale per output row; int16: one scale for the tensor.
            kind = arrays.dtype_name(t)
            rows = t.shape[0] if kind == "int8" and len(t.shape) > 0 else 1
            if kind not in ("int8", "int16") or not arrays.is_floating(scale) or arrays.numel(scale) != rows:
                raise ConversionError(
                    f"{path}: {name} ({kind}, shape {list(t.shape)}) does not fit its scale "
                    f"({arrays.dtype_name(scale)}, {arrays.numel(scale)} values)"
                )
            divisor = _float32(scale)
            if kind == "int8":
                divisor = divisor.reshape(-1, *([1] * (len(t.shape) - 1)))
            t = arrays.cast(t.astype(np.float32) / divisor, target)
        out[name] = t
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _id_list(value, key: str, where: str, n_vocab: int) -> list[int] | None:
    """``suppress_ids`` and the like: None, or a list of token ids (-1: openai's "the usual set")."""
    if value is None:
        return None
    if not (isinstance(value, list) and all(_is_int(i) and -1 <= i < n_vocab for i in value)):
        raise ConversionError(f"{where}: {key} must be a list of token ids below {n_vocab}")
    return value


def _alignment_heads(value, where: str, config: WhisperConfig) -> list[list[int]] | None:
    """None, or ``[[layer, head], ...]`` inside the decoder."""
    if value is None:
        return None
    ok = isinstance(value, list) and all(
        isinstance(p, list) and len(p) == 2 and all(map(_is_int, p))
        and 0 <= p[0] < config.n_text_layer and 0 <= p[1] < config.n_text_head
        for p in value
    )
    if not ok:
        raise ConversionError(
            f"{where}: alignment_heads must be [layer, head] pairs inside the decoder "
            f"({config.n_text_layer} layers of {config.n_text_head} heads)"
        )
    return value


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
        except (OSError, struct.error, UnicodeDecodeError):
            return None
        return "model.bin header: WhisperSpec" if spec == "WhisperSpec" else None

    def source_files(self) -> list[Path]:
        return [self.path / "model.bin"]

    def source_hashes(self) -> dict[str, str]:
        # Hashed through the mapping the variables are then read from: the file is read once.
        return {"model.bin": hashlib.sha256(self._model_bin).hexdigest()}

    def layout(self, config: WhisperConfig) -> WhisperLayout:
        return WhisperLayout(config)

    @functools.cached_property
    def _model_bin(self) -> mmap.mmap:
        file = self.path / "model.bin"
        with open(file, "rb") as f:
            try:
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError as e:  # empty file
                raise ConversionError(f"{file} is empty") from e

    @functools.cached_property
    def _variables(self) -> dict:
        file = self.path / "model.bin"
        spec, variables = _read_model_bin(self._model_bin, file)
        if spec != "WhisperSpec":
            raise ConversionError(f"{file}: CTranslate2 spec {spec} is not supported (WhisperSpec is)")
        return variables

    @functools.cached_property
    def _ct2_config(self) -> dict:
        file = self.path / "config.json"
        try:
            config = json.loads(file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise ConversionError(f"{file} is not valid JSON: {_first_line(e)}") from e
        except OSError as e:
            raise ConversionError(f"{file} cannot be read: {e}") from e
        if not isinstance(config, dict):
            raise ConversionError(f"{file}: expected a JSON object, got {type(config).__name__}")
        return config

    def build_config(self) -> WhisperConfig:
        v = self._variables
        file = self.path / "model.bin"

        def tensor(name: str, rank: int):
            if name not in v:
                raise ConversionError(f"{file} lacks {name}")
            t = v[name]
            if len(t.shape) != rank:
                raise ConversionError(f"{file}: {name} has shape {list(t.shape)}, expected {rank} dimension(s)")
            return t

        def heads(name: str) -> int:
            t = v.get(name)
            if t is None:
                raise ConversionError(f"{file} lacks {name}")
            if arrays.numel(t) != 1 or arrays.is_floating(t):
                raise ConversionError(f"{file}: {name} is not one integer ({arrays.dtype_name(t)}, shape {list(t.shape)})")
            return int(t.reshape(()))

        def layers(side: str) -> int:
            ids = {int(m.group(1)) for n in v if (m := re.match(rf"{side}/layer_([0-9]+)/", n))}
            if ids != set(range(len(ids))):
                raise ConversionError(f"{file}: the {side} layers are not numbered 0..{len(ids) - 1}")
            return len(ids)

        conv1 = tensor("encoder/conv1/weight", 3)
        embeddings = tensor("decoder/embeddings/weight", 2)
        audio_positions = tensor("encoder/position_encodings/encodings", 2)
        text_positions = tensor("decoder/position_encodings/encodings", 2)
        if audio_positions.shape[1] != conv1.shape[0] or text_positions.shape[1] != embeddings.shape[1]:
            raise ConversionError(
                f"{file}: position encodings {list(audio_positions.shape)}, {list(text_positions.shape)} do not match "
                f"the widths of encoder/conv1 ({conv1.shape[0]}) and decoder/embeddings ({embeddings.shape[1]})"
            )
        config = WhisperConfig(
            n_mels=conv1.shape[1],
            n_audio_ctx=audio_positions.shape[0],
            n_audio_state=conv1.shape[0],
            n_audio_head=heads("encoder/num_heads"),
            n_audio_layer=layers("encoder"),
            n_vocab=embeddings.shape[0],
            n_text_ctx=text_positions.shape[0],
            n_text_state=embeddings.shape[1],
            n_text_head=heads("decoder/num_heads"),
            n_text_layer=layers("decoder"),
        )
        check_whisper_config(config, str(file))
        return config

    def load_state_dict(self):
        variables = dict(self._variables)
        file = self.path / "model.bin"
        for name, t in variables.items():
            if name.startswith(_SCALARS):
                continue
            # Weights are floating once dequantised: an integer one lost its *_scale (and would
            # reach the model as raw integers); none may be a scalar (a fused QKV is split along dim 0).
            if not arrays.is_floating(t):
                raise ConversionError(f"{file}: {name} holds {arrays.dtype_name(t)} values and no {name}_scale")
            if len(t.shape) == 0:
                raise ConversionError(f"{file}: {name} is a scalar, not a weight")
        return variables

    def build_specs(self, config):
        files = {n: self.path / n for n in _TOKENIZER_NAMES if (self.path / n).is_file()}
        c = self._ct2_config
        where = f"{self.path / 'config.json'}"
        tokenizer, features, decoding = whisper_specs(
            config,
            files,
            suppress_ids=_id_list(c.get("suppress_ids"), "suppress_ids", where, config.n_vocab),
            suppress_ids_begin=_id_list(c.get("suppress_ids_begin"), "suppress_ids_begin", where, config.n_vocab),
            alignment_heads=_alignment_heads(c.get("alignment_heads"), where, config),
        )
        return tokenizer, files, features, decoding

    def notes(self) -> list[str]:
        if (self.path / "tokenizer.json").is_file():
            return []
        return [
            f"{self.path} has vocabulary.* but no tokenizer.json: without BPE merges the model cannot turn tokens into text"
        ]
