"""A Hugging Face ``tokenizer.json`` (SentencePiece-style pieces) for CTC and transducer models.

Built by the ``tokenizers`` library. The blank is one past the vocabulary (``spec.options
["blank_id"]``) and decodes to nothing. ``token_text`` gives the text a label adds, with the
word-start marker ``▁`` as a leading space, which is how the engines group labels into words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from tokenizers import Tokenizer

from ..errors import BundleError
from ..specs import TokenizerSpec

WORD_START = "\u2581"  # SentencePiece's "▁"


class TokenizerJson:
    def __init__(self, tokenizer: Tokenizer, blank_id: int | None):
        self.tokenizer = tokenizer
        self.blank_id = blank_id
        self._special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec) -> "TokenizerJson":
        if "tokenizer.json" not in files:
            raise BundleError("the bundle's tokenizer names no tokenizer.json")
        try:
            tok = Tokenizer.from_file(str(files["tokenizer.json"]))
        except Exception as e:  # noqa: BLE001 - the library raises its own exception types
            raise BundleError(f"tokenizer.json is unreadable: {e}") from e
        return cls(tok, spec.options.get("blank_id"))

    def token_text(self, token_id: int) -> str:
        if token_id == self.blank_id or token_id in self._special:
            return ""
        piece = self.tokenizer.id_to_token(int(token_id))
        if piece is None:
            return ""
        if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:  # a byte-fallback piece
            return self.tokenizer.decode([int(token_id)])
        return piece.replace(WORD_START, " ")

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids if i != self.blank_id], skip_special_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids


def load_tokenizer(files: Mapping[str, Path], spec: TokenizerSpec) -> TokenizerJson:
    return TokenizerJson.from_files(files, spec)
