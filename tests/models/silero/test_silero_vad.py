"""Silero VAD: the TorchScript archive read as data, the network in torch, and speech regions.

Parity: speech probabilities against the silero-vad package's own model (its TorchScript file,
run by the package), regions against its ``get_speech_timestamps`` rules, random tiny weights
against a chunk-by-chunk reference, and regions on real recordings against reference RTTMs.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import oasr  # noqa: E402
from installed_models import pull_installed  # noqa: E402
from oasr.errors import CapabilityError, InputError, UnsafeCheckpointError  # noqa: E402
from oasr.options import TranscribeOptions, VadOptions  # noqa: E402
from oasr.pipelines.vad.silero import detect_speech, speech_probabilities, speech_samples  # noqa: E402
from wer import wer  # noqa: E402

SR = 16000

# torch.jit.script (the synthetic archive) and torch.jit.load (the package's own model) are deprecated.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def silero_package():
    return pytest.importorskip("silero_vad", reason="silero-vad is installed by make install-test")


@pytest.fixture(scope="module")
def vad(silero_package):
    """Our model, converted from the installed package's folder (silero_vad.jit beside other files)."""
    return oasr.load_pretrained(Path(silero_package.__file__).parent / "data", device="cpu")


@pytest.fixture(scope="module")
def reference(silero_package):
    model = silero_package.load_silero_vad()
    return model


def _reference_probabilities(model, audio: np.ndarray) -> np.ndarray:
    """What get_speech_timestamps computes: 512-sample chunks, the last zero-padded, state carried."""
    model.reset_states()
    x = torch.from_numpy(audio)
    x = torch.nn.functional.pad(x, (0, -len(x) % 512))
    with torch.no_grad():
        return np.array([model(x[i : i + 512], SR).item() for i in range(0, len(x), 512)], dtype=np.float32)


def _read(path: Path) -> np.ndarray:
    from oasr.io.audio import load_audio

    return load_audio(path, SR)


# -- a synthetic TorchScript archive with random weights ---------------------------------------------


