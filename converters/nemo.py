"""What every NeMo source shares: the model config -> FastConformer config (``fastconformer_config``:
the yaml reader lives here, with the converters, not in the runtime) and specs, NeMo's own
tensor names passed through, the tokenizer artifact found.

A NeMo state dict already uses the names the FastConformer model keeps (``encoder.*``,
``decoder.*``, ``joint.*``, a hybrid's ``ctc_decoder.*``), so the table passes those prefixes
through unchanged and the accounting checks the key set against the model exactly. The
preprocessor's two buffers (``preprocessor.featurizer.window`` and ``.fb``) are the only tensors
dropped, after checking they are the window and Slaney filterbank the config describes (the
front end rebuilds both). The config's ``target`` class is named in errors and provenance and
never imported.

Per-format modules (``nemo_archive``, ``nemo_lightning``, ``nemo_safetensors``, ``nemo_distcp``)
say where the config, the tensors and the tokenizer artifact come from.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from oasr.conversion.base import DETECT_NAMED_CONFIG
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError
from oasr.specs import ConvertedCheckpoint, TokenizerSpec

if TYPE_CHECKING:
    from oasr.models.fastconformer.config import FastConformerConfig, PreprocessorConfig
    from torch import Tensor

# The NeMo model classes whose networks the FastConformer model runs (by their class names).
SUPPORTED_CLASSES = (
    "EncDecCTCModel", "EncDecCTCModelBPE", "EncDecRNNTModel", "EncDecRNNTBPEModel",
    "EncDecHybridRNNTCTCModel", "EncDecHybridRNNTCTCBPEModel",
)
SUPPORTED_ENCODERS = ("ConformerEncoder",)
PREPROCESSOR_BUFFERS = ("preprocessor.featurizer.window", "preprocessor.featurizer.fb")
SP_ASSET = "tokenizer.model"


@dataclass(frozen=True)
class SameNames(TensorTable):
    """Source names kept as they are when they start with one of ``prefixes``; others unmatched."""

    prefixes: tuple[str, ...] = ()

    def lookup(self, name: str) -> tuple[str | None, ...] | None:
        return (name,) if name.startswith(self.prefixes) else None


class NemoSource:
    """Mixed into each NeMo converter (before ``CheckpointConverter``). A format provides
    ``nemo_config`` (the model config as plain data), ``artifact_folder`` (where ``nemo:`` and
    other tokenizer paths are looked for) and ``nemo_tensors`` (the state dict)."""

    architecture = "fastconformer"
    detect_specificity = DETECT_NAMED_CONFIG  # NeMo's own config (model_config.yaml, a cfg hyper-parameter)
    tensor_table = SameNames(rules={}, prefixes=("encoder.", "decoder.", "joint.", "ctc_decoder."))
    expected_unused_prefixes = PREPROCESSOR_BUFFERS  # rebuilt by the front end; checked in load_state_dict

    # -- provided by each format ---------------------------------------------------------------

    @property
    def nemo_config(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def artifact_folder(self) -> Path | None:
        raise NotImplementedError

    def nemo_tensors(self) -> dict[str, Tensor]:
        raise NotImplementedError

    # -- shared --------------------------------------------------------------------------------

    @property
    def target(self) -> str:
        from oasr.io.nemo.config import target_class

        return target_class(self.nemo_config) or "a NeMo model (its config names no target class)"

    def build_config(self) -> FastConformerConfig:
        from oasr.io.nemo.config import target_class

        cfg = self.nemo_config
        name = target_class(cfg).rsplit(".", 1)[-1]
        if name and name not in SUPPORTED_CLASSES:
            raise ConversionError(
                f"{self.path}: {target_class(cfg)} is not a model oasr runs (supported NeMo classes: {', '.join(SUPPORTED_CLASSES)})"
            )
        encoder = cfg.get("encoder")
        if not isinstance(encoder, dict):
            raise ConversionError(f"{self.path}: the config of {self.target} has no encoder section")
        enc_class = target_class(encoder).rsplit(".", 1)[-1]
        if enc_class and enc_class not in SUPPORTED_ENCODERS:
            raise ConversionError(f"{self.path}: {self.target} uses the encoder {target_class(encoder)}; only ConformerEncoder (FastConformer) is supported")
        pre = cfg.get("preprocessor") or {}
        pre_class = target_class(pre).rsplit(".", 1)[-1]
        if pre_class and pre_class != "AudioToMelSpectrogramPreprocessor":
            raise ConversionError(f"{self.path}: the preprocessor {target_class(pre)} is not supported (only AudioToMelSpectrogramPreprocessor)")
        if pre.get("use_torchaudio"):
            raise ConversionError(f"{self.path}: a preprocessor with use_torchaudio (FilterbankFeaturesTA) is not supported")
        if int(pre.get("frame_splicing", 1) or 1) != 1:
            raise ConversionError(f"{self.path}: a preprocessor with frame_splicing {pre['frame_splicing']} is not supported")
        try:
            return fastconformer_config(cfg)
        except ConversionError as e:
            raise ConversionError(f"{self.path} ({self.target}): {e}") from e

    def load_state_dict(self) -> dict[str, Tensor]:
        state = self.nemo_tensors()
        self._check_preprocessor_buffers(state)
        return state

    def _check_preprocessor_buffers(self, state: dict[str, Tensor]) -> None:
        """The dropped window and filterbank must be the ones the config describes: the front end
        rebuilds them from the config, so a custom filterbank would be silently replaced."""
        from oasr.features.logmel import mel_filterbank
        from oasr.features.nemo_mel import NemoMelSettings, nemo_feature_spec
        import torch

        settings = NemoMelSettings.from_spec(nemo_feature_spec(dataclasses.asdict(self.build_config().preprocessor)))
        expected = {
            "preprocessor.featurizer.fb": mel_filterbank(
                settings.sample_rate, settings.n_fft, settings.n_mels, settings.lowfreq, settings.highfreq, settings.mel_norm == "slaney"
            ),
        }
        if settings.window != "none":
            fn = getattr(torch, f"{settings.window}_window")
            expected["preprocessor.featurizer.window"] = fn(settings.win_length, periodic=False)
        for name, want in expected.items():
            got = state.get(name)
            if got is None:
                continue
            got = got.float().reshape(-1)
            if got.numel() != want.numel() or not torch.allclose(got, want.reshape(-1), atol=1e-6, rtol=1e-5):
                raise ConversionError(
                    f"{self.path}: {name} differs from the {'Slaney filterbank' if name.endswith('fb') else settings.window + ' window'} "
                    "its preprocessor config describes; a custom front end is not supported"
                )

    def tokenizer_source(self, config: FastConformerConfig) -> tuple[str, dict[str, Path], dict[str, Any]]:
        """(tokenizer kind, asset files, options): SentencePiece for a BPE tokenizer, the config's
        labels for a character model; no kind ("none") when the SentencePiece model is not found."""
        from oasr.io.nemo.config import artifact

        cfg = self.nemo_config
        tok = cfg.get("tokenizer")
        if isinstance(tok, dict):
            kind = str(tok.get("type", "bpe")).lower()
            if kind != "bpe":
                raise ConversionError(f"{self.path}: a NeMo {kind!r} tokenizer is not supported (SentencePiece 'bpe' and character labels are)")
            folder = self.artifact_folder
            entry = tok.get("model_path") or (f"{tok['dir']}/{SP_ASSET}" if isinstance(tok.get("dir"), str) else None)
            path = artifact(folder, entry, f"{self.path}: the tokenizer artifact") if folder is not None else None
            if path is None:
                return "none", {}, {}
            self._check_pieces(path, config)
            return "sentencepiece", {SP_ASSET: path}, {"vocab_size": config.vocab_size}
        labels = cfg.get("labels") or (cfg.get("decoder") or {}).get("vocabulary") or (cfg.get("joint") or {}).get("vocabulary")
        if not isinstance(labels, list) or not all(isinstance(c, str) for c in labels):
            raise ConversionError(f"{self.path}: the config of {self.target} has neither a tokenizer section nor character labels")
        if len(labels) != config.vocab_size:
            raise ConversionError(f"{self.path}: {len(labels)} character labels for a model of {config.vocab_size} classes")
        return "nemo_chars", {}, {"labels": list(labels)}

    def _check_pieces(self, path: Path, config: FastConformerConfig) -> None:
        from oasr.errors import BundleError
        from oasr.tokenizers.sentencepiece import SentencePieceTokenizer

        try:
            pieces = SentencePieceTokenizer.from_file(path).vocab_size
        except BundleError as e:
            raise ConversionError(f"{self.path}: {e}") from e
        if pieces != config.vocab_size:
            raise ConversionError(
                f"{self.path}: the SentencePiece model holds {pieces} pieces, the model's heads {config.vocab_size} labels (plus the blank)"
            )

    def build_specs(self, config: FastConformerConfig):
        from oasr.models.fastconformer.specs import fastconformer_specs

        kind, files, options = self.tokenizer_source(config)
        tokenizer, features, decoding = fastconformer_specs(config, files, tokenizer_kind=kind)
        if kind == "nemo_chars":  # no asset file: the labels travel in the spec
            tokenizer = TokenizerSpec(kind=kind, options={"blank_id": config.blank_id, **options})
        elif files:
            tokenizer = dataclasses.replace(tokenizer, options={**tokenizer.options, **options})
        return tokenizer, files, features, decoding

    def notes(self) -> list[str]:
        tok = self.nemo_config.get("tokenizer")
        if isinstance(tok, dict) and self.tokenizer_source(self.build_config())[0] == "none":
            where = self.artifact_folder or self.path
            return [
                f"the SentencePiece model the config names ({tok.get('model_path') or tok.get('dir')}) is not beside "
                f"{where}: the bundle cannot turn tokens into text; put tokenizer.model there and convert again"
            ]
        return []

    def convert(self, hashes=None) -> ConvertedCheckpoint:
        converted = super().convert(hashes)  # type: ignore[misc]
        converted.provenance.options["source_class"] = self.target
        return converted


# --- NeMo's model_config.yaml -> FastConformerConfig ------------------------------------------------


def fastconformer_config(model_config: Mapping[str, Any]) -> FastConformerConfig:
    """NeMo's ``model_config.yaml`` as a dict (an EncDecCTC/RNNT/Hybrid model's ``cfg``)."""
    try:
        return _from_nemo(model_config)
    except (KeyError, TypeError, ValueError) as e:
        raise ConversionError(f"NeMo model config is incomplete or unsupported: {e!r}") from e


def _nemo_head(model_config: Mapping[str, Any]) -> tuple[str, bool]:
    """The head kind from the config's shape: a joint means a transducer, TDT when it names durations."""
    if "joint" not in model_config:
        return "ctc", False
    durations = _nemo_durations(model_config)
    return ("tdt" if durations else "rnnt"), "aux_ctc" in model_config


