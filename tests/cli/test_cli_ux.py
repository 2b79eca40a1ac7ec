"""What whisper, faster-whisper and demucs users type, and the rough edges a new user met (issue 30):
whisper's spellings and names, one-line usage errors, plain help through a pipe, the subtitle
layout flags, -F all, NO_COLOR, the thread count's reason, eval der on a file that is no RTTM,
separate --accept-license, and the voice and plot names."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from oasr.options import TranscribeOptions
from oasr.results import Segment, Transcript, Word

from tests.cli.test_cli_transcribe import FakeLoader, FakeTranscribe, fake, loader, wavs  # noqa: F401  (fixtures)


# --- whisper's spellings ---------------------------------------------------------------------------


def test_underscore_spellings_and_whisper_booleans(cli, fake, wavs, tmp_path):
    code, _, err = cli(
        "transcribe", "-m", "m", "--output_dir", tmp_path / "o", "--word_timestamps", "True",
        "--condition_on_previous_text", "False", "--no_speech_threshold", "0.5", "-F", "srt", wavs[0],
    )
    assert code == 0, err
    options = fake.calls[0].options
    assert options.word_timestamps is True
    assert options.decoding.condition_on_previous_text is False and options.decoding.no_speech_threshold == 0.5
    assert (tmp_path / "o" / "one.srt").is_file()


def test_an_unknown_underscored_option_is_still_named(cli, fake, wavs):
    code, _, err = cli("transcribe", "-m", "m", "--no_such_thing", wavs[0])
    assert code == 2 and err.strip() == "oasr: error: No such option: --no_such_thing (oasr transcribe --help lists the options)"


def test_language_names_and_compute_type(cli, fake, loader, wavs):
    code, _, err = cli("transcribe", "-m", "m", "-l", "English", "--compute-type", "int8_float32", wavs[0])
    assert code == 0, err
    assert fake.calls[0].options.language == "en" and loader.loads[0].dtype == "int8"
    code, _, err = cli("transcribe", "-m", "m", "-l", "Haitian Creole", "--compute_type", "bfloat16", wavs[0])
    assert code == 0, err
    assert fake.calls[1].options.language == "ht" and loader.loads[1].dtype == "bfloat16"


def test_hotwords_and_vad_options_by_name(cli, fake, wavs):
    code, _, err = cli(
        "transcribe", "-m", "m", "--hotwords", "Kubernetes", "--vad", "silero", "--vad-threshold", "0.3",
        "--min-silence-duration-ms", "500", "--speech-pad-ms", "100", wavs[0],
    )
    assert code == 0, err
    options = fake.calls[0].options
    assert options.decoding.hotwords == "Kubernetes"
    assert (options.vad_options.threshold, options.vad_options.min_silence_s, options.vad_options.speech_pad_s) == (0.3, 0.5, 0.1)
    code, _, err = cli("transcribe", "-m", "m", "--vad-threshold", "0.3", wavs[0])
    assert code == 2 and "add --vad silero" in err


def test_whisper_short_model_names_resolve_to_the_registry(monkeypatch, tmp_path):
    from oasr.hub.resolve import describe_resolution

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for short, name in (("tiny", "whisper-tiny"), ("large-v3", "whisper-large-v3"), ("turbo", "whisper-large-v3-turbo"), ("tiny.en", "whisper-tiny.en")):
        assert describe_resolution(short, task="transcribe", probe=False)["name"] == name


def test_a_short_name_offline_fails_naming_where_it_would_fetch_from(cli, monkeypatch, wavs):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = cli("transcribe", "-m", "large-v3", wavs[0])
    assert code == 1 and "cannot get whisper-large-v3" in err and "hf:openai/whisper-large-v3@" in err


# --- errors and help -----------------------------------------------------------------------------------


def test_usage_errors_are_one_line(cli):
    for args in (["transcribe", "--bogus"], ["transcribe", "--beam-size", "x", "a.wav"], ["nope"]):
        code, _, err = cli(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("oasr: error: "), err


def _piped_help(*args: str, columns: str | None = None) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    if columns:
        env["COLUMNS"] = columns
    done = subprocess.run([sys.executable, "-m", "oasr_cli", *args, "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_piped_help_is_plain_honours_columns_and_groups_the_families():
    text = _piped_help("transcribe", columns="100")
    lines = text.splitlines()
    options = lines[: lines.index("Examples:")]  # the examples keep their lines as written
    assert max(len(line) for line in options) <= 100
    assert not any(c in text for c in "╭│╰─") and "<bool>" not in text
    whisper = lines.index("Decoding: Whisper models only:")
    transducer = next(i for i, line in enumerate(lines) if line.startswith("Decoding: transducers only"))
    assert any("--best-of" in line for line in lines[whisper:]) and not any("--best-of" in line for line in lines[:whisper])
    assert any("--max-symbols-per-step" in line for line in lines[transducer : transducer + 5])
    assert "  oasr transcribe talk.wav" in lines  # the examples as written
    narrow = _piped_help("transcribe").splitlines()
    assert max(len(line) for line in narrow[: narrow.index("Examples:")]) <= 80  # unset: 80


# --- output ----------------------------------------------------------------------------------------------


def test_all_formats_without_a_folder_go_to_the_current_one(cli, fake, wavs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("transcribe", "-m", "m", "-F", "all", wavs[0])
    assert code == 0, err
    assert out == "" and {p.name for p in tmp_path.glob("one.*")} >= {"one.txt", "one.srt", "one.vtt", "one.json", "one.tsv"}


def test_line_layout_turns_word_timestamps_on_and_says_so(cli, fake, wavs):
    code, out, err = cli("transcribe", "-m", "m", "-F", "srt", "--max-line-width", "12", "--max-line-count", "1", wavs[0])
    assert code == 0, err
    assert fake.calls[0].options.word_timestamps is True
    assert "turning on --word-timestamps" in err
    assert "00:00:00,000 --> 00:00:01,000\nHello world,\n" in out  # cut at a word time, not interpolated


def test_max_words_per_line():
    from oasr.formats import WriterOptions, get_writer

    words = tuple(Word(f" w{i}", i * 0.5, i * 0.5 + 0.4, 0.9) for i in range(5))
    seg = Segment(0, 0.0, 2.4, "".join(w.word for w in words), (), words)
    srt = get_writer("srt")(Transcript(seg.text, (seg,), "en", None, 3.0), WriterOptions(max_words_per_line=2))
    assert [block.splitlines()[2] for block in srt.strip().split("\n\n")] == ["w0 w1", "w2 w3", "w4"]
    assert "00:00:01,000 --> 00:00:01,900" in srt


# --- progress and logs -------------------------------------------------------------------------------


def test_no_color_keeps_the_bars(monkeypatch):
    from oasr_cli import output

    class Tty:
        def isatty(self):
            return True

    from rich.console import Console

    monkeypatch.setenv("NO_COLOR", "1")
    assert Console(stderr=True, force_terminal=True).no_color  # the bars' console: colour off, by rich
    monkeypatch.setattr(sys, "stderr", Tty())
    assert output.interactive(quiet=False) is True
    assert output.interactive(quiet=True) is False


def test_threads_say_why_fewer(monkeypatch, caplog):
    from oasr import cpu, threads

    monkeypatch.setattr(cpu, "available_cores", lambda: 2)
    monkeypatch.setattr(threads, "_fitted", lambda most, unmeasured: 1)
    monkeypatch.setattr(threads, "_others_busy", 1.0)
    monkeypatch.setattr(threads, "_use", lambda count: None)
    monkeypatch.setattr(threads, "_USER_OMP_THREADS", False)
    logger = logging.getLogger("oasr")
    monkeypatch.setattr(logger, "propagate", True)
    with caplog.at_level(logging.INFO, logger="oasr"):
        threads.set_threads(64)
    line = next(r.getMessage() for r in caplog.records if "CPU thread(s)" in r.getMessage())
    assert "not 64 (--threads 64)" in line and "may use 2 core(s)" in line and "other processes keep about 1.0 core(s) busy" in line


# --- eval, separate, tts, diarize --------------------------------------------------------------------


def test_der_refuses_a_hypothesis_that_is_no_rttm(cli, data_dir, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("meeting notes\nalice spoke first\n")
    code, out, err = cli("eval", "der", "--ref", data_dir / "diarization" / "sample.rttm", "--hyp", notes)
    assert code == 1 and out == "" and "notes.txt:1: not an RTTM line" in err
    empty = tmp_path / "empty.rttm"
    empty.write_text(";; no speech\n")
    code, out, err = cli("eval", "der", "--ref", data_dir / "diarization" / "sample.rttm", "--hyp", empty, "--json")
    assert code == 0 and json.loads(out)["pooled"]["der"] == pytest.approx(1.0)


def test_separate_accepts_the_licence_and_says_how_to_convert_by_hand(cli, monkeypatch, tmp_path, wavs):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = cli("separate", "--accept-license", "-o", tmp_path / "sep", wavs[0])
    assert code == 1, err  # offline: the weights cannot come, but the licence was taken
    assert "--accept-license" not in err.split("Downloaded by hand")[0]
    assert "Downloaded by hand (https://" in err and "955717e8-8726e21a.th" in err
    assert "`oasr convert 955717e8-8726e21a.th ./htdemucs`; then pass -m ./htdemucs" in err
    code, _, err = cli("separate", "-o", tmp_path / "sep", wavs[0])
    assert code == 1 and "pass --accept-license" in err


def test_the_stem_folder_is_named_after_the_model(tmp_path, monkeypatch):
    from oasr.hub import resolve
    from oasr_cli.commands.separate import model_label

    class Identity:
        bundle = str(tmp_path / "bundles" / "htdemucs_ft" / "url-abc")

    class Loaded:
        identity = Identity()

    (tmp_path / "bundles" / "htdemucs_ft" / "url-abc").mkdir(parents=True)
    monkeypatch.setattr(resolve, "bundle_origin", lambda bundle: {"name": "htdemucs_ft"})
    assert model_label(Identity.bundle, Loaded()) == "htdemucs_ft"  # not the cache key "url-abc"
    assert model_label("auto", Loaded()) == "htdemucs_ft"
    assert model_label("htdemucs") == "htdemucs"
    monkeypatch.setattr(resolve, "bundle_origin", lambda bundle: {"name": "local"})
    assert model_label(str(tmp_path / "my.th"), Loaded()) == "my"


def test_tts_speaker_error_names_the_voice(monkeypatch):
    from oasr.errors import CapabilityError
    from oasr.hub import resolve
    from oasr.pipelines.tts import _speaker

    class Identity:
        requested = "auto"
        bundle = "/cache/bundles/piper-en-us-joe-medium/pypi-1"

    class Loaded:
        identity = Identity()

    monkeypatch.setattr(resolve, "bundle_origin", lambda bundle: {"name": "piper-en-us-joe-medium"})
    with pytest.raises(CapabilityError, match="^piper-en-us-joe-medium has one speaker"):
        _speaker("3", {}, 1, Loaded())


def test_the_plot_draws_the_reference_beneath_and_names_the_file(monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    from oasr.pipelines.diarize.plot import timeline_png
    from oasr.results import SpeakerTurn, SpeakerTurns

    seen = {}
    monkeypatch.setattr(Axes, "set_title", lambda self, text, *a, **k: seen.setdefault("title", text))
    original = Axes.set_yticks
    monkeypatch.setattr(Axes, "set_yticks", lambda self, ticks, labels=None, **k: (seen.setdefault("labels", list(labels)), original(self, ticks, labels, **k))[1])
    turns = SpeakerTurns((SpeakerTurn(0.0, 1.0, "A"), SpeakerTurn(1.0, 2.0, "B")), 2.0)
    timeline_png(turns, [SpeakerTurn(0.0, 2.0, "spk1")], name="meeting.wav")
    assert seen["title"].startswith("meeting.wav: 2 speaker(s)") and "reference beneath" in seen["title"]
    assert seen["labels"] == ["A", "B", "ref spk1"]  # top to bottom once the axis is inverted: the reference last


# --- runtime: the VAD seam and the hotwords ---------------------------------------------------------------


def test_a_segment_across_a_vad_seam_stays_inside_one_region():
    from oasr.pipelines.transcribe.whisper.segments import _inside_one_region
    from oasr.pipelines.vad.energy import SpeechMap

    m = SpeechMap([(0, 16000 * 11), (16000 * 15, 16000 * 26)], 16000)  # speech 0-11 s and 15-26 s
    assert _inside_one_region(m, 8.0, 11.4) == (8.0, 11.0)  # mostly before the seam: ends with its region
    assert _inside_one_region(m, 10.8, 14.0) == (15.0, 18.0)  # mostly after: starts with the next
    assert _inside_one_region(m, 2.0, 5.0) == (2.0, 5.0)


def test_hotwords_prompt_every_window():
    from oasr.decoding.whisper.options import WhisperDecoding
    from oasr.pipelines.transcribe.whisper.decoder import WindowDecoder

    class Tok:
        def encode(self, text):
            return [ord(c) for c in text]

    class Dec:
        n_ctx = 16  # room for 7 prompt tokens

    decoder = WindowDecoder.__new__(WindowDecoder)
    decoder.tokenizer, decoder.decoder = Tok(), Dec()
    decoder.decoding = WhisperDecoding(hotwords="ab")
    assert decoder.context([]) == [32, 97, 98]
    assert decoder.context([1, 2, 3, 4, 5, 6]) == [32, 97, 98, 3, 4, 5, 6]  # the hotwords, then the latest text
    decoder.decoding = WhisperDecoding()
    assert decoder.context([1, 2]) == [1, 2]


def test_oasr_man_shows_the_page_of_an_editable_install(cli):
    code, out, err = cli("man", "eval", "der")
    assert code == 0, err
    assert out.startswith(".\\\" Generated by scripts/gen_cli_docs.py") and '.TH "OASR\\-EVAL\\-DER"' in out
    code, _, err = cli("man", "nope")
    assert code == 1 and "no manual page 'oasr-nope'" in err and "oasr-transcribe" in err


def test_off_a_terminal_a_long_file_prints_status_lines(cli, fake, wavs, monkeypatch):
    from oasr_cli import inputs

    monkeypatch.setattr(inputs, "STATUS_SECONDS", 0.0)  # every update, as a long file after each 30 s
    code, out, err = cli("transcribe", "-m", "m", wavs[2])
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[0].startswith(f"oasr: {wavs[2]}: 0:02 of 0:03 (50%), ") and "x real time, 0:0" in lines[0] and lines[0].endswith(" left")
    assert fake.calls[0].progress is not None
    code, _, err = cli("transcribe", "-m", "m", wavs[2], "-q")
    assert code == 0 and err == "" and fake.calls[1].progress is None


def test_verbose_streams_the_segments_as_they_are_decoded(cli, fake, wavs):
    code, out, err = cli("transcribe", "-m", "m", wavs[0], "-v")
    assert code == 0, err
    assert "[00:00.000 --> 00:02.400] Hello world, 1 seconds.\n" in err
    assert out.strip() == "Hello world, 1 seconds."  # the data still on stdout, once
    code, _, err = cli("transcribe", "-m", "m", wavs[0])
    assert "-->" not in err


def test_the_runtime_hears_segments_from_any_engine(monkeypatch):
    """An engine that decodes all at once (no ``streams_segments``) still reports each segment."""
    import numpy as np

    from oasr.pipelines import transcribe as pipeline

    seg = Segment(0, 0.0, 1.0, " hi", ())

    class Engine:
        tokenizer = None

        def run(self, samples, speech_map, duration, progress):
            return pipeline.EngineOutput([seg], "en", None)

    class Loaded:
        capabilities = ("transcribe",)
        architecture = "x"

        class feature_spec:
            sample_rate = 16000

        def result_provenance(self, options):
            return None

    monkeypatch.setattr(pipeline, "load_pretrained", lambda *a, **k: Loaded())
    monkeypatch.setattr(pipeline, "engine_for", lambda loaded, options: (Engine(), None))
    heard = []
    pipeline.transcribe(np.zeros(16000, dtype=np.float32), "m", on_segment=heard.append)
    assert heard == [seg]
