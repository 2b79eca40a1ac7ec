"""The CIF predictor (Dong and Xu 2020, as Paraformer uses it): a weight per encoder frame,
integrated until it reaches the threshold, when a token fires; its acoustic embedding is the
weighted sum of the frames it integrated.

``CifPredictorV2`` (paraformer-large, -zh, -en): a full conv over ``left + 1 + right`` frames and a
ReLU; the fires come from prefix sums (the fractional part of the running sum, plus 1 where
its integer part steps). ``CifPredictor``: a depthwise conv with a residual, integrated frame by
frame. At inference FunASR adds ``tail_threshold`` of weight one frame after each utterance's end
(over a zero frame) so that a last, partly integrated token fires, and takes the floor of the
summed weights as the token count. Shapes: B batch, T frames, C channels, N tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ParaformerConfig


@dataclass
class CifOutput:
    embeds: Tensor  # [B, N, C] acoustic embeddings, zero past each count
    token_num: Tensor  # [B] the summed weights (floored when a tail is added)
    alphas: Tensor  # [B, T (+1 with a tail)] the weights
    fires: Tensor  # [B, T (+1)] the integration state per frame (timestamps are read from it)


class CifPredictor(nn.Module):
    def __init__(self, config: ParaformerConfig):
        super().__init__()
        self.config = config
        self.v2 = config.predictor == "CifPredictorV2"
        kernel = config.predictor_left + config.predictor_right + 1
        size = config.d_model
        self.cif_conv1d = nn.Conv1d(size, size, kernel, groups=1 if self.v2 else size)
        self.cif_output = nn.Linear(size, 1)

    def weights(self, hidden: Tensor, mask: Tensor) -> Tensor:
        """hidden [B, T, C], mask [B, T] (1.0 on real frames) -> alphas [B, T]."""
        c = self.config
        context = hidden.to(self.cif_output.weight.dtype).transpose(1, 2)  # the layers' dtype (a model loaded in bf16)
        out = self.cif_conv1d(F.pad(context, (c.predictor_left, c.predictor_right)))
        out = torch.relu(out if self.v2 else out + context).transpose(1, 2)
        alphas = torch.sigmoid(self.cif_output(out).float())
        alphas = torch.relu(alphas * c.smooth_factor - c.noise_threshold)
        return alphas.squeeze(-1) * mask

    def forward(self, hidden: Tensor, lengths: Tensor) -> CifOutput:
        c = self.config
        hidden = hidden.float()
        mask = (torch.arange(hidden.shape[1], device=hidden.device)[None, :] < lengths[:, None]).float()
        alphas = self.weights(hidden, mask)
        token_num = alphas.sum(-1)
        if c.tail_threshold > 0.0:
            hidden, alphas, token_num = self._tail(hidden, alphas, mask)
        if self.v2:
            embeds, fires = cif_prefix_sums(hidden, alphas)
        else:
            embeds, fires = cif_loop(hidden, alphas, c.cif_threshold)
        if c.tail_threshold > 0.0:
            embeds = embeds[:, : int(token_num.max().int())]
        return CifOutput(embeds, token_num, alphas, fires)

    def _tail(self, hidden: Tensor, alphas: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One more (zero) frame, weighing ``tail_threshold``: just after each utterance's last
        frame (``tail_mask``, and always for the first predictor), else after the padded end."""
        b = hidden.shape[0]
        zero = alphas.new_zeros(b, 1)
        if self.config.tail_mask or not self.v2:
            end = torch.cat([zero + 1.0, mask], dim=1) - torch.cat([mask, zero], dim=1)  # 1 just past each length
            alphas = torch.cat([alphas, zero], dim=1) + end * self.config.tail_threshold
        else:
            alphas = torch.cat([alphas, zero + self.config.tail_threshold], dim=1)
        hidden = torch.cat([hidden, hidden.new_zeros(b, 1, hidden.shape[-1])], dim=1)
        return hidden, alphas, torch.floor(alphas.sum(-1))


def cif_prefix_sums(hidden: Tensor, alphas: Tensor) -> tuple[Tensor, Tensor]:
    """FunASR's ``cif_v1`` (threshold 1): a token fires on each frame where the running sum of
    weights crosses an integer. Its embedding is the weighted frames since the previous fire:
    the prefix sums' difference, moved by the fractional parts left over at both fires.
    -> embeddings [B, round(sum).max(), C], fires [B, T]."""
    b, t, size = hidden.shape
    running = torch.cumsum(alphas, dim=1, dtype=torch.float64).float()  # float64: long sums stay exact
    whole = torch.floor(running)
    before = torch.cat([whole.new_zeros(b, 1), whole[:, :-1]], dim=1)
    fired = (whole - before) > 0
    fires = fired.to(alphas.dtype) + running - whole
    width = int(torch.round(alphas.sum(-1)).int().max())
    embeds = hidden.new_zeros(b, width, size)
    weighted = torch.cumsum(alphas.unsqueeze(-1) * hidden, dim=1)
    left = fires - torch.floor(fires)  # the weight carried past a fire into the next token
    for i in range(b):
        at = fired[i].nonzero().squeeze(-1)
        if at.numel() == 0:
            continue
        totals = weighted[i, at]
        carried = left[i, at].unsqueeze(-1) * hidden[i, at]
        frames = totals - carried
        frames[1:] = frames[1:] - totals[:-1] + carried[:-1]
        n = min(at.numel(), width)
        embeds[i, :n] = frames[:n]
    return embeds, fires


def cif_loop(hidden: Tensor, alphas: Tensor, threshold: float) -> tuple[Tensor, Tensor]:
    """FunASR's ``cif``: integrate frame by frame; on a fire the frame's weight is split between
    the token it completes and the next. -> embeddings [B, round(sum).max(), C], fires [B, T]."""
    b, t, size = hidden.shape
    integrate = alphas.new_zeros(b)
    frame = hidden.new_zeros(b, size)
    fires, frames = [], []
    for k in range(t):
        alpha = alphas[:, k]
        completion = 1.0 - integrate
        integrate = integrate + alpha
        fires.append(integrate)
        fire = integrate >= threshold
        integrate = torch.where(fire, integrate - 1.0, integrate)
        used = torch.where(fire, completion, alpha)
        frame = frame + used[:, None] * hidden[:, k]
        frames.append(frame)
        frame = torch.where(fire[:, None], (alpha - used)[:, None] * hidden[:, k], frame)
    fires_t, frames_t = torch.stack(fires, 1), torch.stack(frames, 1)
    width = int(torch.round(alphas.sum(-1)).int().max())
    embeds = hidden.new_zeros(b, width, size)
    for i in range(b):
        picked = frames_t[i, fires_t[i] >= threshold][:width]
        embeds[i, : picked.shape[0]] = picked
    return embeds, fires_t
