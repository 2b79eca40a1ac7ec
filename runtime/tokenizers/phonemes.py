"""Text -> Piper phoneme ids: espeak-ng phonemes with the voice's espeak voice, then its id map.

Phonemization is espeak-ng's, through piper-tts's own binding (``piper.phonemize_espeak``, with
the espeak-ng data it bundles), exactly as Piper calls it: sentence by sentence, punctuation kept
as symbols, language-switch flags dropped, phonemes decomposed into code points (NFD). espeak-ng
and piper-tts are GPL-3; they are the optional ``tts`` extra and imported only here, on first use.
Ids follow Piper's layout: BOS, pad, then each phoneme's ids followed by pad, then EOS.

Characters a voice cannot say are taken out before espeak-ng sees them (it would spell an emoji
as "grinning face" and a Chinese character as "Chinese letter"), and named in one warning:
symbols and emoji (Unicode category So), private-use and unassigned code points, and letters of
another script than the voice's language writes in.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from ..errors import CapabilityError
from ..specs import TokenizerSpec

log = logging.getLogger("oasr")

BOS, EOS, PAD = "^", "$", "_"
PUNCTUATION = set(".,;:!?¡¿—…\"'«»“”()[]- ")  # symbols Piper keeps that carry no sound of their own
_LOCK = threading.Lock()  # espeak-ng holds one global voice
# Longest sentence synthesized in one pass, in phonemes (Piper has no limit): text without sentence
# ends (or with only lowercase after its periods, which espeak-ng does not end a sentence at) would
# otherwise be one sentence, whose attention is quadratic in its length. Longer ones are cut at the
# last clause mark, else the last space, before the limit; ~40 s of speech fit in one pass.
MAX_SENTENCE_PHONEMES = 600
_CLAUSE_MARKS = (",", ";", ":", "—", "…")
# Text goes to espeak-ng in pieces of at most this many characters, cut after a sentence end
# (else at a space), so a long paragraph is never phonemized, and held, all at once.
MAX_PIECE_CHARS = 2000
_SENTENCE_ENDS = (".", "!", "?", "。", "！", "？")
_ESPEAK = None

# The scripts a language's letters are written in, by the first word of their Unicode names; a
# language not listed here keeps every letter.
_SCRIPTS = {
    **dict.fromkeys("af ca cs cy da de en eo es et eu fi fr ga gd hr hu id is it lb lt lv ms mt nl no "
                    "pl pt ro sk sl sq sv sw tr vi".split(), ("LATIN",)),
    **dict.fromkeys("ru uk be bg mk sr kk ky mn".split(), ("CYRILLIC", "LATIN")),
    "el": ("GREEK", "LATIN"), "ka": ("GEORGIAN", "LATIN"), "hy": ("ARMENIAN", "LATIN"),
    "ar": ("ARABIC",), "fa": ("ARABIC",), "ur": ("ARABIC",), "he": ("HEBREW",),
    "hi": ("DEVANAGARI", "LATIN"), "ne": ("DEVANAGARI", "LATIN"), "mr": ("DEVANAGARI", "LATIN"),
    "bn": ("BENGALI", "LATIN"), "ta": ("TAMIL", "LATIN"), "te": ("TELUGU", "LATIN"), "ml": ("MALAYALAM", "LATIN"),
    "kn": ("KANNADA", "LATIN"), "gu": ("GUJARATI", "LATIN"), "pa": ("GURMUKHI", "LATIN"),
    "zh": ("CJK", "LATIN"), "cmn": ("CJK", "LATIN"), "yue": ("CJK", "LATIN"),
    "ja": ("CJK", "HIRAGANA", "KATAKANA", "LATIN"), "ko": ("HANGUL", "LATIN"), "th": ("THAI", "LATIN"),
}


def _espeak():
    global _ESPEAK
    if _ESPEAK is None:
        try:
            _enter_piper_lazily()
            from piper.phonemize_espeak import EspeakPhonemizer
        except ImportError:
            raise CapabilityError(
                "phonemizing text needs espeak-ng through piper-tts (GPL-3): pip install 'oasr-toolchain[tts]'; "
                "or give phonemes with --phonemes"
            ) from None
        _ESPEAK = EspeakPhonemizer()
    return _ESPEAK


def _enter_piper_lazily() -> None:
    """Make ``piper`` importable without running its package ``__init__`` yet, unless it ran.

    That ``__init__`` imports Piper's ONNX voice and onnxruntime with it: 0.1 s and 20 MB of a
    process that phonemizes and never runs an ONNX graph. Submodules import as usual; the first
    other name asked of the package (``from piper import PiperVoice``) runs its ``__init__``.
    """
    if "piper" in sys.modules:
        return
    spec = importlib.util.find_spec("piper")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed (the import after says so) or not a package
    package = importlib.util.module_from_spec(spec)

    def __getattr__(name: str):
        if importlib.util.find_spec(f"piper.{name}") is not None:
            raise AttributeError(name)  # a submodule: the import system loads it
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = __getattr__
    sys.modules["piper"] = package


@dataclass(frozen=True)
class Sentence:
    text: str  # the input it came from (the whole line or paragraph espeak-ng split)
    phonemes: tuple[str, ...]

    @property
    def sayable(self) -> bool:
        """Whether any phoneme is a sound (punctuation and spaces alone say nothing)."""
        return any(p not in PUNCTUATION for p in self.phonemes)


class PiperPhonemes:
    """A Piper voice's phonemizer and id map (``TokenizerSpec`` kind ``piper_phonemes``)."""

    def __init__(self, spec: TokenizerSpec):
        options = spec.options
        self.phoneme_type = options.get("phoneme_type", "espeak")
        self.espeak_voice = options.get("espeak_voice", "")
        self.id_map: Mapping[str, list[int]] = options["phoneme_id_map"]
        self.language = self.espeak_voice.split("-")[0].lower()

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec) -> "PiperPhonemes":
        return cls(spec)

    # -- text ------------------------------------------------------------------------------

    def unsayable(self, text: str) -> list[str]:
        """The distinct characters of ``text`` this voice cannot say, in order of appearance."""
        scripts = _SCRIPTS.get(self.language)
        found: dict[str, None] = {}
        for ch in text:
            if ch not in found and not _sayable(ch, scripts):
                found[ch] = None
        return list(found)

    def clean(self, text: str) -> str:
        """``text`` without the characters the voice cannot say (one warning names them)."""
        bad = self.unsayable(text)
        if not bad:
            return text
        log.warning("skipped %d character(s) the %s voice cannot say: %s", len(bad), self.espeak_voice or "this", " ".join(bad))
        drop = set(bad)
        return "".join(" " if ch in drop else ch for ch in text)

    def sentences(self, text: str) -> Iterator[Sentence]:
        """Sentences of phonemes, as Piper makes them (espeak-ng's sentence ends), a piece of
        ``text`` at a time (``text_pieces``)."""
        for piece in text_pieces(text):
            yield from self._piece_sentences(piece)

    def _piece_sentences(self, text: str) -> Iterator[Sentence]:
        if self.phoneme_type == "text":
            yield Sentence(text, tuple(unicodedata.normalize("NFD", text)))
            return
        espeak = _espeak()
        with _LOCK:
            groups = espeak.phonemize(self.espeak_voice, text)
        for phonemes in groups:
            for piece in split_long(phonemes):
                yield Sentence(text, tuple(piece))

    @staticmethod
    def from_phonemes(line: str) -> Iterator[Sentence]:
        """Phonemes given as they are (``--phonemes``): code points after NFD, as Piper splits them,
        a line past ``MAX_SENTENCE_PHONEMES`` cut as long text is (the network's memory grows
        with the square of its input)."""
        for piece in split_long(list(unicodedata.normalize("NFD", line.strip()))):
            yield Sentence(line, tuple(piece))

    # -- ids -------------------------------------------------------------------------------

    def unknown(self, phonemes) -> list[str]:
        return list(dict.fromkeys(p for p in phonemes if p not in self.id_map))

    def ids(self, phonemes) -> list[int]:
        """Piper's ids: BOS, pad, then each known phoneme's ids and a pad, then EOS."""
        m = self.id_map
        ids = [*m[BOS], *m[PAD]]
        for p in phonemes:
            if p in m:
                ids.extend(m[p])
                ids.extend(m[PAD])
        ids.extend(m[EOS])
        return ids


