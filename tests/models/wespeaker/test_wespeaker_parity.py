"""WeSpeaker ResNet speaker embeddings against pyannote.audio's own implementation, on random weights.

No trained WeSpeaker weights are reachable here (the hubs are not; no PyPI package carries them),
so parity runs on random ones; accuracy with the trained encoder is not measured.

The references, installed for the tests only (``make install-test``):
- pyannote.audio 3.3.2 (``--no-deps``): its ``models/embedding/wespeaker`` package (the ResNet,
  TSTP pooling, ``compute_fbank``) loaded on its own: the package's ``__init__`` would import
  Lightning, torchaudio and torch-audiomentations, so the parent packages are bare module objects
  pointing at the installed folders, and ``core.model.Model`` / ``core.task`` are stand-ins (an
  ``nn.Module`` that records its ``__init__`` arguments as ``hparams``, as Lightning's
  ``save_hyperparameters`` does; the task's enums and specifications for the checkpoint);
- Kaldi's fbank as ``torchaudio.compliance.kaldi.fbank``: PyPI's torchaudio does not load beside
  this CPU torch build (``libc10_cuda.so``), but ``compliance/kaldi.py`` is pure Python over torch;
  it is read out of the torchaudio wheel that ``make install-test`` downloads (never installed)
  and run with a stand-in ``torchaudio`` module (it uses torchaudio itself only for MFCCs).
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import os
import sys
import types
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

torch = pytest.importorskip("torch")

import oasr  # noqa: E402
from oasr.features.fbank import FbankOptions, centered_fbank, kaldi_fbank  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
WHEELS = Path(os.environ.get("OASR_REFERENCE_WHEELS", ROOT / ".weights" / "reference"))
TOLERANCE = 1e-4
SR = 16000


# -- the references -----------------------------------------------------------------------------


def _kaldi_module() -> types.ModuleType:
    wheels = sorted(WHEELS.glob("torchaudio-*.whl"))
    if not wheels:
        pytest.skip(f"no torchaudio wheel in {WHEELS} (make install-test downloads it)")
    with zipfile.ZipFile(wheels[-1]) as z:
        source = z.read("torchaudio/compliance/kaldi.py").decode()
    module = types.ModuleType("torchaudio.compliance.kaldi")
    module.__file__ = f"{wheels[-1].name}/torchaudio/compliance/kaldi.py"
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # its `import torchaudio`: the stand-in
    return module


class _Hparams(dict):
    __getattr__ = dict.__getitem__


class _StandInModel(torch.nn.Module):
    """pyannote's ``Model`` (a LightningModule) reduced to what the WeSpeaker classes use of it."""

    def __init__(self, sample_rate: int = 16000, num_channels: int = 1, task=None):
        super().__init__()

    def save_hyperparameters(self, *names):
        caller = inspect.currentframe().f_back.f_locals  # the __init__ that called it, as Lightning reads it
        self.hparams = _Hparams({n: caller[n] for n in names})


def _stand_in_task() -> types.ModuleType:
    task = types.ModuleType("pyannote.audio.core.task")
    task.Task = object
    task.Problem = enum.Enum("Problem", {"REPRESENTATION": 3}, module=task.__name__)
    task.Resolution = enum.Enum("Resolution", {"CHUNK": 2}, module=task.__name__)
    task.Specifications = type("Specifications", (), {"__module__": task.__name__, "__qualname__": "Specifications"})
    return task


