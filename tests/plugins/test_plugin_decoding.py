"""A decoding family from a plugin (tests/plugins/oasr_tinyctc/runs.py, ``tone_runs``): its own
options section, engine and verify rule, found through the ``oasr.decoding`` entry points, and
used through the Python API and the command line (``--decoding-option KEY=VALUE``) with no file
of runtime/ or oasr_cli/ naming it.

A tone letter lasts 0.16 s, 8 output frames of 20 ms: ``min_frames`` up to 8 keeps every letter
(above 6 the spaces' 5 frames vanish, so words run together), 9 keeps none.
"""

from __future__ import annotations

import json

import pytest
import soundfile as sf
from safetensors.torch import load_file, save_file

from .test_plugin_ctc import PLAN, ROOT, SR, _speech, checkpoint  # noqa: F401  (a fixture)

NAMES = ("tone_runs", "ToneRunDecoding", "oasr_tinyctc", "tinyctc")


@pytest.fixture
def runs_checkpoint(checkpoint):  # noqa: F811
    meta = json.loads((checkpoint / "tinyctc.json").read_text())
    (checkpoint / "tinyctc.json").write_text(json.dumps({**meta, "decoding": "tone_runs"}))
    return checkpoint


def test_no_runtime_or_cli_file_names_the_plugin_family():
    for folder in ("runtime", "oasr_cli"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".yaml", ".toml", ".json"):
                text = path.read_text()
                assert not any(name in text for name in NAMES), path


def test_the_family_decodes_through_the_api(plugin, runs_checkpoint, tmp_path):  # noqa: F811
    import oasr
    from oasr.decoding.whisper.options import WhisperDecoding
    from oasr.options import TranscribeOptions
    from oasr_tinyctc.runs import ToneRunDecoding

    bundle = tmp_path / "bundle"
    oasr.convert([runs_checkpoint], bundle)
    audio, truth = _speech(PLAN[:4], 22.0)
    words = "".join(" " + w for w, _, _ in truth)

    def text(decoding=None, **shared):
        return oasr.transcribe(audio, str(bundle), TranscribeOptions(decoding=decoding, **shared)).text

    assert text() == words
    assert text(ToneRunDecoding(min_frames=6)) == words
    assert text(ToneRunDecoding(min_frames=8)) == " " + words.replace(" ", "")  # the spaces' runs are too short
    assert text(ToneRunDecoding(min_frames=9)) == ""
    assert text({"min_frames": "9"}) == "" and text({"min_frames": 6}) == words  # by name, as the CLI passes it
    t = oasr.transcribe(audio, str(bundle), TranscribeOptions(decoding={"min_frames": "6"}))
    assert t.provenance.options["decoding"] == {"min_frames": 6}  # the section it decoded with

    with pytest.raises(oasr.CapabilityError, match="tone_runs family, which offers runs of a label"):
        text(WhisperDecoding(best_of=2))
    with pytest.raises(oasr.CapabilityError, match="--beam-size 3: the tone_runs decoding family has no beam search"):
        text(beam_size=3)
    with pytest.raises(oasr.InputError, match="min_frames must be a whole number"):
        ToneRunDecoding(min_frames=0)
    with pytest.raises(oasr.InputError, match="drop --vad"):
        TranscribeOptions(vad="energy", decoding=ToneRunDecoding())
    with pytest.raises(oasr.InputError, match="--no-such-option"):
        TranscribeOptions(decoding={"no_such_option": 1})  # no installed family takes it


def test_the_family_declares_its_verify_rule(plugin, runs_checkpoint, tmp_path):  # noqa: F811
    import oasr
    from oasr.errors import VerificationError
    from oasr.quant.verify import check_gates, verify

    source, broken = tmp_path / "source", tmp_path / "broken"
    oasr.convert([runs_checkpoint], source)
    weights = load_file(runs_checkpoint / "weights.safetensors")
    weights["W"][3] = 0.0  # label "b" never wins again
    save_file(weights, str(runs_checkpoint / "weights.safetensors"))
    oasr.convert([runs_checkpoint], broken)
    audio, _ = _speech(PLAN[:4], 22.0)
    wav = tmp_path / "tones.wav"
    sf.write(wav, audio, SR)

    same = verify(source, source, wav)
    assert type(same).__name__ == "RunsVerifyReport" and same.failures() == []
    check_gates(same)
    changed = verify(source, broken, wav)
    assert changed.failures() and "b" not in changed.text.replace(" ", "")
    with pytest.raises(VerificationError, match="the transcript changed"):
        check_gates(changed)


def test_the_family_through_the_command_line(runs_checkpoint, tmp_path, plugin_cli):
    audio, truth = _speech(PLAN[:4], 22.0)
    wav = tmp_path / "tones.wav"
    sf.write(wav, audio, SR)
    oasr_cli = plugin_cli
    words = " ".join(w for w, _, _ in truth)
    run = oasr_cli("transcribe", "-m", runs_checkpoint, "-q", "--decoding-option", "min_frames=6", wav)
    assert run.returncode == 0, run.stderr
    assert " ".join(run.stdout.split()) == words
    run = oasr_cli("transcribe", "-m", runs_checkpoint, "-q", "--decoding-option", "min_frames=9", "-F", "json", wav)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["text"] == ""
    run = oasr_cli("transcribe", "-m", runs_checkpoint, "--temperature", "0.5", wav)
    assert run.returncode == 1 and "--temperature" in run.stderr and "cannot be honoured" in run.stderr
    run = oasr_cli("transcribe", "-m", runs_checkpoint, "--decoding-option", "min_frames=0", wav)
    assert run.returncode == 2 and "min_frames must be a whole number" in run.stderr
    run = oasr_cli("transcribe", "-m", runs_checkpoint, "--decoding-option", "nonsense", wav)
    assert run.returncode == 2 and "KEY=VALUE" in run.stderr
