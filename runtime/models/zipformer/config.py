"""The Zipformer bundle config: icefall's encoder stacks, the Conv2dSubsampling front, one head.

Stored tensors keep icefall's own state-dict names (``encoder_embed.conv.0.weight``,
``encoder.encoders.{i}[.encoder].layers.{j}.self_attn_weights.in_proj.weight``,
``ctc_output.1.weight``, ``decoder.embedding.weight``, ``joiner.output_linear.weight``).
Reading a checkpoint's shapes into this config is the converter's work (``oasr_converters.icefall``).

Fields, one value per stack where a tuple (icefall's ``--num-encoder-layers`` and friends):

- ``n_mels``: fbank bins in; ``embed_channels``: the three subsampling convs' widths (8, 32, 128).
- ``downsampling_factor``: each stack's frame-rate divisor (1: full rate, no downsample module),
  on top of the front's 2 and the output's 2.
- ``encoder_dim``, ``num_layers``, ``num_heads``, ``query_head_dim``, ``pos_head_dim``,
  ``value_head_dim``, ``feedforward_dim`` (the middle feed-forward's; icefall's first is 3/4 of it,
  its third 5/4), ``cnn_module_kernel``; ``pos_dim``: the compact relative-position encoding's width.
- ``vocab_size``: labels with the blank, which is id 0 (icefall's ``blank_id``).
- ``head``: ``"ctc"`` (``ctc_output``) or ``"transducer"`` (the stateless decoder and joiner):
  ``decoder_dim``, ``context_size`` (labels the decoder's conv sees; 1: embedding only), ``joiner_dim``.
- ``attention_decoder_*``: icefall's ``AttentionDecoderModel`` beside the CTC head (``_dim`` 0:
  none): its width, layers, attention width, heads and feed-forward width; ``sos_id`` / ``eos_id``
  its ``<sos/eos>`` label. It reads the encoder output (``output_dim``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import BundleError
from ..base import BaseModelConfig
from ..transformer_decoder import AttentionDecoderConfig

HEADS = ("ctc", "transducer")
STACK_FIELDS = (
    "downsampling_factor", "encoder_dim", "num_layers", "num_heads", "query_head_dim",
    "pos_head_dim", "value_head_dim", "feedforward_dim", "cnn_module_kernel",
)


@dataclass(frozen=True)
class ZipformerConfig(BaseModelConfig):
    n_mels: int
    downsampling_factor: tuple[int, ...]
    encoder_dim: tuple[int, ...]
    num_layers: tuple[int, ...]
    num_heads: tuple[int, ...]
    query_head_dim: tuple[int, ...]
    pos_head_dim: tuple[int, ...]
    value_head_dim: tuple[int, ...]
    feedforward_dim: tuple[int, ...]
    cnn_module_kernel: tuple[int, ...]
    pos_dim: int
    vocab_size: int
    head: str = "ctc"
    embed_channels: tuple[int, int, int] = (8, 32, 128)
    decoder_dim: int = 0
    context_size: int = 0
    joiner_dim: int = 0
    attention_decoder_dim: int = 0
    attention_decoder_layers: int = 0
    attention_decoder_attention_dim: int = 0
    attention_decoder_heads: int = 8  # icefall's --attention-decoder-num-heads
    attention_decoder_ff_dim: int = 0
    sos_id: int = 1  # icefall's <sos/eos>
    eos_id: int = 1

    def __post_init__(self):
        for name in (*STACK_FIELDS, "embed_channels"):  # JSON gives lists back
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        problems = []
        stacks = len(self.encoder_dim)
        if not stacks:
            problems.append("no encoder stacks")
        for name in STACK_FIELDS:
            if len(getattr(self, name)) != stacks:
                problems.append(f"{name} has {len(getattr(self, name))} values for {stacks} stacks")
        if self.head not in HEADS:
            problems.append(f"head {self.head!r} (one of {', '.join(HEADS)})")
        if any(k % 2 == 0 for k in self.cnn_module_kernel):
            problems.append(f"cnn_module_kernel {list(self.cnn_module_kernel)} (odd kernels only)")
        if self.head == "transducer" and min(self.decoder_dim, self.context_size, self.joiner_dim) <= 0:
            problems.append("a transducer needs decoder_dim, context_size and joiner_dim")
        if self.has_attention_decoder:
            if self.head != "ctc":
                problems.append("an attention decoder rescores the CTC head's n-best: it needs head 'ctc'")
            if min(self.attention_decoder_layers, self.attention_decoder_attention_dim, self.attention_decoder_ff_dim) <= 0:
                problems.append("an attention decoder needs attention_decoder_layers, _attention_dim and _ff_dim")
            elif self.attention_decoder_heads <= 0 or self.attention_decoder_attention_dim % self.attention_decoder_heads:
                problems.append(f"attention_decoder_attention_dim {self.attention_decoder_attention_dim} does not split into {self.attention_decoder_heads} heads")
        if self.n_mels < 7:
            problems.append(f"n_mels {self.n_mels} (the subsampling needs at least 7)")
        if problems:
            raise BundleError("Zipformer config: unsupported " + "; ".join(problems))

    @property
    def output_dim(self) -> int:
        return max(self.encoder_dim)

    @property
    def blank_id(self) -> int:
        return 0

    @property
    def has_attention_decoder(self) -> bool:
        return self.attention_decoder_dim > 0

    def attention_decoder_config(self) -> AttentionDecoderConfig:
        """icefall's decoder in the shared one's terms: Swish feed-forward, no final norm."""
        return AttentionDecoderConfig(
            vocab_size=self.vocab_size,
            d_model=self.attention_decoder_dim,
            n_heads=self.attention_decoder_heads,
            ff_hidden=self.attention_decoder_ff_dim,
            n_layers=self.attention_decoder_layers,
            activation="swish",
            attention_dim=self.attention_decoder_attention_dim,
            memory_dim=self.output_dim,
            final_norm=False,
        )
