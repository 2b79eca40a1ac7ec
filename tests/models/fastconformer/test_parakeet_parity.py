"""FastConformer against transformers' Parakeet (CTC, RNN-T, TDT) on tiny random weights.

Each model is saved with ``save_pretrained`` (weights, config, processor and a SentencePiece-style
``tokenizer.json``), converted by oasr and compared: the encoder output and the head's logits
within 1e-4 in fp32, greedy ids identical (CTC and RNN-T: transformers' ``generate``; TDT: a plain
greedy loop over transformers' own modules, since its ``generate`` takes the argmax over token and
duration logits together), and ``oasr.transcribe`` text identical to transformers' pipeline
(processor, ``generate``, the tokenizer's ``batch_decode``) on jfk.wav.

Random weights are drawn wider than transformers' init (std 1.5 / sqrt(fan-in)) and the blank is
biased so the greedy outputs mix blanks and several labels: a test of all-blank output could not fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import (  # noqa: E402
    ParakeetCTCConfig,
    ParakeetFeatureExtractor,
    ParakeetForCTC,
    ParakeetForRNNT,
    ParakeetForTDT,
    ParakeetProcessor,
    ParakeetRNNTConfig,
    ParakeetTDTConfig,
    ParakeetTokenizer,
)

import oasr  # noqa: E402
from oasr.decoding.ctc.search import greedy_ctc  # noqa: E402
from oasr.decoding.transducer.search import greedy_transducer  # noqa: E402

TOL = 1e-4
PIECES = ["<unk>", "▁the", "▁cat", "▁sat", "▁on", "▁mat", "s", "ed", "ing", "▁a", "▁dog", "▁ran", "er", "▁to",
          "▁and", "ly", "▁big", "▁red", "▁hat", "o"]
BLANK = len(PIECES)  # one past the vocabulary, transformers' pad (CTC) and blank (transducers)
ENCODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
               subsampling_conv_channels=16, num_mel_bins=80, conv_kernel_size=9, subsampling_factor=8)
DURATIONS = [0, 1, 2, 3, 4]


def _tokenizer() -> ParakeetTokenizer:
    tok = Tokenizer(models.Unigram([(p, -1.0 - 0.1 * i) for i, p in enumerate(PIECES)], unk_id=0))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.add_special_tokens(["<pad>"])  # id BLANK
    return ParakeetTokenizer(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>")


def _randomize(model, blank_bias: float, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if ".norm" in name:
                p.copy_(1 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
            elif p.dim() == 1 or "bias_" in name:  # biases, and the attention's position biases
                p.copy_(0.1 * noise)
            elif "embedding" in name:
                p.copy_(noise)
            else:  # wider than transformers' init (std 0.02), so outputs vary with the input
                p.copy_(noise * 1.5 / p[0].numel() ** 0.5)
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm1d):  # inference uses the running statistics
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.2)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
        if hasattr(model, "ctc_head"):
            model.ctc_head.bias[BLANK] += blank_bias
        else:  # the encoder side drives the joint, so labels change with the audio
            model.encoder_projector.weight.mul_(4)
            model.joint.head.bias[BLANK] += blank_bias


def _build(kind: str):
    if kind == "ctc":
        model = ParakeetForCTC(ParakeetCTCConfig(vocab_size=BLANK + 1, pad_token_id=BLANK, encoder_config=ENCODER))
        _randomize(model, 1.5, 0)
    else:
        cls, config_cls, extra = {
            "rnnt": (ParakeetForRNNT, ParakeetRNNTConfig, {}),
            "tdt": (ParakeetForTDT, ParakeetTDTConfig, {"durations": DURATIONS}),
        }[kind]
        config = config_cls(vocab_size=BLANK + 1, blank_token_id=BLANK, pad_token_id=BLANK, decoder_hidden_size=24,
                            num_decoder_layers=2, encoder_config=ENCODER, **extra)
        model = cls(config)
        _randomize(model, 12.0 if kind == "rnnt" else 3.0, 0)
    return model.eval()


@pytest.fixture(scope="module", params=["ctc", "rnnt", "tdt"])
def parakeet(request, tmp_path_factory):
    """(kind, transformers model, processor, its folder, the oasr bundle, the loaded oasr model)."""
    kind = request.param
    model = _build(kind)
    processor = ParakeetProcessor(feature_extractor=ParakeetFeatureExtractor(), tokenizer=_tokenizer())
    folder = tmp_path_factory.mktemp(f"hf-parakeet-{kind}")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    bundle = tmp_path_factory.mktemp(f"oasr-parakeet-{kind}") / "bundle"
    oasr.convert([folder], bundle)
    loaded = oasr.load_pretrained(str(bundle))
    return kind, model, processor, folder, bundle, loaded


def _features(seed: int = 1, frames: int = 700) -> torch.Tensor:
    return torch.randn(1, 80, frames, generator=torch.Generator().manual_seed(seed))


def test_detected_and_complete(parakeet):
    kind, _, _, folder, bundle, loaded = parakeet
    config = json.loads((bundle / "oasr_config.json").read_text())
    assert config["architecture"] == "fastconformer" and config["provenance"]["source_format"] == "hf-parakeet"
    assert config["decoding"]["family"] == kind and config["decoding"]["blank_id"] == BLANK
    assert config["model"]["head"] == kind and config["features"]["kind"] == "nemo_logmel"
    assert config["provenance"]["dropped"] == []  # every HF tensor has a home


def test_encoder_and_head_logits(parakeet):
    kind, hf, _, _, _, loaded = parakeet
    ours = loaded.model.float()
    x = _features()
    with torch.no_grad():
        ref_enc = hf.encoder(input_features=x.transpose(1, 2)).last_hidden_state
        enc, lengths = ours.encode(x, torch.tensor([x.shape[-1]]))
        assert enc.shape == ref_enc.shape
        assert (enc - ref_enc).abs().max() < TOL
        if kind == "ctc":
            ref = hf(input_features=x.transpose(1, 2)).logits
            assert (ours.ctc_logits(enc) - ref).abs().max() < TOL
            return
        # The joint over every frame for a few prediction-network states.
        labels = torch.tensor([[BLANK, 3, 7, 3]])
        ref_g = hf.decoder(labels)  # [1, U, J], transformers runs the projection inside
        ref_f = hf.encoder_projector(ref_enc)
        ref = hf.joint(decoder_hidden_states=ref_g[:, None], encoder_hidden_states=ref_f[:, :, None])
        out, _ = ours.decoder(labels)
        ours_logits = ours.joint_logits(ours.project_encoder(enc)[:, :, None], ours.joint.pred(out)[:, None])
        assert ours_logits.shape == ref.shape == (1, enc.shape[1], 4, BLANK + 1 + (len(DURATIONS) if kind == "tdt" else 0))
        assert (ours_logits - ref).abs().max() < TOL


def test_encoder_long_padded_batch(tmp_path):
    """Inputs longer than a block of position scores (QUERY_BLOCK queries), batched with padding:
    each row's valid frames as transformers encodes that input alone (the encoder is the same
    for every head, so the CTC model stands for all)."""
    from oasr.models.fastconformer.encoder import QUERY_BLOCK

    hf = _build("ctc")
    hf.save_pretrained(tmp_path / "hf")
    ParakeetProcessor(feature_extractor=ParakeetFeatureExtractor(), tokenizer=_tokenizer()).save_pretrained(tmp_path / "hf")
    oasr.convert([tmp_path / "hf"], tmp_path / "bundle")
    ours = oasr.load_pretrained(str(tmp_path / "bundle")).model.float()
    a, b = _features(seed=3, frames=2600), _features(seed=4, frames=1900)
    batch = torch.cat([a, torch.nn.functional.pad(b, (0, a.shape[-1] - b.shape[-1]))])
    with torch.no_grad():
        enc, lengths = ours.encode(batch, torch.tensor([a.shape[-1], b.shape[-1]]))
        assert lengths[1] > QUERY_BLOCK * 1.5  # several blocks in the padded row too
        for row, x in enumerate((a, b)):
            ref = hf.encoder(input_features=x.transpose(1, 2)).last_hidden_state[0]
            assert ref.shape[0] == lengths[row]
            assert (enc[row, : lengths[row]] - ref).abs().max() < TOL


def _reference_tdt_greedy(hf, features: torch.Tensor, max_symbols: int) -> list[int]:
    """NeMo's TDT greedy over transformers' modules: label argmax, duration argmax, a blank moves
    at least one frame, at most ``max_symbols`` labels per frame."""
    with torch.no_grad():
        f = hf.encoder_projector(hf.encoder(input_features=features.transpose(1, 2)).last_hidden_state)[0]
        out, state = hf.decoder.lstm(hf.decoder.embedding(torch.tensor([[BLANK]])))
        g = hf.decoder.decoder_projector(out)[0, 0]
        ids, t, symbols = [], 0, 0
        while t < f.shape[0]:
            logits = hf.joint(decoder_hidden_states=g, encoder_hidden_states=f[t])
            label = int(logits[: BLANK + 1].argmax())
            duration = DURATIONS[int(logits[BLANK + 1 :].argmax())]
            if label == BLANK:
                t, symbols = t + max(duration, 1), 0
                continue
            ids.append(label)
            symbols = symbols + 1 if duration == 0 else 0
            if symbols >= max_symbols:
                duration, symbols = max(duration, 1), 0
            t += duration
            out, state = hf.decoder.lstm(hf.decoder.embedding(torch.tensor([[label]])), state)
            g = hf.decoder.decoder_projector(out)[0, 0]
    return ids


def _reference(kind: str, hf, tokenizer, features: torch.Tensor) -> tuple[list[int], str]:
    """transformers' greedy label ids and its tokenizer's text for them. For CTC the tokenizer
    itself collapses the per-frame best labels (``group_tokens``); transducer ids are already
    labels, where a repeat is two labels."""
    with torch.no_grad():
        if kind == "ctc":
            best = hf.generate(input_features=features.transpose(1, 2))[0].tolist()
            collapsed = [b for i, b in enumerate(best) if i == 0 or b != best[i - 1]]
            return [b for b in collapsed if b != BLANK], tokenizer.decode(best, skip_special_tokens=True)
        if kind == "rnnt":
            out = hf.generate(input_features=features.transpose(1, 2), decoder_start_token_id=BLANK)
            frames = hf.encoder._get_subsampling_output_length(torch.tensor([features.shape[-1]])).item()
            assert out.sequences.shape[1] < hf.config.max_symbols_per_step * frames  # not cut by max_length
            ids = [i for i in out.sequences[0].tolist() if i != BLANK]
        else:
            ids = _reference_tdt_greedy(hf, features, hf.config.max_symbols_per_step)
    return ids, tokenizer.decode(ids, skip_special_tokens=True, group_tokens=False)


def test_greedy_ids_and_text(parakeet):
    kind, hf, processor, _, _, loaded = parakeet
    ours = loaded.model.float()
    x = _features(seed=2)
    ref, text = _reference(kind, hf, processor.tokenizer, x)
    with torch.no_grad():
        enc, lengths = ours.encode(x, torch.tensor([x.shape[-1]]))
        if kind == "ctc":
            ids = [t.id for t in greedy_ctc(ours.ctc_logits(enc)[0].log_softmax(-1), BLANK)]
        else:
            durations = DURATIONS if kind == "tdt" else ()
            ids = [t.id for t in greedy_transducer(ours, enc, lengths, blank_id=BLANK, durations=durations,
                                                  max_symbols=loaded.decoding.options["max_symbols_per_step"])[0]]
    assert len(set(ref)) >= 3, "the random model must emit several different labels"
    assert ids == ref
    tokenizer = loaded.tokenizer()
    assert tokenizer.decode(ids) == text
    assert "".join(tokenizer.token_text(i) for i in ids).strip() == text


def test_transcribe_text_matches_transformers(parakeet, jfk_wav):
    """The whole ``oasr.transcribe`` call against transformers' model and tokenizer on the same
    features (the front end's own parity is tested against NeMo's in its own tests)."""
    import soundfile as sf

    from oasr.features import feature_extractor

    kind, hf, processor, _, bundle, loaded = parakeet
    audio, rate = sf.read(jfk_wav, dtype="float32")
    assert rate == 16000
    features = feature_extractor(loaded.feature_spec)(torch.from_numpy(audio), loaded.feature_spec)
    _, reference = _reference(kind, hf, processor.tokenizer, features[None])
    transcript = oasr.transcribe(audio, str(bundle), oasr.TranscribeOptions(word_timestamps=True))
    assert reference and transcript.text.strip() == reference
    words = [w for s in transcript.segments for w in s.words]
    assert " ".join(w.word.strip() for w in words) == reference
    assert all(0 <= w.start < w.end <= 11.0 + 1e-6 for w in words)
    assert all(a.start <= b.start for a, b in zip(words, words[1:]))