def _nemo_durations(model_config: Mapping[str, Any]) -> list[int]:
    defaults = model_config.get("model_defaults") or {}
    loss = (model_config.get("loss") or {}).get("tdt_kwargs") or {}
    decoding = model_config.get("decoding") or {}
    return list(defaults.get("tdt_durations") or loss.get("durations") or decoding.get("durations") or [])


def _from_nemo(cfg: Mapping[str, Any]) -> FastConformerConfig:
    from oasr.models.fastconformer.config import FastConformerConfig

    enc = cfg["encoder"]
    head, hybrid = _nemo_head(cfg)
    d_model = int(enc["d_model"])
    channels = int(enc.get("subsampling_conv_channels", -1))
    context = enc.get("att_context_size") or [-1, -1]
    if context and isinstance(context[0], (list, tuple)):  # multi-lookahead models: the first is the default
        context = context[0]
    attention = enc.get("self_attention_model", "rel_pos")
    if attention != "rel_pos":
        raise ValueError(f"self_attention_model {attention!r} (only rel_pos is implemented)")
    if enc.get("causal_downsampling"):
        raise ValueError("causal_downsampling (streaming models' causal subsampling is not implemented)")
    use_bias = bool(enc.get("use_bias", True))
    fields: dict[str, Any] = dict(
        n_mels=int(enc["feat_in"]),
        d_model=d_model,
        n_layers=int(enc["n_layers"]),
        n_heads=int(enc.get("n_heads", 4)),
        ff_hidden=int(d_model * enc.get("ff_expansion_factor", 4)),
        subsampling=str(enc.get("subsampling", "striding")),
        subsampling_factor=int(enc.get("subsampling_factor", 4)),
        subsampling_conv_channels=d_model if channels == -1 else channels,
        conv_kernel_size=int(enc.get("conv_kernel_size", 31)),
        conv_norm_type=str(enc.get("conv_norm_type", "batch_norm")),
        xscaling=bool(enc.get("xscaling", True)),
        att_context_size=tuple(int(v) for v in context),
        att_context_style=str(enc.get("att_context_style", "regular")),
        linear_bias=use_bias,
        conv_bias=use_bias,
        head=head,
        hybrid_ctc=hybrid,
        preprocessor=nemo_preprocessor(cfg.get("preprocessor") or {}),
    )
    if head == "ctc":
        fields["vocab_size"] = _num_labels(cfg["decoder"])
    else:
        joint, dec = cfg["joint"], cfg["decoder"]
        prednet, jointnet = dec.get("prednet") or {}, joint.get("jointnet") or {}
        defaults = cfg.get("model_defaults") or {}
        fields.update(
            vocab_size=_num_labels(joint),
            pred_hidden=int(prednet.get("pred_hidden", defaults.get("pred_hidden", 0))),
            pred_rnn_layers=int(prednet.get("pred_rnn_layers", 1)),
            joint_hidden=int(jointnet.get("joint_hidden", defaults.get("joint_hidden", 0))),
            joint_activation=str(jointnet.get("activation", "relu")),
            durations=tuple(_nemo_durations(cfg)),
            max_symbols_per_step=int(((cfg.get("decoding") or {}).get("greedy") or {}).get("max_symbols") or 10),
        )
    return FastConformerConfig(**fields)


