"""Whisper's logit filters, batched: suppressed tokens, a blank start and the timestamp rules.

openai-whisper re-scans every hypothesis's tokens at every step; here the masks that never change
are boolean tensors built once, and the timestamp rules read a small per-row state
(``TimestampState``) that is updated, and reordered with the beams, one step at a time.
Shapes: N rows (beams or samples), V vocabulary.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

_NEG_INF = float("-inf")


def _mask(n_vocab: int, ids: Sequence[int], device: torch.device) -> Tensor:
    mask = torch.zeros(n_vocab, dtype=torch.bool, device=device)
    ids = [i for i in ids if 0 <= i < n_vocab]
    if ids:
        mask[torch.tensor(ids, dtype=torch.long, device=device)] = True
    return mask


class TimestampState:
    """What the timestamp rules need to know of each row's sampled tokens, kept as [N] tensors.

    ``last_ts``/``prev_ts``: whether the last / second-to-last sampled token is a timestamp;
    ``max_ts``: the largest timestamp token sampled so far (timestamps never decrease, so it is
    also the last one), or ``timestamp_begin - 1`` when there is none.
    """

    def __init__(self, rows: int, timestamp_begin: int, device: torch.device):
        self.timestamp_begin = timestamp_begin
        self.count = 0  # tokens sampled so far, the same for every row
        self.last_ts = torch.zeros(rows, dtype=torch.bool, device=device)
        self.prev_ts = torch.zeros(rows, dtype=torch.bool, device=device)
        self.max_ts = torch.full((rows,), timestamp_begin - 1, dtype=torch.long, device=device)

    def update(self, tokens: Tensor, source: Tensor | None = None) -> None:
        """Append ``tokens`` [N] to the rows ``source`` [N] (None: row i continues row i)."""
        if source is not None:
            self.last_ts, self.max_ts = self.last_ts[source], self.max_ts[source]
        is_ts = tokens >= self.timestamp_begin
        self.prev_ts = self.last_ts
        self.last_ts = is_ts
        self.max_ts = torch.where(is_ts, torch.maximum(self.max_ts, tokens), self.max_ts)
        self.count += 1


class WhisperLogitFilter:
    """Every rule openai-whisper applies to the next-token logits, in its order, in place.

    - suppressed tokens (``suppress``), always;
    - a blank start (``begin``: a leading space and end-of-text), at the first step only;
    - with timestamps (ApplyTimestampRules): no ``<|notimestamps|>``; timestamps come in pairs
      except right before end-of-text; they never decrease and a segment has nonzero length;
      the first token is a timestamp no later than ``max_initial_index``; and when the
      timestamps together are more probable than any single text token, a timestamp is forced.
    """

    def __init__(
        self,
        n_vocab: int,
        *,
        eot: int,
        suppress: Sequence[int],
        begin: Sequence[int] = (),
        timestamp_begin: int | None = None,
        no_timestamps: int | None = None,
        max_initial_index: int | None = None,
        device: torch.device | str = "cpu",
    ):
        device = torch.device(device)
        self.eot = eot
        self.timestamp_begin = timestamp_begin
        self.timestamps = timestamp_begin is not None
        always = list(suppress)
        if self.timestamps and no_timestamps is not None:
            always.append(no_timestamps)
        self.always = _mask(n_vocab, always, device)
        first = self.always | _mask(n_vocab, begin, device)
        if self.timestamps:
            first[:timestamp_begin] = True  # the first token is a timestamp
            if max_initial_index is not None:
                first[timestamp_begin + max_initial_index + 1 :] = True
            # [1, n_timestamps] positions, for the monotonicity rule
            self.ts_index = torch.arange(timestamp_begin, n_vocab, device=device)[None, :]
        self.first = first

    def new_state(self, rows: int, device: torch.device) -> TimestampState:
        """Per-row state for ``apply``: counts the steps (timestamps or not) and tracks timestamps."""
        return TimestampState(rows, self.timestamp_begin if self.timestamps else 1 << 62, device)

    def apply(self, logits: Tensor, state: TimestampState) -> Tensor:
        """Filter ``logits`` [N, V] (fp32) in place for the next token and return them."""
        if state.count == 0:
            return logits.masked_fill_(self.first, _NEG_INF)
        logits.masked_fill_(self.always, _NEG_INF)
        if not self.timestamps:
            return logits
        tb = self.timestamp_begin
        last = state.last_ts
        prev = state.prev_ts if state.count >= 2 else torch.ones_like(last)
        text, times = logits[:, : self.eot], logits[:, tb:]
        # A timestamp after a pair (or at the start) must be followed by text or end-of-text;
        # a lone timestamp closes a segment: the next token is a timestamp or end-of-text.
        times.masked_fill_((last & prev)[:, None], _NEG_INF)
        text.masked_fill_((last & ~prev)[:, None], _NEG_INF)
        # No timestamp before the last one; a new segment must not start where the last ended.
        floor = torch.where(last & ~prev, state.max_ts, state.max_ts + 1)
        times.masked_fill_(self.ts_index < floor[:, None], _NEG_INF)
        # When the timestamps together outweigh every text token, sample a timestamp.
        logprobs = logits.log_softmax(dim=-1)
        timestamp_logprob = logprobs[:, tb:].logsumexp(dim=-1)
        max_text_logprob = logprobs[:, :tb].amax(dim=-1)
        logits[:, :tb].masked_fill_((timestamp_logprob > max_text_logprob)[:, None], _NEG_INF)
        return logits