class _STFT(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("forward_basis_buffer", torch.randn(258, 1, 256) * 0.05)

    def forward(self, x):
        return x


class _Block(nn.Module):
    def __init__(self, i: int, o: int, stride: int):
        super().__init__()
        self.reparam_conv = nn.Conv1d(i, o, 3, stride=stride, padding=1)

    def forward(self, x):
        return x


class _Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTMCell(128, 128)
        self.decoder = nn.Sequential(nn.Dropout(0.1), nn.ReLU(), nn.Conv1d(128, 1, 1), nn.Sigmoid())

    def forward(self, x):
        return x


class _VAD(nn.Module):
    def __init__(self):
        super().__init__()
        self.stft = _STFT()
        self.encoder = nn.Sequential(_Block(129, 128, 1), _Block(128, 64, 2), _Block(64, 64, 2), _Block(64, 128, 1))
        self.decoder = _Decoder()

    def forward(self, x):
        return x


class _Merge(nn.Module):
    def __init__(self):
        super().__init__()
        self._model = _VAD()
        self._model_8k = _VAD()
        self._state = torch.zeros(0)

    def forward(self, x):
        return self._model(x)


for _cls in (_STFT, _Block, _Decoder, _VAD, _Merge):  # the module path the converter recognises
    _cls.__module__ = "vad.model.vad_annotator"


def _chunkwise(net: _VAD, audio: torch.Tensor) -> torch.Tensor:
    """The network as the package's files describe it, one 512-sample chunk (+64 context) at a time."""
    basis = net.stft.forward_basis_buffer
    convs = [b.reparam_conv for b in net.encoder]
    context, state, out = torch.zeros(64), None, []
    for i in range(0, len(audio), 512):
        x = torch.cat([context, audio[i : i + 512]])
        context = x[-64:]
        x = torch.nn.functional.pad(x[None], (0, 64), mode="reflect")[:, None]
        x = torch.nn.functional.conv1d(x, basis, stride=128)
        x = (x[:, :129] ** 2 + x[:, 129:] ** 2).sqrt()
        for conv in convs:
            x = torch.relu(conv(x))
        state = net.decoder.rnn(x[..., 0], state)
        y = net.decoder.decoder(state[0][..., None])
        out.append(y.mean())
    return torch.stack(out)


def test_random_weights_match_chunk_by_chunk(tmp_path, monkeypatch):
    torch.manual_seed(0)
    merge = _Merge().eval()
    torch.jit.script(merge).save(str(tmp_path / "silero_vad.jit"))
    loaded = oasr.load_pretrained(tmp_path, device="cpu")
    assert loaded.architecture == "silero-vad"
    assert all(n.startswith(("_model_8k.", "_state")) for n in loaded.report.dropped)
    audio = torch.randn(512 * 20 + 100) * 0.3
    with torch.no_grad():
        expected = _chunkwise(merge._model, torch.nn.functional.pad(audio, (0, -len(audio) % 512)))
    ours = speech_probabilities(audio.numpy(), loaded)
    assert ours.shape == (21,)
    np.testing.assert_allclose(ours, expected.numpy(), atol=1e-5)
    monkeypatch.setattr("oasr.pipelines.vad.silero.BLOCK_CHUNKS", 4)  # the state carried across blocks
    np.testing.assert_allclose(speech_probabilities(audio.numpy(), loaded), ours, atol=1e-6)


def test_archive_reader_runs_nothing(tmp_path):
    """A data.pkl naming anything beyond module classes, storages and tensors is refused."""
    from oasr.io.torchscript import read_torchscript_tensors

    bad = tmp_path / "silero_vad.jit"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("m/data.pkl", pickle.dumps(os.system))  # not print: importing ray replaces builtins.print
        z.writestr("m/code/__torch__/vad/model/vad_annotator.py", "")
    with pytest.raises(UnsafeCheckpointError, match=r"(posix|os)\.system"):
        read_torchscript_tensors(bad)


@pytest.mark.slow  # real weights: the silero-vad package's model
def test_detects_only_silero_archives(tmp_path, silero_package):
    from oasr.conversion.detect import detect

    folder = Path(silero_package.__file__).parent / "data"
    assert [c.converter.name for c in detect(folder)] == ["silero-vad"]
    assert [c.converter.name for c in detect(folder / "silero_vad.jit")] == ["silero-vad"]
    other = tmp_path / "other.jit"
    torch.jit.script(nn.Linear(2, 2)).save(str(other))
    assert not [c for c in detect(other) if c.converter.name == "silero-vad"]


# -- real weights: parity with the package ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["asr/jfk.wav", "diarization/sample.wav", "diarization/ami/dev00.wav"])
def test_probabilities_match_the_package(vad, reference, data_dir, name):
    audio = _read(data_dir / name)
    ours = speech_probabilities(audio, vad)
    ref = _reference_probabilities(reference, audio)
    diff = float(np.abs(ours - ref).max())
    print(f"\n{name}: {len(ref)} chunks, max |p - p_ref| = {diff:.2e}")
    assert ours.shape == ref.shape and diff < 1e-4


@pytest.mark.slow
def test_regions_match_the_package(vad, reference, data_dir, silero_package):
    audio = _read(data_dir / "diarization" / "sample.wav")
    ref = silero_package.get_speech_timestamps(torch.from_numpy(audio), reference)
    regions = speech_samples(speech_probabilities(audio, vad), len(audio))
    assert regions == [(r["start"], r["end"]) for r in ref] and len(regions) >= 2


def test_region_rules_match_the_package(silero_package):
    """get_speech_timestamps' rules (hysteresis, minimum lengths, padding, splits) on random probabilities."""
    rng = np.random.default_rng(0)
    n_samples = 300 * 512 - 100
    for _ in range(200):
        # Alternating runs of speech-like and silence-like chunks, 32 ms to 0.8 s long, with noise.
        runs = [np.full(rng.integers(1, 25), 0.8 if i % 2 else 0.15) for i in range(40)]
        probs = np.clip(np.concatenate(runs)[:300] + rng.uniform(-0.3, 0.3, 300), 0, 1).astype(np.float32)
        threshold = float(rng.uniform(0.3, 0.7))
        max_speech = float(rng.choice([np.inf, 1.0, 2.5]))
        silence_ms, pad_ms, longest = int(rng.choice([50, 100, 500])), int(rng.choice([0, 30, 200])), bool(rng.integers(2))
        ref = silero_package.get_speech_timestamps_from_probs(
            probs.tolist(), threshold=threshold, max_speech_duration_s=max_speech, min_silence_duration_ms=silence_ms,
            speech_pad_ms=pad_ms, use_max_poss_sil_at_max_speech=longest, audio_length_samples=n_samples,
        )
        options = VadOptions(
            threshold=threshold, max_speech_s=None if np.isinf(max_speech) else max_speech,
            min_silence_s=silence_ms / 1000, speech_pad_s=pad_ms / 1000, split_at_longest_silence=longest,
        )
        assert speech_samples(probs, n_samples, options) == [(r["start"], r["end"]) for r in ref]


# -- real recordings ---------------------------------------------------------------------------------


def _rttm(path: Path) -> dict[str, list[tuple[float, float]]]:
    turns: dict[str, list[tuple[float, float]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        f = line.split()
        if f and f[0] == "SPEAKER":
            turns.setdefault(f[1], []).append((float(f[3]), float(f[3]) + float(f[4])))
    return turns


def _mask(regions, n: int) -> np.ndarray:
    """10 ms frames covered by any region."""
    m = np.zeros(n, dtype=bool)
    for a, b in regions:
        m[round(a * 100) : round(b * 100)] = True
    return m


@pytest.mark.slow
def test_regions_cover_reference_speech(vad, data_dir):
    """Speech in sample.wav and the AMI excerpts, outside 0.25 s collars (as DER scores it)."""
    folder = data_dir / "diarization"
    refs = {**_rttm(folder / "sample.rttm"), **_rttm(folder / "ami" / "debug.train.rttm"),
            **_rttm(folder / "ami" / "debug.development.rttm")}
    totals = {"sample": [0, 0, 0], "ami": [0, 0, 0]}  # reference, missed, false alarm (frames)
    for uri, turns in sorted(refs.items()):
        path = folder / f"{uri}.wav" if uri == "sample" else folder / "ami" / f"{uri}.wav"
        if not path.exists():  # the RTTM lists trn00, whose excerpt is not shipped
            continue
        audio = _read(path)
        n = len(audio) // 160 + 1
        scored = ~_mask([(t - 0.25, t + 0.25) for a, b in turns for t in (max(a, 0.25), b)], n)
        ref, hyp = _mask(turns, n) & scored, _mask(detect_speech(audio, vad), n) & scored
        total = totals["sample" if uri == "sample" else "ami"]
        total[0] += ref.sum()
        total[1] += (ref & ~hyp).sum()
        total[2] += (hyp & ~ref).sum()
    for key, (ref, missed, false_alarm) in totals.items():
        print(f"\n{key}: {ref / 100:.1f} s of reference speech, missed {missed / ref:.3f}, false alarm {false_alarm / ref:.3f}")
    assert totals["sample"][1] / totals["sample"][0] < 0.02 and totals["sample"][2] / totals["sample"][0] < 0.02
    # Silero at its default threshold misses the quieter far-field AMI speech, but adds next to nothing.
    assert totals["ami"][1] / totals["ami"][0] < 0.2 and totals["ami"][2] / totals["ami"][0] < 0.01


@pytest.mark.slow  # real weights: the silero-vad package's model
def test_silence_and_empty_input(vad, data_dir):
    assert detect_speech(_read(data_dir / "diarization" / "ami" / "empty.wav"), vad) == []
    assert detect_speech(np.zeros(0, dtype=np.float32), vad) == []
    assert speech_probabilities(np.zeros(0, dtype=np.float32), vad).shape == (0,)


@pytest.mark.slow
def test_jfk_speech_and_its_pauses(vad, jfk_wav):
    audio = _read(jfk_wav)
    regions = detect_speech(audio, vad)
    print(f"\njfk regions: {regions}")
    assert regions[0][0] < 0.5 and regions[-1][1] > 10.5
    assert sum(b - a for a, b in regions) > 7.5
    # Its pauses (about a second each) end regions, unless only silences of 1.5 s or more may.
    assert len(regions) >= 3 and len(detect_speech(audio, vad, VadOptions(min_silence_s=1.5))) == 1


# -- options and errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, needle",
    [
        ({"threshold": 1.2}, "threshold must lie between 0 and 1"),
        ({"neg_threshold": 0.7}, "negative threshold"),
        ({"min_silence_s": -1}, "must be >= 0"),
        ({"max_speech_s": 0.05}, "maximum speech duration"),
    ],
)
def test_options_are_validated(fields, needle):
    with pytest.raises(InputError, match=needle):
        VadOptions(**fields)


@pytest.mark.slow  # real weights: the silero-vad package's model
def test_wrong_model_and_input(vad, tmp_path):
    from tiny_models import write_openai_pt

    whisper = oasr.load_pretrained(write_openai_pt(tmp_path / "tiny.pt"), device="cpu")
    with pytest.raises(CapabilityError, match="needs a silero-vad model"):
        detect_speech(np.zeros(SR, dtype=np.float32), whisper)
    with pytest.raises(InputError, match="mono"):
        speech_probabilities(np.zeros((2, SR), dtype=np.float32), vad)


# -- the registry name, and transcribe --vad silero -------------------------------------------------------


@pytest.fixture(scope="module")
def pulled(silero_package, tmp_path_factory):
    """`silero-vad` pulled through the registry's PyPI path from the installed package's files."""
    return pull_installed("silero-vad", tmp_path_factory.mktemp("wheels"))


@pytest.mark.slow  # real weights: the silero-vad package's model
def test_registry_name_resolves(pulled, vad):
    from oasr.io.bundle import read_config

    assert read_config(pulled).architecture == "silero-vad"
    audio = np.random.default_rng(0).normal(0, 0.1, 3 * SR).astype(np.float32)
    np.testing.assert_array_equal(speech_probabilities(audio), speech_probabilities(audio, vad))


@pytest.mark.slow
def test_transcribe_with_silero_vad(pulled, tiny_en_bundle, jfk_wav, data_dir):
    """20 s of silence, then jfk: only the speech is decoded and lands at its place in the file."""
    jfk = _read(jfk_wav)
    padded = np.concatenate([np.zeros(20 * SR, dtype=np.float32), jfk])
    tiny = oasr.load_pretrained(tiny_en_bundle, device="cpu", dtype="float32")
    t = oasr.transcribe(padded, tiny, TranscribeOptions(vad="silero"))
    print(f"\n20 s silence + jfk with --vad silero: {[(s.start, s.end) for s in t.segments]}")
    assert wer((data_dir / "asr" / "jfk.txt").read_text(), t.text) <= 0.05
    assert t.segments[0].start >= 19.5 and t.segments[-1].end <= 31.01
