"""oasr separate: demucs packages read without running them, the streaming policy, the command."""

from __future__ import annotations

import json
import math
import pickletools
import random
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from cli_checks import one_line_error
from demucs_refs import SOURCES_4, random_htdemucs, save_package


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    from oasr.conversion.run import convert

    root = tmp_path_factory.mktemp("demucs")
    package = save_package(random_htdemucs(SOURCES_4, seed=5), root / "955717e8-33333333.th")
    out = root / "htdemucs-random"
    [result] = convert([package], out)
    assert result.status == "converted", result.error
    return out


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


# --- reading demucs packages -------------------------------------------------------------------


class _WritesAFile:
    """Unpickling this opens (creates) a file: what a hostile .th could do."""

    def __init__(self, target: Path):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, "w"))


class FakeModel:  # a class demucs never wrote
    pass


def _package(path: Path, klass, state=None, kwargs=None) -> Path:
    torch.save({"klass": klass, "args": (), "kwargs": kwargs or {"sources": SOURCES_4}, "state": state or {"w": torch.zeros(2)}}, path)
    return path


def _pickle_names(path: Path) -> str:
    import zipfile

    with zipfile.ZipFile(path) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    return " ".join(str(arg) for op, arg, _ in pickletools.genops(data) if op.name in ("GLOBAL", "SHORT_BINUNICODE", "BINUNICODE"))


def test_a_package_whose_pickle_would_write_a_file_is_refused_and_nothing_appears(tmp_path, cli):
    target = tmp_path / "pwned.txt"
    package = _package(tmp_path / "955717e8-deadbeef.th", _WritesAFile(target))
    assert "io open" in _pickle_names(package)  # it would call io.open(target, "w")
    from oasr.errors import UnsafeCheckpointError
    from oasr_converters.demucs import read_package

    with pytest.raises(UnsafeCheckpointError, match=r"names io\.open; only tensors are read"):
        read_package(package)
    code, _, err = cli("convert", package, tmp_path / "out")  # detection reads data.pkl's bytes only
    assert code == 1
    code, _, err = cli("convert", "--architecture", "demucs", package, tmp_path / "out")
    assert code == 1 and "io.open" in err
    assert not target.exists()
    assert not (tmp_path / "out").exists()


def test_a_class_outside_the_known_ones_is_refused_by_name(tmp_path):
    from oasr.errors import UnsafeCheckpointError
    from oasr_converters.demucs import read_package

    with pytest.raises(UnsafeCheckpointError, match=r"test_separate\.FakeModel"):
        read_package(_package(tmp_path / "955717e8-0000aaaa.th", FakeModel))


def test_a_known_demucs_class_other_than_htdemucs_is_refused_by_name(tmp_path):
    demucs_refs = pytest.importorskip("demucs_refs")
    demucs_refs.demucs()
    from demucs.hdemucs import HDemucs

    from oasr.errors import ConversionError
    from oasr_converters.demucs import DemucsConverter

    package = _package(tmp_path / "75fc33f5-00000000.th", HDemucs)
    with pytest.raises(ConversionError, match=r"Hybrid Demucs \(v3\) model \(demucs\.hdemucs\.HDemucs\)"):
        DemucsConverter(package).convert()


def test_a_diffq_quantized_state_is_refused_with_the_reason(tmp_path):
    demucs_refs = pytest.importorskip("demucs_refs")
    demucs_refs.demucs()
    from demucs.htdemucs import HTDemucs

    from oasr.errors import UnsafeCheckpointError
    from oasr_converters.demucs import DemucsConverter

    package = _package(tmp_path / "955717e8-0000bbbb.th", HTDemucs, state={"__quantized": True, "quantized": [1, 2, 3]})
    with pytest.raises(UnsafeCheckpointError, match="diffq-quantized"):
        DemucsConverter(package).convert()


def test_kwargs_oasr_does_not_implement_are_refused(tmp_path):
    from oasr.errors import ConversionError
    from oasr_converters.demucs import DemucsConverter

    model = random_htdemucs(SOURCES_4)
    package = save_package(model, tmp_path / "955717e8-0000cccc.th")
    data = torch.load(package, weights_only=False)  # our own trusted file
    data["kwargs"]["t_sparse_self_attn"] = True
    torch.save(data, package)
    with pytest.raises(ConversionError, match="t_sparse_self_attn=True asks for sparse attention"):
        DemucsConverter(package).convert()


# --- the streaming policy ----------------------------------------------------------------------


