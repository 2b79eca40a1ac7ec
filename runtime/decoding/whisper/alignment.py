"""Word-level timestamps from cross-attention and dynamic time warping, as openai-whisper computes them.

For one 30-second window: the decoder reads <|startoftranscript|> [<|lang|> <|task|>]
<|notimestamps|> and every text token decoded in the window, then <|endoftext|>. The
cross-attention scores of the alignment heads (a few heads known to follow the speech) are
softmaxed over the audio that holds speech, standardised per head over the tokens, median
filtered along time, averaged over heads, and DTW finds the monotonic path of least negative
attention through (token, audio position). Each token starts where the path first reaches it;
words (``tokenizers.words``) take the time of their first token and the mean probability of
their tokens. Punctuation is merged into its neighbours, and openai-whisper's heuristics cut
words that swallow a pause: sentence-final words and words after a long silence longer than
twice the median word duration, and first / last words that run far past their segment's bounds.

Runtime code here is numpy and torch only (no numba): the DTW runs one anti-diagonal at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ...errors import InputError
from ...results import Word
from ...tokenizers.words import split_to_word_tokens

if TYPE_CHECKING:
    from ...models.whisper import Whisper
    from ...tokenizers.whisper import WhisperTokenizer

HOP_SECONDS = 0.01  # one mel frame
TOKENS_PER_SECOND = 50  # audio positions per second: the encoder halves the 100 mel frames
MEDIAN_FILTER_WIDTH = 7
SENTENCE_END_MARKS = ".。!！?？"
DEFAULT_PREPEND = "\"'“¿([{-"
DEFAULT_APPEND = "\"'.。,，!！?？:：”)]}、"


@dataclass
class WordTiming:
    """One word of a window, times in seconds from the window's start (mutable while merging)."""

    word: str
    tokens: list[int]
    start: float
    end: float
    probability: float


@dataclass(frozen=True)
class WindowAlignment:
    """Words of each segment of a window, with the segment bounds openai-whisper's rules leave.

    ``segment_bounds``: (start, end) per segment, in absolute seconds: the given bounds moved to
    the first word's start and the last word's end, except where that word ran far past the given
    bound (then the bound stays and the word is cut). Segments without words keep their bounds
    (or get None when no bounds were given). ``last_speech_timestamp``: the end of the last
    segment with words (pass it to the next window).
    """

    words: list[list[Word]]
    segment_bounds: list[tuple[float, float] | None]
    last_speech_timestamp: float


