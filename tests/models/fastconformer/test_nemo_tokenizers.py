"""Issue 12 (part B): NeMo's tokenizers: SentencePiece ``tokenizer.model`` and character labels.

The SentencePiece model is trained here (``SentencePieceTrainer.train`` on a few sentences);
ids and text must round-trip exactly as the sentencepiece library gives them, the blank
(the vocabulary size) decoding to nothing.
"""

from __future__ import annotations

import pytest

import nemo_fixtures as nf
from oasr.errors import BundleError, InputError
from oasr.specs import TokenizerSpec
from oasr.tokenizers import load_tokenizer

sentencepiece = pytest.importorskip("sentencepiece")

TEXTS = ["ask not what your country can do for you", "the lazy dog jumps over the quick brown fox", "speech, into text!"]


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def sp_model(request, tmp_path_factory):
    return nf.train_sentencepiece(tmp_path_factory.mktemp(request.param), vocab_size=48, model_type=request.param)


def test_sentencepiece_round_trip_matches_the_library(sp_model):
    ref = sentencepiece.SentencePieceProcessor(model_file=str(sp_model))
    tok = load_tokenizer(TokenizerSpec(kind="sentencepiece", files=("tokenizer.model",), options={"blank_id": 48}), {"tokenizer.model": sp_model})
    assert tok.vocab_size == ref.get_piece_size() == 48 and tok.blank_id == 48
    for text in TEXTS:
        ids = ref.encode(text)
        assert tok.encode(text) == ids
        assert tok.decode(ids) == ref.decode(ids)
        assert tok.decode([tok.blank_id, *ids, tok.blank_id]) == ref.decode(ids)  # the blank adds nothing
        # Words from labels: a piece that starts a word gives a leading space.
        words = "".join(tok.token_text(i) for i in ids)
        assert words.split() == ref.decode(ids).split()
        assert all(tok.token_text(i).startswith(" ") == ref.id_to_piece(i).startswith("\u2581") for i in ids if not ref.is_unknown(i))
    assert tok.token_text(tok.blank_id) == "" and tok.token_text(10_000) == ""


def test_sentencepiece_refuses_a_model_of_another_size(sp_model, tmp_path):
    spec = TokenizerSpec(kind="sentencepiece", files=("tokenizer.model",), options={"vocab_size": 1024})
    with pytest.raises(BundleError, match="48 pieces"):
        load_tokenizer(spec, {"tokenizer.model": sp_model})
    junk = tmp_path / "tokenizer.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(BundleError, match="not a SentencePiece model"):
        load_tokenizer(TokenizerSpec(kind="sentencepiece", files=("tokenizer.model",)), {"tokenizer.model": junk})


def test_character_labels():
    spec = TokenizerSpec(kind="nemo_chars", options={"labels": nf.CHAR_LABELS, "blank_id": len(nf.CHAR_LABELS)})
    tok = load_tokenizer(spec, {})
    text = "ask not what your country can do"
    ids = tok.encode(text)
    assert ids[:3] == [1, 19, 11] and ids[3] == 0  # " " is label 0, "a" 1
    assert tok.decode([tok.blank_id, *ids, tok.blank_id]) == text
    assert tok.token_text(0) == " " and tok.token_text(tok.blank_id) == ""
    with pytest.raises(InputError, match="'!'"):
        tok.encode("yes!")
    with pytest.raises(BundleError, match="labels"):
        load_tokenizer(TokenizerSpec(kind="nemo_chars"), {})
