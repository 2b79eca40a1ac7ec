"""icefall's Zipformer models (``egs/*/ASR/zipformer``): CTC (``icefall``) or pruned transducer (``transducer``).

A model folder as icefall's export and training scripts write it (``icefall_files`` finds the
weights and tokens). The config is read from the tensors' shapes: stacks, their downsampling
factors, widths, layer counts, feed-forward sizes, kernels; the head split of the attention
projection (heads x (2 query + position) dims) is not determined by shapes, so it comes from
the training ``params`` an ``epoch-N.pt`` carries, else from icefall's ``pos_head_dim`` of 4
(every published recipe's), and a projection that admits no such reading is an error.

Detection is by asset layout: tokens beside icefall weights. A detected folder is CTC
(``ctc_output``); a transducer (``decoder.*``, ``joiner.*``) needs ``--architecture transducer``,
and a folder with both heads is converted as ``--architecture`` says (``icefall-ctc`` or
``transducer``; without it the error names both). The training heads
``simple_am_proj`` / ``simple_lm_proj`` are dropped silently. An attention decoder
(``attention_decoder.*``) is kept beside the CTC head, its names mapped onto the shared
Transformer decoder's, its shape read from the tensors (heads and ``<sos/eos>`` from the params,
else ``tokens.txt``'s ``<sos/eos>``, else icefall's defaults 8 and 1); the bundle then decodes
by the ``aed`` family (attention rescoring by default). A transducer conversion drops it with a
warning. icefall's Conformer, Zipformer1 and streaming (causal) encoders are refused by name.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasr.conversion.base import DETECT_ASSET_LAYOUT, CheckpointConverter
from oasr.conversion.tensor_map import TensorTable
from oasr.errors import ConversionError
from oasr.specs import DecodingDefaults, TokenizerSpec

from .icefall_files import has_weights, read_weights, token_files, weight_file

if TYPE_CHECKING:
    from oasr.models.zipformer.config import ZipformerConfig
    from torch import Tensor

log = logging.getLogger("oasr")

ENCODER = ("encoder_embed.", "encoder.")
_STACK = re.compile(r"^encoder\.encoders\.(\d+)\.")
_LAYER = re.compile(r"^encoder\.encoders\.(\d+)\.(?:encoder\.)?layers\.(\d+)\.")
_DEAD = re.compile(r"^encoder\.encoders\.\d+\.(?:encoder\.)?layers\.\d+\.bypass_scale$")
POS_HEAD_DIM = 4  # icefall's --pos-head-dim in every zipformer recipe
ATTENTION_DECODER = (
    "the attention decoder rescores the CTC head's n-best only: it is not converted with the transducer "
    "(--architecture icefall-ctc keeps it where the checkpoint has a CTC head)"
)
_AD = "attention_decoder.decoder."
_AD_LAYER = re.compile(r"^attention_decoder\.decoder\.layers\.(\d+)\.")
# icefall's attention decoder names -> the shared Transformer decoder's (oasr.models.transformer_decoder)
ATTENTION_DECODER_RULES = {
    f"{_AD}embed.weight": "attention_decoder.embed.0.weight",
    **{f"{_AD}output_layer.{p}": f"attention_decoder.output_layer.{p}" for p in ("weight", "bias")},
    **{
        f"{_AD}layers.{{bid}}.{src}.{p}": f"attention_decoder.decoders.{{bid}}.{dst}.{p}"
        for src, dst in (
            ("norm_self_attn", "norm1"), ("norm_src_attn", "norm2"), ("norm_ff", "norm3"),
            ("feed_forward.0", "feed_forward.w_1"), ("feed_forward.3", "feed_forward.w_2"),
            *((f"{a}.{l}", f"{a}.{l}") for a in ("self_attn", "src_attn") for l in ("linear_q", "linear_k", "linear_v")),
            ("self_attn.out_proj", "self_attn.linear_out"), ("src_attn.out_proj", "src_attn.linear_out"),
        )
        for p in ("weight", "bias")
    },
}
ATTENTION_HEADS = 8  # icefall's --attention-decoder-num-heads
SOS_EOS = 1  # icefall's AttentionDecoderModel default, <sos/eos> of its BPE recipes


@dataclass(frozen=True)
class IcefallNames(TensorTable):
    """icefall's names are the model's under ``prefixes``, the ``rules`` rename the rest (the
    attention decoder); anything else (the other head of a hybrid, the training heads) is
    unmatched, and accounted for."""

    prefixes: tuple[str, ...] = ()

    def lookup(self, name: str) -> tuple[str | None, ...] | None:
        return (name,) if name.startswith(self.prefixes) else super().lookup(name)


def _ints(value) -> tuple[int, ...] | None:
    if isinstance(value, int):
        return (value,)
    if isinstance(value, str) and re.fullmatch(r"\d+(,\d+)*", value.strip()):
        return tuple(int(v) for v in value.split(","))
    return None


class IcefallConverter(CheckpointConverter):
    name = "icefall"
    architecture = "zipformer"
    head = "ctc"
    picked = False  # asked for by name: a hybrid is converted with this converter's head
    markers = "tokens.txt or bpe.model beside pretrained.pt / epoch-<N>.pt (or in exp/ and data/lang_*/)"
    detect_specificity = DETECT_ASSET_LAYOUT
    tensor_table = IcefallNames(rules=ATTENTION_DECODER_RULES, prefixes=(*ENCODER, "ctc_output."))
    expected_unused_prefixes = ("simple_am_proj.", "simple_lm_proj.")
    capability_drop_hints = {
        "decoder.": "the transducer head is not converted (--architecture transducer converts it)",
        "joiner.": "the transducer head is not converted (--architecture transducer converts it)",
    }

    @classmethod
    def detect(cls, path: Path) -> str | None:
        path = Path(path)
        if not path.is_dir():
            return None
        weights = has_weights(path)
        if weights is None:
            return None
        tokens = token_files(path, path / weights)
        return f"{' and '.join(sorted(tokens))} beside {weights} (an icefall model folder)" if tokens else None

    @functools.cached_property
    def file(self) -> Path:
        return weight_file(self.path)

    @functools.cached_property
    def _read(self) -> tuple[dict[str, Tensor], dict[str, Any]]:
        return read_weights(self.file)

    def source_files(self) -> list[Path]:
        return [self.file]

    def load_state_dict(self) -> dict[str, Tensor]:
        self.build_config()
        # icefall's ZipformerEncoderLayer builds a bypass_scale it never reads (its bypass
        # modules hold their own): left out here, the one tensor not accounted by the table.
        return {k: v for k, v in self._read[0].items() if not _DEAD.match(k)}

    # -- the config from the shapes --------------------------------------------------------------

    def build_config(self) -> ZipformerConfig:
        from oasr.models.zipformer.config import ZipformerConfig

        state, params = self._read
        where = str(self.file)
        self._refuse_others(state, where)
        has_ctc, has_rnnt = "ctc_output.1.weight" in state, "joiner.output_linear.weight" in state
        if has_ctc and has_rnnt and not self.picked:
            raise ConversionError(
                f"{where} holds both a CTC head and a transducer: pass --architecture icefall-ctc or --architecture transducer"
            )
        if self.head == "ctc" and not has_ctc:
            if has_rnnt:
                raise ConversionError(f"{where} is an icefall pruned transducer (decoder.*, joiner.*): pass --architecture transducer")
            raise ConversionError(f"{where} has no CTC head (ctc_output.1.weight) and no transducer head")
        if self.head == "transducer" and not has_rnnt:
            raise ConversionError(f"{where} has no transducer head (joiner.*, decoder.*); it is CTC only: convert it without --architecture transducer")
        try:
            fields = self._encoder_fields(state, params, where)
        except KeyError as e:
            raise ConversionError(f"{where}: the Zipformer encoder lacks {e.args[0]}") from e
        if self.head == "ctc":
            fields["vocab_size"] = int(state["ctc_output.1.weight"].shape[0])
            if any(k.startswith(_AD) for k in state):
                fields.update(self._attention_decoder_fields(state, params, fields, where))
        else:
            fields.update(self._transducer_fields(state))
        try:
            return ZipformerConfig(head=self.head, **fields)
        except Exception as e:
            raise ConversionError(f"{where}: {e}") from e

    @staticmethod
    def _refuse_others(state: dict[str, Tensor], where: str) -> None:
        if any(k.startswith("encoder.encoder.layers.") for k in state):
            raise ConversionError(
                f"{where}: an icefall Conformer encoder (pruned_transducer_stateless*) is not supported: "
                "no third-party implementation of it can be run for parity"
            )
        if "encoder_embed.conv.0.weight" not in state and any(k.startswith("encoder.encoder_embed.") for k in state):
            raise ConversionError(f"{where}: an icefall Zipformer1 (pruned_transducer_stateless7) is not supported, only Zipformer2 (zipformer/)")
        if any(k.endswith("depthwise_conv.causal_conv.weight") for k in state):
            raise ConversionError(f"{where}: a streaming (causal) Zipformer is not supported; only full-context models are")
        if "encoder_embed.conv.0.weight" not in state:
            raise ConversionError(f"{where}: no Zipformer2 encoder (encoder_embed.*, encoder.encoders.*) in its model state")

    def _encoder_fields(self, state: dict[str, Tensor], params: dict[str, Any], where: str) -> dict[str, Any]:
        stacks = 1 + max(int(m.group(1)) for k in state if (m := _STACK.match(k)))
        layers = [0] * stacks
        for k in state:
            if m := _LAYER.match(k):
                layers[int(m.group(1))] = max(layers[int(m.group(1))], int(m.group(2)) + 1)
        ds, dim, heads, qd, pd, vd, ff, kernel = ([] for _ in range(8))
        pos_dim = None
        for i in range(stacks):
            down = state.get(f"encoder.encoders.{i}.downsample.bias")
            ds.append(1 if down is None else int(down.shape[0]))
            layer = f"encoder.encoders.{i}.{'' if down is None else 'encoder.'}layers.0."
            d = int(state[layer + "norm.bias"].shape[0])
            dim.append(d)
            proj = int(state[layer + "self_attn_weights.in_proj.weight"].shape[0])
            pos_rows, pos_in = state[layer + "self_attn_weights.linear_pos.weight"].shape
            value_rows = int(state[layer + "self_attn1.in_proj.weight"].shape[0])
            pos_dim = int(pos_in)
            h, p = self._heads(i, proj, int(pos_rows), params, where)
            heads.append(h), pd.append(p), qd.append((proj // h - p) // 2), vd.append(value_rows // h)
            if value_rows % h:
                raise ConversionError(f"{where}: stack {i}'s value projection of {value_rows} rows does not split into {h} heads")
            ff.append(int(state[layer + "feed_forward2.in_proj.weight"].shape[0]))
            kernel.append(int(state[layer + "conv_module1.depthwise_conv.weight"].shape[-1]))
        c1, c2, c3 = (int(state[f"encoder_embed.conv.{j}.weight"].shape[0]) for j in (0, 4, 7))
        width = int(state["encoder_embed.out.weight"].shape[1]) // c3
        return dict(
            n_mels=self._mels(width, params, where), downsampling_factor=tuple(ds), encoder_dim=tuple(dim),
            num_layers=tuple(layers), num_heads=tuple(heads), query_head_dim=tuple(qd), pos_head_dim=tuple(pd),
            value_head_dim=tuple(vd), feedforward_dim=tuple(ff), cnn_module_kernel=tuple(kernel), pos_dim=pos_dim,
            embed_channels=(c1, c2, c3),
        )

    @staticmethod
    def _heads(i: int, proj: int, pos_rows: int, params: dict[str, Any], where: str) -> tuple[int, int]:
        """(heads, pos_head_dim) of stack i: the params' when given, else icefall's pos_head_dim."""
        given = _ints(params.get("num_heads"))
        if given:
            h = given[i] if len(given) > 1 else given[0]
            if pos_rows % h == 0 and (proj // h - pos_rows // h) % 2 == 0 and proj % h == 0:
                return h, pos_rows // h
            raise ConversionError(f"{where}: its params' num_heads {params['num_heads']} do not fit stack {i}'s projections")
        if pos_rows % POS_HEAD_DIM:
            raise ConversionError(
                f"{where}: stack {i}'s position projection has {pos_rows} rows: heads x pos_head_dim has no reading with "
                f"icefall's pos_head_dim {POS_HEAD_DIM}, and the file carries no params naming num_heads"
            )
        h = pos_rows // POS_HEAD_DIM
        if proj % h or (proj // h - POS_HEAD_DIM) % 2:
            raise ConversionError(f"{where}: stack {i}'s attention projection of {proj} rows does not split into {h} heads")
        return h, POS_HEAD_DIM

    @staticmethod
    def _mels(width: int, params: dict[str, Any], where: str) -> int:
        """Bins in from the front's output width ((F - 1) // 2 - 1) // 2: four bin counts give each
        width, so the params' feature_dim decides, else icefall's 80 where it fits."""
        from oasr.features.kaldi import ICEFALL

        readings = [f for f in range(7, 4 * width + 8) if ((f - 1) // 2 - 1) // 2 == width]
        given = params.get("feature_dim")
        if isinstance(given, int) and given in readings:
            return given
        if ICEFALL.num_mel_bins in readings:
            return ICEFALL.num_mel_bins
        raise ConversionError(
            f"{where}: the subsampling's output width {width} reads as {', '.join(map(str, readings))} fbank bins, "
            f"not the {ICEFALL.num_mel_bins} of icefall's front end, and the file names no feature_dim"
        )

    @staticmethod
    def _transducer_fields(state: dict[str, Tensor]) -> dict[str, Any]:
        conv = state.get("decoder.conv.weight")
        return dict(
            vocab_size=int(state["joiner.output_linear.weight"].shape[0]),
            decoder_dim=int(state["decoder.embedding.weight"].shape[1]),
            context_size=1 if conv is None else int(conv.shape[-1]),
            joiner_dim=int(state["joiner.output_linear.weight"].shape[1]),
        )

    def _attention_decoder_fields(self, state: dict[str, Tensor], params: dict[str, Any], fields: dict[str, Any], where: str) -> dict[str, Any]:
        """The decoder's widths from its shapes; heads and <sos/eos> are not in them."""
        try:
            embed = state[f"{_AD}embed.weight"]
            q = state[f"{_AD}layers.0.self_attn.linear_q.weight"]
            k = state[f"{_AD}layers.0.src_attn.linear_k.weight"]
            ff = state[f"{_AD}layers.0.feed_forward.0.weight"]
        except KeyError as e:
            raise ConversionError(f"{where}: the attention decoder lacks {e.args[0]}") from e
        if int(embed.shape[0]) != fields["vocab_size"]:
            raise ConversionError(f"{where}: the attention decoder has {embed.shape[0]} labels, the CTC head {fields['vocab_size']}")
        memory = max(fields["encoder_dim"])
        if int(k.shape[1]) != memory:
            raise ConversionError(f"{where}: the attention decoder reads a {k.shape[1]}-wide memory, the encoder gives {memory}")
        heads = params.get("attention_decoder_num_heads", ATTENTION_HEADS)
        sos = params.get("sos_id", self._sos_eos_token())
        return dict(
            attention_decoder_dim=int(embed.shape[1]),
            attention_decoder_layers=1 + max(int(m.group(1)) for n in state if (m := _AD_LAYER.match(n))),
            attention_decoder_attention_dim=int(q.shape[0]),
            attention_decoder_heads=int(heads),
            attention_decoder_ff_dim=int(ff.shape[0]),
            sos_id=int(sos),
            eos_id=int(params.get("eos_id", sos)),
        )

    def _sos_eos_token(self) -> int:
        """The id of ``<sos/eos>`` (or ``<sos>``) in tokens.txt, else icefall's default."""
        tokens = token_files(self.path, self.file).get("tokens.txt")
        if tokens is not None:
            for line in tokens.read_text(encoding="utf-8").splitlines():
                parts = line.rsplit(maxsplit=1)
                if len(parts) == 2 and parts[0] in ("<sos/eos>", "<sos>") and parts[1].isdigit():
                    return int(parts[1])
        return SOS_EOS

    # -- specs ----------------------------------------------------------------------------------

    def build_specs(self, config: ZipformerConfig):
        from oasr.features.kaldi import kaldi_feature_spec

        files = token_files(self.path, self.file)
        features = kaldi_feature_spec()
        options: dict[str, Any] = {}
        family = "ctc"
        if config.head == "transducer":
            family = "rnnt"
            options = {"max_symbols_per_step": 1, "context_size": config.context_size}  # icefall's --max-sym-per-frame
        decoding = DecodingDefaults(family=family, blank_id=config.blank_id, options=options)
        if config.has_attention_decoder:  # CTC prefix beam n-best rescored by the decoder
            decoding = DecodingDefaults(
                family="aed", bos_id=config.sos_id, eos_id=config.eos_id, blank_id=config.blank_id, options={"decoder": "transformer"}
            )
        if "tokens.txt" in files:
            return TokenizerSpec(kind="icefall_tokens", files=("tokens.txt",)), {"tokens.txt": files["tokens.txt"]}, features, decoding
        if "bpe.model" in files:
            spec = TokenizerSpec(kind="sentencepiece", files=("tokenizer.model",), options={"blank_id": config.blank_id, "vocab_size": config.vocab_size})
            return spec, {"tokenizer.model": files["bpe.model"]}, features, decoding
        return TokenizerSpec(kind="none"), {}, features, decoding


class IcefallCtcConverter(IcefallConverter):
    """A hybrid folder's CTC head, asked for by name (``--architecture icefall-ctc``)."""

    name = "icefall-ctc"
    picked = True

    @classmethod
    def detect(cls, path: Path) -> str | None:
        return None


class IcefallTransducerConverter(IcefallConverter):
    """Never detected: a pruned transducer folder sniffs as the CTC layout, so it is asked for by name."""

    name = "transducer"
    head = "transducer"
    picked = True
    tensor_table = IcefallNames(rules={}, prefixes=(*ENCODER, "decoder.", "joiner."))
    capability_drop_hints = {
        "attention_decoder.": ATTENTION_DECODER,
        "ctc_output.": "the CTC head is not converted (--architecture icefall-ctc converts it)",
    }

    @classmethod
    def detect(cls, path: Path) -> str | None:
        return None
