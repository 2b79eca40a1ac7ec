"""oasr.batch runs separate and tts as the single-file calls do: same samples, one file per stem /
per text, a journal line each, a bad input recorded and the others done.

Tiny random models: an HTDemucs of the released layout with 8 channels (demucs_refs) and a
16-channel VITS voice (test_tts) given phonemes, so neither espeak nor trained weights are needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import oasr
from demucs_refs import SOURCES_4, random_htdemucs, save_package


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _journal(outdir: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in (outdir / "batch.jsonl").read_text().splitlines()]
    return {Path(r["input"]).name: r for r in rows}


def test_batch_separate_writes_each_songs_stems_as_oasr_separate_does(tmp_path):
    from oasr.conversion.run import convert
    from oasr.options import SeparateOptions

    [converted] = convert([save_package(random_htdemucs(SOURCES_4, seed=4), tmp_path / "955717e8-44444444.th")], tmp_path / "bundle")
    assert converted.status == "converted", converted.error
    corpus = tmp_path / "songs"
    (corpus / "live").mkdir(parents=True)
    rng = np.random.default_rng(0)
    sf.write(corpus / "a.wav", (0.1 * rng.standard_normal((44100 * 2, 2))).astype(np.float32), 44100)
    sf.write(corpus / "live" / "b.wav", (0.1 * rng.standard_normal(16000)).astype(np.float32), 16000)  # mono 16 kHz
    (corpus / "live" / "empty.wav").write_bytes(b"")
    options = SeparateOptions(two_stems="vocals")

    summary = oasr.batch("separate", corpus, tmp_path / "out", glob="**/*.wav", model=str(tmp_path / "bundle"), options=options, device="cpu", dtype="float32")

    assert (summary.done, summary.failed) == (2, 1)
    rows = _journal(tmp_path / "out")
    assert rows["a.wav"]["outputs"] == [str(tmp_path / "out" / "a" / f"{s}.wav") for s in ("vocals", "no_vocals")]
    assert rows["b.wav"]["outputs"] == [str(tmp_path / "out" / "live" / "b" / f"{s}.wav") for s in ("vocals", "no_vocals")]
    assert "empty" in rows["empty.wav"]["error"]
    assert not (tmp_path / "out" / "live" / "empty").exists()
    # what oasr.separate writes for the same song (to one 16-bit step: the worker's torch threads
    # sum in another order)
    from oasr.pipelines.separate.writer import StemFiles

    alone = {s: tmp_path / "alone" / f"{s}.wav" for s in ("vocals", "no_vocals")}
    oasr.separate(str(corpus / "a.wav"), str(tmp_path / "bundle"), options, files=StemFiles(alone), device="cpu", dtype="float32")
    for stem, path in alone.items():
        got, want = sf.read(tmp_path / "out" / "a" / f"{stem}.wav", dtype="int16")[0], sf.read(path, dtype="int16")[0]
        assert got.shape == want.shape == (44100 * 2, 2)
        assert np.abs(got.astype(int) - want).max() <= 1


def test_batch_tts_speaks_each_text_file_into_its_wav(tmp_path):
    pytest.importorskip("piper.phoneme_ids", reason="piper-tts (the tts extra) holds the phoneme map")
    from tests.pipelines.tts.test_tts import write_tiny_voice

    from oasr.formats.wav import pcm16

    voice = write_tiny_voice(tmp_path / "voice")
    corpus = tmp_path / "texts"
    (corpus / "ch2").mkdir(parents=True)
    (corpus / "one.txt").write_text("həlˈoʊ wˈɜːld.\n", encoding="utf-8")
    (corpus / "ch2" / "two.txt").write_text("ðə kwˈɪk bɹˈaʊn fˈɑːks.\n", encoding="utf-8")
    (corpus / "ch2" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    options = oasr.SynthesizeOptions(phonemes=True)

    summary = oasr.batch("tts", corpus, tmp_path / "out", glob="**/*.txt", model=str(voice), options=options, device="cpu", dtype="float32")

    assert (summary.done, summary.failed) == (2, 1)
    rows = _journal(tmp_path / "out")
    assert "not UTF-8 text" in rows["latin1.txt"]["error"]
    assert not (tmp_path / "out" / "ch2" / "latin1.wav").exists()
    for name, rel in (("one.txt", "one.wav"), ("two.txt", "ch2/two.wav")):
        path = tmp_path / "out" / rel
        assert rows[name]["outputs"] == [str(path)]
        text = (corpus / Path(rel).with_suffix(".txt")).read_text(encoding="utf-8")
        want = oasr.synthesize(text, str(voice), options)
        got, rate = sf.read(path, dtype="int16")
        assert rate == want.sample_rate
        assert got.tobytes() == pcm16(want.samples)
        assert rows[name]["duration"] == pytest.approx(len(want.samples) / want.sample_rate)