@pytest.fixture(scope="module")
def ref():
    """(pyannote's wespeaker package, the resnet module, Kaldi's fbank module), loaded alone."""
    spec = importlib.util.find_spec("pyannote.audio")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pyannote.audio is not installed (make install-test: pip install --no-deps pyannote.audio==3.3.2)")
    pytest.importorskip("einops", reason="pyannote's ResNet uses einops")
    root = Path(next(iter(spec.submodule_search_locations)))
    before = {n: m for n, m in sys.modules.items() if n.startswith(("pyannote.audio", "torchaudio"))}
    packages = {"pyannote.audio": root, "pyannote.audio.core": root / "core", "pyannote.audio.models": root / "models",
                "pyannote.audio.models.blocks": root / "models" / "blocks", "pyannote.audio.utils": root / "utils",
                "pyannote.audio.models.embedding": root / "models" / "embedding"}
    stand_ins = {}
    for name, folder in packages.items():
        stand_ins[name] = types.ModuleType(name)
        stand_ins[name].__path__ = [str(folder)]
    stand_ins["pyannote.audio.core.model"] = types.ModuleType("pyannote.audio.core.model")
    stand_ins["pyannote.audio.core.model"].Model = _StandInModel
    stand_ins["pyannote.audio.core.task"] = _stand_in_task()
    torchaudio = types.ModuleType("torchaudio")
    torchaudio.compliance = types.ModuleType("torchaudio.compliance")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "torchaudio", torchaudio)
        torchaudio.compliance.kaldi = kaldi = _kaldi_module()
        stand_ins.update({"torchaudio.compliance": torchaudio.compliance, "torchaudio.compliance.kaldi": kaldi})
        for name, module in stand_ins.items():
            mp.setitem(sys.modules, name, module)
        wespeaker = importlib.import_module("pyannote.audio.models.embedding.wespeaker")
        resnet = importlib.import_module("pyannote.audio.models.embedding.wespeaker.resnet")
        yield types.SimpleNamespace(wespeaker=wespeaker, resnet=resnet, kaldi=kaldi, task=stand_ins["pyannote.audio.core.task"])
    for name in [n for n in sys.modules if n.startswith(("pyannote.audio", "torchaudio"))]:
        if name not in before:
            del sys.modules[name]
    sys.modules.update(before)


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Random batch-norm statistics and affine terms too, so no layer is the identity."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
                m.num_batches_tracked.fill_(1000)
                if m.affine:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=g) * 0.5 + 0.75)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    model.eval()


def _pyannote_checkpoint(ref, model, path: Path) -> None:
    """A checkpoint as pyannote.audio's ``wespeaker/convert.py`` writes one (task specifications pickled)."""
    specifications = ref.task.Specifications()
    specifications.__dict__.update(problem=ref.task.Problem.REPRESENTATION, resolution=ref.task.Resolution.CHUNK, duration=5.0)
    torch.save({
        "state_dict": model.state_dict(),
        "pyannote.audio": {
            "versions": {"torch": "2.1.1", "pyannote.audio": "3.1.0"},
            "architecture": {"module": "pyannote.audio.models.embedding.wespeaker", "class": type(model).__name__},
            "specifications": specifications,
        },
        "pytorch-lightning_version": "2.1.2",
    }, path)


@pytest.fixture(scope="module")
def resnet34(ref, tmp_path_factory):
    """(pyannote's WeSpeakerResNet34 with random weights, ours loaded from its checkpoint)."""
    torch.manual_seed(0)
    model = ref.wespeaker.WeSpeakerResNet34()
    _randomise(model, 1)
    folder = tmp_path_factory.mktemp("wespeaker-pyannote")
    _pyannote_checkpoint(ref, model, folder / "pytorch_model.bin")
    return model, oasr.load_pretrained(folder, device="cpu", dtype="float32")


def _audio(data_dir: Path, name: str) -> np.ndarray:
    samples, rate = sf.read(data_dir / name, dtype="float32")
    assert rate == SR and samples.ndim == 1
    return samples


@pytest.fixture(scope="module")
def jfk(data_dir):
    return _audio(data_dir, "asr/jfk.wav")


@pytest.fixture(scope="module")
def sample(data_dir):
    return _audio(data_dir, "diarization/sample.wav")


