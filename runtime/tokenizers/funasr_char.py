"""FunASR's ``CharTokenizer`` vocabularies and its text rules (``sentence_postprocess``).

The vocabulary is ``tokens.json`` (a JSON list) or ``tokens.txt`` (one token a line); id i is
token i. Chinese models spell characters; English ones BPE pieces, a piece ending in ``@@``
continuing into the next (``seg_dict`` maps words to pieces: the encoding direction).

FunASR's rules, reproduced in ``join``: ``<s>``, ``</s>``, ``<unk>`` and ``<OOV>`` are dropped; when
every token is Chinese (CJK, digits, ``@``) each is a word; when every token is alphabetic, pieces
are joined at ``@@`` into space-separated words; mixed text does both, a Chinese character
taking back the space after an alphabetic word; then runs of single letters separated by
spaces become one upper-case abbreviation ("a b c" -> "ABC"). Times follow the same grouping.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import BundleError, InputError
from ..specs import TokenizerSpec

DROPPED = ("<s>", "</s>", "<unk>", "<OOV>")
VOCABULARIES = ("tokens.json", "tokens.txt")
SEG_DICT = "seg_dict"


def read_vocabulary(path: Path) -> list[str]:
    """A FunASR token list: ``tokens.json`` or ``tokens.txt``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        tokens = json.loads(text) if Path(path).suffix == ".json" else [line.strip() for line in text.splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BundleError(f"{path}: not a FunASR token list ({e})") from e
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise BundleError(f"{path}: a FunASR token list is a non-empty list of strings")
    return tokens


def read_seg_dict(path: Path) -> dict[str, list[str]]:
    """``seg_dict``: a word, then its pieces, per line."""
    table = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if parts:
            table[parts[0]] = parts[1:]
    return table


def _clean(token: str) -> str:
    for mark in (" ", *DROPPED):
        token = token.replace(mark, "")
    return token


def _is_chinese(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "0" <= ch <= "9" or ch == "@"


def _all_chinese(tokens: Sequence[str]) -> bool:
    # FunASR compares each cleaned token as a whole: one character or it is not Chinese.
    return bool(tokens) and all(_is_chinese(_clean(t)) for t in tokens)


def _all_alpha(tokens: Sequence[str]) -> bool:
    if not tokens:
        return False
    for t in (_clean(t) for t in tokens):
        if not t.isalpha() and t != "'":
            return False
        if t.isalpha() and _is_chinese(t):
            return False
    return True


def _is_letter(word: str) -> bool:
    return len(word) == 1 and word.encode("utf-8").isalpha()


Span = tuple[int, int]  # milliseconds


def _abbreviations(words: list[str], members: list[list[int]], times: list[Span] | None):
    """FunASR's ``abbr_dispose``: single letters separated by single spaces, upper-cased as one."""
    n = len(words)
    begins, ends = [], []
    last = -1
    for i in range(n):
        if i <= last:
            continue
        if _is_letter(words[i]) and i + 2 < n and words[i + 1] == " " and _is_letter(words[i + 2]):
            begins.append(i)
            j = i + 2
            ends.append(j)
            while True:
                j += 1
                if j < n and words[j] == " ":
                    j += 1
                    if j < n and _is_letter(words[j]):
                        ends[-1] = j
                        last = j
                    else:
                        break
                else:
                    break
    index, at = [], 0  # the time of word i: spaces share the next word's
    for w in words:
        index.append(at)
        if w != " ":
            at += 1
    out, out_members, spans = [], [], []
    last = -1
    for i in range(n):
        if i <= last:
            continue
        if i in begins:
            begin = times[index[i]][0] if times is not None else 0
            word, tokens = words[i].upper(), list(members[i])
            j = i + 1
            while j < n:
                tokens += members[j]
                if j in ends:
                    word += words[j].upper()
                    last = j
                    break
                if words[j].encode("utf-8").isalpha():
                    word += words[j].upper()
                j += 1
            out.append(word)
            out_members.append(tokens)
            if times is not None and index[j] < len(times):  # j ends on the abbreviation's last letter
                spans.append((begin, times[index[j]][1]))
        else:
            out.append(words[i])
            out_members.append(members[i])
            if times is not None and index[i] < len(times) and words[i] != " ":
                spans.append((times[index[i]][0], times[index[i]][1]))
    return out, out_members, spans


def join(tokens: Sequence[str], times: Sequence[Span] | None = None) -> tuple[list[str], list[list[int]], list[Span]]:
    """Tokens (and their [start, end] ms) -> FunASR's word list (spaces as " " items), the
    indices of the tokens each word was made of, and one span per word (not per space) when
    ``times`` are given. The text is ``"".join(words).strip()``."""
    kept = [(i, t) for i, t in enumerate(tokens) if t not in DROPPED]
    texts = [t for _, t in kept]
    times = list(times) if times is not None else None
    words: list[str] = []
    members: list[list[int]] = []
    spans: list[Span] = []

    def add(word: str, which: list[int]) -> None:
        words.append(word)
        members.append(which)

    if _all_chinese(texts):
        for i, t in kept:
            add(t.replace(" ", ""), [i])
        spans = list(times) if times is not None else []
    elif _all_alpha(texts):
        item, which, begin, end, fresh = "", [], 0, 0, True
        for k, (i, t) in enumerate(kept):
            if fresh and times is not None:
                begin, end = times[k]
            which.append(i)
            if "@@" in t:
                item += t.replace("@@", "")
                if times is not None:
                    fresh, end = False, times[k][1]
            else:
                add(item + t, which)
                add(" ", [])
                item, which = "", []
                if times is not None:
                    fresh, end = True, times[k][1]
                    spans.append((begin, end))
                    begin = end
    else:
        item, which, begin, end, fresh, blank = "", [], -1, -1, True, False
        for k, (i, t) in enumerate(kept):
            if fresh and times is not None:
                begin, end = times[k]
            if _all_chinese(list(t)):  # here FunASR tests the token's characters one by one
                if blank:
                    words.pop()
                    members.pop()
                add(t, [i])
                blank = False
                if times is not None:
                    fresh = True
                    spans.append((begin, end))
                    begin = end
            elif "@@" in t:
                item += t.replace("@@", "")
                which.append(i)
                blank = False
                if times is not None:
                    fresh, end = False, times[k][1]
            elif _all_alpha(list(t)):
                add(item + t, which + [i])
                add(" ", [])
                item, which, blank = "", [], True
                if times is not None:
                    fresh, end = True, times[k][1]
                    spans.append((begin, end))
                    begin = end
            else:
                add(t, [i])
    return _abbreviations(words, members, spans if times is not None else None)


class FunasrCharTokenizer:
    def __init__(self, tokens: Sequence[str], seg_dict: Mapping[str, list[str]] | None = None, blank_id: int = 0):
        self.tokens = tuple(tokens)
        self.vocab_size = len(self.tokens)
        self.blank_id = blank_id
        self.seg_dict = dict(seg_dict or {})
        self._ids: dict[str, int] = {}
        for i, t in enumerate(self.tokens):
            self._ids.setdefault(t, i)

    @classmethod
    def from_files(cls, files: Mapping[str, Path], spec: TokenizerSpec) -> "FunasrCharTokenizer":
        vocab = next((files[n] for n in VOCABULARIES if n in files), None)
        if vocab is None:
            raise BundleError(f"the bundle's funasr_char tokenizer has no {' or '.join(VOCABULARIES)}")
        seg = read_seg_dict(files[SEG_DICT]) if SEG_DICT in files else None
        return cls(read_vocabulary(vocab), seg, int(spec.options.get("blank_id", 0)))

    def token(self, token_id: int) -> str:
        token_id = int(token_id)
        return self.tokens[token_id] if 0 <= token_id < self.vocab_size else "<unk>"

    def token_text(self, token_id: int) -> str:
        return self.token(token_id)

    def decode(self, ids: Iterable[int]) -> str:
        words, _, _ = join([self.token(i) for i in ids])
        return "".join(words).strip()

    def encode(self, text: str) -> list[int]:
        """FunASR's ``text2tokens``: words through ``seg_dict`` where there is one (an unknown word
        is ``<unk>``), else characters with spaces skipped; then ids."""
        if self.seg_dict:
            pieces = [p for word in text.strip().split() for p in self._segment(word.lower())]
        else:
            pieces = [c for c in text if c != " "]
        unknown = self._ids.get("<unk>")
        missing = sorted({p for p in pieces if p not in self._ids})
        if missing and unknown is None:
            raise InputError(f"the FunASR vocabulary has no token for {', '.join(map(repr, missing[:5]))}")
        return [self._ids.get(p, unknown) for p in pieces]


    def _segment(self, word: str) -> list[str]:
        if word in self.seg_dict:
            return self.seg_dict[word]
        if _SEGMENTABLE.match(word):  # FunASR looks each character up then
            return [p for ch in word for p in self.seg_dict.get(ch, ["<unk>"])]
        return ["<unk>"]


_SEGMENTABLE = re.compile(r"([\u4E00-\u9FA5A-Za-z0-9])")


def load_tokenizer(files: Mapping[str, Path], spec: TokenizerSpec) -> FunasrCharTokenizer:
    return FunasrCharTokenizer.from_files(files, spec)
