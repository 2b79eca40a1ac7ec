"""Decoding one 30-second Whisper window: greedy, beam search, and best-of-N sampling.

The algorithm is openai-whisper's ``DecodingTask`` (same filters, ranking and scores); the work
is organised for speed:

- the prompt (previous text, start-of-transcript sequence) runs once, for a batch of one, and is
  shared by every temperature a window falls back to;
- beams or samples then run as one batch per step over the KV cache, whose cross-attention keys
  stay a batch of one (every row reads the same audio) and whose self-attention keys follow the
  beams through ``WhisperKVCache.reorder``;
- suppression masks are boolean tensors built once per decoder; each step makes one decoder call,
  one log-softmax and one device-to-host transfer of a few candidates.
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
    """A window after its prompt ran: shared by every decode of the window (fallbacks)."""

    audio_features: Tensor  # [1, Ta, C]
    length: int  # prompt tokens
    self_kv: dict  # the prompt's self-attention keys/values, batch of one
    cross_kv: dict  # the audio's cross-attention keys/values, batch of one
    first_logits: Tensor  # [1, V] fp32: the next-token logits after the prompt
    no_speech_prob: float

    def cache(self) -> WhisperKVCache:
        """A fresh cache holding the prompt (tensors are shared, never written in place)."""
        return WhisperKVCache(self_kv=dict(self.self_kv), cross_kv=dict(self.cross_kv))


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
    def prompt(self, audio_features: Tensor, tokens: Sequence[int], sot_index: int) -> Prompted:
        """Run ``tokens`` through the decoder for a batch of one ``audio_features`` [1, Ta, C]."""
        cache = WhisperKVCache()
        x = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        logits = self.model.logits(x, audio_features[:1], cache)[0]
        no_speech = logits[sot_index].softmax(dim=-1)[self.tokenizer.no_speech].item()
        return Prompted(
            audio_features=audio_features[:1],
            length=len(tokens),
            self_kv=cache.self_kv,
            cross_kv=cache.cross_kv,
            first_logits=logits[-1:].float().clone(),  # not a view: the prompt's logits can go
            no_speech_prob=no_speech,
        )

    # -- decoding -----------------------------------------------------------------------------

    @torch.inference_mode()
    def decode(self, prompted: Prompted, temperature: float = 0.0) -> WindowResult:
        """The best sequence at ``temperature``: beam search at 0 (greedy with beam_size 1),
        the most likely of ``best_of`` samples above 0."""
        max_steps = min(self.sample_len, self.n_ctx - prompted.length + 1)
        if temperature == 0 and self.beam_size > 1:
            candidates = self._beam_search(prompted, max_steps)
        else:
            rows = 1 if temperature == 0 else self.best_of
            candidates = self._sample(prompted, max_steps, rows, temperature)
        tokens, sum_logprob = max(candidates, key=self._rank_score)
        text = self.tokenizer.decode(tokens)
        return WindowResult(
            tokens=tuple(tokens),
            text=text,
            sum_logprob=sum_logprob,
            avg_logprob=sum_logprob / (len(tokens) + 1),
            no_speech_prob=prompted.no_speech_prob,
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

    def _sample(self, prompted: Prompted, max_steps: int, rows: int, temperature: float):
        """Greedy (one row at temperature 0) or ``rows`` independent samples."""
        eot = self.tokenizer.eot
        cache = prompted.cache()
        state = self.filter.new_state(1, self.device)
        logits = self.filter.apply(prompted.first_logits.clone(), state)
        spread = None  # the first step: the prompt row becomes ``rows`` rows
        if rows > 1:
            logits = logits.expand(rows, -1)
            spread = torch.zeros(rows, dtype=torch.long, device=self.device)
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
        return candidates

    def _draw(self, logits: Tensor, temperature: float) -> Tensor:
        """One token per row from softmax(logits / temperature), by inverting the cumulative
        distribution (as torch.multinomial samples, 30x faster over a Whisper vocabulary)."""
        cdf = (logits / temperature).softmax(dim=-1).cumsum(dim=-1)
        u = torch.rand(cdf.shape[0], 1, device=cdf.device, generator=self.generator) * cdf[:, -1:]
        return torch.searchsorted(cdf, u, right=True)[:, 0].clamp_(max=cdf.shape[-1] - 1)

    def _beam_search(self, prompted: Prompted, max_steps: int):
        """openai's BeamSearchDecoder: each beam proposes its beam_size + 1 best tokens, the
        best beam_size unfinished candidates go on, finished ones are kept until
        ``beam_size * patience`` are collected."""
        eot, beam = self.tokenizer.eot, self.beam_size
        cache = prompted.cache()
        state = self.filter.new_state(1, self.device)
        logits = self.filter.apply(prompted.first_logits.clone(), state)
        sequences: list[list[int]] = [[]]
        sum_logprobs = torch.zeros(1, device=self.device)
        finished: list[tuple[list[int], float]] = []
        for step in range(max_steps):
            if step > 0:
                logits = self.filter.apply(self._step(tokens, prompted, cache), state)
            scores = sum_logprobs[:, None] + logits.log_softmax(dim=-1)
            top_scores, top_tokens = scores.topk(beam + 1, dim=-1)  # [rows, beam + 1]
            flat_scores, flat_tokens = top_scores.flatten(), top_tokens.flatten()
            values, ids = flat_scores.tolist(), flat_tokens.tolist()
            order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
            keep: list[int] = []
            newly_finished: list[tuple[list[int], float]] = []
            for i in order:
                source = i // (beam + 1)
                if ids[i] == eot:
                    newly_finished.append((sequences[source], values[i]))
                else:
                    keep.append(i)
                    if len(keep) == beam:
                        break
            for candidate in newly_finished:  # already in descending score order
                if len(finished) >= self.max_candidates:
                    break
                finished.append(candidate)
            if len(finished) >= self.max_candidates:
                break
            sources = [i // (beam + 1) for i in keep]
            sequences = [sequences[s] + [ids[i]] for s, i in zip(sources, keep)]
            index = torch.tensor(keep, dtype=torch.long, device=self.device)
            tokens, sum_logprobs = flat_tokens[index], flat_scores[index]
            source_index = None
            if sources != list(range(len(sources))):  # the first step always: one row -> beam rows
                source_index = torch.div(index, beam + 1, rounding_mode="floor")
                cache.reorder(source_index)
            state.update(tokens, source_index)
        if len(finished) < beam:  # not enough finished: the best unfinished beams fill up
            for j in sorted(range(len(sequences)), key=sum_logprobs.tolist().__getitem__, reverse=True):
                finished.append((sequences[j], sum_logprobs[j].item()))
                if len(finished) >= beam:
                    break
        return finished

