"""The ``whisper_seq2seq`` engine: long-form Whisper transcription, as openai-whisper's ``transcribe`` does it.

Sequential 30-second windows over the log-mel of the whole file (computed a window at a time,
with the whole file's values); each window is encoded once,
decoded with temperature fallback (compression ratio and log-probability thresholds), and the
next window starts at the last complete segment's end timestamp. Windows the model calls silent
(no-speech probability) are skipped, and so, without decoding, are windows of pure silence.
Previous text conditions the next window until a window needs a temperature above 0.5. A segment
repeating the previous one is dropped (a repeat from an earlier window, or of three words or more
within one: Whisper's looping; a short "Hello? Hello?" inside one window stays). The language is
detected on the first decoded window. With a VAD (``oasr.pipelines.transcribe``) only the detected speech is
decoded (joined end to end) and times are mapped back to the original audio. A ``batch_size`` above
1 takes the batched path instead (``batched.py``: VAD windows decoded N at a time, no conditioning).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ...errors import CapabilityError
from ...io.samples import SampleFile, SampleTensor
from ...decoding.whisper.options import WhisperDecoding
from ...decoding.family import section_for
from ...options import TranscribeOptions
from ...results import Segment, Word
from ...threads import fit_threads
from ..vad.energy import frame_levels_db
from . import EngineOutput

log = logging.getLogger("oasr")

SILENCE_FLOOR_DB = -60.0  # dBFS: a window whose every 10 ms frame is quieter is not decoded
PROMPT_RESET_TEMPERATURE = 0.5  # a window decoded above this does not condition the next one


class Engine:
    """Checks the options against the Whisper model before any work, then runs the long-form loop."""

    reads_windows = True  # takes a SampleFile: the log-mel and the levels read it a window at a time

    def __init__(self, loaded, options: TranscribeOptions, section: WhisperDecoding | None = None):
        self.loaded = loaded
        self.options = options
        self.decoding = section or section_for(loaded.decoding.family, options)
        self.tokenizer = _check_capabilities(loaded, options)
        _check_suppress_tokens(loaded, self.decoding)

    def run(self, samples, speech_map, duration, progress) -> EngineOutput:
        if self.options.batch_size > 1:
            from .batched import BatchedLongForm

            run = BatchedLongForm(self.loaded, self.tokenizer, self.options, self.decoding, speech_map, duration, progress)
            segments, language, probability = run(samples)
            return EngineOutput(segments, language, probability)
        run = _LongForm(self.loaded, self.tokenizer, self.options, self.decoding, speech_map, duration, progress)
        segments, language, probability = run(samples)
        return EngineOutput(segments, language, probability)


def _check_capabilities(loaded, options: TranscribeOptions):
    if loaded.tokenizer_spec.kind == "none":
        raise CapabilityError(
            "this model was converted without tokenizer assets; it cannot transcribe (re-convert it with its tokenizer)"
        )
    tokenizer = loaded.tokenizer()
    if not tokenizer.multilingual:
        if options.language not in (None, "en"):
            raise CapabilityError(f"this Whisper model is English-only; it cannot transcribe language {options.language!r}")
        if options.task == "translate":
            raise CapabilityError("this Whisper model is English-only; it cannot translate (use a multilingual model)")
    elif options.language is not None:
        tokenizer.language_token(options.language)  # an unknown code fails here, before any work
    return tokenizer


def _check_suppress_tokens(loaded, decoding: WhisperDecoding) -> None:
    """Token ids to suppress must lie in the model's vocabulary (the options know only >= -1)."""
    n_vocab = loaded.model.config.n_vocab
    outside = [t for t in decoding.suppress_tokens if t >= n_vocab]
    if outside:
        raise CapabilityError(
            f"--suppress-tokens {', '.join(map(str, outside[:3]))}{' ...' if len(outside) > 3 else ''}: this model's "
            f"vocabulary has {n_vocab} tokens (ids 0..{n_vocab - 1}; -1 stands for the non-speech symbols)"
        )


# -- the long-form loop -----------------------------------------------------------------------


