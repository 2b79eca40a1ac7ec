"""Every numeric option has a finite, documented range, enforced before any work (issue 17, item 3).

Through the options classes (the Python API) and through the CLI: a value outside the range is an
InputError naming the flag and the range, a usage error (exit 2) on the command line, before any
model is loaded. Suppressed token ids beyond the model's vocabulary are refused once it is loaded.
"""

from __future__ import annotations

import dataclasses
import math
import wave

import numpy as np
import pytest

import oasr
from oasr.errors import CapabilityError, InputError
from oasr.formats import WriterOptions
from oasr.decoding.whisper.options import WhisperDecoding
from oasr.options import (
    DiarizeOptions,
    PitchOptions,
    TranscribeOptions,
    VadOptions,
)

NAN, INF = math.nan, math.inf


# --- the options classes --------------------------------------------------------------------------

# (options class, field values, a piece of the message): each is refused.
REFUSED = [
    # WhisperDecoding
    (WhisperDecoding, {"beam_size": 10000}, "--beam-size must be at least 1 and at most 32"),
    (WhisperDecoding, {"beam_size": 0}, "--beam-size must be at least 1"),
    (WhisperDecoding, {"beam_size": 2.5}, "--beam-size must be a whole number"),
    (WhisperDecoding, {"best_of": 10000}, "--best-of must be at least 1 and at most 32"),
    (WhisperDecoding, {"patience": NAN}, "--patience must be a finite number"),
    (WhisperDecoding, {"patience": 1e9}, "--patience must be above 0 and at most 10"),
    (WhisperDecoding, {"patience": 0.0}, "--patience"),
    (WhisperDecoding, {"temperatures": (NAN,)}, "--temperature must be a finite number"),
    (WhisperDecoding, {"temperatures": (1e308,)}, "--temperature must be between 0 and 2"),
    (WhisperDecoding, {"temperatures": (0.0, INF)}, "--temperature must be a finite number"),
    (WhisperDecoding, {"temperatures": (-0.1,)}, "--temperature must be between 0 and 2"),
    (WhisperDecoding, {"temperatures": tuple(i / 100 for i in range(21))}, "at most 20 temperatures"),
    (WhisperDecoding, {"temperatures": ()}, "non-empty"),
    (WhisperDecoding, {"length_penalty": NAN}, "--length-penalty"),
    (WhisperDecoding, {"compression_ratio_threshold": INF}, "--compression-ratio-threshold must be a finite number"),
    (WhisperDecoding, {"compression_ratio_threshold": 0.0}, "--compression-ratio-threshold must be above 0"),
    (WhisperDecoding, {"logprob_threshold": -INF}, "--logprob-threshold must be a finite number"),
    (WhisperDecoding, {"logprob_threshold": 1.0}, "--logprob-threshold must be between -100 and 0"),
    (WhisperDecoding, {"no_speech_threshold": NAN}, "--no-speech-threshold"),
    (WhisperDecoding, {"max_initial_timestamp": NAN}, "--max-initial-timestamp must be a finite number"),
    (WhisperDecoding, {"max_initial_timestamp": 1e9}, "--max-initial-timestamp must be between 0 s and 30 s"),
    (WhisperDecoding, {"hallucination_silence_threshold": INF}, "--hallucination-silence-threshold"),
    (WhisperDecoding, {"suppress_tokens": (-2,)}, "--suppress-tokens ids must be at least -1"),
    (WhisperDecoding, {"suppress_tokens": (1.5,)}, "--suppress-tokens ids must be a whole number"),
    # TranscribeOptions
    (TranscribeOptions, {"chunk_length": NAN}, "--chunk-length must be a finite number"),
    (TranscribeOptions, {"chunk_length": 0.001}, "--chunk-length must be between 1 s and 120 s"),
    (TranscribeOptions, {"chunk_length": 1e6}, "--chunk-length must be between 1 s and 120 s"),
    (TranscribeOptions, {"chunk_overlap": INF}, "--chunk-overlap must be a finite number"),
    (TranscribeOptions, {"chunk_length": 20.0, "chunk_overlap": 10.0}, "under half the chunk length"),
    (TranscribeOptions, {"batch_size": 100000}, "--batch-size must be at least 1 and at most 64"),
    # VadOptions
    (VadOptions, {"threshold": NAN}, "VAD threshold (--vad-threshold) must be a finite number"),
    (VadOptions, {"neg_threshold": NAN}, "negative threshold"),
    (VadOptions, {"min_speech_s": INF}, "minimum speech must be a finite number"),
    (VadOptions, {"speech_pad_s": 1e9}, "padding must be at most 60 s"),
    (VadOptions, {"min_silence_s": NAN}, "minimum silence must be a finite number"),
    (VadOptions, {"max_speech_s": INF}, "maximum speech duration must be a finite number"),
    # PitchOptions
    (PitchOptions, {"hop": NAN}, "--hop must be a finite number"),
    (PitchOptions, {"hop": 1e9}, "--hop must be at most 1000 ms"),
    (PitchOptions, {"fmin": NAN}, "--fmin must be a finite number"),
    (PitchOptions, {"fmax": INF}, "--fmax must be a finite number"),
    (PitchOptions, {"voicing_threshold": NAN}, "--voicing-threshold must be a finite number"),
    (PitchOptions, {"silence_db": -INF}, "--silence-db must be a finite number"),
    (PitchOptions, {"silence_db": -1e9}, "--silence-db must be at most 0 dBFS and at least -200"),
    (PitchOptions, {"batch_size": 10**9}, "--batch-size must be at least 1 and at most 8192"),
    # DiarizeOptions
    (DiarizeOptions, {"num_speakers": 1000}, "--num-speakers must be at least 1 and at most 32"),
    (DiarizeOptions, {"min_speakers": 1000}, "--min-speakers must be at least 1 and at most 32"),
    (DiarizeOptions, {"max_speakers": 1000}, "--max-speakers must be at least 1 and at most 32"),
    (DiarizeOptions, {"threshold": NAN}, "--threshold must lie between 0 and 2"),
    (DiarizeOptions, {"step": 0.0001}, "--step must be between 0.5 s and 10 s"),
    (DiarizeOptions, {"step": NAN}, "--step must be a finite number"),
    (DiarizeOptions, {"onset": NAN}, "--onset must lie between 0 and 1"),
    (DiarizeOptions, {"min_embed_seconds": 1e9}, "min_embed_seconds must be between 0 s and 10 s"),
    (DiarizeOptions, {"min_cluster_size": 10**9}, "min_cluster_size must be at least 1 and at most 1000"),
    # WriterOptions
    (WriterOptions, {"max_line_width": 10**9}, "--max-line-width must be at least 1 and at most 1000"),
    (WriterOptions, {"max_line_width": 42, "max_line_count": 10**9}, "--max-line-count must be at least 1 and at most 100"),
]


