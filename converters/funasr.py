"""FunASR Paraformer folders: ``config.yaml`` naming ``model: Paraformer``, ``model.pt`` (or an
older ``model.pb``), ``am.mvn``, ``tokens.json`` or ``tokens.txt``, and ``seg_dict`` for English.

The layout is the one FunASR's hub download and training write and its ``AutoModel`` reads
(``download_model_from_hub``: the tokens, ``seg_dict`` and ``am.mvn`` found beside
``config.yaml``). The weights are read through the closed unpickler: a trainer's checkpoint
(``state_dict``, ``model_state_dict`` or ``model`` beside optimiser states) is unwrapped and a
``module.`` prefix removed, as FunASR's ``load_pretrained_model`` does. Tensor names are FunASR's
own; the decoder's token table (``decoder.embed``: training's glancing sampler) and a CTC head
(``ctc.*``: only for a beam FunASR joins it into, not built) are left out by name.
``am.mvn``'s ``<AddShift>`` and ``<Rescale>`` rows become the model's computed CMVN buffers.
Models FunASR names differently (SeACo and contextual hotword models, the streaming and
BiCIF variants) are claimed so they are refused by name rather than mistaken for others.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import yaml

from oasr.conversion.base import DETECT_KEYED_VALUE, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import BundleError, ConversionError
from oasr.io.checkpoint import load_torch_file
from oasr.specs import DecodingDefaults, TokenizerSpec
from oasr.tokenizers.funasr_char import SEG_DICT, VOCABULARIES, read_vocabulary

if TYPE_CHECKING:
    from oasr.models.paraformer.config import ParaformerConfig
    from torch import Tensor

MODEL = "Paraformer"
# What FunASR ships under other model names, each needing more than this network.
REFUSED = {
    "SeacoParaformer": "the SeACo hotword model (a bias encoder and decoder)",
    "ContextualParaformer": "the contextual hotword model (a bias encoder)",
    "NeatContextualParaformer": "the contextual hotword model (a bias encoder)",
    "ParaformerStreaming": "streaming Paraformer (chunked encoder with caches)",
    "BiCifParaformer": "Paraformer with a second CIF predictor for timestamps",
}
WEIGHTS = ("model.pt", "model.pb")
CMVN = "am.mvn"


@dataclass(frozen=True)
class FunasrNames(TensorTable):
    """FunASR's names kept as they are under the Paraformer's three parts; others unmatched."""

    prefixes: tuple[str, ...] = ("encoder.", "predictor.", "decoder.")

    def lookup(self, name: str) -> tuple[str | None, ...] | None:
        return (name,) if name.startswith(self.prefixes) and not name.startswith("decoder.embed.") else None


def _model_name(folder: Path) -> str | None:
    config = folder / "config.yaml"
    if not config.is_file():
        return None
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError, RecursionError):
        return None
    name = data.get("model") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def read_cmvn(path: Path) -> tuple[list[float], list[float]]:
    """``am.mvn`` (Kaldi nnet text): the numbers between ``[`` and ``]`` on the ``<LearnRateCoef>``
    line after ``<AddShift>`` (the shift) and after ``<Rescale>`` (the scale), as FunASR reads them."""
    try:
        lines = [line.split() for line in Path(path).read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as e:
        raise ConversionError(f"{path}: not a readable am.mvn ({e})") from e
    rows: dict[str, list[float]] = {}
    for i, words in enumerate(lines[:-1]):
        if words and words[0] in ("<AddShift>", "<Rescale>"):
            following = lines[i + 1]
            if following and following[0] == "<LearnRateCoef>":
                try:
                    values = [float(v) for v in following[3:-1]]
                except ValueError as e:
                    raise ConversionError(f"{path}: the {words[0]} row holds a non-number ({e})") from e
                if not all(math.isfinite(v) for v in values):
                    raise ConversionError(f"{path}: the {words[0]} row holds a non-finite value")
                rows[words[0]] = values
    missing = [k for k in ("<AddShift>", "<Rescale>") if k not in rows]
    if missing:
        raise ConversionError(f"{path}: no {' or '.join(missing)} row (Kaldi nnet CMVN: <AddShift> and <Rescale>)")
    return rows["<AddShift>"], rows["<Rescale>"]


class FunasrParaformerConverter(CheckpointConverter):
    name = "funasr-paraformer"
    architecture = "paraformer"
    markers = "a FunASR folder: config.yaml with model: Paraformer, model.pt, am.mvn, tokens.json"
    detect_specificity = DETECT_KEYED_VALUE
    tensor_table = FunasrNames(rules={})
    expected_unused_prefixes = ("decoder.embed.", "ctc.")

    def __init__(self, path: Path):
        path = Path(path)
        super().__init__(path.parent if path.is_file() else path)

    @classmethod
    def detect(cls, path: Path) -> str | None:
        path = Path(path)
        folder = path.parent if path.is_file() else path
        name = _model_name(folder)
        return f"config.yaml: model={name}" if name == MODEL or name in REFUSED else None

    # -- the files ---------------------------------------------------------------------------------

    @functools.cached_property
    def conf(self) -> dict[str, Any]:
        try:
            data = yaml.safe_load((self.path / "config.yaml").read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
            raise ConversionError(f"{self.path}/config.yaml: not readable YAML ({str(e).splitlines()[0]})") from e
        if not isinstance(data, dict):
            raise ConversionError(f"{self.path}/config.yaml: not a mapping")
        name = data.get("model")
        if name in REFUSED:
            raise ConversionError(f"{self.path}: FunASR's {name} is {REFUSED[name]}, which oasr does not run (only model: {MODEL})")
        return data

    def _file(self, *names: str, what: str) -> Path:
        for n in names:
            if (self.path / n).is_file():
                return self.path / n
        raise ConversionError(f"{self.path}: no {' or '.join(names)} ({what})")

    @functools.cached_property
    def weights_file(self) -> Path:
        return self._file(*WEIGHTS, what="the weights")

    def tokenizer_files(self) -> dict[str, Path]:
        vocab = self._file(*VOCABULARIES, what="the token list")
        files = {vocab.name: vocab}
        if (self.path / SEG_DICT).is_file():
            files[SEG_DICT] = self.path / SEG_DICT
        return files

    def source_files(self) -> list[Path]:
        return [self.weights_file, self.path / "config.yaml", self._file(CMVN, what="the CMVN statistics"), *self.tokenizer_files().values()]

    def load_state_dict(self) -> dict[str, Tensor]:
        from torch import Tensor

        state = load_torch_file(self.weights_file)
        for key in ("state_dict", "model_state_dict", "model"):
            if isinstance(state, dict) and isinstance(state.get(key), dict):
                state = state[key]
        if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
            raise ConversionError(f"{self.weights_file}: not a state dict of tensors")
        return {k.removeprefix("module."): v for k, v in state.items()}

    # -- config ------------------------------------------------------------------------------------

    def build_config(self) -> ParaformerConfig:
        vocab = read_vocabulary(self._file(*VOCABULARIES, what="the token list"))
        shift, scale = read_cmvn(self._file(CMVN, what="the CMVN statistics"))
        return paraformer_config(self.conf, len(vocab), shift, scale, str(self.path))

    def build_specs(self, config: ParaformerConfig):
        from oasr.features.funasr_fbank import funasr_feature_spec

        files = self.tokenizer_files()
        tokenizer = TokenizerSpec(kind="funasr_char", files=tuple(sorted(files)), options={"blank_id": config.blank_id})
        features = funasr_feature_spec(self.conf.get("frontend_conf") or {}, str(self.path))
        if features.n_mels != config.input_size:
            raise ConversionError(f"{self.path}: the front end makes {features.n_mels} features; the encoder takes {config.input_size}")
        decoding = DecodingDefaults(
            family="cif", bos_id=config.sos_id, eos_id=config.eos_id, blank_id=config.blank_id,
            options={"drop_ids": sorted({config.sos_id, config.eos_id}), "tail": config.tail_threshold > 0.0},
        )
        return tokenizer, files, features, decoding

    def notes(self) -> list[str]:
        dither = (self.conf.get("frontend_conf") or {}).get("dither", 1.0)
        return [f"the front end's dither ({dither}) is a training setting: features are computed without it"] if dither else []


def _section(conf: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = conf.get(key) or {}
    if not isinstance(value, dict):
        raise ConversionError(f"{where}: {key} is not a mapping")
    return value


def _expect(conf: Mapping[str, Any], key: str, allowed: tuple, default, where: str):
    value = conf.get(key, default)
    if value not in allowed:
        raise ConversionError(f"{where}: {key} {value!r} is not supported (only {', '.join(map(repr, allowed))})")
    return value


def paraformer_config(conf: Mapping[str, Any], vocab_size: int, shift: list[float], scale: list[float], where: str) -> ParaformerConfig:
    """FunASR's ``config.yaml`` (a ``model: Paraformer``) -> ParaformerConfig; what differs from
    the network built here is refused, naming the setting."""
    from oasr.models.paraformer.config import PREDICTORS, ParaformerConfig

    _expect(conf, "model", (MODEL,), None, where)
    _expect(conf, "encoder", ("SANMEncoder",), None, where)
    _expect(conf, "decoder", ("ParaformerSANMDecoder",), None, where)
    predictor = _expect(conf, "predictor", PREDICTORS, None, where)
    if conf.get("normalize"):
        raise ConversionError(f"{where}: a separate feature normalisation ({conf['normalize']}) is not supported (CMVN comes from am.mvn)")
    enc, dec, pred = (_section(conf, k, where) for k in ("encoder_conf", "decoder_conf", "predictor_conf"))
    model = _section(conf, "model_conf", where)
    for section, name in ((enc, "encoder_conf"), (dec, "decoder_conf")):
        _expect(section, "normalize_before", (True,), True, f"{where}: {name}")
        _expect(section, "concat_after", (False,), False, f"{where}: {name}")
        if section.get("lora_list"):
            raise ConversionError(f"{where}: {name} has LoRA layers (lora_list), which are not supported")
    _expect(enc, "input_layer", ("pe",), "conv2d", f"{where}: encoder_conf")
    _expect(enc, "selfattention_layer_type", ("sanm",), "sanm", f"{where}: encoder_conf")
    _expect(enc, "positionwise_layer_type", ("linear",), "linear", f"{where}: encoder_conf")
    if enc.get("interctc_layer_idx"):
        raise ConversionError(f"{where}: encoder_conf interctc_layer_idx (intermediate CTC) is not supported")
    _expect(dec, "input_layer", ("embed",), "embed", f"{where}: decoder_conf")
    _expect(dec, "use_output_layer", (True,), True, f"{where}: decoder_conf")
    _expect(dec, "wo_input_layer", (False,), False, f"{where}: decoder_conf")
    frontend = _section(conf, "frontend_conf", where)
    d_model = int(enc.get("output_size", 256))
    if int(pred.get("idim", d_model)) != d_model:
        raise ConversionError(f"{where}: predictor_conf idim {pred.get('idim')} differs from the encoder's output_size {d_model}")
    kernel = int(dec.get("kernel_size", 21))
    shift_dec = dec.get("sanm_shfit", 0)
    shift_dec = (kernel - 1) // 2 if shift_dec is None else int(shift_dec)  # FunASR's None: centred on the past
    sos, eos = model.get("sos", 1), model.get("eos", 2)
    try:
        return ParaformerConfig(
            input_size=int(frontend.get("n_mels", 80)) * int(frontend.get("lfr_m", 1)),
            d_model=d_model,
            vocab_size=vocab_size,
            encoder_layers=int(enc.get("num_blocks", 6)),
            encoder_heads=int(enc.get("attention_heads", 4)),
            encoder_ff=int(enc.get("linear_units", 2048)),
            encoder_kernel=int(enc.get("kernel_size", 11)),
            encoder_shift=int(enc.get("sanm_shfit", 0) or 0),
            predictor=predictor,
            predictor_left=int(pred.get("l_order", 1)),
            predictor_right=int(pred.get("r_order", 1)),
            cif_threshold=float(pred.get("threshold", 1.0)),
            smooth_factor=float(pred.get("smooth_factor", 1.0)),
            noise_threshold=float(pred.get("noise_threshold", 0.0)),
            tail_threshold=float(pred.get("tail_threshold", 0.0 if predictor == "CifPredictorV2" else 0.45)),
            tail_mask=bool(pred.get("tail_mask", True)),
            decoder_layers=int(dec.get("num_blocks", 6)),
            decoder_att_layers=int(dec.get("att_layer_num", 6)),
            decoder_heads=int(dec.get("attention_heads", 4)),
            decoder_ff=int(dec.get("linear_units", 2048)),
            decoder_kernel=kernel,
            decoder_shift=shift_dec,
            blank_id=int(model.get("blank_id", 0)),
            sos_id=vocab_size - 1 if sos is None else int(sos),
            eos_id=vocab_size - 1 if eos is None else int(eos),
            cmvn_shift=tuple(shift),
            cmvn_scale=tuple(scale),
        )
    except (TypeError, ValueError) as e:
        raise ConversionError(f"{where}: config.yaml: {e}") from e
    except BundleError as e:  # the config dataclass's own checks
        raise ConversionError(f"{where}: {e}") from e
