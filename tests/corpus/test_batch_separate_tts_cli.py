"""`oasr batch separate` and `oasr batch tts` from the command line: the flags reach oasr.batch,
the outputs are what oasr.batch (tested in test_batch_separate_tts.py) writes, bad flags are usage errors.

Tiny random models: an HTDemucs of the released layout (demucs_refs) and a 16-channel VITS voice
given phonemes (test_tts), so neither espeak nor trained weights are needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from demucs_refs import SOURCES_4, random_htdemucs, save_package

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _journal(outdir: Path) -> dict[str, dict]:
    return {Path(r["input"]).name: r for r in map(json.loads, (outdir / "batch.jsonl").read_text().splitlines())}


def test_batch_separate_cli(cli, tmp_path):
    from oasr.conversion.run import convert

    [converted] = convert([save_package(random_htdemucs(SOURCES_4, seed=4), tmp_path / "955717e8-44444444.th")], tmp_path / "bundle")
    assert converted.status == "converted", converted.error
    songs = tmp_path / "songs"
    songs.mkdir()
    sf.write(songs / "a.wav", (0.1 * np.random.default_rng(0).standard_normal((44100, 2))).astype(np.float32), 44100)
    out = tmp_path / "out"
    code, stdout, err = cli("batch", "separate", songs, "-o", out, "-m", tmp_path / "bundle", "--stems", "drums,vocals", "--format", "flac", "--device", "cpu", "--dtype", "float32", "--json")
    assert code == 0, err
    assert json.loads(stdout)["done"] == 1
    assert _journal(out)["a.wav"]["outputs"] == [str(out / "a" / "drums.flac"), str(out / "a" / "vocals.flac")]
    assert sf.read(out / "a" / "vocals.flac")[0].shape == (44100, 2)
    code, _, err = cli("batch", "separate", songs, "-o", out, "-m", tmp_path / "bundle", "--shifts", "99")
    assert code == 2 and "--shifts" in err
    code, _, err = cli("batch", "separate", songs, "-o", out, "--format", "mp3")
    assert code == 2 and "--format" in err


def test_batch_tts_cli(cli, tmp_path):
    pytest.importorskip("piper.phoneme_ids", reason="piper-tts (the tts extra) holds the phoneme map")
    from tests.pipelines.tts.test_tts import write_tiny_voice

    import oasr
    from oasr.formats.wav import pcm16

    voice = write_tiny_voice(tmp_path / "voice")
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "one.txt").write_text("həlˈoʊ wˈɜːld.\n", encoding="utf-8")
    out = tmp_path / "out"
    code, _, err = cli("batch", "tts", texts, "--glob", "*.txt", "-o", out, "-m", voice, "--phonemes", "--speed", "1.5", "--seed", "3")
    assert code == 0, err
    want = oasr.synthesize("həlˈoʊ wˈɜːld.\n", str(voice), oasr.SynthesizeOptions(phonemes=True, speed=1.5, seed=3))
    assert sf.read(out / "one.wav", dtype="int16")[0].tobytes() == pcm16(want.samples)
    code, _, err = cli("batch", "tts", texts, "-o", out, "-m", voice, "--speed", "9")
    assert code == 2 and "--speed" in err
