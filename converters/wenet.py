"""WeNet model folders: ``train.yaml`` beside ``final.pt`` / ``avg_N.pt`` (what WeNet's
``train.py`` and ``average_model.py`` write), ``global_cmvn``, ``units.txt`` and the BPE model.

``train.yaml`` chooses what is built: ``model`` (only ``asr_model``, the U2 / U2++ hybrid),
``encoder`` (``conformer`` or ``transformer``) with its ``encoder_conf``, ``decoder``
(``transformer``, or U2++'s ``bitransformer``) with its ``decoder_conf``, ``ctc_conf``,
``tokenizer_conf`` (unit table, BPE model, special tokens), ``cmvn_conf`` and
``dataset_conf.fbank_conf``. A value the runtime does not implement is refused by name. A decoder
kind it does not build is dropped with a warning naming the lost attention decoding.

Weights are read with the closed (tensors only) unpickler. The tensors keep WeNet's names; the
sinusoid tables WeNet registers as buffers (``*.pos_enc.pe``, ``*.embed.1.pe``) are checked
against the runtime's and left out. The global CMVN comes from the state dict
(``encoder.global_cmvn.*``) and from the file ``train.yaml`` names (WeNet's JSON of
``mean_stat`` / ``var_stat`` / ``frame_num``, or Kaldi's text or binary stats), which must agree.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import DETECT_NAMED_CONFIG, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import BundleError, ConversionError
from oasr.io.checkpoint import load_torch_file

if TYPE_CHECKING:
    from oasr.models.wenet.config import WenetConfig
    from torch import Tensor

log = logging.getLogger("oasr")

CONFIG_FILE = "train.yaml"
UNIT_FILES = ("units.txt", "words.txt")
MODELS = ("asr_model",)
DECODERS = ("transformer", "bitransformer")

# encoder_conf key -> WenetConfig field; keys read for training only are in _TRAINING_ONLY.
_ENCODER_KEYS = {
    "output_size": "d_model", "attention_heads": "n_heads", "linear_units": "ff_hidden", "num_blocks": "n_layers",
    "input_layer": "input_layer", "pos_enc_layer_type": "pos_enc", "selfattention_layer_type": "attention",
    "normalize_before": "normalize_before", "final_norm": "final_norm", "activation_type": "activation",
    "macaron_style": "macaron", "use_cnn_module": "use_cnn_module", "cnn_module_kernel": "cnn_kernel",
    "causal": "causal", "cnn_module_norm": "cnn_norm", "conv_bias": "conv_bias", "norm_eps": "norm_eps",
    "conv_norm_eps": "conv_norm_eps", "static_chunk_size": "static_chunk_size", "use_dynamic_chunk": "use_dynamic_chunk",
}
_DECODER_KEYS = {
    "attention_heads": "decoder_heads", "linear_units": "decoder_ff_hidden", "num_blocks": "decoder_layers",
    "r_num_blocks": "decoder_r_layers", "normalize_before": "decoder_normalize_before", "activation_type": "decoder_activation",
}
_TRAINING_ONLY = {
    "dropout_rate", "positional_dropout_rate", "attention_dropout_rate", "self_attention_dropout_rate",
    "src_attention_dropout_rate", "use_dynamic_left_chunk", "gradient_checkpointing", "use_sdpa",
}
# Keys the runtime honours only at one value (WeNet's defaults): anything else is refused by name.
_FIXED = {
    "layer_norm_type": "layer_norm", "positionwise_conv_kernel_size": 1, "conv_inner_factor": 2,
    "mlp_type": "position_wise_feed_forward", "mlp_bias": True, "n_kv_head": None, "head_dim": None,
    "input_layer": "embed", "use_output_layer": True, "src_attention": True, "tie_word_embedding": False,
    "concat_after": False, "src_query_bias": True, "src_key_bias": True, "src_value_bias": True,
}
_BIAS_KEYS = ("query_bias", "key_bias", "value_bias")
_SINUSOIDS = ("encoder.embed.pos_enc.pe", "decoder.embed.1.pe", "decoder.left_decoder.embed.1.pe", "decoder.right_decoder.embed.1.pe")




class _WenetNames(TensorTable):
    """WeNet's names kept as they are (the runtime model uses them)."""

    def lookup(self, name: str) -> tuple[str | None, ...] | None:
        return (name,) if name.startswith(("encoder.", "ctc.", "decoder.")) else None