def _num_labels(section: Mapping[str, Any]) -> int:
    """NeMo's ``num_classes`` counts labels without the blank (-1: the vocabulary's length)."""
    n = int(section.get("num_classes", -1))
    return len(section.get("vocabulary") or []) if n < 1 else n


def nemo_preprocessor(pre: Mapping[str, Any]) -> PreprocessorConfig:
    """NeMo's ``preprocessor`` section (``window_size``/``window_stride`` in seconds)."""
    from oasr.models.fastconformer.config import PreprocessorConfig

    rate = int(pre.get("sample_rate", 16000))
    win = round(float(pre.get("window_size", 0.02)) * rate)
    n_fft = pre.get("n_fft") or 2 ** math.ceil(math.log2(win))
    guard = pre.get("log_zero_guard_value", 2.0**-24)
    norm = pre.get("normalize", "per_feature")
    return PreprocessorConfig(
        sample_rate=rate,
        n_fft=int(n_fft),
        win_length=win,
        hop_length=round(float(pre.get("window_stride", 0.01)) * rate),
        window=str(pre.get("window", "hann")),
        n_mels=int(pre.get("features", pre.get("nfilt", 64))),
        preemphasis=pre.get("preemph", 0.97),
        mag_power=float(pre.get("mag_power", 2.0)),
        log=bool(pre.get("log", True)),
        log_zero_guard_type=str(pre.get("log_zero_guard_type", "add")),
        log_zero_guard_value=guard if isinstance(guard, str) else float(guard),
        normalize=dict(norm) if isinstance(norm, Mapping) else ("" if norm in (None, "None", "none", False) else str(norm)),
        pad_to=int(pre.get("pad_to", 16) or 0),
        pad_value=float(pre.get("pad_value", 0.0)),
        dither=float(pre.get("dither", 1e-5)),
        lowfreq=float(pre.get("lowfreq", 0.0)),
        highfreq=None if pre.get("highfreq") is None else float(pre["highfreq"]),
        mel_norm=pre.get("mel_norm", "slaney"),
        exact_pad=bool(pre.get("exact_pad", False)),
    )