def test_lanes_hold_at_most_two_segments_whatever_the_length():
    """The bound the module states: per (member, shift) under two windows of every source."""
    from oasr.pipelines.separate import overlap

    valid, sources = 1000, 3
    longest = []
    real_step = overlap.Lane.step

    def step(self):
        real_step(self)
        longest.append(self.held)

    plan = overlap.Plan(forward=lambda x: x[:, None].repeat(1, sources, 1, 1), valid=valid, weights=(1.0,) * sources)
    track = torch.randn(2, 200_000)
    overlap.Lane.step = step
    try:
        out = torch.cat(list(overlap.stream([plan, plan], track, sources=sources, overlap=0.25, shifts=3,
                                            max_shift=500, rng=random.Random(0))), -1)
    finally:
        overlap.Lane.step = real_step
    assert out.shape == (sources, 2, 200_000)
    assert torch.allclose(out, track.expand(sources, -1, -1), atol=1e-5)  # an identity network gives the track back
    assert max(longest) <= 2 * valid


# --- the command -------------------------------------------------------------------------------


def _wav(path: Path, seconds: float, rate: int, channels: int) -> Path:
    rng = np.random.default_rng(0)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    data = np.stack([0.3 * np.sin(2 * math.pi * 220 * (c + 1) * t) + 0.05 * rng.standard_normal(n) for c in range(channels)], 1)
    sf.write(path, data.astype(np.float32), rate)
    return path


def test_mono_16k_input_is_resampled_and_separated(tmp_path, cli, bundle):
    song = _wav(tmp_path / "mono.wav", 2.0, 16000, 1)
    code, out, err = cli("separate", "-m", bundle, "-o", tmp_path / "sep", "--shifts", "0", song)
    assert code == 0, err
    folder = tmp_path / "sep" / "htdemucs-random" / "mono"
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{s}.wav" for s in SOURCES_4)
    assert out.split() == [str(folder / f"{s}.wav") for s in SOURCES_4]
    info = sf.info(folder / "vocals.wav")
    assert (info.samplerate, info.channels, info.subtype) == (44100, 2, "PCM_16")
    assert info.frames == 2 * 44100


def test_low_memory_alone_fixes_the_allocator_and_the_stems_are_the_same(tmp_path, cli, bundle, monkeypatch):
    """glibc's mmap threshold is process-wide and costs speed: only --low-memory touches it."""
    from oasr import heap

    calls = []
    monkeypatch.setattr(heap, "return_freed_buffers", lambda *a: calls.append(a) or True)
    song = _wav(tmp_path / "song.wav", 2.0, 44100, 2)
    code, _, err = cli("separate", "-m", bundle, "-o", tmp_path / "fast", "--shifts", "0", "--float32", song)
    assert code == 0, err
    assert calls == []
    code, _, err = cli("separate", "-m", bundle, "-o", tmp_path / "low", "--shifts", "0", "--float32", "--low-memory", song)
    assert code == 0, err
    assert calls == [()]
    for stem in SOURCES_4:
        fast, _ = sf.read(tmp_path / "fast" / "htdemucs-random" / "song" / f"{stem}.wav")
        low, _ = sf.read(tmp_path / "low" / "htdemucs-random" / "song" / f"{stem}.wav")
        assert np.array_equal(fast, low), stem


def test_two_stems_writes_the_stem_and_the_sum_of_the_rest(tmp_path, cli, bundle):
    song = _wav(tmp_path / "song.wav", 1.5, 44100, 2)
    code, out, err = cli("separate", "-m", bundle, "-o", tmp_path / "a", "--shifts", "0", "--float32", "--clip", "none", song)
    assert code == 0, err
    code, out, err = cli("separate", "-m", bundle, "-o", tmp_path / "b", "--shifts", "0", "--float32", "--clip", "none",
                         "--two-stems", "vocals", "--json", song)
    assert code == 0, err
    report = json.loads(out)
    assert [s["name"] for s in report["stems"]] == ["vocals", "no_vocals"]
    a, b = tmp_path / "a" / "htdemucs-random" / "song", tmp_path / "b" / "htdemucs-random" / "song"
    assert sorted(p.name for p in b.iterdir()) == ["no_vocals.wav", "vocals.wav"]
    rest = sum(sf.read(a / f"{s}.wav")[0] for s in ("drums", "bass", "other"))
    assert np.abs(sf.read(b / "no_vocals.wav")[0] - rest).max() < 1e-5
    assert np.array_equal(sf.read(b / "vocals.wav")[0], sf.read(a / "vocals.wav")[0])


def test_stems_subset_filename_template_and_flac(tmp_path, cli, bundle):
    song = _wav(tmp_path / "tune.wav", 1.0, 22050, 2)
    code, _, err = cli("separate", "-m", bundle, "-o", tmp_path / "o", "--shifts", "0", "--stems", "drums,bass",
                       "--format", "flac", "--int24", "--filename", "{track}_{stem}.{ext}", song)
    assert code == 0, err
    folder = tmp_path / "o" / "htdemucs-random"
    assert sorted(p.name for p in folder.iterdir()) == ["tune_bass.flac", "tune_drums.flac"]
    assert sf.info(folder / "tune_bass.flac").subtype == "PCM_24"


