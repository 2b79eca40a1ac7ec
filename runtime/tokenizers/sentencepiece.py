"""NeMo's SentencePiece tokenizers (the ``tokenizer.model`` artifact of a BPE or unigram model),
through the ``sentencepiece`` library.

The model's ids are NeMo's label ids (its ``vocab_size`` pieces, ``<unk>`` included); the blank
sits one past them (``spec.options["blank_id"]``, the vocabulary size when not given) and
decodes to nothing, as do ids the vocabulary lacks and control pieces. ``token_text`` gives the
text a label adds with the word-start marker ``▁`` as a leading space: how the engines group
labels into words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from ..errors import BundleError
from ..specs import TokenizerSpec

MODEL_FILE = "tokenizer.model"
WORD_START = "\u2581"  # SentencePiece's "▁"


class SentencePieceTokenizer:
    def __init__(self, processor, blank_id: int | None = None):
        self.processor = processor
        self.vocab_size = int(processor.get_piece_size())
        self.blank_id = self.vocab_size if blank_id is None else int(blank_id)

    @classmethod
    def from_file(cls, path: Path, blank_id: int | None = None) -> "SentencePieceTokenizer":
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor()
        try:
            data = Path(path).read_bytes()
            processor.LoadFromSerializedProto(data)
        except OSError as e:
            raise BundleError(f"cannot read the SentencePiece model {path}: {e.strerror or e}") from e
        except Exception as e:  # noqa: BLE001 - the library raises RuntimeError or its own types on bad bytes
            raise BundleError(f"{path} is not a SentencePiece model: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}") from e
        return cls(processor, blank_id)

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec) -> "SentencePieceTokenizer":
        if MODEL_FILE not in files:
            raise BundleError(f"the bundle's tokenizer has no {MODEL_FILE} (it has {', '.join(sorted(files)) or 'nothing'})")
        tokenizer = cls.from_file(files[MODEL_FILE], spec.options.get("blank_id"))
        expected = spec.options.get("vocab_size")
        if expected is not None and expected != tokenizer.vocab_size:
            raise BundleError(f"{MODEL_FILE} holds {tokenizer.vocab_size} pieces, the model was trained with {expected}")
        return tokenizer

    def _known(self, token_id: int) -> bool:
        return 0 <= token_id < self.vocab_size and token_id != self.blank_id and not self.processor.is_control(token_id)

    def token_text(self, token_id: int) -> str:
        token_id = int(token_id)
        if not self._known(token_id):
            return ""
        if self.processor.is_byte(token_id) or self.processor.is_unknown(token_id):
            return self.processor.decode([token_id])  # a byte as its character, <unk> as the library shows it (" ⁇ ")
        return self.processor.id_to_piece(token_id).replace(WORD_START, " ")

    def decode(self, ids: Iterable[int]) -> str:
        return self.processor.decode([int(i) for i in ids if self._known(int(i))])

    def encode(self, text: str) -> list[int]:
        return list(self.processor.encode(text, out_type=int))


def load_tokenizer(files: Mapping[str, Path], spec: TokenizerSpec) -> SentencePieceTokenizer:
    return SentencePieceTokenizer.from_files(files, spec)