def _yaml(file: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
        raise ConversionError(f"{file}: unreadable YAML ({str(e).splitlines()[0]})") from e
    if not isinstance(data, dict):
        raise ConversionError(f"{file}: not a mapping of settings")
    return data


# --- global CMVN ------------------------------------------------------------------------------


def _stats_to_cmvn(sums: list[float], squares: list[float], count: float, where: Path) -> tuple[Tensor, Tensor]:
    """mean and 1 / std per band, as WeNet's load_cmvn computes them (variance floored at 1e-20)."""
    import torch

    if count <= 0 or len(sums) != len(squares) or not sums:
        raise ConversionError(f"{where}: CMVN statistics with {len(sums)} means, {len(squares)} variances, count {count}")
    means, istd = [], []
    for s, q in zip(sums, squares):
        mean = s / count
        var = max(q / count - mean * mean, 1.0e-20)
        means.append(mean)
        istd.append(1.0 / math.sqrt(var))
    return torch.tensor(means, dtype=torch.float32), torch.tensor(istd, dtype=torch.float32)


def read_cmvn(file: Path, is_json: bool) -> tuple[Tensor, Tensor]:
    """WeNet's JSON (``mean_stat``, ``var_stat``, ``frame_num``), or Kaldi's 2 x (D + 1) stats
    matrix as text (``[ sums count sums-of-squares 0 ]``) or binary (``\\0B`` then ``DM``/``FM``)."""
    data = file.read_bytes()
    try:
        if is_json:
            stats = json.loads(data.decode("utf-8"))
            return _stats_to_cmvn([float(v) for v in stats["mean_stat"]], [float(v) for v in stats["var_stat"]], float(stats["frame_num"]), file)
        if data.startswith(b"\0B"):
            return _kaldi_binary(data, file)
        words = data.decode("utf-8").split()
        if words[0] != "[" or words[-1] != "]" or (len(words) - 2) % 2:
            raise ValueError("not a Kaldi stats matrix")
        values = [float(w) for w in words[1:-1]]
        dim = len(values) // 2 - 1
        return _stats_to_cmvn(values[:dim], values[dim + 1 : 2 * dim + 1], values[dim], file)
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError, struct.error) as e:
        raise ConversionError(f"{file}: not a readable {'JSON' if is_json else 'Kaldi'} CMVN file ({e})") from e


def _kaldi_binary(data: bytes, file: Path) -> tuple[Tensor, Tensor]:
    kind = data[2:5]
    if kind not in (b"DM ", b"FM "):
        raise ValueError(f"binary matrix type {kind!r}")
    if data[5] != 4 or data[10] != 4:
        raise ValueError("bad dimension headers")
    rows, cols = struct.unpack("<i", data[6:10])[0], struct.unpack("<i", data[11:15])[0]
    size = 8 if kind == b"DM " else 4
    if rows != 2 or cols < 2 or len(data) < 15 + rows * cols * size:
        raise ValueError(f"a {rows} x {cols} matrix in {len(data)} bytes")
    values = struct.unpack(("<%dd" if size == 8 else "<%df") % (rows * cols), data[15 : 15 + rows * cols * size])
    dim = cols - 1
    return _stats_to_cmvn(list(values[:dim]), list(values[cols : cols + dim]), values[dim], file)


# --- the converter ----------------------------------------------------------------------------


