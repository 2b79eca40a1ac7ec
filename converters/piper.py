"""Piper voices (``<voice>.onnx`` + ``<voice>.onnx.json``) -> VITS bundles.

The ONNX export is read as data (``oasr.io.onnx``), never run. Piper's exporter keeps most
weights under their PyTorch names (``enc_p.encoder.attn_layers.0.conv_q.weight``), but leaves
others anonymous or misnamed: the coupling flows' convolutions are ``onnx::Conv_8168``, the phoneme
embedding is called ``sid``. Every weight is therefore named from the node that consumes it,
whose name is the module's path (``/flow/flows.6/enc/in_layers.0/Conv`` -> ``flow.flows.6.enc.
in_layers.0.weight``); a MatMul's weight is transposed back to a linear layer's [out, in]. Where
a named initializer's consumer names another module the file is refused. One value is folded by
the exporter: the duration predictor's affine flow stores ``exp(-logs)`` (``/dp/flows.0/Exp_output_0``),
turned back into ``logs`` in float64.

What is left is the graph's own arithmetic: integer shapes and axes, and scalar constants
(sqrt(192), epsilons, -1e4 masks). Those, and only those, are allowed to go unused; any other
tensor that names no VITS weight fails the conversion.

The JSON gives the sample rate, the phoneme_id_map and espeak voice (the tokenizer spec), the
inference defaults (noise_scale, length_scale, noise_w) and the speakers.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError, InputError
from oasr.specs import DecodingDefaults, FeatureSpec, TokenizerSpec

if TYPE_CHECKING:
    from oasr.io.onnx import OnnxGraph
    from oasr.models.vits import VitsConfig
    import torch

MAX_JSON_BYTES = 4 << 20  # a voice config with a large speaker map is a few hundred kB
PHONEME_TYPES = ("espeak", "text")  # Piper's phonemizers that oasr runs (pinyin, hebrew ... are not)
GRAPH_PREFIX = "graph:"  # the export's arithmetic constants, allowed to go unused

# Which input of a consuming node is which parameter of the module the node belongs to.
_PARAMETER_INPUTS = {
    "Conv": {1: "weight", 2: "bias"},
    "ConvTranspose": {1: "weight", 2: "bias"},
    "Gather": {0: "weight"},  # an embedding table
    "MatMul": {1: "weight"},  # [in, out] as the graph multiplies; transposed to [out, in]
}


def _negative_log(t):
    import torch

    return (-torch.log(t.double())).float()


# Values the exporter folded: initializer -> (VITS name, the inverse of the folding).
_FOLDED = {
    "/dp/flows.0/Exp_output_0": ("dp.flows.0.logs", _negative_log),
}
_PARAM_PATH = re.compile(r"^[A-Za-z_]\w*(\.\w+)+$")


class _VitsModules(TensorTable):
    """Names the graph resolved to VITS's own are kept as they are, under the VITS modules."""

    def lookup(self, name: str):
        return (name,) if name.startswith(tuple(self.rules)) else None


def _json(path: Path) -> dict | None:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _is_voice_config(data: dict | None) -> bool:
    return bool(data) and isinstance(data.get("phoneme_id_map"), dict) and isinstance(data.get("audio"), dict)


