"""Issue 12 (part B): NeMo's mel front end (``nemo_logmel``).

References: transformers' ``ParakeetFeatureExtractor`` (NeMo's default FastConformer front end,
reimplemented by transformers) on real speech, and, for the settings it does not cover, a plain
batch reference written here from NeMo's ``FilterbankFeatures.forward`` (one STFT over the whole
padded batch, librosa's filterbank), which the windowed implementation must match at every
block seam.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from oasr.features import feature_extractor
from oasr.features import nemo_mel
from oasr.features.nemo_mel import nemo_feature_spec, nemo_log_mel, nemo_log_mel_batch

PARAKEET = dict(sample_rate=16000, n_fft=512, win_length=400, hop_length=160, n_mels=80, pad_to=0)


def _read(path) -> torch.Tensor:
    import soundfile as sf

    audio, rate = sf.read(path, dtype="float32")
    assert rate == 16000
    return torch.from_numpy(audio)


@pytest.fixture(scope="module")
def clips(data_dir):
    return {"jfk": _read(data_dir / "asr" / "jfk.wav"), "sample": _read(data_dir / "diarization" / "sample.wav")}


@pytest.mark.parametrize("clip", ["jfk", "sample"])
def test_matches_transformers_parakeet_features(clip, clips):
    from transformers import ParakeetFeatureExtractor

    audio = clips[clip]
    fe = ParakeetFeatureExtractor()
    ref = fe(audio.numpy(), sampling_rate=16000, return_tensors="pt")
    spec = nemo_feature_spec(PARAKEET)
    ours = feature_extractor(spec)(audio, spec)  # through the oasr.features entry point
    valid = int(ref["attention_mask"][0].sum())
    assert ours.shape == (80, valid) == (80, len(audio) // 160)
    err = (ours - ref["input_features"][0, :valid].T).abs().max().item()
    assert err <= 1e-4, f"{clip}: normalised features differ from transformers' by {err:.2e}"
    # Before normalisation (which divides by standard deviations as small as 0.02 on the
    # telephone clip's empty top band) the log-mel values agree to the float32 rounding.
    raw = nemo_log_mel(audio, dataclasses.replace(spec, options={**spec.options, "normalize": ""}))
    emphasised = torch.cat([audio[:1], audio[1:] - 0.97 * audio[:-1]])[None]
    ref_raw = fe._torch_extract_fbank_features(emphasised)[0, :valid].T
    assert (raw - ref_raw).abs().max().item() <= 1e-5


# -- a plain batch reference, written from NeMo's FilterbankFeatures.forward ------------------


def _nemo_reference(audio: torch.Tensor, lengths: torch.Tensor, s: nemo_mel.NemoMelSettings) -> tuple[torch.Tensor, torch.Tensor]:
    import librosa

    x = audio.clone()
    pad = (s.n_fft - s.hop_length) // 2 if s.exact_pad else None
    seq_len = torch.floor_divide(lengths + (2 * pad if pad is not None else s.n_fft // 2 * 2) - s.n_fft, s.hop_length)
    if pad is not None:
        x = torch.nn.functional.pad(x.unsqueeze(1), (pad, pad), "constant").squeeze(1)
    if s.preemphasis is not None:
        mask = torch.arange(x.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
        x = torch.cat((x[:, 0].unsqueeze(1), x[:, 1:] - s.preemphasis * x[:, :-1]), dim=1).masked_fill(~mask, 0.0)
    window = getattr(torch, f"{s.window}_window")(s.win_length, periodic=False)
    spec = torch.stft(x, s.n_fft, s.hop_length, s.win_length, window=window, center=pad is None, return_complex=True, pad_mode="constant")
    spec = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1))
    if s.mag_power != 1.0:
        spec = spec.pow(s.mag_power)
    fb = torch.tensor(librosa.filters.mel(sr=s.sample_rate, n_fft=s.n_fft, n_mels=s.n_mels, fmin=s.lowfreq,
                                          fmax=s.highfreq or s.sample_rate / 2, norm=s.mel_norm), dtype=torch.float)
    spec = fb @ spec
    guard = s.log_zero_guard_value
    if isinstance(guard, str):
        guard = torch.finfo(spec.dtype).tiny if guard == "tiny" else torch.finfo(spec.dtype).eps
    spec = torch.log(spec + guard) if s.log_zero_guard_type == "add" else torch.log(torch.clamp(spec, min=guard))
    valid = torch.arange(spec.shape[-1])[None, :] < seq_len[:, None]
    if s.normalize == "per_feature":
        n = valid.sum(1)[:, None]
        mean = torch.where(valid[:, None], spec, 0.0).sum(2) / n
        std = torch.sqrt(torch.where(valid[:, None], spec - mean[..., None], 0.0).pow(2).sum(2) / (n - 1)) + 1e-5
        spec = (spec - mean[..., None]) / std[..., None]
    elif s.normalize == "all_features":
        for i in range(spec.shape[0]):
            part = spec[i, :, : seq_len[i]]
            spec[i] = (spec[i] - part.mean()) / (part.std() + 1e-5)
    spec = spec.masked_fill(~valid[:, None], s.pad_value)
    if s.pad_to and spec.shape[-1] % s.pad_to:
        spec = torch.nn.functional.pad(spec, (0, s.pad_to - spec.shape[-1] % s.pad_to), value=s.pad_value)
    return spec, seq_len


VARIANTS = {
    "parakeet, pad_to 16": dict(pad_to=16),
    "clamp to eps": dict(log_zero_guard_type="clamp", log_zero_guard_value="eps", pad_to=16, pad_value=-1.5),
    "magnitude, all features": dict(mag_power=1.0, normalize="all_features"),
    "hamming, band-limited, unnormalised mel": dict(window="hamming", lowfreq=100.0, highfreq=6000.0, mel_norm=None, normalize=""),
    "exact pad": dict(exact_pad=True, pad_to=8),
    "exact pad, no preemphasis": dict(exact_pad=True, preemphasis=None, n_mels=64, win_length=320),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_matches_nemo_forward_in_blocks(variant, clips, monkeypatch):
    """A batch of two lengths, computed 37 frames at a time: NeMo's whole-batch output."""
    monkeypatch.setattr(nemo_mel, "BLOCK", 37)
    spec = nemo_feature_spec({**PARAKEET, **VARIANTS[variant]})
    settings = nemo_mel.NemoMelSettings.from_spec(spec)
    audio = clips["jfk"][:48_000]
    batch = torch.stack([audio, torch.cat([audio[:30_001], torch.zeros(48_000 - 30_001)])])
    lengths = torch.tensor([48_000, 30_001])
    ours, ours_len = nemo_log_mel_batch(batch, lengths, spec)
    ref, ref_len = _nemo_reference(batch, lengths, settings)
    assert torch.equal(ours_len, ref_len)
    assert ours.shape == ref.shape
    assert (ours - ref).abs().max().item() <= 1e-4, variant
    # One signal alone: its valid frames, and with padded=True NeMo's own padded output.
    single = nemo_log_mel(audio[:30_001], spec)
    assert single.shape[-1] == int(ref_len[1])
    assert (single - ref[1, :, : single.shape[-1]]).abs().max().item() <= 1e-4
    padded = nemo_log_mel(audio[:30_001], spec, padded=True)
    alone, _ = _nemo_reference(audio[None, :30_001], lengths[1:], settings)
    assert padded.shape == alone[0].shape and (padded - alone[0]).abs().max().item() <= 1e-4


