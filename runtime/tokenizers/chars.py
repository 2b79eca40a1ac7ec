"""NeMo character vocabularies: the config's ``labels`` (``[" ", "a", ..., "'"]``), id i = labels[i].

The labels travel in ``spec.options["labels"]`` (no asset file); the blank is one past them
(``spec.options["blank_id"]``, ``len(labels)`` when not given) and decodes to nothing. A space
label separates words, which is how the engines group labels into words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import BundleError, InputError
from ..specs import TokenizerSpec


class CharTokenizer:
    def __init__(self, labels: Sequence[str], blank_id: int | None = None):
        if not labels or not all(isinstance(c, str) and c for c in labels):
            raise BundleError("a character vocabulary needs a non-empty list of non-empty labels")
        self.labels = tuple(labels)
        self.vocab_size = len(self.labels)
        self.blank_id = self.vocab_size if blank_id is None else int(blank_id)
        self._ids: dict[str, int] = {}
        for i, c in enumerate(self.labels):
            self._ids.setdefault(c, i)

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec) -> "CharTokenizer":
        labels = spec.options.get("labels")
        if not isinstance(labels, list):
            raise BundleError("the bundle's character tokenizer names no labels (tokenizer options: labels)")
        return cls(labels, spec.options.get("blank_id"))

    def token_text(self, token_id: int) -> str:
        token_id = int(token_id)
        if token_id == self.blank_id or not 0 <= token_id < self.vocab_size:
            return ""
        return self.labels[token_id]

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.token_text(i) for i in ids)

    def encode(self, text: str) -> list[int]:
        """Each character's label id; a character the vocabulary lacks is an error naming it."""
        missing = sorted({c for c in text if c not in self._ids})
        if missing:
            raise InputError(f"the character vocabulary has no label for {', '.join(map(repr, missing[:5]))}")
        return [self._ids[c] for c in text]


def load_tokenizer(files: Mapping[str, Path], spec: TokenizerSpec) -> CharTokenizer:
    return CharTokenizer.from_files(files, spec)
