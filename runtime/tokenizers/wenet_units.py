"""WeNet's ``units.txt`` (``symbol id`` per line: ``<blank> 0``, ``<unk> 1``, ..., ``<sos/eos>``
last), with the recipe's SentencePiece model beside it when it used BPE.

A unit's text is its symbol with SentencePiece's word-start mark ``▁`` as a leading space (how the
engines group units into words); ``<blank>``, ``<unk>``, ``<sos/eos>`` and other ``<...>`` or
``{...}`` symbols (WeNet's non-language symbols) decode to nothing. Text is encoded with the BPE
model when there is one (and the ``sentencepiece`` package), else unit by unit, spaces as ``▁``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from ..errors import BundleError, InputError
from ..specs import TokenizerSpec

UNITS_FILE = "units.txt"
BPE_FILE = "bpe.model"
WORD_START = "\u2581"


def read_units(path: Path) -> list[str]:
    """Symbols by id; every id from 0 to the largest present, once."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise BundleError(f"cannot read the unit table {path}: {e}") from e
    by_id: dict[int, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise BundleError(f"{path}:{number}: expected 'symbol id', got {line.strip()!r}")
        symbol, index = parts[0], int(parts[1])
        if index in by_id or index < 0:
            raise BundleError(f"{path}:{number}: id {index} is repeated or negative")
        by_id[index] = symbol
    if not by_id or sorted(by_id) != list(range(len(by_id))):
        raise BundleError(f"{path}: ids must run from 0 without gaps")
    return [by_id[i] for i in range(len(by_id))]


def _special(symbol: str) -> bool:
    return (symbol.startswith("<") and symbol.endswith(">")) or (symbol.startswith("{") and symbol.endswith("}"))


class WenetUnits:
    def __init__(self, units: list[str], bpe=None):
        self.units = units
        self.vocab_size = len(units)
        self.bpe = bpe
        self._ids = {s: i for i, s in enumerate(units)}

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec) -> "WenetUnits":
        if UNITS_FILE not in files:
            raise BundleError(f"the bundle's tokenizer has no {UNITS_FILE}")
        units = read_units(files[UNITS_FILE])
        expected = spec.options.get("vocab_size")
        if expected is not None and expected != len(units):
            raise BundleError(f"{UNITS_FILE} holds {len(units)} units, the model was trained with {expected}")
        bpe = None
        if BPE_FILE in files:
            try:
                import sentencepiece
            except ImportError:
                sentencepiece = None
            if sentencepiece is not None:
                bpe = sentencepiece.SentencePieceProcessor()
                bpe.LoadFromSerializedProto(Path(files[BPE_FILE]).read_bytes())
        return cls(units, bpe)

    def token_text(self, token_id: int) -> str:
        token_id = int(token_id)
        if not 0 <= token_id < self.vocab_size or _special(self.units[token_id]):
            return ""
        return self.units[token_id].replace(WORD_START, " ")

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.token_text(i) for i in ids).strip()

    def encode(self, text: str) -> list[int]:
        if self.bpe is not None:
            pieces = self.bpe.encode(text, out_type=str)
        else:
            pieces = [WORD_START if c == " " else c for c in text]
        missing = sorted({p for p in pieces if p not in self._ids})
        if missing:
            raise InputError(f"the unit table has no unit for {', '.join(map(repr, missing[:5]))}")
        return [self._ids[p] for p in pieces]


def load_tokenizer(files: Mapping[str, Path], spec: TokenizerSpec) -> WenetUnits:
    return WenetUnits.from_files(files, spec)
