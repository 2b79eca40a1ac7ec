"""oasr's Whisper against the reference implementations pip installs.

- Hugging Face transformers: tiny random checkpoints in every layout the converter reads
  (safetensors, pytorch_model.bin, sharded indexes, 128 mel bins), through a bundle and directly.
- openai-whisper: a tiny random ``.pt`` checkpoint.
- Log-mel features: openai-whisper, transformers' WhisperFeatureExtractor and faster-whisper's
  extractor on real audio; the filterbank against librosa's (openai's mel_filters.npz) and
  transformers' independent Slaney implementation.
- CTranslate2: its own converter's output in every quantization, weights checked against what
  CTranslate2 stored, outputs against transformers and the CTranslate2 runtime.
- Real weights (slow): greedy decoding token-identical to faster-whisper for tiny.en and base.

Random models fill every weight with values of order one (see ``whisper_refs.randomize_``), so a
swapped, transposed or dropped tensor moves the outputs far beyond the 1e-4 tolerances.
"""

from __future__ import annotations

import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.nn.functional as F  # noqa: E402

import whisper_refs as R  # noqa: E402
from oasr.conversion.run import convert  # noqa: E402
from oasr.errors import ConversionError, LoadError  # noqa: E402
from oasr.loading import load_pretrained  # noqa: E402
from oasr.models.whisper import WhisperKVCache  # noqa: E402
from oasr.specs import FeatureSpec  # noqa: E402

ATOL = 1e-4  # fp32 parity: encoder output and decoder logits (logits reach |20|)
N_TOKENS = 12


def make_inputs(n_mels: int, vocab: int, seed: int = 1):
    """A batch of two random mel windows (2 * AUDIO_CTX frames) and token sequences."""
    gen = torch.Generator().manual_seed(seed)
    mel = torch.randn(2, n_mels, 2 * R.AUDIO_CTX, generator=gen)
    tokens = torch.randint(0, vocab, (2, N_TOKENS), generator=gen)
    return mel, tokens


@torch.inference_mode()
def oasr_outputs(loaded, mel, tokens):
    audio = loaded.model.embed_audio(mel)
    return audio, loaded.model.logits(tokens, audio)


@torch.inference_mode()
def cached_logits(loaded, audio, tokens, prompt: int = 4):
    """Logits for every position, decoded with the KV cache: the prompt at once, then one by one."""
    cache = WhisperKVCache()
    steps = [loaded.model.logits(tokens[:, :prompt], audio, cache)]
    for i in range(prompt, tokens.shape[1]):
        steps.append(loaded.model.logits(tokens[:, i : i + 1], audio, cache))
    return torch.cat(steps, dim=1)


def max_diff(a, b) -> float:
    return (a.float() - b.float()).abs().max().item()


def min_cosine(a, b) -> float:
    return F.cosine_similarity(a.flatten(0, -2).float(), b.flatten(0, -2).float(), dim=-1).min().item()


def assert_close(name: str, ours, ref, atol: float = ATOL) -> None:
    assert ours.shape == ref.shape, f"{name}: shape {tuple(ours.shape)} != reference {tuple(ref.shape)}"
    diff = max_diff(ours, ref)
    assert diff <= atol, f"{name}: max |oasr - reference| = {diff:.3g} > {atol:g}"


# -- Hugging Face transformers ------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_reference():
    """(model, mel, tokens, encoder output, logits) of a random 80-bin multilingual-shaped model."""
    model, _ = R.hf_whisper(n_mels=80, vocab=R.MULTILINGUAL_VOCAB, seed=0)
    mel, tokens = make_inputs(80, R.MULTILINGUAL_VOCAB)
    audio = R.hf_encode(model, mel)
    return model, mel, tokens, audio, R.hf_logits(model, tokens, audio)


def test_oasr_sinusoids_are_the_references():
    """The computed encoder buffer equals openai-whisper's and transformers' own functions."""
    from transformers.models.whisper.modeling_whisper import sinusoids as hf_sinusoids

    from oasr.models.whisper import sinusoids

    for length, channels in ((1500, 384), (1500, 1280), (R.AUDIO_CTX, R.D_MODEL)):
        ours = sinusoids(length, channels)
        assert_close("sinusoids vs openai", ours, R.reference_sinusoids(length, channels), atol=1e-6)
        assert_close("sinusoids vs transformers", ours, hf_sinusoids(length, channels).float(), atol=1e-6)