class PiperConverter(CheckpointConverter):
    name = "piper"
    architecture = "vits"
    markers = "a Piper voice: VOICE.onnx with its VOICE.onnx.json (phoneme_id_map, audio), or a folder holding one"
    detect_specificity = DETECT_NAMED_CONFIG
    tensor_table = _VitsModules(
        {
            "enc_p.": "text encoder",
            "dp.": "duration predictor",
            "flow.": "residual coupling flow",
            "dec.": "HiFi-GAN generator",
            "emb_g.": "speaker embedding",
        }
    )
    expected_unused_prefixes = (GRAPH_PREFIX,)
    requires = {"onnx": "onnx"}

    @classmethod
    def detect(cls, path: Path) -> str | None:
        found = cls._files(Path(path))
        return f"{found[0].name} with {found[1].name} (a Piper voice)" if found else None

    @staticmethod
    def _files(path: Path) -> tuple[Path, Path] | None:
        if path.is_file() and path.name.endswith(".onnx.json"):
            path = path.with_name(path.name[: -len(".json")])
        if path.is_dir():
            # A hub snapshot keeps the voice under lang/region/name/quality/: looked for below too.
            voices = [p for p in sorted(path.rglob("*.onnx")) if p.with_name(p.name + ".json").is_file()]
            if len(voices) != 1:
                return None
            path = voices[0]
        config = path.with_name(path.name + ".json")
        if path.suffix == ".onnx" and path.is_file() and config.is_file() and _is_voice_config(_json(config)):
            return path, config
        return None

    @property
    def files(self) -> tuple[Path, Path]:
        found = self._files(self.path)
        if found is None:
            raise ConversionError(f"{self.path}: expected VOICE.onnx beside VOICE.onnx.json (a Piper voice)")
        return found

    def source_files(self) -> list[Path]:
        return list(self.files)

    @functools.cached_property
    def voice(self) -> dict:
        data = _json(self.files[1])
        if not _is_voice_config(data):
            raise ConversionError(f"{self.files[1]}: not a Piper voice config")
        return data

    @functools.cached_property
    def _graph(self) -> OnnxGraph:
        from oasr.io.onnx import read_onnx

        try:
            return read_onnx(self.files[0])
        except InputError as e:  # the onnx package is missing, or the file is unreadable
            raise ConversionError(str(e)) from None

    @functools.cached_property
    def _state(self) -> dict[str, torch.Tensor]:
        return resolve_weights(self._graph)

    def load_state_dict(self) -> dict[str, torch.Tensor]:
        return dict(self._state)

    def build_config(self) -> VitsConfig:
        return vits_config(self._state, self._graph, self.voice)

    def build_specs(self, config: VitsConfig):
        return voice_specs(self.voice, config, str(self.files[0]))


def module_path(node_name: str) -> str:
    """``/flow/flows.6/enc/in_layers.0/Conv`` -> ``flow.flows.6.enc.in_layers.0``."""
    return ".".join(p for p in node_name.strip("/").split("/")[:-1])


def resolve_weights(graph: OnnxGraph) -> dict[str, torch.Tensor]:
    """Every initializer under the VITS name the graph gives it; arithmetic under GRAPH_PREFIX."""
    out: dict[str, torch.Tensor] = {}
    label = graph.path.name
    for name, tensor in graph.initializers.items():
        if name in _FOLDED:
            target, unfold = _FOLDED[name]
            out[target] = unfold(tensor)
            continue
        target = _consumer_name(graph, name)
        if target is not None:
            param, transpose = target
            if _PARAM_PATH.match(name) and not name.startswith("onnx::") and name != param:
                raise ConversionError(f"{label}: initializer {name!r} is consumed as {param!r}; the export is not Piper's")
            if param in out:
                raise ConversionError(f"{label}: two initializers are consumed as {param!r}")
            out[param] = tensor.t().contiguous() if transpose else tensor
        elif _PARAM_PATH.match(name) and tensor.is_floating_point() and tensor.numel() > 1:
            out[name] = tensor  # a named parameter used by arithmetic (norm gamma/beta, emb_rel_k, m)
        elif not tensor.is_floating_point() or tensor.numel() <= 1:
            out[GRAPH_PREFIX + name] = tensor
        else:
            raise ConversionError(f"{label}: tensor {name!r} {list(tensor.shape)} names no VITS weight")
    return out


