"""Every task's output formats come from one registry (oasr.formats.registry, the entry points of
oasr.formats.<result>): the built-in names, their order and extensions, and the commands that read them."""

from __future__ import annotations

import pytest

from oasr.errors import InputError
from oasr.formats import registry

BUILT_IN = {
    "transcript": ["txt", "srt", "vtt", "json", "tsv", "lrc"],
    "turns": ["rttm", "json", "csv"],
    "pitch": ["csv", "json"],
    "stems": ["wav", "flac"],
    "speech": ["wav", "raw"],
}


@pytest.mark.parametrize("result", sorted(BUILT_IN))
def test_the_built_in_formats_of_each_result(result):
    assert registry.names(result) == BUILT_IN[result]
    assert registry.extensions(result) == {name: name for name in BUILT_IN[result]}


def test_an_unknown_format_lists_the_known_ones():
    with pytest.raises(InputError, match="unknown output format 'docx'; choose rttm, json, csv"):
        registry.get("turns", "docx")


def test_a_format_registered_in_process_joins_its_result_only(monkeypatch):
    monkeypatch.setitem(registry.registered("turns"), "lab", registry.WriterEntry("lab", "lab", lambda turns: "x"))
    assert registry.names("turns") == ["rttm", "json", "csv", "lab"]
    assert "lab" not in registry.names("pitch")


def test_stems_are_encoded_in_their_formats_container(tmp_path):
    from oasr.pipelines.separate.writer import StemFiles, container

    assert (container("wav"), container("flac")) == ("WAV", "FLAC")
    with pytest.raises(InputError, match="unknown output format 'ogg'; choose wav, flac"):
        StemFiles({"vocals": tmp_path / "v.ogg"}, "ogg")


def test_speech_formats_write_wav_or_raw_pcm():
    import io

    import numpy as np

    outputs = {}
    for name in ("wav", "raw"):
        out = io.BytesIO()
        writer = registry.get("speech", name).write(out, 22050, {"ISFT": "oasr"})
        writer.write(np.zeros(10, dtype=np.float32))
        writer.finish()
        outputs[name] = out.getvalue()
    assert outputs["wav"][:4] == b"RIFF" and outputs["raw"] == bytes(20)


@pytest.mark.parametrize("command, choices", [
    (["transcribe"], "txt|srt|vtt|json|tsv|lrc|all"),
    (["diarize"], "rttm|json|csv"),
    (["pitch"], "csv|json"),
    (["separate"], "wav|flac"),
    (["tts"], "wav|raw"),
])
def test_each_command_offers_its_results_formats(cli, command, choices):
    code, out, _ = cli(*command, "--help")
    assert code == 0 and choices in out


def test_tts_raw_and_another_format_are_a_usage_error(cli, tmp_path):
    code, _, err = cli("tts", "Hi.", "--raw", "-F", "wav", "-o", tmp_path / "x.wav")
    assert code == 2 and "--raw writes raw PCM, not wav" in err