@pytest.mark.parametrize("cls, fields, needle", REFUSED, ids=lambda v: getattr(v, "__name__", None) or str(v)[:60])
def test_options_refuse_values_outside_their_range(cls, fields, needle):
    with pytest.raises(InputError) as e:
        cls(**fields)
    assert needle in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "cls, fields",
    [
        (WhisperDecoding, {"beam_size": 32, "best_of": 32, "patience": 10.0, "temperatures": (0.0, 2.0), "suppress_tokens": (-1, 0, 50000)}),
        (WhisperDecoding, {"compression_ratio_threshold": None, "logprob_threshold": None, "no_speech_threshold": None}),
        (WhisperDecoding, {"max_initial_timestamp": 0.0, "logprob_threshold": -100.0, "temperatures": tuple(i / 19 for i in range(20))}),
        (TranscribeOptions, {"chunk_length": 120.0, "chunk_overlap": 59.0, "batch_size": 64}),
        (VadOptions, {"min_speech_s": 60.0, "max_speech_s": 3600.0}),
        (PitchOptions, {"hop": 0.0625, "batch_size": 8192, "silence_db": -200.0}),
        (PitchOptions, {"hop": 1000.0, "silence_db": None}),
        (DiarizeOptions, {"num_speakers": 32, "step": 10.0, "onset": None}),
        (DiarizeOptions, {"min_speakers": 32, "max_speakers": 32, "step": 0.5, "min_embed_seconds": 0.0}),
        (WriterOptions, {"max_line_width": 1000, "max_line_count": 100}),
    ],
)
def test_the_ends_of_each_range_are_accepted(cls, fields):
    cls(**fields)