@dataclass
class _Piece:
    """A segment of the current window before it becomes a ``Segment``."""

    start: float
    end: float
    tokens: list[int]
    text: str
    words: list[Word] | None = None


class _LongForm:
    def __init__(self, loaded, tokenizer, options: TranscribeOptions, decoding: WhisperDecoding, speech_map, duration, progress):
        from ...decoding.whisper.decode import WhisperDecoder

        self.model = loaded.model
        self.loaded = loaded
        self.tokenizer = tokenizer
        self.options = options
        self.decoding = decoding
        self.speech_map = speech_map
        self.duration = duration
        self.progress = progress
        spec = loaded.feature_spec
        self.spec = spec
        self.hop = spec.hop_length
        self.sample_rate = spec.sample_rate
        self.n_frames = round(spec.chunk_seconds * spec.sample_rate / spec.hop_length)  # 3000
        self.input_stride = self.n_frames // self.model.config.n_audio_ctx  # mel frames per token: 2
        self.time_precision = self.input_stride * self.hop / self.sample_rate  # 0.02 s
        self.frames_per_second = self.sample_rate / self.hop
        self.last_speech = 0.0  # end of the last word, with word timestamps
        self.content_frames = 0
        self.content_duration = 0.0
        parameter = next(self.model.parameters())
        self.device, self.dtype = parameter.device, parameter.dtype
        self.decoder = WhisperDecoder(
            self.model,
            tokenizer,
            beam_size=decoding.beam_size,
            best_of=decoding.best_of,
            patience=decoding.patience,
            length_penalty=decoding.length_penalty,
            suppress_tokens=decoding.suppress_tokens,
            suppress_blank=decoding.suppress_blank,
            without_timestamps=decoding.without_timestamps,
            max_initial_timestamp=decoding.max_initial_timestamp,
            generator=torch.Generator(self.device).manual_seed(decoding.seed),
        )

    def _seconds(self, frames: int) -> float:
        return frames * self.hop / self.sample_rate

    def _done(self, seek: int) -> None:
        if self.progress is None:
            return
        t = self._seconds(seek)
        if self.speech_map is not None:
            t = self.speech_map.to_original(t)
        self.progress(min(t, self.duration), self.duration)

    def _features(self, audio: torch.Tensor):
        """``mel(seek, size)``: log-mel frames ``seek .. seek + size - 1`` of ``audio`` followed by
        30 s of zeros, as openai frames and clamps the whole padded file (``log_mel_spectrogram``
        of the whole file, then sliced). The built-in front end computes only the window asked
        for, with the file's largest value (found in blocks when the first window is decoded) as
        the clamp's reference, so memory does not grow with the file; another front end (an
        ``oasr.features`` plugin) is run over the whole file once."""
        from ...features import feature_extractor
        from ...features.logmel import log_mel_reference, log_mel_spectrogram

        extract = feature_extractor(self.spec)
        padding = self.n_frames * self.hop  # + 30 s of zeros, as openai
        if extract is not log_mel_spectrogram:
            if isinstance(audio, SampleTensor):  # a plugin front end takes the whole signal
                audio = audio[..., :]
            whole = extract(audio, self.spec, padding=padding)
            return lambda seek, size: whole[:, seek : seek + size]
        reference: list[torch.Tensor] = []

        def mel(seek: int, size: int) -> torch.Tensor:
            if not reference:
                reference.append(log_mel_reference(audio, self.spec, padding))
            return log_mel_spectrogram(audio, self.spec, padding, frames=(seek, size), reference=reference[0])

        return mel

    def _encode(self, mel, seek: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        window = F.pad(mel(seek, size), (0, self.n_frames - size))
        window = window.to(self.dtype)
        return window, self.model.embed_audio(window[None])

    def _detect_language(self, features) -> tuple[str, float]:
        from ...decoding.whisper.language import detect_language

        guess = detect_language(self.model, self.tokenizer, features)
        log.info(
            "detected language %s with probability %.2f (set --language to skip detection)",
            guess.language,
            guess.probability,
        )
        return guess.language, guess.probability

    def __call__(self, samples: np.ndarray) -> tuple[list[Segment], str, float | None]:
        o, d = self.options, self.decoding
        # A SampleFile (a long recording on disk) is read a window at a time by the front end.
        audio = samples.tensor(self.device) if isinstance(samples, SampleFile) else torch.from_numpy(samples).to(self.device)
        mel = self._features(audio)  # one window at a time
        content_frames = len(samples) // self.hop  # the padded file's frames less the 30 s of zeros
        self.content_frames, self.content_duration = content_frames, self._seconds(content_frames)
        # Detected on the first window that is decoded; "" when there is none to detect it on.
        language = o.language or (None if self.tokenizer.multilingual else "en")
        probability = None
        levels = frame_levels_db(samples, self.hop)  # one level per mel frame
        initial_prompt = self.tokenizer.encode(" " + d.initial_prompt.strip()) if d.initial_prompt else []
        all_tokens: list[int] = list(initial_prompt)
        prompt_reset_since = 0
        segments: list[Segment] = []
        last: tuple[str, int] | None = None  # the previous kept segment: normalised text, window
        seek = 0
        while seek < content_frames:
            size = min(self.n_frames, content_frames - seek)
            time_offset = self._seconds(seek)
            if levels[seek : seek + size].max(initial=-np.inf) < SILENCE_FLOOR_DB:
                log.debug("window at %.2f s is silent (below %.0f dBFS); skipped", time_offset, SILENCE_FLOOR_DB)
                seek += size
                self._done(seek)
                continue
            fit_threads()  # the cores other processes left free since the last window
            window, features = self._encode(mel, seek, size)
            if language is None:
                language, probability = self._detect_language(features)
            result, temperature = self._decode_with_fallback(features, all_tokens[prompt_reset_since:], language)
            if d.no_speech_threshold is not None and result.no_speech_prob > d.no_speech_threshold:
                if d.logprob_threshold is None or result.avg_logprob <= d.logprob_threshold:
                    log.debug("window at %.2f s: no speech (p=%.2f); skipped", time_offset, result.no_speech_prob)
                    seek += size
                    self._done(seek)
                    continue
            previous_seek = seek
            pieces, seek, single_ending = self._split(result.tokens, seek, size)
            if o.word_timestamps and pieces:
                seek, pieces = self._add_words(pieces, window, features, size, time_offset, language, seek, single_ending)
            for piece in pieces:
                if piece.start == piece.end or not piece.text.strip():
                    continue
                key = _normalise(piece.text)
                if last is not None and key == last[0] and (last[1] != previous_seek or len(key.split()) >= 3):
                    log.debug("dropped a segment repeating the previous one: %r", piece.text)
                    continue
                last = (key, previous_seek)
                segments.append(self._segment(len(segments), previous_seek, piece, result))
                all_tokens.extend(piece.tokens)
            if not d.condition_on_previous_text or temperature > PROMPT_RESET_TEMPERATURE:
                prompt_reset_since = len(all_tokens)
            self._done(min(seek, content_frames))
        return segments, language or "", probability

    def _decode_with_fallback(self, features, previous: list[int], language: str, first=None):
        """The first result at the temperatures in order that passes the thresholds; when none
        does, the most probable one whose compression ratio passed (faster-whisper's choice),
        and the last temperature tried (for the prompt reset). ``first``: the result at the
        first temperature when it is known already (a batched decode)."""
        o, d = self.options, self.decoding
        prompted = None
        tried, not_repetitive = [], []
        for k, temperature in enumerate(d.temperatures):
            if k == 0 and first is not None:
                result = first
            else:
                if prompted is None:
                    tokens, sot_index = self.decoder.initial_tokens(language, o.task, previous)
                    prompted = self.decoder.prompt(features, tokens, sot_index)
                result = self.decoder.decode(prompted, temperature)
            tried.append(result)
            failed = False
            if d.compression_ratio_threshold is not None:
                if result.compression_ratio > d.compression_ratio_threshold:
                    failed = True
                else:
                    not_repetitive.append(result)
            if d.logprob_threshold is not None and result.avg_logprob < d.logprob_threshold:
                failed = True
            if (
                d.no_speech_threshold is not None
                and result.no_speech_prob > d.no_speech_threshold
                and d.logprob_threshold is not None
                and result.avg_logprob < d.logprob_threshold
            ):
                failed = False  # silence: the no-speech check decides
            if not failed:
                return result, temperature
            log.debug(
                "temperature %.1f failed (compression %.2f, avg logprob %.2f)",
                temperature, result.compression_ratio, result.avg_logprob,
            )
        best = max(not_repetitive or tried, key=lambda r: r.avg_logprob)
        return best, d.temperatures[-1]

    def _split(self, tokens: tuple[int, ...], seek: int, size: int) -> tuple[list[_Piece], int, bool]:
        """openai's segmentation: pieces between consecutive timestamp pairs; the next seek."""
        tb = self.tokenizer.timestamp_begin
        time_offset = self._seconds(seek)
        is_ts = [t >= tb for t in tokens]
        single_ending = len(tokens) >= 2 and not is_ts[-2] and is_ts[-1]
        cuts = [i for i in range(1, len(tokens)) if is_ts[i] and is_ts[i - 1]]
        pieces: list[_Piece] = []
        if cuts:
            if single_ending:
                cuts.append(len(tokens))
            begin = 0
            for cut in cuts:
                part = list(tokens[begin:cut])
                start = time_offset + (part[0] - tb) * self.time_precision
                end = time_offset + (part[-1] - tb) * self.time_precision
                pieces.append(self._piece(start, end, part))
                begin = cut
            if single_ending:  # no speech after the last timestamp
                seek += size
            else:  # the last segment is unfinished: the next window starts where it begins
                seek += (tokens[begin - 1] - tb) * self.input_stride
        else:
            duration = self._seconds(size)
            stamps = [t for t in tokens if t >= tb]
            if stamps and stamps[-1] != tb:  # a lone timestamp: where the text ends
                duration = (stamps[-1] - tb) * self.time_precision
            pieces.append(self._piece(time_offset, time_offset + duration, list(tokens)))
            seek += size
        return pieces, seek, single_ending

    def _piece(self, start: float, end: float, tokens: list[int]) -> _Piece:
        return _Piece(start, end, tokens, self.tokenizer.decode(tokens))

    def _align(self, pieces, window, features, size, time_offset, language, last_speech):
        """One alignment pass over a window's pieces: their words and openai-whisper's segment bounds
        set in place; returns the alignment (its last speech time)."""
        from ...decoding.whisper.alignment import align_segments

        d = self.decoding
        aligned = align_segments(
            self.model,
            self.tokenizer,
            window,
            [p.tokens for p in pieces],
            num_frames=size,
            alignment_heads=self.loaded.decoding.options.get("alignment_heads"),
            language=language,
            prepend_punctuations=d.prepend_punctuations,
            append_punctuations=d.append_punctuations,
            time_offset=time_offset,
            task=self.options.task,
            segment_bounds=[(p.start, p.end) for p in pieces],
            last_speech_timestamp=last_speech,
            audio_features=features,
        )
        for piece, words, bounds in zip(pieces, aligned.words, aligned.segment_bounds):
            piece.words = list(words)
            if bounds is not None:
                piece.start, piece.end = bounds
        return aligned

    def _add_words(self, pieces, window, features, size, time_offset, language, seek, single_ending):
        """Word times for this window's segments (one alignment pass, openai-whisper's rules for
        segment bounds); the next window starts after the last word; optionally, suspect
        segments in long silences are skipped."""
        d = self.decoding
        self._align(pieces, window, features, size, time_offset, language, self.last_speech)
        previous_seek = round(time_offset * self.frames_per_second)
        last_end = _last_end(pieces)
        if not single_ending and last_end is not None and last_end > time_offset:
            seek = round(last_end * self.frames_per_second)
        if d.hallucination_silence_threshold is not None:
            seek, pieces = self._skip_hallucinations(pieces, time_offset, previous_seek, size, seek, single_ending)
        last_end = _last_end(pieces)
        if last_end is not None:
            self.last_speech = last_end
        return seek, pieces

    def _skip_hallucinations(self, pieces, time_offset, previous_seek, size, seek, single_ending):
        """openai-whisper's ``hallucination_silence_threshold``: a segment of improbable, too long
        or too short words, surrounded by silence, is dropped and the window restarts after it."""
        threshold = self.decoding.hallucination_silence_threshold
        fps = self.frames_per_second
        window_end = time_offset + self._seconds(self.n_frames)
        segment_duration = self._seconds(size)
        if not single_ending:
            last_end = _last_end(pieces)
            if last_end is not None and last_end > time_offset:
                seek = round(last_end * fps) if window_end - last_end > threshold else previous_seek + size
        first = next((p for p in pieces if p.words), None)
        if first is not None and _is_anomaly(first):
            gap = first.start - time_offset
            if gap > threshold:  # skip the leading silence, decode again from there
                return previous_seek + round(gap * fps), []
        last_end = self.last_speech
        for i, piece in enumerate(pieces):
            if not piece.words:
                continue
            if _is_anomaly(piece):
                following = next((p for p in pieces[i + 1 :] if p.words), None)
                next_start = following.words[0].start if following else time_offset + segment_duration
                silence_before = (
                    piece.start - last_end > threshold or piece.start < threshold or piece.start - time_offset < 2.0
                )
                silence_after = (
                    next_start - piece.end > threshold or _is_anomaly(following) or window_end - piece.end < 2.0
                )
                if silence_before and silence_after:
                    seek = round(max(time_offset + 1, piece.start) * fps)
                    if self.content_duration - piece.end < threshold:
                        seek = self.content_frames
                    return seek, pieces[:i]
            last_end = piece.end
        return seek, pieces

    def _segment(self, index: int, seek: int, piece: _Piece, result) -> Segment:
        start, end, words = piece.start, piece.end, piece.words
        m = self.speech_map
        if m is not None:
            if words:
                words = [self._map_word(w) for w in words]
                start, end = words[0].start, words[-1].end
            else:
                start, end = m.to_original(start), m.to_original(end, is_end=True)
            seek = round(m.to_original(self._seconds(seek)) * self.sample_rate / self.hop)
        start = min(max(start, 0.0), self.duration)
        end = min(max(end, start), self.duration)
        return Segment(
            id=index,
            start=round(start, 3),
            end=round(end, 3),
            text=piece.text,
            tokens=tuple(piece.tokens),
            words=tuple(words) if words is not None else None,
            seek=seek,
            temperature=result.temperature,
            avg_logprob=result.avg_logprob,
            compression_ratio=result.compression_ratio,
            no_speech_prob=result.no_speech_prob,
        )

    def _map_word(self, word: Word) -> Word:
        m = self.speech_map
        region = m.region((word.start + word.end) / 2)  # both ends in the region of the middle
        return dataclasses.replace(
            word, start=m.to_original(word.start, region=region), end=m.to_original(word.end, region=region)
        )


_PUNCTUATION = re.compile(r"[^\w\s]")


def _normalise(text: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", text.lower()).split())


# -- hallucination skipping with word timestamps (openai-whisper's heuristics) --------------------

_PUNCTUATION_WORDS = "\"'“¿([{-\"'.。,，!！?？:：”)]}、"  # a word that is a substring of this is punctuation


def _word_anomaly(word: Word) -> float:
    duration = word.end - word.start
    score = 0.0
    if word.probability < 0.15:
        score += 1.0
    if duration < 0.133:
        score += (0.133 - duration) * 15
    if duration > 2.0:
        score += duration - 2.0
    return score


def _is_anomaly(piece: _Piece | None) -> bool:
    if piece is None or not piece.words:
        return False
    words = [w for w in piece.words if w.word not in _PUNCTUATION_WORDS][:8]
    score = sum(_word_anomaly(w) for w in words)
    return score >= 3 or score + 0.01 >= len(words)


def _last_end(pieces: list[_Piece]) -> float | None:
    """openai's ``get_end``: the end of the last word, else of the last segment."""
    for piece in reversed(pieces):
        if piece.words:
            return piece.words[-1].end
    return pieces[-1].end if pieces else None