def _consumer_name(graph: OnnxGraph, name: str) -> tuple[str, bool] | None:
    """(VITS name, transpose) of an initializer a Conv/Gather/MatMul takes as a parameter."""
    found = None
    for node in graph.consumers(name):
        roles = _PARAMETER_INPUTS.get(node.op_type, {})
        role = next((roles[i] for i, v in enumerate(node.inputs) if v == name and i in roles), None)
        if role is None or not node.name:
            continue
        candidate = (f"{module_path(node.name)}.{role}", node.op_type == "MatMul")
        if found is not None and found != candidate:
            raise ConversionError(f"{graph.path.name}: initializer {name!r} feeds both {found[0]} and {candidate[0]}")
        found = candidate
    return found


def _count(state, pattern: str) -> int:
    regex = re.compile(pattern)
    return len({m.group(1) for k in state for m in [regex.match(k)] if m})


def _node_attr(graph: OnnxGraph, node_name: str, attr: str, default):
    node = next((n for n in graph.nodes if n.name == node_name), None)
    if node is None:
        return default
    return node.attrs.get(attr, default)


def vits_config(state: dict[str, torch.Tensor], graph: OnnxGraph, voice: dict) -> VitsConfig:
    """The VITS dimensions, from the weights' shapes and the graph's convolution attributes."""
    from oasr.models.vits import VitsConfig

    label = graph.path.name

    def shape(name: str):
        if name not in state:
            raise ConversionError(f"{label}: no {name}: not a Piper VITS export")
        return state[name].shape

    n_vocab, hidden = shape("enc_p.emb.weight")
    rel = shape("enc_p.encoder.attn_layers.0.emb_rel_k")
    ffn = shape("enc_p.encoder.ffn_layers.0.conv_1.weight")
    use_sdp = "dp.flows.0.m" in state
    if use_sdp:
        dp_filter, dp_kernel = shape("dp.pre.weight")[0], shape("dp.convs.convs_sep.0.weight")[2]
    else:
        dp_filter, dp_kernel = shape("dp.conv_1.weight")[0], shape("dp.conv_1.weight")[2]
    n_ups = _count(state, r"^dec\.ups\.(\d+)\.weight$")
    n_blocks = _count(state, r"^dec\.resblocks\.(\d+)\.")
    if n_ups == 0 or n_blocks % n_ups:
        raise ConversionError(f"{label}: {n_blocks} HiFi-GAN residual blocks over {n_ups} upsampling stages")
    n_kernels = n_blocks // n_ups
    resblock = "1" if "dec.resblocks.0.convs1.0.weight" in state else "2"
    convs = "convs1" if resblock == "1" else "convs"
    kernels, dilations = [], []
    for j in range(n_kernels):
        n_convs = _count(state, rf"^dec\.resblocks\.{j}\.{convs}\.(\d+)\.weight$")
        kernels.append(int(shape(f"dec.resblocks.{j}.{convs}.0.weight")[2]))
        dilations.append(tuple(int(_node_attr(graph, f"/dec/resblocks.{j}/{convs}.{i}/Conv", "dilations", [1])[0]) for i in range(n_convs)))
    rates = [int(_node_attr(graph, f"/dec/ups.{i}/ConvTranspose", "strides", [0])[0]) for i in range(n_ups)]
    if min(rates) < 1:
        raise ConversionError(f"{label}: an upsampling stage has no stride in the graph")
    n_wn = _count(state, r"^flow\.flows\.0\.enc\.in_layers\.(\d+)\.weight$")
    dilation_rate = int(_node_attr(graph, "/flow/flows.0/enc/in_layers.1/Conv", "dilations", [1])[0]) if n_wn > 1 else 1
    n_speakers = int(voice.get("num_speakers", 1) or 1)
    gin = int(shape("emb_g.weight")[1]) if n_speakers > 1 else 0
    if n_speakers > 1 and shape("emb_g.weight")[0] != n_speakers:
        raise ConversionError(f"{label}: {shape('emb_g.weight')[0]} speaker embeddings for num_speakers {n_speakers}")
    try:
        return VitsConfig(
            n_vocab=int(n_vocab),
            hidden_channels=int(hidden),
            inter_channels=int(shape("enc_p.proj.weight")[0]) // 2,
            filter_channels=int(ffn[0]),
            n_heads=int(hidden) // int(rel[2]),
            n_layers=_count(state, r"^enc_p\.encoder\.attn_layers\.(\d+)\."),
            kernel_size=int(ffn[2]),
            window_size=(int(rel[1]) - 1) // 2,
            use_sdp=use_sdp,
            dp_filter_channels=int(dp_filter),
            dp_kernel_size=int(dp_kernel),
            sdp_flows=1 + _count(state, r"^dp\.flows\.(\d+)\.pre\.weight$") if use_sdp else 4,
            flow_layers=_count(state, r"^flow\.flows\.(\d+)\.pre\.weight$"),
            flow_kernel_size=int(shape("flow.flows.0.enc.in_layers.0.weight")[2]),
            flow_dilation_rate=dilation_rate,
            flow_wavenet_layers=n_wn,
            resblock=resblock,
            resblock_kernel_sizes=tuple(kernels),
            resblock_dilation_sizes=tuple(dilations),
            upsample_rates=tuple(rates),
            upsample_initial_channel=int(shape("dec.conv_pre.weight")[0]),
            upsample_kernel_sizes=tuple(int(shape(f"dec.ups.{i}.weight")[2]) for i in range(n_ups)),
            n_speakers=n_speakers,
            gin_channels=gin,
        )
    except Exception as e:  # BundleError from the config's own checks
        raise ConversionError(f"{label}: {e}") from None


