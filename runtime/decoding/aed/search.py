"""Searches of the ``aed`` family, with WeNet's arithmetic (``wenet/.../search.py``).

- ``ctc_prefix_beam_search``: prefixes scored over all their alignments (blank- and
  label-ending parts), ``beam_size`` best labels per frame; each token keeps the frame of its
  Viterbi path's peak (its time). Gives the n-best, best first.
- ``attention_beam_search``: the decoder alone, ``beam_size`` prefixes from ``<sos>`` until
  every beam has emitted ``<eos>`` (at most one token per encoder frame).
- ``attention_rescoring``: the CTC n-best scored by the decoder (teacher-forced), plus
  ``reverse_weight`` of the right-to-left decoder's score and ``ctc_weight`` of the CTC score.
- ``ctc_forced_alignment``: the frames of a given token sequence on the CTC posteriors (word
  times of attention beam search).

Any model joins by offering, beside its CTC log-probabilities:
``decoder_log_probs(tokens [N, L] (sos first), encoded [1, T, C], reverse: bool) -> [N, L, V]``
(the log-probabilities of the token after each prefix; ``reverse`` reads a right-to-left decoder
fed ``sos`` + the reversed hypothesis), ``decoder_step(prefixes [N, i], encoded [1, T, C]) ->
[N, V]`` and ``has_reverse_decoder``. ``oasr.models.transformer_decoder`` implements both for
any Transformer decoder. Shapes: T frames, V labels, N hypotheses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

NEG_INF = -float("inf")


def log_add(a: float, b: float) -> float:
    if a == NEG_INF and b == NEG_INF:
        return NEG_INF
    m = a if a > b else b
    return m + math.log(math.exp(a - m) + math.exp(b - m))


@dataclass
class _Prefix:
    s: float = NEG_INF  # log p of the prefix, alignments ending in a blank
    ns: float = NEG_INF  # ... ending in its last label
    v_s: float = NEG_INF  # the best single alignment's log p, ending in a blank / a label
    v_ns: float = NEG_INF
    token_prob: float = NEG_INF  # the last token's frame log p on the best label-ending path
    times_s: list[int] = field(default_factory=list)  # the peak frames of that best path
    times_ns: list[int] = field(default_factory=list)

    def score(self) -> float:
        return log_add(self.s, self.ns)

    def viterbi(self) -> float:
        return self.v_s if self.v_s > self.v_ns else self.v_ns

    def times(self) -> list[int]:
        return self.times_s if self.v_s > self.v_ns else self.times_ns


@dataclass(frozen=True)
class Hypothesis:
    tokens: tuple[int, ...]
    score: float  # log p (CTC prefix score, or the rescoring total)
    times: tuple[int, ...]  # a frame per token


def ctc_prefix_beam_search(log_probs: Tensor, blank_id: int, beam_size: int) -> list[Hypothesis]:
    """log_probs [T, V] -> the n-best (at most ``beam_size``), best first."""
    n_frames = log_probs.shape[0]
    top = min(beam_size, log_probs.shape[1])
    top_lp, top_ids = log_probs.float().topk(top, dim=-1)
    top_lp, top_ids = top_lp.tolist(), top_ids.tolist()
    hyps: list[tuple[tuple[int, ...], _Prefix]] = [((), _Prefix(s=0.0, v_s=0.0, v_ns=0.0))]
    for t in range(n_frames):
        nxt: dict[tuple[int, ...], _Prefix] = {}

        def at(prefix):
            entry = nxt.get(prefix)
            if entry is None:
                entry = nxt[prefix] = _Prefix()
            return entry

        for u, p in zip(top_ids[t], top_lp[t]):
            for prefix, old in hyps:
                if u == blank_id:
                    new = at(prefix)
                    new.s = log_add(new.s, old.score() + p)
                    new.v_s = old.viterbi() + p
                    new.times_s = list(old.times())
                elif prefix and u == prefix[-1]:
                    same = at(prefix)  # the label repeated without a blank: the same prefix
                    same.ns = log_add(same.ns, old.ns + p)
                    if same.v_ns < old.v_ns + p:
                        same.v_ns = old.v_ns + p
                        if same.token_prob < p:
                            same.token_prob = p
                            same.times_ns = list(old.times_ns)
                            same.times_ns[-1] = t
                    longer = at(prefix + (u,))  # after a blank: a second label
                    longer.ns = log_add(longer.ns, old.s + p)
                    if longer.v_ns < old.v_s + p:
                        longer.v_ns = old.v_s + p
                        longer.token_prob = p
                        longer.times_ns = old.times_s + [t]
                else:
                    longer = at(prefix + (u,))
                    longer.ns = log_add(longer.ns, old.score() + p)
                    if longer.v_ns < old.viterbi() + p:
                        longer.v_ns = old.viterbi() + p
                        longer.token_prob = p
                        longer.times_ns = old.times() + [t]
        hyps = sorted(nxt.items(), key=lambda kv: kv[1].score(), reverse=True)[:beam_size]
    return [Hypothesis(prefix, entry.score(), tuple(entry.times())) for prefix, entry in hyps]


def _padded(hyps: list[tuple[int, ...]], first: int, pad: int, device) -> Tensor:
    """[N, 1 + longest]: ``first`` then each hypothesis, padded with ``pad``."""
    width = 1 + max((len(h) for h in hyps), default=0)
    out = torch.full((len(hyps), width), pad, dtype=torch.long, device=device)
    out[:, 0] = first
    for i, h in enumerate(hyps):
        if h:
            out[i, 1 : 1 + len(h)] = torch.tensor(h, dtype=torch.long)
    return out


@dataclass(frozen=True)
class Rescored:
    index: int  # the chosen hypothesis in the n-best
    scores: tuple[float, ...]  # every hypothesis' total
    token_probs: tuple[float, ...]  # the chosen one's per-token decoder probabilities


def attention_rescoring(
    model, encoded: Tensor, nbest: list[Hypothesis], sos: int, eos: int, ctc_weight: float = 0.0, reverse_weight: float = 0.0
) -> Rescored:
    """One utterance's encoded [1, T, C] and its CTC n-best -> the best by the decoder's score."""
    hyps = [h.tokens for h in nbest]
    forward = model.decoder_log_probs(_padded(hyps, sos, eos, encoded.device), encoded).cpu()
    backward = None
    if reverse_weight > 0 and model.has_reverse_decoder:
        backward = model.decoder_log_probs(_padded([h[::-1] for h in hyps], sos, eos, encoded.device), encoded, reverse=True).cpu()
    totals, probs = [], []
    best, best_score = 0, NEG_INF
    for i, (hyp, h) in enumerate(zip(hyps, nbest)):
        n = len(hyp)
        ids = torch.tensor(hyp + (eos,), dtype=torch.long)
        steps = forward[i, torch.arange(n + 1), ids]
        score = float(steps.sum())
        tc = steps[:n].exp()
        if backward is not None:
            r_steps = backward[i, torch.arange(n + 1), torch.tensor(hyp[::-1] + (eos,), dtype=torch.long)]
            score = score * (1 - reverse_weight) + float(r_steps.sum()) * reverse_weight
            tc = (tc + r_steps[:n].flip(0).exp()) / 2
        score += h.score * ctc_weight
        totals.append(score)
        probs.append(tuple(tc.tolist()))
        if score > best_score:
            best, best_score = i, score
    return Rescored(best, tuple(totals), probs[best] if probs else ())


def attention_beam_search(model, encoded: Tensor, sos: int, eos: int, beam_size: int, length_penalty: float = 0.0) -> list[int]:
    """One utterance's encoded [1, T, C] -> the decoder's best token sequence (no sos / eos)."""
    device = encoded.device
    n = beam_size
    hyps = torch.full((n, 1), sos, dtype=torch.long, device=device)
    scores = torch.tensor([0.0] + [NEG_INF] * (n - 1), device=device)[:, None]  # [N, 1]
    ended = torch.zeros(n, 1, dtype=torch.bool, device=device)
    for _ in range(encoded.shape[1]):
        if bool(ended.all()):
            break
        logp = model.decoder_step(hyps, encoded)  # [N, V]
        top_lp, top_ids = logp.topk(n, dim=-1)
        # a finished beam extends only by eos at no cost
        done_cols = torch.zeros(n, n, dtype=torch.bool, device=device)
        done_cols[:, 1:] = ended
        top_lp = top_lp.masked_fill(done_cols, NEG_INF).masked_fill(ended & ~done_cols, 0.0)
        top_ids = top_ids.masked_fill(ended.expand(n, n), eos)
        flat, index = (scores + top_lp).view(-1).topk(n)
        scores = flat[:, None]
        hyps = torch.cat([hyps[index // n], top_ids.view(-1)[index][:, None]], dim=1)
        ended = (hyps[:, -1] == eos)[:, None]
    lengths = hyps.ne(eos).sum(dim=1).float()
    best = int((scores[:, 0] / lengths.pow(length_penalty)).argmax())
    tokens = hyps[best, 1:]
    return tokens[tokens != eos].tolist()


def ctc_forced_alignment(log_probs: Tensor, tokens: list[int], blank_id: int) -> list[tuple[int, int]]:
    """The Viterbi path of ``tokens`` on log_probs [T, V]: each token's (first, last) frame.
    Tokens the frames cannot hold (more labels than frames) are spread one frame each."""
    t_len, n = log_probs.shape[0], len(tokens)
    if n == 0:
        return []
    labels = [blank_id]
    for tok in tokens:
        labels += [tok, blank_id]
    states = len(labels)
    lp = log_probs.float()[:, labels]  # [T, S]
    label_t = torch.tensor(labels)
    # a label state may skip the blank before it unless it repeats the label two states back
    skip = torch.zeros(states, dtype=torch.bool)
    skip[2:] = (label_t[2:] != blank_id) & (label_t[2:] != label_t[:-2])
    score = torch.full((states,), NEG_INF)
    score[0] = lp[0, 0]
    if states > 1:
        score[1] = lp[0, 1]
    back = torch.zeros(t_len, states, dtype=torch.long)
    for t in range(1, t_len):
        stay = score
        step = torch.cat([score.new_full((1,), NEG_INF), score[:-1]])
        jump = torch.cat([score.new_full((2,), NEG_INF), score[:-2]]).masked_fill(~skip, NEG_INF)
        stacked = torch.stack([stay, step, jump])
        best, arg = stacked.max(dim=0)
        back[t] = arg
        score = best + lp[t]
    end = states - 1 if states == 1 or score[-1] >= score[-2] else states - 2
    if score[end] == NEG_INF:
        return [(min(i, t_len - 1), min(i, t_len - 1)) for i in range(n)]
    path = [end]
    for t in range(t_len - 1, 0, -1):
        path.append(path[-1] - int(back[t, path[-1]]))
    path.reverse()
    spans: list[list[int]] = [[-1, -1] for _ in range(n)]
    for t, s in enumerate(path):
        if s % 2 == 1:
            k = s // 2
            if spans[k][0] < 0:
                spans[k][0] = t
            spans[k][1] = t
    return [(a, b) for a, b in spans]