# --- the command line: usage errors before any model loads -------------------------------------------


@pytest.fixture
def no_models(monkeypatch):
    """A model load or a pipeline run fails the test: a bad flag must stop the command before."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded for a command with a bad flag")

    for name in ("load_pretrained", "transcribe", "diarize", "pitch"):
        monkeypatch.setattr(oasr, name, refuse, raising=False)


def _usage(code: int, err: str, needle: str) -> None:
    assert code == 2, err
    assert needle in err, err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["transcribe", "--beam-size", "10000"], "--beam-size must be at least 1 and at most 64"),
        (["transcribe", "--best-of", "10000"], "--best-of must be at least 1 and at most 32"),
        (["transcribe", "--temperature", "nan"], "--temperature must be a finite number"),
        (["transcribe", "--temperature", "1e308"], "--temperature must be between 0 and 2"),
        (["transcribe", "--temperature-increment-on-fallback", "nan"], "must be positive and at most 1"),
        (["transcribe", "--temperature-increment-on-fallback", "1e-9"], "at most 20"),
        (["transcribe", "--patience", "inf"], "--patience must be a finite number"),
        (["transcribe", "--length-penalty", "nan"], "length_penalty must be a finite number"),  # shared by three families: named as their option
        (["transcribe", "--compression-ratio-threshold", "inf"], "--compression-ratio-threshold"),
        (["transcribe", "--logprob-threshold", "-inf"], "--logprob-threshold"),
        (["transcribe", "--no-speech-threshold", "nan"], "--no-speech-threshold"),
        (["transcribe", "--max-initial-timestamp", "1e9"], "--max-initial-timestamp"),
        (["transcribe", "--word-timestamps", "--hallucination-silence-threshold", "inf"], "--hallucination-silence-threshold"),
        (["transcribe", "--suppress-tokens", "-5"], "--suppress-tokens ids must be at least -1"),
        (["transcribe", "-F", "srt", "--max-line-width", "99999999"], "--max-line-width must be at least 1 and at most 1000"),
        (["transcribe", "-m", ""], "'--model' / '-m': is empty"),
        (["transcribe", "-m", "   "], "it takes a native bundle, a checkpoint directory, a registry name"),
        (["diarize", "--step", "0.0001"], "--step must be between 0.5 s and 10 s (got 0.0001)"),
        (["diarize", "--num-speakers", "1000"], "--num-speakers must be at least 1 and at most 32"),
        (["diarize", "--max-speakers", "1000"], "--max-speakers must be at least 1 and at most 32"),
        (["diarize", "--step", "nan"], "--step must be a finite number"),
        (["diarize", "--threshold", "nan"], "--threshold must lie between 0 and 2"),
        (["diarize", "--step", "1e9"], "--step must be between 0.5 s and 10 s"),
        (["diarize", "--segmentation-model", ""], "--segmentation-model': is empty"),
        (["diarize", "--embedding-model", " "], "--embedding-model': is empty"),
        (["pitch", "--hop", "nan"], "--hop must be a finite number"),
        (["pitch", "--hop", "1e9"], "--hop must be at most 1000 ms"),
        (["pitch", "--fmax", "inf"], "--fmax must be a finite number"),
        (["pitch", "--silence-db", "-inf"], "--silence-db must be a finite number"),
        (["pitch", "--batch-size", "1000000000"], "--batch-size must be at least 1 and at most 8192"),
        (["pitch", "-m", ""], "is empty"),
    ],
)
def test_cli_bounds_are_usage_errors(cli, no_models, tmp_path, args, needle):
    command, *flags = args
    code, out, err = cli(command, *flags, tmp_path / "never-read.wav")
    _usage(code, err, needle)
    assert out == ""


@pytest.mark.parametrize(
    "args, needle",
    [
        (["quantize", "", "{tmp}/out"], "'SRC': is empty"),
        (["quantize", "tiny.en", ""], "'DST': is empty"),
        (["convert", "", "{tmp}/out"], "'SRC... DST': is empty; it takes a file or folder path"),
        (["convert", "{tmp}", ""], "'SRC... DST': is empty"),
        (["inspect", ""], "is empty; it takes a file or folder path"),
        (["models", "path", ""], "'NAME': is empty"),
        (["models", "pull", " "], "'NAME': is empty"),
        (["models", "resolve", ""], "'NAME': is empty"),
        (["models", "rm", ""], "'NAME': is empty"),
        (["eval", "der", "--ref", "{tmp}/r.rttm", "--hyp", "{tmp}/h.rttm", "--collar", "nan"], "'--collar'"),
        (["eval", "der", "--ref", "{tmp}/r.rttm", "--hyp", "{tmp}/h.rttm", "--collar", "1e9"], "at most 10 seconds"),
    ],
)
def test_other_commands_bounds_are_usage_errors(cli, no_models, tmp_path, args, needle):
    code, out, err = cli(*(a.format(tmp=tmp_path) for a in args))
    _usage(code, err, needle)
    assert not (tmp_path / "out").exists()


def _help(command: str) -> str:
    import typer

    from oasr_cli.main import app

    cmd = typer.main.get_command(app).commands[command]
    return "\n".join(p.help or "" for p in cmd.params)


def test_ranges_are_in_the_help():
    helps = _help("transcribe")
    for piece in ("(1..32; default 5)", "(1..64; default 1); 1 is greedy", "0..2 (0: beam search", "at most 20 temperatures", "(1..1000)"):
        assert piece in helps, piece
    helps = _help("diarize")
    for piece in ("Exactly N speakers, 1..32", "(1..32)", "Cosine distance (0..2)", "probability reaches P (0..1)", "windows (0.5..10)"):
        assert piece in helps, piece
    helps = _help("pitch")
    for piece in ("0.0625..1000", "(1..8192)", "(-200..0)"):
        assert piece in helps, piece


# --- suppressed tokens against the loaded model's vocabulary ----------------------------------------


def _silent_wav(path, seconds=1.0):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * int(16000 * seconds))
    return path


def test_suppress_tokens_beyond_the_vocabulary_are_refused(tiny_en_bundle):
    options = TranscribeOptions(decoding=WhisperDecoding(beam_size=1, suppress_tokens=(-1, 99999999)))
    with pytest.raises(CapabilityError, match=r"99999999: this model's vocabulary has 51864 tokens \(ids 0\.\.51863"):
        oasr.transcribe(np.zeros(16000, dtype=np.float32), str(tiny_en_bundle), options)
    ok = dataclasses.replace(options.decoding, suppress_tokens=(-1, 51863))
    oasr.transcribe(np.zeros(1600, dtype=np.float32), str(tiny_en_bundle), TranscribeOptions(decoding=ok))


def test_cli_suppress_tokens_beyond_the_vocabulary(cli, tiny_en_bundle, tmp_path):
    wav = _silent_wav(tmp_path / "silence.wav")
    code, out, err = cli("transcribe", "-m", tiny_en_bundle, "-f", wav, "--suppress-tokens", "99999999", "-o", tmp_path / "t.txt")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1, err
    assert "vocabulary has 51864 tokens" in lines[0] and lines[0].startswith("oasr: error:"), err
    assert out == "" and not (tmp_path / "t.txt").exists()
