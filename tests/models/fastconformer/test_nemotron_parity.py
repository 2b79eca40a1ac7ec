"""Nemotron ASR (transformers ``nemotron3_5_asr``) against transformers on tiny random weights.

The model is saved with ``save_pretrained`` (weights, config, processor with its feature extractor
and a SentencePiece-style ``tokenizer.json`` whose ``<blank>`` is the last class), converted by
oasr and compared: the front end within 1e-4 of transformers' feature extractor on jfk.wav, the
encoder output and the joint's logits within 1e-4 in fp32, greedy ids identical to transformers'
``generate``, and the text identical to its tokenizer's decode (also through ``oasr.transcribe``).
"""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import (  # noqa: E402
    Nemotron3_5AsrConfig,
    Nemotron3_5AsrForRNNT,
    Nemotron3_5AsrProcessor,
    NemotronAsrStreamingFeatureExtractor,
    PreTrainedTokenizerFast,
)

import oasr  # noqa: E402
from oasr.decoding.transducer.search import greedy_transducer  # noqa: E402

from .test_parakeet_parity import PIECES, _randomize  # noqa: E402

TOL = 1e-4
BLANK = len(PIECES)  # the tokenizer's <blank>, the joint's last class
PROMPTS = {"en": 0, "de": 1, "auto": 5}
ENCODER = dict(model_type="nemotron_asr_streaming_encoder", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=64, subsampling_conv_channels=16, num_mel_bins=80, conv_kernel_size=9,
               subsampling_factor=8, sliding_window=11, default_num_lookahead_tokens=2)


def _tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.Unigram([(p, -1.0 - 0.1 * i) for i, p in enumerate(PIECES)], unk_id=0))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.add_special_tokens(["<blank>"])  # id BLANK
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<unk>")


@pytest.fixture(scope="module")
def nemotron(tmp_path_factory):
    """(transformers model, processor, the oasr bundle, the loaded oasr model)."""
    config = Nemotron3_5AsrConfig(vocab_size=BLANK + 1, blank_token_id=BLANK, pad_token_id=0, decoder_hidden_size=24,
                                  num_decoder_layers=2, encoder_config=ENCODER, num_prompts=8, prompt_intermediate_size=24,
                                  default_prompt_id=PROMPTS["auto"])
    model = Nemotron3_5AsrForRNNT(config)
    _randomize(model, 12.0, 2)
    with torch.no_grad():  # through the prompt fusion too, the encoder drives the joint
        model.prompt_projector.linear_2.weight.mul_(3)
    model.eval()
    processor = Nemotron3_5AsrProcessor(feature_extractor=NemotronAsrStreamingFeatureExtractor(), tokenizer=_tokenizer(),
                                        prompt_dictionary=PROMPTS, num_prompts=8)
    folder = tmp_path_factory.mktemp("hf-nemotron")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    bundle = tmp_path_factory.mktemp("oasr-nemotron") / "bundle"
    oasr.convert([folder], bundle)
    return model, processor, bundle, oasr.load_pretrained(str(bundle))


def test_detected_and_complete(nemotron):
    _, _, bundle, _ = nemotron
    config = json.loads((bundle / "oasr_config.json").read_text())
    assert config["architecture"] == "nemotron-asr" and config["provenance"]["source_format"] == "hf-nemotron-asr"
    assert config["decoding"]["family"] == "rnnt" and config["decoding"]["blank_id"] == BLANK
    assert config["decoding"]["options"]["language_prompts"] == PROMPTS
    assert config["tokenizer"]["options"] == {"blank_id": BLANK, "blank_token": "<blank>"}
    features = config["features"]
    assert features["kind"] == "nemotron_logmel" and features["audio_scale"] == 1.0
    assert features["options"]["preemphasis"] == 0.97 and features["options"]["normalize"] == ""
    assert config["provenance"]["dropped"] == []


