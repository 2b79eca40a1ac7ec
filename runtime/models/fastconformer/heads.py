"""FastConformer heads under NeMo's names: CTC (``ConvASRDecoder``), the RNN-T prediction
network (``RNNTDecoder``) and the joint network (``RNNTJoint``, with TDT duration logits).

Shapes: B batch, T frames, C encoder width, P prediction width, J joint width, V labels with
the blank (the blank is the last label), K durations.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import FastConformerConfig
from .encoder import PointwiseConv1d

ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu, "swish": F.silu}


class ConvASRDecoder(nn.Module):
    """A 1x1 convolution from encoder frames to label logits (run as a linear layer on [B, T, C])."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        self.decoder_layers = nn.Sequential(PointwiseConv1d(cfg.d_model, cfg.vocab_size + 1))

    def forward(self, encoded: Tensor) -> Tensor:
        """encoded [B, T, C] -> logits [B, T, V]."""
        return self.decoder_layers(encoded)


class _Prediction(nn.Module):
    """NeMo's ``decoder.prediction`` dict: ``embed`` and ``dec_rnn.lstm``."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size + 1, cfg.pred_hidden)
        self.dec_rnn = nn.Module()
        self.dec_rnn.lstm = nn.LSTM(cfg.pred_hidden, cfg.pred_hidden, cfg.pred_rnn_layers, batch_first=True)


class PredictionNetwork(nn.Module):
    """Embedding + LSTM over the labels emitted so far; the blank starts every sequence.

    The blank's embedding row is used as the start input: NeMo keeps that row at zero
    (``blank_as_pad``), which is NeMo's zero start input; transformers uses the row as stored.
    """

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        self.prediction = _Prediction(cfg)

    def forward(self, labels: Tensor, state: tuple[Tensor, Tensor] | None = None):
        """labels [B, U] -> outputs [B, U, P], (h, c) each [layers, B, P]."""
        x = self.prediction.embed(labels)
        if labels.shape[1] == 1 and not self.training:
            return self._step(x[:, 0], state)
        return self.prediction.dec_rnn.lstm(x, state)

    def _step(self, x: Tensor, state: tuple[Tensor, Tensor] | None):
        """One LSTM step as plain GEMMs. ``torch.lstm`` on a CPU goes through oneDNN, which spent
        about 10 ms per single step of a 2 x 640 LSTM against 2.3 ms for these products (the
        same gates; results within 1e-7): the step runs once per emitted label."""
        lstm = self.prediction.dec_rnn.lstm
        if state is None:
            zeros = x.new_zeros(lstm.num_layers, x.shape[0], lstm.hidden_size)
            state = (zeros, zeros)
        hs, cs = [], []
        for layer in range(lstm.num_layers):
            gates = F.linear(x, getattr(lstm, f"weight_ih_l{layer}"), getattr(lstm, f"bias_ih_l{layer}"))
            gates = gates + F.linear(state[0][layer], getattr(lstm, f"weight_hh_l{layer}"), getattr(lstm, f"bias_hh_l{layer}"))
            i, f, g, o = gates.chunk(4, dim=-1)
            c = torch.sigmoid(f) * state[1][layer] + torch.sigmoid(i) * torch.tanh(g)
            x = torch.sigmoid(o) * torch.tanh(c)
            hs.append(x)
            cs.append(c)
        return x[:, None], (torch.stack(hs), torch.stack(cs))


class JointNetwork(nn.Module):
    """logits = W act(enc(f) + pred(g)) + b; a TDT joint appends K duration logits."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        self.enc = nn.Linear(cfg.d_model, cfg.joint_hidden)
        self.pred = nn.Linear(cfg.pred_hidden, cfg.joint_hidden)
        self.activation = ACTIVATIONS[cfg.joint_activation]
        self.joint_net = nn.Sequential(nn.Identity(), nn.Identity(), nn.Linear(cfg.joint_hidden, cfg.vocab_size + 1 + len(cfg.durations)))

    def forward(self, enc_proj: Tensor, pred_proj: Tensor) -> Tensor:
        """Projected encoder and prediction vectors (broadcastable, [..., J]) -> [..., V + K]."""
        return self.joint_net[2](self.activation(enc_proj + pred_proj))