@pytest.mark.parametrize(
    "fmt, n_mels",
    [("safetensors", 80), ("sharded", 80), ("bin", 80), ("sharded-bin", 80), ("safetensors", 128)],
)
def test_hf_parity_through_bundle(fmt, n_mels, hf_reference, tmp_path):
    if n_mels == 80:
        model, mel, tokens, ref_audio, ref_logits = hf_reference
    else:
        model, _ = R.hf_whisper(n_mels=n_mels, vocab=R.MULTILINGUAL_VOCAB, seed=2)
        mel, tokens = make_inputs(n_mels, R.MULTILINGUAL_VOCAB)
        ref_audio = R.hf_encode(model, mel)
        ref_logits = R.hf_logits(model, tokens, ref_audio)
    src = R.save_hf(model, tmp_path / "hf", fmt)
    names = {p.name for p in src.iterdir()}
    if fmt == "sharded":
        assert "model.safetensors.index.json" in names and len([n for n in names if n.endswith(".safetensors")]) > 1
    elif fmt == "bin":
        assert "pytorch_model.bin" in names and not any(n.endswith(".safetensors") for n in names)
    elif fmt == "sharded-bin":
        assert "pytorch_model.bin.index.json" in names and len([n for n in names if n.endswith(".bin")]) > 1

    (result,) = convert([src], tmp_path / "bundle")
    assert (result.status, result.converter, result.dtype) == ("converted", "hf-whisper", "float32")
    assert result.dropped == []
    loaded = load_pretrained(tmp_path / "bundle", device="cpu", dtype="float32")
    assert loaded.config.n_mels == n_mels and loaded.feature_spec.n_mels == n_mels

    audio, logits = oasr_outputs(loaded, mel, tokens)
    assert_close("encoder output", audio, ref_audio)
    assert_close("decoder logits", logits, ref_logits)
    assert_close("decoder logits with the KV cache", cached_logits(loaded, audio, tokens), ref_logits)


def test_hf_directory_loads_without_a_bundle(hf_reference, tmp_path):
    model, mel, tokens, ref_audio, ref_logits = hf_reference
    src = R.save_hf(model, tmp_path / "hf", "safetensors")
    loaded = load_pretrained(src, device="cpu", dtype="float32")
    assert loaded.provenance.source_format == "hf-whisper"
    assert loaded.report.dropped == [] and loaded.report.missing == []
    audio, logits = oasr_outputs(loaded, mel, tokens)
    assert_close("encoder output", audio, ref_audio)
    assert_close("decoder logits", logits, ref_logits)