def text_pieces(text: str, limit: int = MAX_PIECE_CHARS) -> Iterator[str]:
    """``text`` in pieces of at most ``limit`` characters, cut after a sentence end and its space,
    else at the last space (a piece of one unbroken word is cut where it must)."""
    while len(text) > limit:
        window = text[: limit + 1]
        cut = max((i + 1 for i in range(len(window) - 1) if window[i] in _SENTENCE_ENDS and window[i + 1].isspace()), default=0)
        if cut < limit // 4:
            cut = window.rfind(" ") + 1 or limit
        yield text[:cut]
        text = text[cut:]
    if text.strip():
        yield text


def split_long(phonemes: list[str], limit: int = MAX_SENTENCE_PHONEMES) -> Iterator[list[str]]:
    """``phonemes`` in pieces of at most ``limit``, cut after a clause mark or at a space."""
    while len(phonemes) > limit:
        window = phonemes[:limit]
        cut = max((i + 1 for i, p in enumerate(window) if p in _CLAUSE_MARKS), default=0)
        if cut < limit // 4:
            cut = max((i for i, p in enumerate(window) if p == " "), default=0) or limit
        piece, phonemes = phonemes[:cut], phonemes[cut:]
        while phonemes and phonemes[0] == " ":
            phonemes = phonemes[1:]
        if piece:
            yield piece
    if phonemes:
        yield phonemes


def _sayable(ch: str, scripts: tuple[str, ...] | None) -> bool:
    category = unicodedata.category(ch)
    if category in ("So", "Cn", "Co", "Cs") or "VARIATION SELECTOR" in unicodedata.name(ch, ""):
        return False
    if category == "Cf":  # zero-width joiners of emoji sequences and the like: nothing to say, nothing to name
        return True
    if scripts is None or not category.startswith("L"):
        return True
    return unicodedata.name(ch, "").split(" ")[0] in scripts