def test_front_end_matches_the_feature_extractor(nemotron, jfk_wav):
    import soundfile as sf

    from oasr.features import feature_extractor

    _, processor, _, loaded = nemotron
    audio, rate = sf.read(jfk_wav, dtype="float32")
    ref = processor.feature_extractor(audio, sampling_rate=rate, return_tensors="pt")
    ours = feature_extractor(loaded.feature_spec)(torch.from_numpy(audio), loaded.feature_spec)
    n = int(ref["attention_mask"].sum())
    assert ours.shape == (80, n)
    assert (ours - ref["input_features"][0, :n].T).abs().max() < TOL


def _features(seed: int, frames: int = 700) -> torch.Tensor:
    return torch.randn(1, 80, frames, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("language", ["auto", "de"])
def test_encoder_and_joint_logits(nemotron, language):
    hf, _, _, loaded = nemotron
    ours = loaded.model.float()
    x = _features(1)
    prompt = torch.tensor([PROMPTS[language]])
    with torch.no_grad():
        ref = hf.get_audio_features(input_features=x.transpose(1, 2), prompt_ids=prompt, num_lookahead_tokens=2)
        enc, _ = ours.encoder(x, torch.tensor([x.shape[-1]]))
        assert enc.shape == ref.last_hidden_state.shape
        assert (enc - ref.last_hidden_state).abs().max() < TOL
        f = ours.project_encoder(ours.fuse_prompt(enc, PROMPTS[language]))
        assert (f - ref.pooler_output).abs().max() < TOL
        labels = torch.tensor([[BLANK, 3, 7, 3]])
        ref_logits = hf.joint(decoder_hidden_states=hf.decoder(labels)[:, None], encoder_hidden_states=ref.pooler_output[:, :, None])
        out, _ = ours.decoder(labels)
        logits = ours.joint_logits(f[:, :, None], ours.joint.pred(out)[:, None])
        assert logits.shape == ref_logits.shape == (1, enc.shape[1], 4, BLANK + 1)
        assert (logits - ref_logits).abs().max() < TOL


def _reference(hf, tokenizer, features: torch.Tensor, prompt: int) -> tuple[list[int], str]:
    with torch.no_grad():
        out = hf.generate(input_features=features.transpose(1, 2), decoder_start_token_id=BLANK,
                          prompt_ids=torch.tensor([prompt]), num_lookahead_tokens=2)
    sequences = out.sequences if hasattr(out, "sequences") else out
    ids = [i for i in sequences[0].tolist() if i != BLANK]
    return ids, tokenizer.decode(ids, skip_special_tokens=True)


def test_greedy_ids_and_text(nemotron):
    hf, processor, _, loaded = nemotron
    ours = loaded.model.float()
    x = _features(2)
    ref, text = _reference(hf, processor.tokenizer, x, PROMPTS["auto"])
    with torch.no_grad():
        enc, lengths = ours.encode(x, torch.tensor([x.shape[-1]]))
        ids = [t.id for t in greedy_transducer(ours, enc, lengths, blank_id=BLANK, max_symbols=10)[0]]
    assert len(set(ref)) >= 3, "the random model must emit several different labels"
    assert ids == ref
    assert loaded.tokenizer().decode(ids) == text


def test_transcribe_text_matches_transformers(nemotron, jfk_wav):
    import soundfile as sf

    from oasr.features import feature_extractor

    hf, processor, bundle, loaded = nemotron
    audio, _ = sf.read(jfk_wav, dtype="float32")
    features = feature_extractor(loaded.feature_spec)(torch.from_numpy(audio), loaded.feature_spec)
    for language in ("auto", "de"):
        _, reference = _reference(hf, processor.tokenizer, features[None], PROMPTS[language])
        options = oasr.TranscribeOptions(language=None if language == "auto" else language)
        assert reference and oasr.transcribe(audio, str(bundle), options).text.strip() == reference
    with pytest.raises(oasr.CapabilityError, match="no prompt for 'fr'"):
        oasr.transcribe(audio, str(bundle), oasr.TranscribeOptions(language="fr"))