def default_alignment_heads(n_text_layer: int, n_text_head: int) -> list[list[int]]:
    """openai-whisper's fallback: every head of the second half of the decoder layers."""
    return [[layer, head] for layer in range(n_text_layer // 2, n_text_layer) for head in range(n_text_head)]


def resolve_alignment_heads(model: "Whisper", heads: Sequence[Sequence[int]] | None) -> list[list[int]]:
    """``heads`` checked against the model's shape, or the default when None or empty.

    Bundles converted from CTranslate2 and Hugging Face sources carry the published heads in
    ``LoadedModel.decoding.options["alignment_heads"]``.
    """
    c = model.config
    if not heads:
        return default_alignment_heads(c.n_text_layer, c.n_text_head)
    out = []
    for pair in heads:
        layer, head = (int(v) for v in pair)
        if not (0 <= layer < c.n_text_layer and 0 <= head < c.n_text_head):
            raise InputError(
                f"alignment head ({layer}, {head}) is outside this decoder ({c.n_text_layer} layers of {c.n_text_head} heads)"
            )
        out.append([layer, head])
    return out


def median_filter(x: Tensor, width: int) -> Tensor:
    """Median over a sliding window of odd ``width`` along the last dimension, reflect-padded."""
    if width <= 0 or width % 2 == 0:
        raise ValueError(f"the median filter width must be a positive odd number, not {width}")
    pad = width // 2
    if x.shape[-1] <= pad:  # reflect padding needs more samples than the pad
        return x
    shape = x.shape
    y = F.pad(x.reshape(-1, 1, shape[-1]), (pad, pad), mode="reflect")
    return y.unfold(-1, width, 1).sort(dim=-1).values[..., pad].reshape(shape)


def dtw(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-cost monotonic path through ``x`` [N, M]: (row indices, column indices), both of its length.

    Steps are diagonal, down (next row, same column) or right (same row, next column). Costs
    accumulate in float32 and ties resolve diagonal < down < right as openai-whisper's kernel
    does, so paths agree step for step. The cells of one anti-diagonal depend only on the two
    before it, so each is computed in one vectorised step.
    """
    n, m = x.shape
    x = np.asarray(x, dtype=np.float64)
    cost = np.full((n + 1, m + 1), np.inf, dtype=np.float32)
    trace = np.full((n + 1, m + 1), -1, dtype=np.int8)
    cost[0, 0] = 0.0
    for d in range(2, n + m + 1):  # cells (i, j) with i + j = d, 1 <= i <= n, 1 <= j <= m
        i = np.arange(max(1, d - m), min(n, d - 1) + 1)
        j = d - i
        c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
        diagonal = (c0 < c1) & (c0 < c2)
        down = ~diagonal & (c1 < c0) & (c1 < c2)
        t = np.where(diagonal, 0, np.where(down, 1, 2)).astype(np.int8)
        c = np.where(diagonal, c0, np.where(down, c1, c2))
        cost[i, j] = x[i - 1, j - 1] + c  # float64 sum, stored as float32
        trace[i, j] = t
    return _backtrace(trace)


def _backtrace(trace: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    trace[0, :] = 2
    trace[:, 0] = 1
    i, j = trace.shape[0] - 1, trace.shape[1] - 1
    rows: list[int] = []
    cols: list[int] = []
    while i > 0 or j > 0:
        rows.append(i - 1)
        cols.append(j - 1)
        t = trace[i, j]
        if t == 0:
            i -= 1
            j -= 1
        elif t == 1:
            i -= 1
        elif t == 2:
            j -= 1
        else:
            raise ValueError("DTW trace has an unvisited cell")
    return np.array(rows[::-1], dtype=np.int64), np.array(cols[::-1], dtype=np.int64)


@torch.inference_mode()
def find_alignment(
    model: "Whisper",
    tokenizer: "WhisperTokenizer",
    text_tokens: Sequence[int],
    *,
    num_frames: int,
    alignment_heads: Sequence[Sequence[int]],
    sot_sequence: Sequence[int],
    language: str | None,
    mel_window: Tensor | None = None,
    audio_features: Tensor | None = None,
    medfilt_width: int = MEDIAN_FILTER_WIDTH,
) -> list[WordTiming]:
    """Words of ``text_tokens`` with times in seconds from the window's start (openai's ``find_alignment``).

    ``sot_sequence`` without <|notimestamps|> (it is added). Give the window's ``audio_features``
    [1, 1500, C] when the caller has them, else its ``mel_window`` [n_mels, 3000] is encoded.
    """
    text_tokens = [int(t) for t in text_tokens]
    if not text_tokens:
        return []
    eot = tokenizer.eot
    if any(t >= eot for t in text_tokens):
        raise InputError("word alignment takes text tokens only (no special or timestamp tokens)")
    sot_sequence = list(sot_sequence)
    sequence = [*sot_sequence, tokenizer.no_timestamps, *text_tokens, eot]
    if len(sequence) > model.config.n_text_ctx:
        raise InputError(
            f"{len(text_tokens)} text tokens do not fit the decoder's {model.config.n_text_ctx} positions for alignment"
        )
    param = next(model.parameters())
    if audio_features is None:
        if mel_window is None:
            raise InputError("find_alignment needs mel_window or audio_features")
        mel = mel_window if mel_window.dim() == 3 else mel_window[None]
        audio_features = model.embed_audio(mel.to(device=param.device, dtype=param.dtype))
    tokens = torch.tensor([sequence], device=audio_features.device)
    logits, scores = model.logits(tokens, audio_features, cross_attention_heads=alignment_heads)

    n_sot = len(sot_sequence)
    token_probs = logits[0, n_sot : n_sot + len(text_tokens), :eot].float().softmax(dim=-1)
    index = torch.tensor(text_tokens, device=token_probs.device)[:, None]
    text_token_probs = token_probs.gather(1, index)[:, 0].tolist()

    weights = scores[0, :, :, : num_frames // 2].float().softmax(dim=-1)  # [heads, tokens, audio]
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, correction=0)
    weights = median_filter((weights - mean) / std, medfilt_width)
    matrix = weights.mean(dim=0)[n_sot:-1]  # rows: <|notimestamps|> and the text tokens
    text_indices, time_indices = dtw(-matrix.double().cpu().numpy())

    words, word_tokens = split_to_word_tokens(tokenizer, text_tokens + [eot], language)
    if len(word_tokens) <= 1:
        return []
    word_boundaries = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
    jumps = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
    jump_times = time_indices[jumps] / TOKENS_PER_SECOND
    start_times = jump_times[word_boundaries[:-1]]
    end_times = jump_times[word_boundaries[1:]]
    probabilities = [float(np.mean(text_token_probs[i:j])) for i, j in zip(word_boundaries[:-1], word_boundaries[1:])]
    return [
        WordTiming(word, list(toks), float(start), float(end), prob)
        for word, toks, start, end, prob in zip(words, word_tokens, start_times, end_times, probabilities)
    ]


def merge_punctuations(alignment: list[WordTiming], prepended: str, appended: str) -> None:
    """Attach opening marks to the word after them and closing marks to the word before, in place.

    A merged-away entry keeps its place with an empty word and no tokens.
    """
    i, j = len(alignment) - 2, len(alignment) - 1
    while i >= 0:
        previous, following = alignment[i], alignment[j]
        if previous.word.startswith(" ") and previous.word.strip() in prepended:
            following.word = previous.word + following.word
            following.tokens = previous.tokens + following.tokens
            previous.word = ""
            previous.tokens = []
        else:
            j = i
        i -= 1
    i, j = 0, 1
    while j < len(alignment):
        previous, following = alignment[i], alignment[j]
        if not previous.word.endswith(" ") and following.word in appended:
            previous.word = previous.word + following.word
            previous.tokens = previous.tokens + following.tokens
            following.word = ""
            following.tokens = []
        else:
            i = j
        j += 1


def align_segments(
    model: "Whisper",
    tokenizer: "WhisperTokenizer",
    mel_window: Tensor | None,
    segments_tokens: Sequence[Sequence[int]],
    *,
    num_frames: int,
    alignment_heads: Sequence[Sequence[int]] | None,
    language: str | None,
    prepend_punctuations: str = DEFAULT_PREPEND,
    append_punctuations: str = DEFAULT_APPEND,
    time_offset: float = 0.0,
    task: str = "transcribe",
    segment_bounds: Sequence[tuple[float, float]] | None = None,
    last_speech_timestamp: float | None = None,
    audio_features: Tensor | None = None,
    medfilt_width: int = MEDIAN_FILTER_WIDTH,
) -> WindowAlignment:
    """Words of every segment decoded in one window (openai-whisper's ``add_word_timestamps``).

    ``mel_window`` [n_mels, 3000]: the window's log-mel, of which ``num_frames`` frames hold audio
    (fewer in the last window). ``segments_tokens``: each segment's text tokens, in order (timestamp
    and special tokens are dropped). ``time_offset``: the window's start in the audio, seconds.
    ``segment_bounds``: each segment's (start, end) in absolute seconds from its timestamp tokens,
    when known: words that overrun them are cut, as openai-whisper does. ``last_speech_timestamp``:
    where speech ended before this window (default: the window's start); a first word that follows
    a long pause is held to twice the median word duration. ``audio_features`` [1, 1500, C]: the
    encoder output of the window, to skip encoding ``mel_window`` again.

    Times are absolute, rounded to 10 ms, and held inside the window's audio.
    """
    per_segment = [[int(t) for t in seg if int(t) < tokenizer.eot] for seg in segments_tokens]
    if segment_bounds is not None and len(segment_bounds) != len(per_segment):
        raise InputError(f"{len(segment_bounds)} segment bounds for {len(per_segment)} segments")
    heads = resolve_alignment_heads(model, alignment_heads)
    window_start = float(time_offset)
    window_end = window_start + num_frames * HOP_SECONDS
    last_speech = window_start if last_speech_timestamp is None else float(last_speech_timestamp)
    bounds: list[tuple[float, float] | None] = (
        [(float(s), float(e)) for s, e in segment_bounds] if segment_bounds is not None else [None] * len(per_segment)
    )
    all_tokens = [t for seg in per_segment for t in seg]
    if not all_tokens:
        return WindowAlignment([[] for _ in per_segment], bounds, last_speech)

    alignment = find_alignment(
        model,
        tokenizer,
        all_tokens,
        num_frames=num_frames,
        alignment_heads=heads,
        sot_sequence=tokenizer.sot_sequence(language, task, timestamps=True),
        language=language,
        mel_window=mel_window,
        audio_features=audio_features,
        medfilt_width=medfilt_width,
    )
    durations = np.array([t.end - t.start for t in alignment])
    durations = durations[durations.nonzero()]
    median_duration = min(0.7, float(np.median(durations))) if len(durations) else 0.0
    max_duration = median_duration * 2

    # Sentence-final marks and the word after them do not swallow a pause.
    if len(durations):
        for i in range(1, len(alignment)):
            if alignment[i].end - alignment[i].start > max_duration:
                if alignment[i].word in SENTENCE_END_MARKS:
                    alignment[i].end = alignment[i].start + max_duration
                elif alignment[i - 1].word in SENTENCE_END_MARKS:
                    alignment[i].start = alignment[i].end - max_duration

    merge_punctuations(alignment, prepend_punctuations, append_punctuations)

    out_words: list[list[Word]] = []
    out_bounds: list[tuple[float, float] | None] = []
    word_index = 0
    for tokens, bound in zip(per_segment, bounds):
        saved_tokens = 0
        words: list[dict] = []
        while word_index < len(alignment) and saved_tokens < len(tokens):
            timing = alignment[word_index]
            if timing.word:
                words.append(
                    dict(
                        word=timing.word,
                        start=round(window_start + timing.start, 2),
                        end=round(window_start + timing.end, 2),
                        probability=timing.probability,
                    )
                )
            saved_tokens += len(timing.tokens)
            word_index += 1

        if words:
            # The first words after a pause are held to twice the median word duration.
            if words[0]["end"] - last_speech > median_duration * 4 and (
                words[0]["end"] - words[0]["start"] > max_duration
                or (len(words) > 1 and words[1]["end"] - words[0]["start"] > max_duration * 2)
            ):
                if len(words) > 1 and words[1]["end"] - words[1]["start"] > max_duration:
                    boundary = max(words[1]["end"] / 2, words[1]["end"] - max_duration)
                    words[0]["end"] = words[1]["start"] = boundary
                words[0]["start"] = max(window_start, words[0]["end"] - max_duration)
            seg_start, seg_end = words[0]["start"], words[-1]["end"]
            if bound is not None:
                # A first word that starts well before its segment is cut to the segment's start.
                if bound[0] < words[0]["end"] and bound[0] - 0.5 > words[0]["start"]:
                    words[0]["start"] = max(window_start, min(words[0]["end"] - median_duration, bound[0]))
                    seg_start = bound[0]
                # A last word that ends well after its segment is cut to the segment's end.
                if bound[1] > words[-1]["start"] and bound[1] + 0.5 < words[-1]["end"]:
                    words[-1]["end"] = max(words[-1]["start"] + median_duration, bound[1])
                    seg_end = bound[1]
            last_speech = seg_end
            bound = (round(seg_start, 3), round(seg_end, 3))

        segment_words = []
        for w in words:  # rounded to 1 ms: the cuts above leave float noise (7.579999999999998)
            start = round(min(max(float(w["start"]), window_start), window_end), 3)
            end = round(min(max(float(w["end"]), start), window_end), 3)
            segment_words.append(Word(w["word"], start, end, float(w["probability"])))
        out_words.append(segment_words)
        out_bounds.append(bound)
    return WindowAlignment(out_words, out_bounds, last_speech)