def _number(voice: dict, section: str, key: str, default: float) -> float:
    value = (voice.get(section) or {}).get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConversionError(f"voice config: {section}.{key} must be a number, not {value!r}")
    return float(value)


def voice_specs(voice: dict, config: VitsConfig, where: str):
    """(tokenizer, files, features, decoding) of a Piper voice config."""
    phoneme_type = str(voice.get("phoneme_type", "espeak"))
    if phoneme_type not in PHONEME_TYPES:
        raise ConversionError(f"{where}: phoneme type {phoneme_type!r} is not supported (oasr runs {', '.join(PHONEME_TYPES)})")
    id_map: dict[str, Any] = voice["phoneme_id_map"]
    for symbol, ids in id_map.items():
        if not isinstance(ids, list) or not all(isinstance(i, int) and 0 <= i < config.n_vocab for i in ids):
            raise ConversionError(f"{where}: phoneme {symbol!r} maps to {ids!r}, not ids below {config.n_vocab}")
    for special in ("^", "$", "_"):
        if special not in id_map:
            raise ConversionError(f"{where}: the phoneme_id_map lacks Piper's {special!r}")
    sample_rate = int(_number(voice, "audio", "sample_rate", 22050))
    speakers = voice.get("speaker_id_map") or {}
    if not isinstance(speakers, dict) or not all(isinstance(v, int) and 0 <= v < max(config.n_speakers, 1) for v in speakers.values()):
        raise ConversionError(f"{where}: speaker_id_map must map names to ids below {config.n_speakers}")
    language = voice.get("language") or {}
    tokenizer = TokenizerSpec(
        kind="piper_phonemes",
        options={
            "phoneme_type": phoneme_type,
            "espeak_voice": str((voice.get("espeak") or {}).get("voice", "")),
            "phoneme_id_map": {k: list(v) for k, v in id_map.items()},
        },
    )
    decoding = DecodingDefaults(
        family="vits",
        options={
            "noise_scale": _number(voice, "inference", "noise_scale", 0.667),
            "length_scale": _number(voice, "inference", "length_scale", 1.0),
            "noise_w": _number(voice, "inference", "noise_w", 0.8),
            "speakers": {str(k): int(v) for k, v in speakers.items()},
            "language": str(language.get("code", "")) if isinstance(language, dict) else "",
        },
    )
    features = FeatureSpec(kind="none", sample_rate=sample_rate, n_mels=0, n_fft=0, hop_length=config.hop_length, chunk_seconds=0.0)
    return tokenizer, {}, features, decoding