def test_unsupported_settings_are_refused_at_conversion():
    from oasr.errors import ConversionError

    for bad in (dict(window="kaiser"), dict(log_zero_guard_type="max"), dict(mel_norm="l2"), dict(normalize="per_utterance"), dict(win_length=1024)):
        with pytest.raises(ConversionError):
            nemo_feature_spec({**PARAKEET, **bad})
    with pytest.raises(ConversionError, match="unknown setting"):
        nemo_feature_spec({**PARAKEET, "frame_splicing": 3})


def test_long_audio_is_computed_in_blocks():
    """Ten minutes go through 20 STFTs of one block each: the whole STFT (1.4 GB for an hour at
    512 points) is never held, only the output and one block."""
    spec = nemo_feature_spec(PARAKEET)
    seen: list[int] = []
    real_stft = torch.stft

    def spy(x, *a, **k):
        seen.append(x.shape[-1])
        return real_stft(x, *a, **k)

    audio = torch.from_numpy(np.random.default_rng(0).standard_normal(16000 * 600).astype(np.float32)) * 0.1
    try:
        torch.stft = spy
        out = nemo_log_mel(audio, spec)
    finally:
        torch.stft = real_stft
    assert out.shape == (80, 60_000)
    assert len(seen) == 20 and max(seen) <= nemo_mel.BLOCK * 160 + 512