def _worst(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference, relative to the reference's largest magnitude."""
    return float((a - b).abs().max() / b.abs().max())


# -- the front end ------------------------------------------------------------------------------


def test_fbank_matches_kaldi(ref, jfk):
    x = torch.from_numpy(jfk) * (1 << 15)
    expected = ref.kaldi.fbank(x[None], num_mel_bins=80, frame_length=25.0, frame_shift=10.0, dither=0.0,
                               sample_frequency=SR, window_type="hamming", use_energy=False)
    ours = kaldi_fbank(x)
    assert ours.shape == expected.shape == (1 + (len(jfk) - 400) // 160, 80)
    print(f"\nfbank vs Kaldi on jfk.wav: max |diff| {float((ours - expected).abs().max()):.3g}")
    assert float((ours - expected).abs().max()) <= TOLERANCE
    # Batched, with the other Kaldi windows and a shorter clip (the frame count rule).
    for window in ("hanning", "povey", "rectangular"):
        options = FbankOptions(window=window, num_mel_bins=40)
        expected = ref.kaldi.fbank(x[None, :8000], num_mel_bins=40, dither=0.0, window_type=window)
        assert float((kaldi_fbank(torch.stack([x[:8000], x[:8000]]), options)[1] - expected).abs().max()) <= TOLERANCE


def test_fbank_shorter_than_a_window_has_no_frames():
    assert kaldi_fbank(torch.zeros(399)).shape == (0, 80)
    assert kaldi_fbank(torch.zeros(2, 400)).shape == (2, 1, 80)
    with pytest.raises(oasr.InputError, match="window"):
        kaldi_fbank(torch.zeros(400), FbankOptions(window="blackmann"))


def test_centred_fbank_matches_pyannote(ref, resnet34, jfk, sample):
    model, _ = resnet34
    batch = torch.from_numpy(np.stack([jfk[:3 * SR], sample[SR : 4 * SR]]))
    with torch.no_grad():
        expected = model.compute_fbank(batch[:, None])
    assert _worst(centered_fbank(batch), expected) <= TOLERANCE


# -- the network --------------------------------------------------------------------------------


def test_converter_reads_pyannote_checkpoint(resnet34):
    _, ours = resnet34
    assert ours.architecture == "wespeaker-resnet"
    assert ours.config.num_blocks == (3, 4, 6, 3) and ours.config.block == "basic" and ours.config.embedding_size == 256
    assert ours.report.dropped == [] and ours.report.missing == []
    assert ours.feature_spec.kind == "kaldi_fbank" and ours.feature_spec.n_mels == 80


@pytest.mark.parametrize("clip", ["jfk", "sample"])
def test_embeddings_match_pyannote(resnet34, clip, jfk, sample):
    """jfk.wav whole (11 s) and 3 s of sample.wav: fbank -> ResNet34 -> TSTP -> embedding."""
    model, ours = resnet34
    wav = torch.from_numpy(jfk if clip == "jfk" else sample[5 * SR : 8 * SR])[None]
    with torch.no_grad():
        expected = model(wav[:, None])
        got = ours.model(centered_fbank(wav, ours.config.fbank_options()))
    assert got.shape == expected.shape == (1, 256)
    print(f"\n{clip}: max |diff| {float((got - expected).abs().max()):.3g}, relative {_worst(got, expected):.3g}")
    assert _worst(got, expected) <= TOLERANCE


def test_weighted_pooling_matches_pyannote(resnet34, sample):
    """Per-speaker weights over the 589 segmentation frames of a 10 s window, as pyannote 3.1 passes
    them ([B, K, W] and [B, W]), resampled to the ResNet's 125 frames by nearest neighbour."""
    model, ours = resnet34
    window = torch.from_numpy(sample[20 * SR : 30 * SR])[None]
    rng = np.random.default_rng(0)
    weights = torch.from_numpy((rng.random((1, 3, 589)) < 0.4).astype(np.float32))
    weights[0, 2, :] = 0.0
    weights[0, 2, 100:130] = 1.0  # a speaker of half a second
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # pyannote warns that it resamples the weights
        expected = model(window[:, None], weights=weights)  # what the diarization pipeline calls
        expected_one = model.forward_embedding(model.forward_frames(window[:, None]), weights=weights[:, 1])
        frames = ours.model.frames(centered_fbank(window))
        got, got_one = ours.model.embed(frames, weights), ours.model.embed(frames, weights[:, 1])
    assert frames.shape[-1] == ours.config.num_frames(998) == 125
    assert got.shape == (1, 3, 256)
    print(f"\nweighted [B, K, W]: relative {_worst(got, expected):.3g}; [B, W]: {_worst(got_one, expected_one):.3g}")
    assert _worst(got, expected) <= TOLERANCE
    assert _worst(got_one, expected_one) <= TOLERANCE


def test_wespeaker_release_with_bottleneck_blocks(ref, tmp_path, jfk):
    """WeSpeaker's own layout (avg_model.pt + config.yaml, the training classifier beside the
    encoder): a tiny bottleneck ResNet with two embedding layers, against pyannote's ResNet class."""
    torch.manual_seed(2)
    net = ref.resnet.ResNet(ref.resnet.Bottleneck, [1, 2, 1, 1], m_channels=8, feat_dim=40, embed_dim=32, two_emb_layer=True)
    _randomise(net, 3)
    state = {k: (v.float() if k.endswith("num_batches_tracked") else v) for k, v in net.state_dict().items()}
    state["projection.weight"] = torch.randn(1211, 32)  # AAM softmax over the training speakers
    torch.save(state, tmp_path / "avg_model.pt")
    (tmp_path / "config.yaml").write_text(
        "model: ResNet50\nmodel_args:\n  feat_dim: 40\n  embed_dim: 32\n  pooling_func: TSTP\n  two_emb_layer: true\n"
        "dataset_args:\n  fbank_args:\n    num_mel_bins: 40\n    frame_shift: 10\n    frame_length: 25\n    dither: 1.0\n"
    )
    ours = oasr.load_pretrained(tmp_path, device="cpu", dtype="float32")
    assert ours.config.block == "bottleneck" and ours.config.num_blocks == (1, 2, 1, 1) and ours.config.two_emb_layer
    assert ours.report.dropped == ["projection.weight"]
    options = ours.config.fbank_options()
    wav = torch.from_numpy(jfk[: 3 * SR])[None]
    fbank = centered_fbank(wav, options)
    with torch.no_grad():
        expected = net(fbank.clone())[1]
        got = ours.model(fbank)
    assert _worst(got, expected) <= TOLERANCE


def test_mislabelled_checkpoints_are_refused(ref, tmp_path):
    from oasr.errors import ConversionError

    torch.manual_seed(4)
    net = ref.resnet.ResNet(ref.resnet.BasicBlock, [1, 1, 1, 1], m_channels=4, feat_dim=80, embed_dim=8, two_emb_layer=False)
    torch.save(net.state_dict(), tmp_path / "avg_model.pt")
    (tmp_path / "config.yaml").write_text("model_args:\n  feat_dim: 64\n")  # 64 bands do not fit the layer
    with pytest.raises(ConversionError, match="64 mel bands"):
        oasr.load_pretrained(tmp_path, device="cpu")
    (tmp_path / "config.yaml").write_text("model: ECAPA_TDNN_GLOB_c512\n")
    with pytest.raises(ConversionError, match="only WeSpeaker's ResNets"):
        oasr.load_pretrained(tmp_path, device="cpu")


# -- as the diarization's embedding backend -----------------------------------------------------


@pytest.fixture(scope="module")
def tiny_wespeaker(tmp_path_factory) -> Path:
    """A WeSpeaker release of a tiny random ResNet (no reference needed to build it)."""
    from oasr.models.wespeaker import WeSpeakerConfig, WeSpeakerResNet

    torch.manual_seed(5)
    net = WeSpeakerResNet(WeSpeakerConfig(num_blocks=(1, 1, 1, 1), m_channels=4, embedding_size=16))
    _randomise(net, 6)
    folder = tmp_path_factory.mktemp("wespeaker-tiny")
    torch.save({**net.state_dict(), "projection.weight": torch.randn(10, 16)}, folder / "avg_model.pt")
    return folder


def test_weighted_windows_embed_each_window_alone(tiny_wespeaker, sample):
    """Batching, the zero padding of a window past the end, the NaN of a silent speaker."""
    from oasr.pipelines.diarize.embedding import embed_weighted_windows

    loaded = oasr.load_pretrained(tiny_wespeaker, device="cpu", dtype="float32")
    window, starts = 10 * SR, np.array([0, 10 * SR, 25 * SR])  # the last one runs 5 s past the end
    weights = (np.random.default_rng(1).random((3, 2, 589)) < 0.5).astype(np.float32)
    weights[1, 1] = 0.0
    got = embed_weighted_windows(sample, starts, window, weights, loaded, batch_size=2)
    assert got.shape == (3, 2, 16) and np.isnan(got[1, 1]).all() and not np.isnan(np.delete(got.reshape(6, 16), 3, 0)).any()
    for w, start in enumerate(starts):
        piece = np.zeros(window, dtype=np.float32)
        part = sample[start : start + window]
        piece[: len(part)] = part
        with torch.no_grad():
            alone = loaded.model(centered_fbank(torch.from_numpy(piece)[None]), torch.from_numpy(weights[w : w + 1]))[0]
        alone = torch.nn.functional.normalize(alone, dim=-1).numpy()
        for k in range(2):
            if weights[w, k].any():
                assert np.abs(got[w, k] - alone[k]).max() <= 1e-5


def test_utterances_embed_unweighted(tiny_wespeaker, sample):
    """``embed_utterance`` / ``embed_segments`` with a WeSpeaker bundle: each window alone, whole."""
    from oasr.pipelines.diarize.embedding import embed_segments, embed_utterance

    loaded = oasr.load_pretrained(tiny_wespeaker, device="cpu", dtype="float32")
    got = embed_segments(sample, [(0.5, 2.0), (10.0, 13.5)], loaded)
    with torch.no_grad():
        for row, (a, b) in zip(got, [(8000, 32000), (160000, 216000)]):
            alone = loaded.model(centered_fbank(torch.from_numpy(sample[a:b])[None]))[0]
            assert np.abs(row - torch.nn.functional.normalize(alone, dim=0).numpy()).max() <= 1e-5
    assert np.allclose(embed_utterance(sample[8000:32000], loaded), got[0], atol=1e-6)
    with pytest.raises(oasr.InputError, match="too short"):
        embed_segments(sample, [(0.0, 0.02)], loaded)


@pytest.mark.slow  # real weights: pyannote segmentation-3.0
def test_diarize_runs_with_a_wespeaker_bundle(tiny_wespeaker, sample, cli, tmp_path):
    """End to end with random WeSpeaker weights (15 s of sample.wav, two speakers): it runs, through
    the API and ``oasr diarize --embedding-model``, and yields turns. What the turns are worth
    needs the trained encoder, which is not reachable here: accuracy is not measured."""
    from tests.models.pyannote.test_segmentation_parity import WEIGHTS

    if not WEIGHTS.is_file():
        pytest.skip(f"no {WEIGHTS} (make install-test fetches it: scripts/fetch_sdist_weights.py)")
    clip = sample[: 15 * SR]
    result = oasr.diarize(clip, segmentation_model=WEIGHTS, embedding_model=tiny_wespeaker, device="cpu")
    assert result.turns and all(0 <= t.start < t.end <= result.duration + 1e-6 for t in result.turns)
    assert result.provenance.architecture == "wespeaker-resnet"
    wav = tmp_path / "clip.wav"
    sf.write(wav, clip, SR)
    code, stdout, err = cli("diarize", wav, "--segmentation-model", WEIGHTS, "--embedding-model", tiny_wespeaker,
                            "--num-speakers", "2", "-F", "csv")
    assert code == 0, err
    speakers = [line.split(",")[2] for line in stdout.splitlines()[1:]]
    assert speakers and set(speakers) <= {"SPEAKER_00", "SPEAKER_01"}
