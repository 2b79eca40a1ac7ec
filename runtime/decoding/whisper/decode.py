"""Decoding one 30-second Whisper window: greedy, beam search, and best-of-N sampling.

The algorithm is openai-whisper's ``DecodingTask`` (same filters, ranking and scores); the work
is organised for speed:

- the prompt (previous text, start-of-transcript sequence) runs once per window, and is shared
  by every temperature a window falls back to;
- a batch of windows (``decode_batch``, batched long-form) decodes together: every beam or
  sample of every window is one row of one decoder call per step; the cross-attention keys stay
  one row per window (the rows of a window read the same audio), the self-attention keys follow
  the beams through ``WhisperKVCache.reorder`` and a window that is done leaves the batch;
- suppression masks are built once per decoder; each step makes one decoder call, one
  log-softmax and one device-to-host transfer of a few candidates per window.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from ...models.whisper import Whisper, WhisperKVCache
from ...tokenizers.whisper import TIME_PRECISION, WhisperTokenizer
from .filters import WhisperLogitFilter


def _place(parent_rows: list[int], rows: int) -> list[int]:
    """Rows for the kept beams (their parents' rows given): a beam stays in its parent's row when
    it is that parent's first child; the others take the rows that no kept beam continues."""
    placed, taken = [], set()
    for row in parent_rows:
        placed.append(-1 if row in taken else row)
        taken.add(row)
    free = (row for row in range(rows) if row not in taken)
    return [row if row >= 0 else next(free) for row in placed]


def compression_ratio(text: str) -> float:
    """gzip compression ratio of ``text``: above ~2.4 the text is repetitive (a failed window)."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


@dataclass(frozen=True)
class WindowResult:
    tokens: tuple[int, ...]  # sampled text and timestamp tokens, end-of-text left out
    text: str
    sum_logprob: float
    avg_logprob: float  # sum_logprob / (tokens + 1): the end-of-text token counts
    no_speech_prob: float  # probability of <|nospeech|> at the first step after the SOT sequence
    temperature: float
    compression_ratio: float


@dataclass
class Prompted:
    """W windows after their prompt ran: shared by every decode of them (fallbacks)."""

    audio_features: Tensor  # [W, Ta, C]
    length: int  # prompt tokens
    self_kv: dict  # the prompt's self-attention keys/values [W, H, length, D] per block
    cross_kv: dict  # the audio's cross-attention keys/values [W, H, Ta, D] per block
    first_logits: Tensor  # [W, V] fp32: the next-token logits after the prompt
    no_speech_prob: float  # the first window's
    no_speech_probs: tuple[float, ...] = ()  # every window's

    @property
    def windows(self) -> int:
        return self.first_logits.shape[0]

    def cache(self, steps: int = 0, once: bool = False) -> WhisperKVCache:
        """A fresh cache holding the prompt (copied: the prompt's keys are never written) with
        room for ``steps`` more positions. ``once``: these windows are decoded this one time, so
        the cache takes over their cross-attention keys and values, and windows leaving the batch
        free theirs (this Prompted is used up)."""
        return WhisperKVCache.holding(self.self_kv, self.cross_kv, capacity=self.length + steps, take=once)


class WhisperDecoder:
    """Decodes windows of one model with fixed options; build it once per transcription."""

    def __init__(
        self,
        model: Whisper,
        tokenizer: WhisperTokenizer,
        *,
        beam_size: int = 5,
        best_of: int = 5,
        patience: float = 1.0,
        length_penalty: float | None = None,
        suppress_tokens: Sequence[int] = (-1,),
        suppress_blank: bool = True,
        without_timestamps: bool = False,
        max_initial_timestamp: float | None = 1.0,
        sample_len: int | None = None,
        generator: torch.Generator | None = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.beam_size = beam_size
        self.best_of = best_of
        self.max_candidates = max(1, round(beam_size * patience))
        self.length_penalty = length_penalty
        self.without_timestamps = without_timestamps
        self.n_ctx = model.config.n_text_ctx
        self.sample_len = sample_len or self.n_ctx // 2
        self.generator = generator
        self.device = next(model.parameters()).device
        max_initial_index = None
        if max_initial_timestamp:
            max_initial_index = round(max_initial_timestamp / TIME_PRECISION)
        self.filter = WhisperLogitFilter(
            model.config.n_vocab,
            eot=tokenizer.eot,
            suppress=tokenizer.suppressed_tokens(suppress_tokens) if suppress_tokens else (),
            begin=tokenizer.blank_tokens() if suppress_blank else (),
            timestamp_begin=None if without_timestamps else tokenizer.timestamp_begin,
            no_timestamps=tokenizer.no_timestamps,
            max_initial_index=max_initial_index,
            device=self.device,
        )

    # -- the prompt ---------------------------------------------------------------------------

    def initial_tokens(self, language: str | None, task: str, previous: Sequence[int] = ()) -> tuple[list[int], int]:
        """``[<|startofprev|> previous...] SOT-sequence`` (at most the last 223 previous tokens)
        and the index of <|startoftranscript|> in it."""
        tok = self.tokenizer
        tokens: list[int] = []
        if previous:
            tokens = [tok.sot_prev, *list(previous)[-(self.n_ctx // 2 - 1) :]]
        sot_index = len(tokens)
        tokens += tok.sot_sequence(language, task, timestamps=not self.without_timestamps)
        return tokens, sot_index

    @torch.inference_mode()
    def prompt(self, audio_features: Tensor, tokens: Sequence[int], sot_index: int, cross_kv: dict | None = None) -> Prompted:
        """Run ``tokens`` through the decoder for every window of ``audio_features`` [W, Ta, C]
        (the same prompt for each). ``cross_kv``: the windows' cross-attention keys and values,
        already projected (``Whisper.cross_kv``); the dict is taken over."""
        cache = WhisperKVCache.holding({}, cross_kv or {}, take=True)
        w = audio_features.shape[0]
        x = torch.tensor([list(tokens)], dtype=torch.long, device=self.device).expand(w, -1)
        logits = self.model.logits(x, audio_features, cache)
        no_speech = logits[:, sot_index].softmax(dim=-1)[:, self.tokenizer.no_speech].tolist()
        n = len(tokens)
        return Prompted(
            audio_features=audio_features,
            length=n,
            self_kv={i: (k[:, :, :n], v[:, :, :n]) for i, (k, v) in cache.self_kv.items()},
            cross_kv=cache.cross_kv,
            first_logits=logits[:, -1].float().clone(),  # not a view: the prompt's logits can go
            no_speech_prob=no_speech[0],
            no_speech_probs=tuple(no_speech),
        )

    # -- decoding -----------------------------------------------------------------------------

    def _max_steps(self, prompted: Prompted) -> int:
        return min(self.sample_len, self.n_ctx - prompted.length + 1)

    @torch.inference_mode()
    def decode(self, prompted: Prompted, temperature: float = 0.0) -> WindowResult:
        """The best sequence of the (first) window at ``temperature``: beam search at 0 (greedy
        with beam_size 1), the most likely of ``best_of`` samples above 0."""
        max_steps = self._max_steps(prompted)
        if temperature == 0 and self.beam_size > 1:
            candidates = self._beam_search(prompted, max_steps)
        else:
            rows = 1 if temperature == 0 else self.best_of
            candidates = self._sample(prompted, max_steps, rows, temperature)[0]
        return self._result(candidates, prompted.no_speech_prob, temperature)

    @torch.inference_mode()
    def decode_batch(self, prompted: Prompted, temperature: float = 0.0) -> list[WindowResult]:
        """``decode`` for every window of ``prompted``, decoded together; the same result per
        window as decoding it alone (up to the rounding of batched matrix products). ``prompted``
        is used up: a window's cross-attention keys and values go once it leaves the batch."""
        max_steps = self._max_steps(prompted)
        if temperature == 0 and self.beam_size > 1:
            per_window = self._beam_search_windows(prompted, max_steps, once=True)
        else:
            rows = 1 if temperature == 0 else self.best_of
            per_window = self._sample(prompted, max_steps, rows, temperature, once=True)
        no_speech = prompted.no_speech_probs or (prompted.no_speech_prob,)
        return [self._result(c, p, temperature) for c, p in zip(per_window, no_speech)]

    def _result(self, candidates: list[tuple[list[int], float]], no_speech_prob: float, temperature: float) -> WindowResult:
        tokens, sum_logprob = max(candidates, key=self._rank_score)
        text = self.tokenizer.decode(tokens)
        return WindowResult(
            tokens=tuple(tokens),
            text=text,
            sum_logprob=sum_logprob,
            avg_logprob=sum_logprob / (len(tokens) + 1),
            no_speech_prob=no_speech_prob,
            temperature=temperature,
            compression_ratio=compression_ratio(text.strip()),
        )

    def _rank_score(self, candidate: tuple[list[int], float]) -> float:
        """openai's MaximumLikelihoodRanker: sum logprob over length, or Google NMT's penalty."""
        tokens, sum_logprob = candidate
        length = len(tokens)
        penalty = length if self.length_penalty is None else ((5 + length) / 6) ** self.length_penalty
        return sum_logprob / penalty if penalty else sum_logprob

    def _step(self, tokens: Tensor, prompted: Prompted, cache: WhisperKVCache) -> Tensor:
        return self.model.logits(tokens[:, None], prompted.audio_features, cache)[:, -1].float()

    def _sample(self, prompted: Prompted, max_steps: int, per_window: int, temperature: float, once: bool = False):
        """Greedy (one row per window at temperature 0) or ``per_window`` independent samples of
        each window; the candidates of each window."""
        eot, w = self.tokenizer.eot, prompted.windows
        rows = w * per_window
        cache = prompted.cache(max_steps, once)
        state = self.filter.new_state(w, self.device)
        logits = self.filter.apply(prompted.first_logits.clone(), state)
        spread = None  # the first step: each window's prompt row becomes ``per_window`` rows
        if per_window > 1:
            spread = torch.arange(w, device=self.device).repeat_interleave(per_window)
            logits = logits[spread]
            cache.reorder(spread)
        out = torch.full((rows, max_steps), eot, dtype=torch.long, device=self.device)
        sum_logprobs = torch.zeros(rows, device=self.device)
        finished = torch.zeros(rows, dtype=torch.bool, device=self.device)
        for step in range(max_steps):
            if step > 0:
                logits = self.filter.apply(self._step(tokens, prompted, cache), state)
            if temperature == 0:
                tokens = logits.argmax(dim=-1)
            else:
                tokens = self._draw(logits, temperature)
            logprobs = logits.log_softmax(dim=-1).gather(1, tokens[:, None])[:, 0]
            sum_logprobs += logprobs.masked_fill(finished, 0.0)
            tokens = tokens.masked_fill(finished, eot)
            out[:, step] = tokens
            finished |= tokens == eot
            if bool(finished.all()):
                break
            state.update(tokens, spread if step == 0 else None)
        candidates = []
        for seq, score in zip(out.tolist(), sum_logprobs.tolist()):
            candidates.append((seq[: seq.index(eot)] if eot in seq else seq, score))
        return [candidates[i : i + per_window] for i in range(0, rows, per_window)]

    def _draw(self, logits: Tensor, temperature: float) -> Tensor:
        """One token per row from softmax(logits / temperature), by inverting the cumulative
        distribution (as torch.multinomial samples, 30x faster over a Whisper vocabulary)."""
        cdf = (logits / temperature).softmax(dim=-1).cumsum(dim=-1)
        u = torch.rand(cdf.shape[0], 1, device=cdf.device, generator=self.generator) * cdf[:, -1:]
        return torch.searchsorted(cdf, u, right=True)[:, 0].clamp_(max=cdf.shape[-1] - 1)

    def _beam_search(self, prompted: Prompted, max_steps: int):
        """The beam search of one window (the first): its finished candidates."""
        return self._beam_search_windows(prompted, max_steps)[0]

    def _beam_search_windows(self, prompted: Prompted, max_steps: int, once: bool = False) -> list[list[tuple[list[int], float]]]:
        """openai's BeamSearchDecoder for each window: each beam proposes its beam_size + 1 best
        tokens, the best beam_size unfinished candidates go on, finished ones are kept until
        ``beam_size * patience`` are collected; then the window leaves the batch.

        Rows are window-major: window a's beams are rows a * R .. a * R + R - 1 (R = 1 at the
        first step, beam_size after it). The choice is made on the host from one transfer of
        the (beam_size + 1) best candidates of every row, openai's exact order and tie rule, with
        the beams taken in their rank order whatever rows hold them. A kept beam stays in its
        parent's row when it is that parent's first child, so only the rows of beams that died
        are overwritten in the cache, not every row."""
        eot, beam = self.tokenizer.eot, self.beam_size
        width = beam + 1
        cache = prompted.cache(max_steps, once)
        w = prompted.windows
        state = self.filter.new_state(w, self.device)
        logits = self.filter.apply(prompted.first_logits.clone(), state)
        active = list(range(w))  # windows still in the batch, in row order
        sequences: list[list[list[int]]] = [[[]] for _ in range(w)]  # per window, per beam (rank order)
        beam_scores: list[list[float]] = [[0.0] for _ in range(w)]
        rows_of: list[list[int]] = [[0] for _ in range(w)]  # per window, per beam: its row in the window's block
        finished: list[list[tuple[list[int], float]]] = [[] for _ in range(w)]
        sum_logprobs = torch.zeros(w, device=self.device)
        rows_per = 1
        for step in range(max_steps):
            if step > 0:
                logits = self.filter.apply(self._step(tokens, prompted, cache), state)
            scores = sum_logprobs[:, None] + logits.log_softmax(dim=-1)
            top_scores, top_tokens = scores.topk(width, dim=-1)  # [rows, beam + 1]
            flat_scores, flat_tokens = top_scores.flatten(), top_tokens.flatten()
            per = rows_per * width  # candidates per window
            # One transfer for scores and ids (float64 holds both exactly).
            all_values, all_ids = torch.stack((flat_scores.double(), flat_tokens.double())).tolist()
            picked: list[int] = []  # per row of the next step: the flat candidate it continues with
            parents: list[int] = []  # per row of the next step: the row (of this step) it continues
            staying: list[int] = []  # positions (in ``active``) of the windows that go on
            for position, window in enumerate(active):
                # this window's candidates, beam by beam in rank order
                flat = [position * per + r * width + j for r in rows_of[window] for j in range(width)]
                values, ids = [all_values[i] for i in flat], [all_ids[i] for i in flat]
                order = sorted(range(per), key=values.__getitem__, reverse=True)
                keep: list[int] = []
                newly_finished: list[tuple[list[int], float]] = []
                for i in order:
                    if ids[i] == eot:  # ids are floats here: == compares exactly
                        newly_finished.append((sequences[window][i // width], values[i]))
                    else:
                        keep.append(i)
                        if len(keep) == beam:
                            break
                done = finished[window]
                for candidate in newly_finished:  # already in descending score order
                    if len(done) >= self.max_candidates:
                        break
                    done.append(candidate)
                if len(done) >= self.max_candidates:
                    continue  # this window is done
                sequences[window] = [sequences[window][i // width] + [int(ids[i])] for i in keep]
                beam_scores[window] = [values[i] for i in keep]
                parent_rows = [rows_of[window][i // width] for i in keep]
                rows_of[window] = _place(parent_rows, beam)
                block_pick, block_parent = [0] * beam, [0] * beam
                for row, parent, i in zip(rows_of[window], parent_rows, keep):
                    block_pick[row] = flat[i]
                    block_parent[row] = position * rows_per + parent
                picked.extend(block_pick)
                parents.extend(block_parent)
                staying.append(position)
            dropped = len(staying) < len(active)  # windows that are done leave the batch
            if dropped:
                active = [active[p] for p in staying]
            if not active:
                break
            index = torch.tensor(picked, dtype=torch.long, device=self.device)
            tokens, sum_logprobs = flat_tokens[index], flat_scores[index]
            source_index = torch.tensor(parents, dtype=torch.long, device=self.device)
            if dropped or rows_per != beam:  # the first step spreads one row to beam rows
                remaining = torch.tensor(staying, dtype=torch.long, device=self.device) if dropped else None
                cache.reorder(source_index, remaining)
            else:
                moved = [row for row, parent in enumerate(parents) if row != parent]
                if not moved:
                    source_index = None
                else:
                    rows = torch.tensor(moved, dtype=torch.long, device=self.device)
                    cache.copy_rows(rows, source_index[rows])
            state.update(tokens, source_index)
            rows_per = beam
        for window in range(w):  # not enough finished: the best unfinished beams fill up
            done = finished[window]
            if len(done) < beam:
                values = beam_scores[window]
                for j in sorted(range(len(values)), key=values.__getitem__, reverse=True):
                    done.append((sequences[window][j], values[j]))
                    if len(done) >= beam:
                        break
        return finished
