"""icefall's modified beam search for stateless transducers (``modified_beam_search``), apart from the network.

At most one label per frame: on each frame every hypothesis is extended by each label (the blank
keeps it as it is), scored by the joint's log-softmax added to its score, and the ``beam_size``
best (hypothesis, label) pairs over all of a row's hypotheses go on; pairs that reach the same
label sequence are merged (their probabilities summed). The winner has the best score per
context-and-label count (icefall's ``length_norm``). Rows advance together, one batched decoder
and joiner call per frame over every live hypothesis.

The model supplies ``project_encoder``, ``decode_context(context [N, K]) -> [N, J]`` and
``joint_logits``; ``context_size`` K is the decoder's label context. Shapes: B batch, T frames,
J joiner width, V labels with the blank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .search import TransducerHypothesis, TransducerToken


@dataclass
class _Hyp:
    ys: tuple[int, ...]  # the start context (-1 ..., blank), then the labels
    score: Tensor  # float32 scalar, as icefall keeps it (the ranks then tie as icefall's do)
    frames: tuple[int, ...]
    probs: tuple[float, ...]


@torch.no_grad()
def modified_beam_search(
    model, encoded: Tensor, lengths: Tensor, *, blank_id: int, beam_size: int, context_size: int
) -> list[TransducerHypothesis]:
    """encoded [B, T, C], lengths [B] -> each row's best hypothesis."""
    f_all = model.project_encoder(encoded)
    b = f_all.shape[0]
    device = f_all.device
    lengths = lengths.tolist()
    start = (-1,) * (context_size - 1) + (blank_id,)
    beams: list[dict[tuple[int, ...], _Hyp]] = [
        {start: _Hyp(start, torch.zeros((), dtype=torch.float32), (), ())} for _ in range(b)
    ]
    for t in range(max(lengths, default=0)):
        live = [r for r in range(b) if lengths[r] > t]
        hyps = [list(beams[r].values()) for r in live]
        flat = [h for row in hyps for h in row]
        context = torch.tensor([h.ys[-context_size:] for h in flat], dtype=torch.long, device=device)
        rows = torch.tensor([r for r, row in zip(live, hyps) for _ in row], device=device)
        logp = model.joint_logits(f_all[rows, t], model.decode_context(context)).float().log_softmax(-1).cpu()
        total = logp + torch.stack([h.score for h in flat])[:, None]
        vocab = total.shape[-1]
        first = 0
        for r, row in zip(live, hyps):
            segment = total[first : first + len(row)].reshape(-1)
            values, indices = segment.topk(min(beam_size, segment.numel()))
            nxt: dict[tuple[int, ...], _Hyp] = {}
            for value, index in zip(values, indices.tolist()):
                h, label = row[index // vocab], index % vocab
                if label == blank_id:
                    new = _Hyp(h.ys, value, h.frames, h.probs)
                else:
                    p = math.exp(float(logp[first + index // vocab, label]))
                    new = _Hyp(h.ys + (label,), value, h.frames + (t,), h.probs + (p,))
                old = nxt.get(new.ys)
                if old is None:
                    nxt[new.ys] = new
                else:
                    old.score = torch.logaddexp(old.score, new.score)
            beams[r] = nxt
            first += len(row)
    out = []
    for r in range(b):
        best = max(beams[r].values(), key=lambda h: h.score / len(h.ys))
        labels = best.ys[context_size:]
        tokens = [TransducerToken(k, f, 1, p) for k, f, p in zip(labels, best.frames, best.probs)]
        out.append(TransducerHypothesis(tokens, float(best.score)))
    return out
