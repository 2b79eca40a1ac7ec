"""Tiny WeNet model folders with random weights, and their references.

The network reference is ESPnet (``espnet`` 202511, installed ``--no-deps``: its
``espnet.nets.pytorch_backend`` Conformer, Transformer, subsampling, decoder), which WeNet's
Conformer came from; WeNet's parameter names are mapped onto it here. Where WeNet's arithmetic
differs from ESPnet's, this module carries a small reference written from WeNet's code
(``wenet/models/transformer/``, ``wenet/utils/mask.py``, ``search.py``), each part listed:

0. layer norms: WeNet's ``norm_eps`` 1e-5 where ESPnet's ``LayerNorm`` uses 1e-12 (set on ESPnet's);
1. relative attention: WeNet drops Transformer-XL's relative shift (``matrix_bd`` of positions
   0..T-1 as they are) and its ``RelPositionalEncoding`` tabulates positions 0..T-1 where
   ESPnet's ``LegacyRelPositionalEncoding`` counts them down; ESPnet's
   ``LegacyRelPositionMultiHeadedAttention`` has the same projections and biases, so its
   ``rel_shift`` is replaced by the identity and its table rebuilt in WeNet's order;
2. the convolution module when causal (left padding of kernel - 1) or with a layer norm: ESPnet's
   has a centred kernel and a batch norm only (``WenetConvModule`` below);
3. the static chunk mask (``subsequent_chunk_mask``) fed to ESPnet's layers;
4. the ``linear`` input layer (WeNet: Linear + LayerNorm; ESPnet adds a ReLU);
5. the searches: CTC greedy, prefix beam search with peak times, attention beam search and
   attention rescoring (``wenet_*`` functions below), run on the ESPnet networks' outputs.

The folder is laid out as WeNet's ``train.py`` writes an experiment: ``train.yaml`` (with
``input_dim`` / ``output_dim`` and ``cmvn_conf`` naming ``global_cmvn``), ``final.pt``
(``torch.save(model.state_dict())``, sinusoid buffers included), ``global_cmvn`` (JSON
statistics) and ``units.txt``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import torch
import yaml
from torch import nn

from oasr.models.transformer_decoder import sinusoids


def _espnet():
    import logging

    logging.getLogger().setLevel(logging.WARNING)
    from espnet.nets.pytorch_backend.conformer.encoder import Encoder as ConformerEncoder
    from espnet.nets.pytorch_backend.transformer.decoder import Decoder
    from espnet.nets.pytorch_backend.transformer.encoder import Encoder as TransformerEncoder

    return ConformerEncoder, TransformerEncoder, Decoder


class WenetConvModule(nn.Module):
    """WeNet's ConvolutionModule (reference 2): causal or centred depthwise kernel, batch or layer norm."""

    def __init__(self, channels: int, kernel: int, causal: bool, norm: str):
        super().__init__()
        self.lorder = kernel - 1 if causal else 0
        self.pointwise_conv1 = nn.Conv1d(channels, 2 * channels, 1)
        self.depthwise_conv = nn.Conv1d(channels, channels, kernel, padding=0 if causal else (kernel - 1) // 2, groups=channels)
        self.use_layer_norm = norm == "layer_norm"
        self.norm = nn.LayerNorm(channels) if self.use_layer_norm else nn.BatchNorm1d(channels)
        self.pointwise_conv2 = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        x = x.transpose(1, 2)
        if self.lorder > 0:  # before the pointwise conv, as WeNet pads
            x = nn.functional.pad(x, (self.lorder, 0), "constant", 0.0)
        x = nn.functional.glu(self.pointwise_conv1(x), dim=1)
        x = self.depthwise_conv(x)
        if self.use_layer_norm:
            x = x.transpose(1, 2)
        x = self.norm(x)
        if self.use_layer_norm:
            x = x.transpose(1, 2)
        x = x * torch.sigmoid(x)
        return self.pointwise_conv2(x).transpose(1, 2)


def subsequent_chunk_mask(size: int, chunk: int) -> torch.Tensor:
    """WeNet's mask (reference 3), every left chunk visible."""
    ret = torch.zeros(size, size, dtype=torch.bool)
    for i in range(size):
        ret[i, 0 : min((i // chunk + 1) * chunk, size)] = True
    return ret


class Reference(nn.Module):
    """The ESPnet encoder, CTC head and decoder(s) of one tiny config (WeNet's names mapped)."""

    def __init__(self, conf: dict):
        super().__init__()
        ConformerEncoder, TransformerEncoder, Decoder = _espnet()
        self.conf = conf
        e = conf["encoder_conf"]
        c, idim = e["output_size"], conf["input_dim"]
        common = dict(attention_dim=c, attention_heads=e["attention_heads"], linear_units=e["linear_units"],
                      num_blocks=e["num_blocks"], dropout_rate=0.0, positional_dropout_rate=0.0, attention_dropout_rate=0.0,
                      input_layer=e.get("input_layer", "conv2d") if e.get("input_layer") != "linear" else "linear")
        layer_kind = common["input_layer"]
        if layer_kind in ("conv2d6", "conv2d8"):
            common["input_layer"] = "conv2d"  # ESPnet's Conformer builds only conv2d; its 6x / 8x modules are swapped in
        if conf["encoder"] == "conformer":
            self.encoder = ConformerEncoder(idim, macaron_style=True, pos_enc_layer_type="legacy_rel_pos",
                                            selfattention_layer_type="legacy_rel_selfattn", use_cnn_module=True,
                                            cnn_module_kernel=e["cnn_module_kernel"], **common)
        else:
            self.encoder = TransformerEncoder(idim, **common)
        if layer_kind in ("conv2d6", "conv2d8"):
            from espnet.nets.pytorch_backend.transformer import subsampling

            pos = self.encoder.embed.out[-1]
            cls = subsampling.Conv2dSubsampling6 if layer_kind == "conv2d6" else subsampling.Conv2dSubsampling8
            self.encoder.embed = cls(idim, c, 0.0, pos)
        if e.get("input_layer") == "linear":  # reference 4
            pos = self.encoder.embed[-1]
            self.encoder.embed = nn.Sequential(nn.Linear(idim, c), nn.LayerNorm(c), pos)
        if conf["encoder"] == "conformer":
            for m in self.encoder.embed.modules():
                if hasattr(m, "reverse") and hasattr(m, "extend_pe"):  # reference 1: positions 0..T-1
                    m.reverse, m.pe = False, None
                    m.extend_pe(torch.zeros(1, 5000))
            for layer in self.encoder.encoders:
                layer.self_attn.rel_shift = lambda x: x  # reference 1
                if e.get("causal") or e.get("cnn_module_norm") == "layer_norm":
                    layer.conv_module = WenetConvModule(c, e["cnn_module_kernel"], e.get("causal", False), e.get("cnn_module_norm", "batch_norm"))
        vocab = conf["output_dim"]
        self.ctc_lo = nn.Linear(c, vocab)
        d = conf["decoder_conf"]
        make = lambda n: Decoder(vocab, attention_dim=c, attention_heads=d["attention_heads"], linear_units=d["linear_units"],
                                 num_blocks=n, dropout_rate=0.0, positional_dropout_rate=0.0)
        self.left = make(d["num_blocks"])
        self.right = make(d["r_num_blocks"]) if conf["decoder"] == "bitransformer" else None
        for m in self.modules():  # reference 0: WeNet's norm_eps 1e-5 (ESPnet's LayerNorm: 1e-12)
            if isinstance(m, nn.LayerNorm):
                m.eps = 1e-5
        self.mean = torch.randn(idim) * 2
        self.istd = torch.rand(idim) + 0.5
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            # gains near 1 for every norm (ESPnet names them norm_ff, norm_mha, norm1, ...): gains near
            # 0 would shrink each block's contribution and leave the residual stream to decide the parity
            gains = {f"{n}.weight" for n, m in self.named_modules() if isinstance(m, (nn.LayerNorm, nn.BatchNorm1d))}
            for name, p in self.named_parameters():
                p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() > 1 else 0.1) + (1.0 if name in gains else 0.0))
            for m in self.modules():
                if isinstance(m, nn.BatchNorm1d):
                    m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                    m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
        self.eval()

    # -- WeNet's state dict -------------------------------------------------------------------

    def wenet_state(self) -> dict[str, torch.Tensor]:
        e = self.conf["encoder_conf"]
        state = {}
        for k, v in self.encoder.state_dict().items():
            if e.get("input_layer") in ("conv2d6", "conv2d8") and k.startswith("embed.out."):
                k = k.replace("embed.out.0.", "embed.linear.").replace("embed.out.", "embed.linear.")
            if e.get("input_layer") == "linear" and k.startswith("embed."):
                k = k.replace("embed.", "embed.out.")
            if k.startswith("embed.") and k.endswith(".pe"):
                continue
            state["encoder." + k] = v.clone()
        c = e["output_size"]
        state["encoder.embed.pos_enc.pe"] = sinusoids(5000, c)[None]  # WeNet registers the table
        state["encoder.global_cmvn.mean"], state["encoder.global_cmvn.istd"] = self.mean.clone(), self.istd.clone()
        state["ctc.ctc_lo.weight"], state["ctc.ctc_lo.bias"] = self.ctc_lo.weight.clone(), self.ctc_lo.bias.clone()
        for prefix, dec in (("decoder.left_decoder.", self.left), ("decoder.right_decoder.", self.right)) if self.right is not None else (("decoder.", self.left),):
            for k, v in dec.state_dict().items():
                if not k.endswith(".pe"):
                    state[prefix + k] = v.clone()
            state[prefix + "embed.1.pe"] = sinusoids(5000, c)[None]
        return state

    # -- reference forward ---------------------------------------------------------------------

    def encode(self, feats: torch.Tensor) -> torch.Tensor:
        """feats [1, T, F] (raw fbank) -> encoder output [1, T', C]: ESPnet's embed, layers and norm."""
        x = (feats - self.mean) * self.istd
        masks = torch.ones(1, 1, x.shape[1], dtype=torch.bool)
        embed = self.encoder.embed
        x = embed(x) if isinstance(embed, nn.Sequential) else embed(x, masks)[0]
        frames = (x[0] if isinstance(x, tuple) else x).shape[1]
        e = self.conf["encoder_conf"]
        chunk = e.get("static_chunk_size", 0)
        mask = torch.ones(1, 1, frames, dtype=torch.bool)
        if chunk and not e.get("use_dynamic_chunk"):
            mask = subsequent_chunk_mask(frames, chunk)[None]
        for layer in self.encoder.encoders:
            x, mask = layer(x, mask)
        return self.encoder.after_norm(x[0] if isinstance(x, tuple) else x)

    def ctc_log_probs(self, enc):
        return self.ctc_lo(enc).log_softmax(-1)

    def decoder_logits(self, tokens, enc, reverse=False):
        from espnet.nets.pytorch_backend.transformer.mask import subsequent_mask

        dec = self.right if reverse else self.left
        n = tokens.shape[0]
        mask = subsequent_mask(tokens.shape[1]).unsqueeze(0).expand(n, -1, -1)
        return dec(tokens, mask, enc.expand(n, -1, -1), None)[0]


# -- the folder -------------------------------------------------------------------------------

def train_yaml(encoder="conformer", decoder="bitransformer", input_layer="conv2d", causal=False, norm="batch_norm",
               static_chunk=0, dynamic=False, vocab=12, mels=20, width=16):
    enc = {"output_size": width, "attention_heads": 2, "linear_units": width + 8, "num_blocks": 2, "dropout_rate": 0.1,
           "positional_dropout_rate": 0.1, "attention_dropout_rate": 0.0, "input_layer": input_layer, "normalize_before": True}
    if encoder == "conformer":
        enc.update({"cnn_module_kernel": 5, "use_cnn_module": True, "activation_type": "swish", "pos_enc_layer_type": "rel_pos",
                    "selfattention_layer_type": "rel_selfattn", "causal": causal, "cnn_module_norm": norm,
                    "use_dynamic_chunk": dynamic, "static_chunk_size": static_chunk})
    else:
        enc.update({"use_dynamic_chunk": dynamic, "static_chunk_size": static_chunk})
    dec = {"attention_heads": 2, "linear_units": width + 8, "num_blocks": 2, "r_num_blocks": 1 if decoder == "bitransformer" else 0,
           "dropout_rate": 0.1, "positional_dropout_rate": 0.1, "self_attention_dropout_rate": 0.0, "src_attention_dropout_rate": 0.0}
    if decoder != "bitransformer":
        dec.pop("r_num_blocks")
    return {
        "encoder": encoder, "encoder_conf": enc, "decoder": decoder, "decoder_conf": dec,
        "tokenizer": "char", "tokenizer_conf": {"symbol_table_path": "data/dict/lang_char.txt", "split_with_space": False,
                                                "special_tokens": {"<blank>": 0, "<unk>": 1, "<sos>": vocab - 1, "<eos>": vocab - 1}},
        "ctc": "ctc", "ctc_conf": {"ctc_blank_id": 0},
        "cmvn": "global_cmvn", "cmvn_conf": {"cmvn_file": "data/train/global_cmvn", "is_json_cmvn": True},
        "model": "asr_model", "model_conf": {"ctc_weight": 0.3, "lsm_weight": 0.1, "length_normalized_loss": False, "reverse_weight": 0.3},
        "dataset": "asr", "dataset_conf": {"fbank_conf": {"num_mel_bins": mels, "frame_shift": 10, "frame_length": 25, "dither": 1.0},
                                          "resample_conf": {"resample_rate": 16000}},
        "input_dim": mels, "output_dim": vocab,
    }


UNITS = ["<blank>", "<unk>", "▁A", "B", "▁C", "D", "▁E", "F", "G", "▁H", "I", "<sos/eos>"]


def write_folder(folder: Path, conf: dict, ref: Reference | None = None) -> Reference:
    """A WeNet experiment folder for ``conf`` (its reference built when not given)."""
    ref = ref or Reference(conf)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.yaml").write_text(yaml.safe_dump(conf), encoding="utf-8")
    torch.save(ref.wenet_state(), folder / "final.pt")
    # global_cmvn statistics whose mean and 1/std are the reference's
    count = 1000.0
    mean, istd = ref.mean.double(), ref.istd.double()
    var = 1.0 / istd**2
    stats = {"mean_stat": (mean * count).tolist(), "var_stat": ((var + mean**2) * count).tolist(), "frame_num": count}
    (folder / "global_cmvn").write_text(json.dumps(stats), encoding="utf-8")
    (folder / "units.txt").write_text("".join(f"{u} {i}\n" for i, u in enumerate(UNITS[: conf["output_dim"]])), encoding="utf-8")
    return ref


# -- the searches, from WeNet's search.py (reference 5) ----------------------------------------

def _log_add(*args):
    if all(a == -float("inf") for a in args):
        return -float("inf")
    a_max = max(args)
    return a_max + math.log(sum(math.exp(a - a_max) for a in args))


def wenet_greedy(lp: torch.Tensor, blank: int = 0) -> list[int]:
    best = lp.argmax(-1).tolist()
    out, prev = [], None
    for b in best:
        if b != prev and b != blank:
            out.append(b)
        prev = b
    return out


def wenet_prefix_beam(lp: torch.Tensor, beam: int, blank: int = 0):
    """[(prefix, score, times)] best first, as WeNet's ctc_prefix_beam_search (no context graph)."""
    class S:
        def __init__(self, s=-float("inf"), ns=-float("inf"), v_s=-float("inf"), v_ns=-float("inf")):
            self.s, self.ns, self.v_s, self.v_ns = s, ns, v_s, v_ns
            self.cur, self.times_s, self.times_ns = -float("inf"), [], []

        def score(self):
            return _log_add(self.s, self.ns)

        def vit(self):
            return self.v_s if self.v_s > self.v_ns else self.v_ns

        def times(self):
            return self.times_s if self.v_s > self.v_ns else self.times_ns

    cur = [((), S(0.0, -float("inf"), 0.0, 0.0))]
    for t in range(lp.shape[0]):
        logp = lp[t]
        nxt = defaultdict(S)
        _, top = logp.topk(beam)
        for u in top:
            u = u.item()
            prob = logp[u].item()
            for prefix, ps in cur:
                last = prefix[-1] if prefix else None
                if u == blank:
                    ns_ = nxt[prefix]
                    ns_.s = _log_add(ns_.s, ps.score() + prob)
                    ns_.v_s = ps.vit() + prob
                    ns_.times_s = ps.times().copy()
                elif u == last:
                    a = nxt[prefix]
                    a.ns = _log_add(a.ns, ps.ns + prob)
                    if a.v_ns < ps.v_ns + prob:
                        a.v_ns = ps.v_ns + prob
                        if a.cur < prob:
                            a.cur = prob
                            a.times_ns = ps.times_ns.copy()
                            a.times_ns[-1] = t
                    b = nxt[prefix + (u,)]
                    b.ns = _log_add(b.ns, ps.s + prob)
                    if b.v_ns < ps.v_s + prob:
                        b.v_ns = ps.v_s + prob
                        b.cur = prob
                        b.times_ns = ps.times_s.copy()
                        b.times_ns.append(t)
                else:
                    b = nxt[prefix + (u,)]
                    b.ns = _log_add(b.ns, ps.score() + prob)
                    if b.v_ns < ps.vit() + prob:
                        b.v_ns = ps.vit() + prob
                        b.cur = prob
                        b.times_ns = ps.times().copy()
                        b.times_ns.append(t)
        cur = sorted(nxt.items(), key=lambda x: x[1].score(), reverse=True)[:beam]
    return [(p, s.score(), s.times()) for p, s in cur]


def wenet_rescoring(ref: Reference, enc, nbest, sos, eos, ctc_weight=0.0, reverse_weight=0.0):
    """(the index WeNet's attention_rescoring picks from the n-best, every hypothesis' score)."""
    hyps = [list(h) for h, _, _ in nbest]
    width = 1 + max(len(h) for h in hyps)
    ys = torch.full((len(hyps), width), eos, dtype=torch.long)
    r_ys = torch.full((len(hyps), width), eos, dtype=torch.long)
    ys[:, 0] = r_ys[:, 0] = sos
    for i, h in enumerate(hyps):
        ys[i, 1 : 1 + len(h)] = torch.tensor(h, dtype=torch.long)
        r_ys[i, 1 : 1 + len(h)] = torch.tensor(h[::-1], dtype=torch.long)
    out = ref.decoder_logits(ys, enc).log_softmax(-1)
    r_out = ref.decoder_logits(r_ys, enc, reverse=True).log_softmax(-1) if reverse_weight > 0 else None
    best, best_score, totals = 0, -float("inf"), []
    for i, h in enumerate(hyps):
        score = sum(out[i][j][w] for j, w in enumerate(h)) + out[i][len(h)][eos]
        if r_out is not None:
            r_score = sum(r_out[i][len(h) - j - 1][w] for j, w in enumerate(h)) + r_out[i][len(h)][eos]
            score = score * (1 - reverse_weight) + r_score * reverse_weight
        score = score + nbest[i][1] * ctc_weight
        totals.append(float(score))
        if score > best_score:
            best, best_score = i, float(score)
    return best, totals


def wenet_attention_beam(ref: Reference, enc, sos, eos, beam: int) -> list[int]:
    """WeNet's attention_beam_search on the ESPnet decoder (full prefix recomputed each step)."""
    n = beam
    hyps = torch.full((n, 1), sos, dtype=torch.long)
    scores = torch.tensor([0.0] + [-float("inf")] * (n - 1)).unsqueeze(1)
    end = torch.zeros_like(scores, dtype=torch.bool)
    for _ in range(1, enc.shape[1] + 1):
        if end.sum() == n:
            break
        logp = ref.decoder_logits(hyps, enc)[:, -1].log_softmax(-1)
        top_lp, top_ix = logp.topk(n)
        zero = torch.zeros_like(end)
        unfinished = torch.cat((zero, end.repeat([1, n - 1])), dim=1)
        finished = torch.cat((end, zero.repeat([1, n - 1])), dim=1)
        top_lp = top_lp.masked_fill(unfinished, -float("inf")).masked_fill(finished, 0)
        top_ix = top_ix.masked_fill(end.repeat([1, n]), eos)
        s = (scores + top_lp).view(1, n * n)
        s, off = s.topk(n)
        scores = s.view(-1, 1)
        pred = top_ix.view(-1)[off.view(-1)]
        hyps = torch.cat((hyps[off.view(-1) // n], pred.view(-1, 1)), dim=1)
        end = torch.eq(hyps[:, -1], eos).view(-1, 1)
    best = int(scores.view(-1).argmax())
    h = hyps[best, 1:]
    return h[h != eos].tolist()