class WenetConverter(CheckpointConverter):
    name = "wenet"
    architecture = "conformer"
    markers = f"WeNet's {CONFIG_FILE} beside final.pt / avg_N.pt (or a .pt file with {CONFIG_FILE} beside it)"
    detect_specificity = DETECT_NAMED_CONFIG  # WeNet's own training config names the framework
    tensor_table = _WenetNames(rules={})

    @classmethod
    def detect(cls, path: Path) -> str | None:
        file = cls._checkpoint_file(path)
        if file is None:
            return None
        return f"{CONFIG_FILE} (a WeNet training config) beside {file.name}"

    @staticmethod
    def _checkpoint_file(path: Path) -> Path | None:
        path = Path(path)
        if path.is_file():
            return path if path.suffix == ".pt" and (path.parent / CONFIG_FILE).is_file() else None
        if not (path.is_dir() and (path / CONFIG_FILE).is_file()):
            return None
        if (path / "final.pt").is_file():
            return path / "final.pt"
        averaged = sorted(path.glob("avg_*.pt"))
        if averaged:
            return averaged[-1]
        found = sorted(path.glob("*.pt"))
        return found[0] if len(found) == 1 else None

    @property
    def file(self) -> Path:
        file = self._checkpoint_file(self.path)
        if file is None:
            raise ConversionError(f"{self.path}: expected {CONFIG_FILE} beside final.pt, avg_N.pt or one other .pt file")
        return file

    @property
    def folder(self) -> Path:
        return self.file.parent

    @functools.cached_property
    def settings(self) -> dict:
        return _yaml(self.folder / CONFIG_FILE)

    @functools.cached_property
    def _state(self) -> dict[str, Tensor]:
        from torch import Tensor

        state = load_torch_file(self.file)
        if isinstance(state, dict) and isinstance(state.get("model"), dict):
            state = state["model"]
        if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(t, Tensor) for k, t in state.items()):
            raise ConversionError(f"{self.file} is not a WeNet state dict (a mapping of names to tensors)")
        if "ctc.ctc_lo.weight" not in state:
            raise ConversionError(f"{self.file} holds no CTC head (ctc.ctc_lo.weight); not a WeNet U2 model")
        return state

    def source_files(self) -> list[Path]:
        return [self.file]

    def _find(self, named: Any, what: str, fallbacks: tuple[str, ...] = ()) -> Path | None:
        """A file ``train.yaml`` names: as written (relative to the recipe, or absolute), else by its
        name in the model folder, else the first of ``fallbacks`` there (WeNet's exported folders
        hold ``units.txt`` whatever the recipe called its table). Named and found nowhere: refused;
        nothing named and no fallback: None."""
        candidates = []
        if named:
            given = Path(str(named))
            candidates += [given if given.is_absolute() else self.folder / given, self.folder / given.name]
        candidates += [self.folder / name for name in fallbacks]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        if named:
            raise ConversionError(f"{self.folder / CONFIG_FILE} names the {what} {named}; it is not in {self.folder}")
        return None

    def _cmvn_file(self) -> tuple[Path, bool] | None:
        s = self.settings
        conf = s.get("cmvn_conf") or {}
        named = conf.get("cmvn_file") if s.get("cmvn", "global_cmvn" if conf else None) == "global_cmvn" else None
        named = named or s.get("cmvn_file")  # WeNet 2.x kept it at the top level
        if s.get("cmvn") not in (None, "global_cmvn"):
            raise ConversionError(f"{self.folder / CONFIG_FILE}: cmvn {s['cmvn']!r}; only global_cmvn is supported")
        if not named:
            return None
        is_json = bool(conf.get("is_json_cmvn", s.get("is_json_cmvn", True)))
        return self._find(named, "global CMVN"), is_json

    def build_config(self) -> WenetConfig:
        from oasr.models.wenet.config import WenetConfig

        where = self.folder / CONFIG_FILE
        s = self.settings
        model = s.get("model", "asr_model")
        if model not in MODELS:
            raise ConversionError(f"{where}: model {model!r} is not built by oasr (supported: {', '.join(MODELS)}, WeNet's U2 / U2++)")
        encoder = s.get("encoder", "conformer")
        if encoder not in ("conformer", "transformer"):
            raise ConversionError(f"{where}: encoder {encoder!r} is not implemented (conformer or transformer)")
        if s.get("ctc", "ctc") != "ctc":
            raise ConversionError(f"{where}: ctc {s['ctc']!r} is not implemented")
        values: dict[str, Any] = {"encoder": encoder}
        enc_conf = dict(s.get("encoder_conf") or {})
        if encoder == "transformer":  # WeNet's Transformer defaults differ from its Conformer's
            values.update(pos_enc="abs_pos", attention="selfattn", activation="relu", macaron=False, use_cnn_module=False)
            for key in ("macaron_style", "use_cnn_module", "cnn_module_kernel", "causal", "cnn_module_norm", "conv_bias", "conv_norm_eps"):
                if key in enc_conf:
                    raise ConversionError(f"{where}: encoder_conf {key} is a Conformer setting; the Transformer encoder has none")
        values.update(self._read_section(enc_conf, _ENCODER_KEYS, "encoder_conf", where))
        decoder = s.get("decoder", "bitransformer")
        self.dropped_decoder = None
        if decoder not in DECODERS:
            self.dropped_decoder = decoder
            values["decoder"] = ""
        else:
            values["decoder"] = decoder
            values.update(self._read_section(dict(s.get("decoder_conf") or {}), _DECODER_KEYS, "decoder_conf", where))
        state = self._state
        vocab, width = state["ctc.ctc_lo.weight"].shape
        values["vocab_size"] = int(s.get("output_dim", vocab))
        if values["vocab_size"] != vocab:
            raise ConversionError(f"{where}: output_dim {values['vocab_size']}; the CTC head has {vocab} units")
        values["blank_id"] = int((s.get("ctc_conf") or {}).get("ctc_blank_id", 0))
        special = (s.get("tokenizer_conf") or {}).get("special_tokens") or {}
        values["sos_id"], values["eos_id"] = int(special.get("<sos>", -1)), int(special.get("<eos>", -1))
        values.update(self._front_end(s, where))
        values["cmvn"] = "encoder.global_cmvn.mean" in state or self._cmvn_file() is not None
        values.setdefault("d_model", int(width))
        for key in ("n_heads", "ff_hidden", "n_layers"):
            values.setdefault(key, {"n_heads": 4, "ff_hidden": 2048, "n_layers": 6}[key])
        if values["decoder"] == "":
            values.pop("decoder_r_layers", None)
        elif values["decoder"] == "transformer":
            values["decoder_r_layers"] = 0
        try:
            return WenetConfig(**values)
        except BundleError as e:
            raise ConversionError(f"{where}: {e}") from e

    def _read_section(self, conf: dict, keys: dict[str, str], section: str, where: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        biases = [bool(conf.pop(k, True)) for k in _BIAS_KEYS]
        if section == "encoder_conf":
            out["qkv_bias"] = tuple(biases)
        elif not all(biases):
            raise ConversionError(f"{where}: {section} without attention biases is not implemented")
        for key, value in conf.items():
            if key in keys:
                out[keys[key]] = value
            elif key in _FIXED:
                if value != _FIXED[key]:
                    raise ConversionError(f"{where}: {section} {key}: {value!r} is not implemented (only {_FIXED[key]!r})")
            elif key not in _TRAINING_ONLY:
                raise ConversionError(f"{where}: {section} {key} is not a setting oasr implements")
        return out

    def _front_end(self, s: dict, where: Path) -> dict[str, Any]:
        dataset = s.get("dataset_conf") or {}
        fbank = dataset.get("fbank_conf")
        if fbank is None:
            other = [k for k in ("mfcc_conf", "log_mel_spectrogram_conf") if k in dataset]
            if other:
                raise ConversionError(f"{where}: dataset_conf {other[0]}: only fbank features are implemented")
            fbank = {}
        n_mels = int(fbank.get("num_mel_bins", s.get("input_dim", 80)))
        if "input_dim" in s and int(s["input_dim"]) != n_mels:
            raise ConversionError(f"{where}: input_dim {s['input_dim']} but fbank_conf num_mel_bins {n_mels}")
        rate = int((dataset.get("resample_conf") or {}).get("resample_rate", 16000))
        return {
            "n_mels": n_mels,
            "sample_rate": rate,
            "frame_length_ms": float(fbank.get("frame_length", 25)),
            "frame_shift_ms": float(fbank.get("frame_shift", 10)),
        }

    def load_state_dict(self) -> dict[str, Tensor]:
        from oasr.models.transformer_decoder import sinusoids
        import torch

        config = self.build_config()
        state = dict(self._state)
        for name in _SINUSOIDS:
            table = state.pop(name, None)
            if table is None:
                continue
            table = table.reshape(-1, table.shape[-1]).float()
            if not torch.allclose(table, sinusoids(table.shape[0], table.shape[1]), atol=1e-4):
                raise ConversionError(f"{self.file}: {name} is not the sinusoid table WeNet computes; a custom position table is not supported")
        if self.dropped_decoder is not None:
            dropped = [k for k in state if k.startswith("decoder.")]
            for k in dropped:
                del state[k]
        cmvn = self._cmvn_file()
        if cmvn is not None:
            mean, istd = read_cmvn(*cmvn)
            if mean.numel() != config.n_mels:
                raise ConversionError(f"{cmvn[0]}: CMVN of {mean.numel()} bands for {config.n_mels} mel bands")
            for name, value in (("encoder.global_cmvn.mean", mean), ("encoder.global_cmvn.istd", istd)):
                stored = state.get(name)
                if stored is None:
                    state[name] = value
                elif stored.shape != value.shape or not torch.allclose(stored.float(), value, rtol=1e-4, atol=1e-4):
                    raise ConversionError(f"{self.file}: {name} differs from {cmvn[0].name}; the checkpoint and the CMVN file are not one model's")
        return state

    def notes(self) -> list[str]:
        if getattr(self, "dropped_decoder", None):
            return [
                f"{self.folder / CONFIG_FILE}: decoder {self.dropped_decoder!r} is not built by oasr: its decoder.* weights are "
                "dropped and with them attention decoding and attention rescoring (ctc_aed_rescoring); the bundle decodes by CTC only"
            ]
        return []

    def _tokenizer_files(self, config: WenetConfig) -> dict[str, Path]:
        conf = self.settings.get("tokenizer_conf") or {}
        files: dict[str, Path] = {}
        units = self._find(conf.get("symbol_table_path"), "unit table", UNIT_FILES)
        if units is not None:
            files["units.txt"] = units
        bpe = self._find(conf.get("bpe_path") or self.settings.get("bpe_model"), "BPE model")
        if bpe is not None:
            files["bpe.model"] = bpe
        if units is not None:
            from oasr.tokenizers.wenet_units import read_units

            try:
                count = len(read_units(units))
            except BundleError as e:
                raise ConversionError(str(e)) from e
            if count != config.vocab_size:
                raise ConversionError(f"{units}: {count} units; the model has {config.vocab_size}")
        return files

    def build_specs(self, config: WenetConfig):
        from oasr.models.wenet.specs import wenet_specs

        files = self._tokenizer_files(config)
        tokenizer, features, decoding = wenet_specs(config, files)
        return tokenizer, files, features, decoding
