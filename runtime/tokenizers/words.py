"""Splitting Whisper token sequences into words, as openai-whisper's ``split_to_word_tokens`` does.

Most languages split at spaces and punctuation: a word starts at a piece that begins with a space,
at a punctuation mark, and at a special token. Languages written without spaces (Chinese,
Japanese, Thai, Lao, Burmese, Cantonese) split wherever the tokens so far decode to whole
unicode characters, so no character is ever cut between two "words".

Pieces are decoded through the tokenizer itself: a piece that ends inside a multi-byte
character decodes to U+FFFD, the signal for "not a whole character yet".
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from .whisper import WhisperTokenizer

UNSPACED_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "my", "yue"})
REPLACEMENT_CHAR = "\ufffd"


def decode_with_specials(tokenizer: "WhisperTokenizer", tokens: Sequence[int]) -> str:
    """Text of ``tokens`` with special tokens spelled out ("<|endoftext|>", "<|1.08|>").

    Runs of ordinary tokens decode together, so a character split over tokens comes back whole.
    """
    parts: list[str] = []
    run: list[int] = []
    for token in tokens:
        if token < tokenizer.eot:
            run.append(token)
            continue
        if run:
            parts.append(tokenizer.tokenizer.decode(run, skip_special_tokens=False))
            run = []
        if token >= tokenizer.timestamp_begin:
            parts.append(f"<|{(token - tokenizer.timestamp_begin) * 0.02:.2f}|>")
        else:
            parts.append(tokenizer.tokenizer.id_to_token(token) or "")
    if run:
        parts.append(tokenizer.tokenizer.decode(run, skip_special_tokens=False))
    return "".join(parts)


def split_tokens_on_unicode(
    tokenizer: "WhisperTokenizer", tokens: Sequence[int]
) -> tuple[list[str], list[list[int]]]:
    """Groups of consecutive tokens that each decode to whole characters.

    A group closes when its text has no U+FFFD, or when the U+FFFD is in the full text too (bytes
    that are invalid whatever follows them, which waiting cannot repair).
    """
    decoded_full = decode_with_specials(tokenizer, tokens)
    words: list[str] = []
    word_tokens: list[list[int]] = []
    current: list[int] = []
    offset = 0  # characters of decoded_full consumed by closed groups
    for token in tokens:
        current.append(token)
        decoded = decode_with_specials(tokenizer, current)
        bad = decoded.find(REPLACEMENT_CHAR)
        if bad < 0 or (offset + bad < len(decoded_full) and decoded_full[offset + bad] == REPLACEMENT_CHAR):
            words.append(decoded)
            word_tokens.append(current)
            current = []
            offset += len(decoded)
    return words, word_tokens


def split_tokens_on_spaces(
    tokenizer: "WhisperTokenizer", tokens: Sequence[int]
) -> tuple[list[str], list[list[int]]]:
    """Words that start at a leading space, a punctuation mark or a special token."""
    subwords, subword_tokens_list = split_tokens_on_unicode(tokenizer, tokens)
    words: list[str] = []
    word_tokens: list[list[int]] = []
    for subword, subword_tokens in zip(subwords, subword_tokens_list):
        special = subword_tokens[0] >= tokenizer.eot
        with_space = subword.startswith(" ")
        punctuation = subword.strip() in string.punctuation  # "" counts, as in openai-whisper
        if special or with_space or punctuation or not words:
            words.append(subword)
            word_tokens.append(list(subword_tokens))
        else:
            words[-1] = words[-1] + subword
            word_tokens[-1].extend(subword_tokens)
    return words, word_tokens


def split_to_word_tokens(
    tokenizer: "WhisperTokenizer", tokens: Sequence[int], language: str | None = None
) -> tuple[list[str], list[list[int]]]:
    """(words, their tokens): unicode-safe groups for unspaced languages, else spaces and punctuation.

    Every token lands in exactly one word, in order; the words joined give the decoded text.
    """
    if language in UNSPACED_LANGUAGES:
        return split_tokens_on_unicode(tokenizer, tokens)
    return split_tokens_on_spaces(tokenizer, tokens)
