"""Whisper's byte-level BPE with its special, language and timestamp tokens.

Built by the ``tokenizers`` library from ``tokenizer.json`` (or ``vocab.json`` + ``merges.txt``).
Special ids are looked up by their text, never assumed: English-only and multilingual
vocabularies place them differently. Timestamp tokens follow ``<|notimestamps|>`` (0.02 s each)
and need not be in the vocabulary file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from tokenizers import Tokenizer

from ..errors import BundleError, InputError
from ..specs import TokenizerSpec

TIME_PRECISION = 0.02  # seconds per timestamp token


@dataclass(frozen=True)
class WhisperTokenizer:
    tokenizer: Tokenizer
    eot: int
    sot: int
    translate: int
    transcribe: int
    sot_lm: int
    sot_prev: int
    no_speech: int
    no_timestamps: int
    languages: tuple[str, ...]  # codes in id order: languages[i] has id sot + 1 + i
    multilingual: bool  # English-only models carry language tokens too but are never prompted with them

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec | None = None) -> "WhisperTokenizer":
        if "tokenizer.json" in files:
            tok = Tokenizer.from_file(str(files["tokenizer.json"]))
        elif "vocab.json" in files and "merges.txt" in files:
            from tokenizers import decoders, models, pre_tokenizers

            tok = Tokenizer(models.BPE.from_file(str(files["vocab.json"]), str(files["merges.txt"])))
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            tok.decoder = decoders.ByteLevel()
            added = files.get("added_tokens.json")
            if added is not None:
                import json

                names = sorted(json.loads(Path(added).read_text()).items(), key=lambda kv: kv[1])
                tok.add_special_tokens([n for n, _ in names])
        else:
            raise BundleError(f"no Whisper tokenizer assets among {sorted(files) or 'no files'}")
        multilingual = (spec.options.get("multilingual") if spec is not None else None)
        return cls.from_tokenizer(tok, multilingual)

    @classmethod
    def from_tokenizer(cls, tok: Tokenizer, multilingual: bool | None = None) -> "WhisperTokenizer":
        def tid(*names: str) -> int:
            for name in names:
                i = tok.token_to_id(name)
                if i is not None:
                    return i
            raise BundleError(f"the Whisper vocabulary has no {names[0]} token")

        sot = tid("<|startoftranscript|>")
        translate = tid("<|translate|>")
        languages = tuple(tok.id_to_token(i)[2:-2] for i in range(sot + 1, translate))
        eot = tid("<|endoftext|>")
        if multilingual is None:
            multilingual = eot != 50256  # GPT-2's vocabulary (English-only models) ends at 50256
        return cls(
            tokenizer=tok,
            eot=eot,
            sot=sot,
            translate=translate,
            transcribe=tid("<|transcribe|>"),
            sot_lm=tid("<|startoflm|>"),
            sot_prev=tid("<|startofprev|>"),
            no_speech=tid("<|nospeech|>", "<|nocaptions|>"),
            no_timestamps=tid("<|notimestamps|>"),
            languages=languages,
            multilingual=bool(multilingual),
        )

    @property
    def timestamp_begin(self) -> int:
        return self.no_timestamps + 1

    def language_token(self, code: str) -> int:
        try:
            return self.sot + 1 + self.languages.index(code)
        except ValueError:
            raise InputError(f"language {code!r} is not in this model's vocabulary") from None

    def sot_sequence(self, language: str | None = None, task: str = "transcribe", timestamps: bool = True) -> list[int]:
        """The decoder prompt: <|startoftranscript|> [<|lang|> <|task|>] [<|notimestamps|>]."""
        seq = [self.sot]
        if self.multilingual:
            seq.append(self.language_token(language or "en"))
            seq.append(self.translate if task == "translate" else self.transcribe)
        if not timestamps:
            seq.append(self.no_timestamps)
        return seq

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of the ordinary tokens; special and timestamp tokens are left out."""
        return self.tokenizer.decode([i for i in ids if i < self.eot], skip_special_tokens=False)

    def timestamp(self, token: int) -> float:
        return (token - self.timestamp_begin) * TIME_PRECISION

    def non_speech_tokens(self) -> tuple[int, ...]:
        """Tokens of speaker tags and sound annotations ("[DAVID]", "♪♪"), as openai-whisper lists them.

        Hyphens and apostrophes stay allowed inside words, not at their start.
        """
        symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
        symbols += "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪".split()
        miscellaneous = set("♩♪♫♬♭♮♯")  # one 3-byte block: the first token is safe to suppress
        result = {self.encode(" -")[0], self.encode(" '")[0]}
        for symbol in symbols + sorted(miscellaneous):
            for ids in (self.encode(symbol), self.encode(" " + symbol)):
                if len(ids) == 1 or symbol in miscellaneous:
                    result.add(ids[0])
        return tuple(sorted(result))

    def suppressed_tokens(self, configured: Iterable[int] = (-1,)) -> tuple[int, ...]:
        """Ids never sampled: ``configured`` (-1 stands for the non-speech set) and the control tokens."""
        configured = list(configured)
        ids = {i for i in configured if i >= 0}
        if -1 in configured:
            ids.update(self.non_speech_tokens())
        ids.update((self.transcribe, self.translate, self.sot, self.sot_prev, self.sot_lm, self.no_speech))
        return tuple(sorted(ids))

    def blank_tokens(self) -> tuple[int, ...]:
        """Suppressed at the first step only: a leading space and an immediate end-of-text."""
        return (*self.encode(" "), self.eot)


# The asset sets a Whisper tokenizer can be built from, most complete first.
_ASSET_SETS = (("tokenizer.json",), ("vocab.json", "merges.txt", "added_tokens.json"), ("vocab.json", "merges.txt"))


def find_tokenizer_assets(folder: Path) -> dict[str, Path]:
    """Bundle name -> path of the first complete asset set in ``folder``, or {} when none is there."""
    for names in _ASSET_SETS:
        if all((folder / n).is_file() for n in names):
            return {n: folder / n for n in names}
    return {}
