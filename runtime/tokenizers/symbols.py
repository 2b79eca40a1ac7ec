"""icefall's ``tokens.txt``: one ``symbol id`` pair a line (k2's symbol table), BPE pieces or characters.

Symbols in angle brackets (``<blk>``, ``<sos/eos>``, ``<unk>``) decode to nothing; SentencePiece's
word mark ``▁`` becomes a space, which is how the engines find where words start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from ..errors import BundleError
from ..specs import TokenizerSpec

ASSET = "tokens.txt"


def read_symbols(path: Path) -> dict[int, str]:
    """id -> symbol of a tokens.txt; a malformed line or a repeated id is an error naming the line."""
    table: dict[int, str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise BundleError(f"{path} is not a readable tokens.txt: {e}") from e
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.rsplit(maxsplit=1)
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise BundleError(f"{path}:{number}: expected 'symbol id', got {line[:40]!r}")
        symbol, index = parts[0], int(parts[1])
        if index in table:
            raise BundleError(f"{path}:{number}: id {index} given twice")
        table[index] = symbol
    if not table:
        raise BundleError(f"{path} holds no symbols")
    return table


class SymbolTokenizer:
    def __init__(self, symbols: Mapping[int, str]):
        self.symbols = dict(symbols)
        self.vocab_size = max(self.symbols) + 1

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec) -> "SymbolTokenizer":
        if ASSET not in files:
            raise BundleError(f"the bundle's symbol tokenizer lacks its {ASSET}")
        return cls(read_symbols(files[ASSET]))

    def token_text(self, token_id: int) -> str:
        symbol = self.symbols.get(int(token_id), "")
        if symbol.startswith("<") and symbol.endswith(">"):
            return ""
        return symbol.replace("\u2581", " ")

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.token_text(i) for i in ids).strip()


def load_tokenizer(files: Mapping[str, Path], spec: TokenizerSpec) -> SymbolTokenizer:
    return SymbolTokenizer.from_files(files, spec)