def test_hf_nonstandard_encoder_positions_are_refused(hf_reference, tmp_path):
    """oasr computes the encoder sinusoid; a source whose values differ is not silently replaced."""
    model = hf_reference[0]
    state = dict(model.state_dict())
    key = "model.encoder.embed_positions.weight"
    gen = torch.Generator().manual_seed(3)
    state[key] = state[key] + 0.05 * torch.randn(state[key].shape, generator=gen)
    src = R.save_hf(model, tmp_path / "hf", "safetensors", state_dict=state)
    from safetensors.torch import load_file

    assert not torch.equal(load_file(src / "model.safetensors")[key], model.model.encoder.embed_positions.weight)
    with pytest.raises(LoadError, match="positional_embedding"):
        convert([src], tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()
    with pytest.raises(LoadError, match="positional_embedding"):
        load_pretrained(src, device="cpu")


def test_hf_untied_output_projection_is_refused(hf_reference, tmp_path):
    """oasr stores the output projection once, as the token embedding: a proj_out that differs
    (an untied checkpoint) must fail rather than be dropped."""
    model = hf_reference[0]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["proj_out.weight"] = state["proj_out.weight"] + 0.01
    src = R.save_hf(model, tmp_path / "hf", "bin", state_dict=state)
    with pytest.raises(ConversionError, match="token_embedding"):
        convert([src], tmp_path / "bundle")


# -- openai-whisper -----------------------------------------------------------------------------


@pytest.mark.parametrize("n_mels", [80, 128])
def test_openai_parity(n_mels, tmp_path):
    pytest.importorskip("whisper")
    model = R.openai_whisper(n_mels=n_mels, vocab=R.MULTILINGUAL_VOCAB, seed=4)
    mel, tokens = make_inputs(n_mels, R.MULTILINGUAL_VOCAB)
    with torch.inference_mode():
        ref_audio = model.encoder(mel)
        ref_logits = model.decoder(tokens, ref_audio)
    src = R.save_openai(model, tmp_path / "tiny-random.pt")

    (result,) = convert([src], tmp_path / "bundle")
    assert (result.converter, result.dtype, result.dropped) == ("openai-whisper", "float32", [])
    loaded = load_pretrained(tmp_path / "bundle", device="cpu", dtype="float32")
    audio, logits = oasr_outputs(loaded, mel, tokens)
    assert_close("encoder output", audio, ref_audio)
    assert_close("decoder logits", logits, ref_logits)
    assert_close("decoder logits with the KV cache", cached_logits(loaded, audio, tokens), ref_logits)


# -- log-mel features ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jfk_audio(jfk_wav):
    from oasr.io.audio import load_audio
    return load_audio(jfk_wav)


@pytest.mark.parametrize("n_mels", [80, 128])
def test_log_mel_matches_references(n_mels, jfk_audio):
    pytest.importorskip("whisper")
    import whisper.audio
    from transformers import WhisperFeatureExtractor

    from oasr.features.logmel import log_mel_spectrogram

    spec = FeatureSpec(kind="whisper_logmel", n_mels=n_mels)
    audio = torch.from_numpy(jfk_audio)
    n_samples = whisper.audio.N_SAMPLES  # 30 s

    # openai-whisper, like with like: no padding, and the 30 s of zeros its transcribe() appends.
    for padding in (0, n_samples):
        ref = whisper.audio.log_mel_spectrogram(audio, n_mels=n_mels, padding=padding)
        ours = log_mel_spectrogram(audio, spec, padding=padding)
        assert ours.shape == ref.shape == (n_mels, (len(audio) + padding) // 160)
        assert_close(f"log-mel vs openai-whisper (padding {padding})", ours, ref)

    # transformers pads (or trims) the audio to 30 s, then frames it the same way.
    hf = WhisperFeatureExtractor(feature_size=n_mels)(jfk_audio, sampling_rate=16000, return_tensors="np")
    ref = torch.from_numpy(hf.input_features[0])
    ours = log_mel_spectrogram(audio, spec, padding=n_samples - len(audio))
    assert_close("log-mel vs transformers' WhisperFeatureExtractor", ours, ref)

    # faster-whisper appends one hop (160 samples) of zeros.
    fw = pytest.importorskip("faster_whisper.feature_extractor")
    ref = torch.from_numpy(fw.FeatureExtractor(feature_size=n_mels)(jfk_audio))
    ours = log_mel_spectrogram(audio, spec, padding=160)
    assert_close("log-mel vs faster-whisper's FeatureExtractor", ours, ref)


@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_filterbank_is_librosas(n_mels):
    """openai-whisper ships librosa.filters.mel(sr=16000, n_fft=400, n_mels) as mel_filters.npz;
    transformers' mel_filter_bank is a second, independent Slaney implementation."""
    pytest.importorskip("whisper")
    import whisper.audio
    from transformers.audio_utils import mel_filter_bank

    from oasr.features.logmel import mel_filterbank

    ours = mel_filterbank(16000, 400, n_mels)
    librosa = whisper.audio.mel_filters("cpu", n_mels)
    hf = mel_filter_bank(
        num_frequency_bins=201, num_mel_filters=n_mels, min_frequency=0.0, max_frequency=8000.0,
        sampling_rate=16000, norm="slaney", mel_scale="slaney",
    )
    assert ours.dtype == torch.float32
    assert_close("filterbank vs librosa (openai's mel_filters.npz)", ours, librosa, atol=1e-7)
    assert_close("filterbank vs transformers' mel_filter_bank", ours, torch.from_numpy(hf).T.float(), atol=1e-7)


# -- real weights: greedy decoding against faster-whisper ---------------------------------------


def _faster_whisper_framing(loaded, audio):
    """faster-whisper's window: log-mel of the audio plus 160 zero samples, the last frame left
    out, then zero frames up to 3000 (not 30 s of zero audio as openai-whisper does)."""
    from oasr.features.logmel import log_mel_spectrogram

    mel = log_mel_spectrogram(torch.from_numpy(audio), loaded.feature_spec, padding=160)
    frames = min(mel.shape[-1] - 1, 3000)
    return F.pad(mel[:, :frames], (0, 3000 - frames))


def _greedy_against_faster_whisper(ct2_dir, bundle, wav, audio, language=None):
    pytest.importorskip("faster_whisper")
    from faster_whisper import WhisperModel

    from whisper_decoding import greedy_decode

    loaded = load_pretrained(bundle, device="cpu", dtype="float32")
    tok = loaded.tokenizer()
    with torch.inference_mode():
        audio_features = loaded.model.embed_audio(_faster_whisper_framing(loaded, audio)[None])
    ours = greedy_decode(
        loaded.model,
        audio_features,
        tok.sot_sequence(language=language, timestamps=False),
        eot=tok.eot,
        suppress=tok.suppressed_tokens(),
        suppress_at_begin=tok.blank_tokens(),
    )
    reference = WhisperModel(str(ct2_dir), device="cpu", compute_type="float32", cpu_threads=2)
    segments, _ = reference.transcribe(
        str(wav),
        language=language,
        beam_size=1,
        temperature=0.0,
        without_timestamps=True,
        condition_on_previous_text=False,
        vad_filter=False,
    )
    expected = [t for seg in segments for t in seg.tokens]
    assert expected, "faster-whisper produced no tokens"
    assert ours == expected, f"oasr {tok.decode(ours)!r} != faster-whisper {tok.decode(expected)!r}"
    return tok.decode(ours)


@pytest.mark.slow
def test_greedy_tiny_en_matches_faster_whisper(tiny_en_ct2, tiny_en_bundle, jfk_wav, jfk_audio):
    text = _greedy_against_faster_whisper(tiny_en_ct2, tiny_en_bundle, jfk_wav, jfk_audio)
    assert "ask not what your country can do for you" in text.lower()


@pytest.mark.slow
def test_greedy_base_multilingual_matches_faster_whisper(base_ct2, jfk_wav, jfk_audio, tmp_path):
    convert([base_ct2], tmp_path / "base")
    text = _greedy_against_faster_whisper(base_ct2, tmp_path / "base", jfk_wav, jfk_audio, language="en")
    assert "ask not what your country can do for you" in text.lower()


# -- CTranslate2 --------------------------------------------------------------------------------

# Stored dtype of the bundle for each CTranslate2 quantization (int8/int16 are dequantised).
CT2_VARIANTS = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "int8": "float32",
    "int8_float32": "float32",
    "int8_float16": "float16",
    "int8_bfloat16": "bfloat16",
    "int16": "float32",
}


@pytest.fixture(scope="module")
def ct2_source(tiny_en_ct2, tmp_path_factory):
    """A random English-only HF model (tiny.en's vocabulary, whose tokenizer.json CTranslate2's
    converter needs), with its reference outputs."""
    pytest.importorskip("ctranslate2")
    model, _ = R.hf_whisper(n_mels=80, vocab=R.ENGLISH_VOCAB, seed=5)
    src = R.save_hf(model, tmp_path_factory.mktemp("hf-en") / "hf", "safetensors")
    shutil.copyfile(tiny_en_ct2 / "tokenizer.json", src / "tokenizer.json")
    mel, tokens = make_inputs(80, R.ENGLISH_VOCAB)
    audio = R.hf_encode(model, mel)
    return model, src, mel, tokens, audio, R.hf_logits(model, tokens, audio)


def _rounded_copy(model, dtype):
    """The HF model with every weight rounded to ``dtype`` (fp32 compute), except the encoder
    sinusoid, which oasr recomputes in full precision."""
    ref = type(model)(model.config).eval()
    ref.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if name != "model.encoder.embed_positions.weight":
                p.copy_(p.to(dtype).float())
    return ref


@pytest.mark.parametrize("quantization", list(CT2_VARIANTS))
def test_ct2_variants(quantization, ct2_source, tmp_path):
    import ctranslate2
    import numpy as np

    from oasr_converters.ctranslate2 import CTranslate2WhisperConverter as ct2_converter

    model, src, mel, tokens, ref_audio, ref_logits = ct2_source
    # Stock output of today's converter: the tied projection is an alias of the embedding (for
    # int8/int16 it shares the embedding's scale), and 4.x adds the scalar decoder/scale_alibi.
    quantized = quantization.startswith("int")
    ct2_dir = R.ct2_convert(src, tmp_path / "ct2", quantization)

    (result,) = convert([ct2_dir], tmp_path / "bundle")
    assert (result.converter, result.dtype) == ("ctranslate2", CT2_VARIANTS[quantization])
    assert all(name.startswith(ct2_converter.expected_unused_prefixes) for name in result.dropped)
    loaded = load_pretrained(tmp_path / "bundle", device="cpu", dtype="float32")

    # Weights: exactly what CTranslate2 stored, dequantised (int8 per row, int16 per tensor) into
    # the bundle's dtype. Names are placed by the converter's table, whose correctness the
    # float32 variant's output parity establishes.
    stored = R.ct2_dequantize(R.ct2_spec_variables(src, quantization))
    bundle_dtype = getattr(torch, CT2_VARIANTS[quantization])
    state = loaded.model.state_dict()
    checked = set()
    for name, value in stored.items():
        targets = ct2_converter.tensor_table.lookup(name)
        if targets is None or value.dim() == 0:
            continue
        chunks = value.chunk(len(targets), dim=0) if len(targets) > 1 else (value,)
        for target, chunk in zip(targets, chunks):
            if target is None or target == "encoder.positional_embedding":  # computed, not stored
                continue
            expected = chunk.to(bundle_dtype).float()
            assert torch.equal(state[target].float(), expected), f"{target} != CTranslate2's {name} ({max_diff(state[target], expected):.3g})"
            checked.add(target)
    assert checked == set(state) - {"encoder.positional_embedding"}
    if quantized:  # the quantization really happened: weights moved off the fp32 originals
        original = model.model.encoder.layers[0].fc1.weight
        assert max_diff(state["encoder.blocks.0.mlp.0.weight"], original) > 1e-4

    audio, logits = oasr_outputs(loaded, mel, tokens)
    if quantization == "float32":
        assert_close("encoder output vs transformers", audio, ref_audio)
        assert_close("decoder logits vs transformers", logits, ref_logits)
    elif quantization in ("float16", "bfloat16"):
        # The same computation as transformers in fp32 with the weights rounded as CTranslate2 did.
        rounded = _rounded_copy(model, getattr(torch, quantization))
        rounded_audio = R.hf_encode(rounded, mel)
        assert_close("encoder output vs rounded transformers", audio, rounded_audio)
        assert_close("decoder logits vs rounded transformers", logits, R.hf_logits(rounded, tokens, rounded_audio))
    # Against the fp32 original: closeness that fits the precision.
    floor = 0.99 if quantized and quantization != "int16" else 0.999
    assert min_cosine(logits, ref_logits) >= floor
    assert min_cosine(audio, ref_audio) >= floor
    if CT2_VARIANTS[quantization] == "float32":
        # CTranslate2's own runtime, computing in fp32 on the same dequantised weights.
        runtime = ctranslate2.models.Whisper(str(ct2_dir), device="cpu", compute_type="float32", intra_threads=2)
        out = runtime.encode(ctranslate2.StorageView.from_array(mel.numpy()), to_cpu=True)
        assert_close("encoder output vs the CTranslate2 runtime", audio, torch.from_numpy(np.array(out)))


@pytest.mark.parametrize("clip", ["asr/jfk.wav", "diarization/sample.wav"])
def test_beam_search_matches_openai_beam_search(tiny_en_bundle, data_dir, clip, monkeypatch):
    """Beam 5 with timestamps, real tiny.en weights, one 30 s window: the tokens and score of
    openai-whisper's BeamSearchDecoder, while the beams move between cache rows (beams whose
    parent died take its rows, copied in place)."""
    whisper = pytest.importorskip("whisper")
    from whisper.model import ModelDimensions, Whisper

    from oasr.decoding.whisper.decode import WhisperDecoder
    from oasr.io.audio import load_audio

    path = data_dir / clip
    loaded = load_pretrained(tiny_en_bundle, device="cpu", dtype="float32")
    dims = ModelDimensions(**{f: getattr(loaded.config, f) for f in ModelDimensions.__dataclass_fields__})
    reference = Whisper(dims)
    missing, unexpected = reference.load_state_dict(loaded.model.state_dict(), strict=False)
    assert not missing and not unexpected
    mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(load_audio(path))))
    expected = whisper.decode(reference.eval(), mel, whisper.DecodingOptions(language="en", beam_size=5, fp16=False))

    copies = []
    copy_rows = WhisperKVCache.copy_rows
    monkeypatch.setattr(WhisperKVCache, "copy_rows", lambda self, dest, source: (copies.append(len(dest)), copy_rows(self, dest, source)))
    decoder = WhisperDecoder(loaded.model, loaded.tokenizer(), beam_size=5)
    tokens, sot = decoder.initial_tokens("en", "transcribe")
    with torch.inference_mode():
        ours = decoder.decode(decoder.prompt(loaded.model.embed_audio(mel[None]), tokens, sot), 0.0)
    assert list(ours.tokens) == expected.tokens, f"oasr {ours.text!r} != openai {expected.text!r}"
    assert ours.avg_logprob == pytest.approx(expected.avg_logprob, abs=1e-4)
    assert copies and max(copies) < 5, "no beam changed rows, or every row was copied"
