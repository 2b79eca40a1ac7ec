"""The ``cif`` engine: Paraformer-style models that predict their tokens in one forward.

A CIF model implements ``recognise(features [B, F, T], lengths [B]) -> ParaformerOutput``
(encoder lengths, the predictor's weights and fires, the token counts, log-probabilities
[B, N, V] or None when nothing fired) and ``output_stride`` 1; its bundle's decoding defaults
name the blank, and ``options["drop_ids"]`` (sos, eos) and ``options["tail"]`` (whether the
predictor adds a tail frame). Its tokenizer is ``funasr_char``: FunASR's word rules and times
(``oasr.decoding.cif.search``). Long audio runs in overlapping chunks (``chunked.py``),
``batch_size`` chunks per forward, each decoded as FunASR decodes one utterance.
"""

from __future__ import annotations

import numpy as np

from ...decoding.cif.options import CifDecoding
from ...decoding.cif.search import best_tokens, token_times, utterance_frames
from ...decoding.family import section_for
from ...options import TranscribeOptions
from ...tokenizers.funasr_char import join
from . import EngineOutput
from .chunked import ChunkedEngine, log
from .longform import TimedWord, feature_batches, keep_own, plan_chunks, to_segments


class Engine(ChunkedEngine):
    def __init__(self, loaded, options: TranscribeOptions, section: CifDecoding | None = None):
        section_for(loaded.decoding.family, options) if section is None else section
        super().__init__(loaded, options)
        defaults = loaded.decoding.options
        self.drop = (self.blank, *defaults.get("drop_ids", ()))
        self.tail = bool(defaults.get("tail", False))

    def run(self, samples: np.ndarray, speech_map, duration: float, progress) -> EngineOutput:
        spec = self.loaded.feature_spec
        rate = spec.sample_rate
        parameter = next(self.loaded.model.parameters())
        chunks = plan_chunks(len(samples), rate, self.length, self.overlap)
        log.debug("%d chunk(s) of %.1f s, %.1f s overlap", len(chunks), self.length, self.overlap)
        words: list[TimedWord] = []
        for batch, padded, lengths in feature_batches(samples, chunks, spec, self.options.batch_size, parameter.device):
            out = self.loaded.model.recognise(padded.to(parameter.dtype), lengths)
            for i, c in enumerate(batch):
                own = keep_own(self.chunk_words(out, i, c.start / rate), c)
                if own and words and not own[0].text.startswith(" ") and _spaced(words[-1].text) and _spaced(own[0].text):
                    own[0].text = " " + own[0].text  # two chunks' alphabetic words meet
                words += own
            if progress is not None:
                done = batch[-1].own_end
                progress(min(speech_map.to_original(done) if speech_map else done, duration), duration)
        segments = to_segments(words, speech_map, duration, with_words=self.options.word_timestamps)
        return EngineOutput(segments, (self.options.language or self.language) if segments else "", None)

    def chunk_words(self, out, row: int, offset: float) -> list[TimedWord]:
        """One chunk's words on the chunked audio's clock (seconds)."""
        if out.log_probs is None:
            return []
        tokens = best_tokens(out.log_probs[row], int(out.token_lengths[row]), self.drop)
        if not tokens:
            return []
        frames = utterance_frames(out.cif.alphas[row], int(out.lengths[row]), self.tail)
        times = token_times(out.cif.fires[row, :frames], out.cif.alphas[row, :frames], len(tokens))
        times += [times[-1] if times else (0, 0)] * (len(tokens) - len(times))  # FunASR would fail here
        texts = [self.tokenizer.token(t.id) for t in tokens]
        pieces, members, spans = join(texts, times)
        words: list[TimedWord] = []
        space = False
        for piece, which in zip(pieces, members):
            if piece == " ":
                space = True
                continue
            start, end = spans[len(words)] if len(words) < len(spans) else (times[which[0]][0], times[which[-1]][1])
            probability = sum(tokens[k].probability for k in which) / max(1, len(which))
            words.append(TimedWord((" " if space else "") + piece, offset + start / 1000, offset + end / 1000, probability, [tokens[k].id for k in which]))
            space = False
        return words


def _spaced(text: str) -> bool:
    """Whether a word is written with spaces around it (not CJK)."""
    last = text.strip()[-1:] or " "
    return not ("\u4e00" <= last <= "\u9fff")