@pytest.mark.parametrize("kind", ["one sample", "empty"])
def test_a_one_sample_file_and_an_empty_file_are_one_line_errors_and_nothing_is_written(tmp_path, cli, bundle, kind):
    song = tmp_path / "bad.wav"
    if kind == "empty":
        song.write_bytes(b"")
    else:
        sf.write(song, np.zeros((1, 2), np.float32), 44100)
    code, out, err = cli("separate", "-m", bundle, "-o", tmp_path / "sep", song)
    one_line_error(code, err, str(song), "empty" if kind == "empty" else "1 sample(s)")
    assert out == ""
    assert _files(tmp_path / "sep") == []


def test_a_bad_file_in_a_batch_does_not_stop_the_others(tmp_path, cli, bundle):
    good = _wav(tmp_path / "good.wav", 1.0, 44100, 2)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    code, out, err = cli("separate", "-m", bundle, "-o", tmp_path / "sep", "--shifts", "0", "--stems", "vocals", empty, good)
    assert code == 1
    assert "empty.wav" in err and "1 of 2 file(s) failed" in err
    assert _files(tmp_path / "sep") == [tmp_path / "sep" / "htdemucs-random" / "good" / "vocals.wav"]


def test_flags_the_model_cannot_honour_are_errors(tmp_path, cli, bundle):
    song = _wav(tmp_path / "s.wav", 0.5, 44100, 2)
    code, _, err = cli("separate", "-m", bundle, "-o", tmp_path / "sep", "--two-stems", "guitar", song)
    assert code == 1 and "has no guitar stem" in err and "drums, bass, other, vocals" in err
    code, _, err = cli("separate", "-m", bundle, "-o", tmp_path / "sep", "--segment", "5", song)
    assert code == 1 and "--segment 5 s" in err
    code, _, err = cli("separate", "-m", bundle, "--stems", "vocals", "--two-stems", "vocals", song)
    assert code == 2
    assert _files(tmp_path / "sep") == []


# --- the registry's plain URL source -----------------------------------------------------------


def _url_registry(tmp_path: Path, sha256_prefix: str) -> Path:
    registry = tmp_path / "mine.yaml"
    registry.write_text(
        "format: 1\nmodels:\n  - name: my-demucs\n    task: separate\n    architecture: htdemucs\n    licence: MIT\n"
        "    size: 1000\n    languages: []\n    sources:\n      - url:\n          files:\n"
        f"            - {{url: 'https://example.org/demucs/955717e8-44444444.th', name: 955717e8-44444444.th, sha256_prefix: '{sha256_prefix}'}}\n"
    )
    return registry


def _serve(monkeypatch, data: bytes) -> list[str]:
    import io
    import urllib.request

    asked = []

    def urlopen(url, timeout=None):
        asked.append(url)
        return io.BytesIO(data)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return asked


def test_a_url_source_is_downloaded_checked_against_its_sha256_prefix_and_converted(tmp_path, monkeypatch):
    import hashlib

    import oasr

    package = save_package(random_htdemucs(SOURCES_4, seed=6), tmp_path / "pkg.th")
    data = package.read_bytes()
    monkeypatch.setenv("OASR_CATALOG", str(_url_registry(tmp_path, hashlib.sha256(data).hexdigest()[:8])))
    monkeypatch.setenv("OASR_CACHE", str(tmp_path / "cache"))
    asked = _serve(monkeypatch, data)
    bundle = oasr.resolve_model("my-demucs", offline=False)
    assert asked == ["https://example.org/demucs/955717e8-44444444.th"]
    assert oasr.load_pretrained(bundle, task="separate").architecture == "htdemucs"


def test_a_url_source_with_another_sha256_is_refused_and_nothing_is_cached(tmp_path, monkeypatch):
    import oasr
    from oasr.errors import OasrError

    package = save_package(random_htdemucs(SOURCES_4, seed=6), tmp_path / "pkg.th")
    monkeypatch.setenv("OASR_CATALOG", str(_url_registry(tmp_path, "00000000")))
    monkeypatch.setenv("OASR_CACHE", str(tmp_path / "cache"))
    _serve(monkeypatch, package.read_bytes())
    with pytest.raises(OasrError, match="does not match the registry's 00000000"):
        oasr.resolve_model("my-demucs", offline=False)
    assert not list((tmp_path / "cache").rglob("*.safetensors"))
