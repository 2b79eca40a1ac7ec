"""`oasr transcribe` from the command line: flags -> TranscribeOptions, output routing, batches,
usage errors and bad input, with a stand-in for ``oasr.transcribe``; one real run (slow)."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import oasr
from oasr.errors import CapabilityError, InputError
from oasr.decoding.whisper.options import WhisperDecoding
from oasr.options import TranscribeOptions
from oasr.results import ResultProvenance, Segment, Transcript, Word

from tests.formats.test_formats import read_srt, read_vtt
from cli_checks import one_line_error as _one_line_error


@dataclasses.dataclass
class Call:
    audio: np.ndarray
    model: object
    options: TranscribeOptions
    device: str
    dtype: str
    progress: object


class FakeTranscribe:
    """Stands in for ``oasr.transcribe``: records its calls, returns a handmade Transcript.

    The text says how long the audio was, so tests can tell which file a transcript is for.
    """

    def __init__(self):
        self.calls: list[Call] = []
        self.fail_on: dict[int, BaseException] = {}  # samples -> exception to raise
        self.silent = False

    def __call__(self, audio, model, options=TranscribeOptions(), *, device="auto", dtype="auto", progress=None, on_segment=None):
        self.calls.append(Call(audio, model, options, device, dtype, progress))
        if len(audio) in self.fail_on:
            raise self.fail_on[len(audio)]
        seconds = len(audio) / 16000
        if progress is not None:
            progress(seconds / 2, seconds)
            progress(seconds, seconds)
        if self.silent:
            return Transcript("", (), "en", None, seconds)
        words = (Word(" Hello", 0.0, 0.5, 0.9), Word(" world,", 0.5, 1.0, 0.9), Word(f" {seconds:g}", 1.2, 1.8, 0.8), Word(" seconds.", 1.8, 2.4, 0.9))
        text = f" Hello world, {seconds:g} seconds."
        seg = Segment(0, 0.0, 2.4, text, (50364, 1), words if options.word_timestamps else None, seek=0, temperature=0.0, avg_logprob=-0.2, compression_ratio=1.1, no_speech_prob=0.01)
        # as the runtime does: the provenance names the model as it was asked for
        provenance = ResultProvenance(model=model.spec if isinstance(model, FakeModel) else str(model))
        if on_segment is not None:  # as the runtime does: each segment as it is decoded
            on_segment(seg)
        return Transcript(text, (seg,), options.language or "en", None if options.language else 0.93, seconds, provenance)


@dataclasses.dataclass(frozen=True)
class FakeModel:
    spec: str
    device: str
    dtype: str
    task: str = "transcribe"


class FakeLoader:
    """Stands in for ``oasr.load_pretrained``: records what was loaded; raises for "bad-model"."""

    def __init__(self):
        self.loads: list[FakeModel] = []
        self.hub_steps: list[tuple[str, str]] = []  # reported to progress(step, message) while "fetching"

    def __call__(self, spec, *, task=None, device=None, dtype=None, progress=None):
        if str(spec) == "bad-model":
            raise oasr.InputError("unknown model 'bad-model'; see oasr models list")
        for step, message in self.hub_steps:
            if progress is not None:
                progress(step, message)
        self.loads.append(FakeModel(str(spec), device, dtype, task))
        return self.loads[-1]


@pytest.fixture
def loader(monkeypatch) -> FakeLoader:
    loader = FakeLoader()
    monkeypatch.setattr(oasr, "load_pretrained", loader, raising=False)
    return loader


@pytest.fixture
def fake(monkeypatch, loader) -> FakeTranscribe:
    fake = FakeTranscribe()
    monkeypatch.setattr(oasr, "transcribe", fake, raising=False)
    return fake


def _tone(path: Path, seconds: float, rate: int = 16000, channels: int = 1) -> Path:
    t = np.arange(int(seconds * rate)) / rate
    x = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    sf.write(path, np.stack([x] * channels, axis=1) if channels > 1 else x, rate)
    return path


@pytest.fixture
def wavs(tmp_path) -> list[Path]:
    """Three inputs of 1, 2 and 3 seconds (a 44.1 kHz stereo one among them)."""
    return [_tone(tmp_path / "one.wav", 1.0), _tone(tmp_path / "two.flac", 2.0, 44100, 2), _tone(tmp_path / "three.ogg", 3.0)]




def _usage_error(code: int, err: str, needle: str) -> None:
    assert code == 2, err
    assert needle in " ".join(err.split()), err


# --- flags -> TranscribeOptions ------------------------------------------------------------------------


def test_defaults_are_the_dataclass_defaults(cli, fake, wavs):
    code, out, err = cli("transcribe", "-m", "some-model", "-f", wavs[0])
    assert code == 0, err
    (call,) = fake.calls
    assert call.options == TranscribeOptions()
    assert call.model == FakeModel("some-model", "auto", "auto")  # loaded (and resolved) by oasr.load_pretrained
    assert (call.device, call.dtype) == ("auto", "auto")
    assert callable(call.progress)  # stderr is not a terminal here: status lines now and then (none for a short file)
    assert out == "Hello world, 1 seconds.\n" and err == ""
    assert call.audio.dtype == np.float32 and len(call.audio) == 16000


def test_every_flag_maps_onto_its_field(cli, fake, wavs):
    code, _, err = cli(
        "transcribe", "-m", "m", "-f", wavs[0],
        "--language", "de", "--task", "translate", "--beam-size", "3", "--best-of", "2", "--patience", "1.5",
        "--length-penalty", "0.6", "--temperature", "0.1", "--temperature-increment-on-fallback", "0.3",
        "--compression-ratio-threshold", "none", "--logprob-threshold", "-2", "--no-speech-threshold", "0.4",
        "--no-condition-on-previous-text", "--initial-prompt", "Kennedy, Cuba.", "--suppress-tokens", "-1,220, 50257",
        "--no-suppress-blank", "--max-initial-timestamp", "0.5", "--word-timestamps", "--prepend-punctuations", "¿(",
        "--append-punctuations", ".!", "--hallucination-silence-threshold", "2", "--vad", "energy",
        "--device", "cpu", "--dtype", "bfloat16",
    )
    assert code == 0, err
    (call,) = fake.calls
    assert call.options == TranscribeOptions(
        task="translate", language="de", word_timestamps=True, vad="energy",
        decoding=WhisperDecoding(
            beam_size=3, best_of=2, patience=1.5, length_penalty=0.6,
            temperatures=(0.1, 0.4, 0.7, 1.0), compression_ratio_threshold=None, logprob_threshold=-2.0,
            no_speech_threshold=0.4, condition_on_previous_text=False, initial_prompt="Kennedy, Cuba.",
            suppress_tokens=(-1, 220, 50257), suppress_blank=False, without_timestamps=False, max_initial_timestamp=0.5,
            prepend_punctuations="¿(", append_punctuations=".!", hallucination_silence_threshold=2.0,
        ),
    )
    assert (call.device, call.dtype) == ("cpu", "bfloat16")
    assert call.model == FakeModel("m", "cpu", "bfloat16")


@pytest.mark.parametrize(
    "flags, field, value",
    [
        (["--temperature-increment-on-fallback", "0"], "temperatures", (0.0,)),
        (["--temperature-increment-on-fallback", "none"], "temperatures", (0.0,)),
        (["--temperature", "0.5", "--temperature-increment-on-fallback", "0.25"], "temperatures", (0.5, 0.75, 1.0)),
        (["--suppress-tokens", ""], "suppress_tokens", ()),
        (["--language", "auto"], "language", None),
        (["-l", "fr"], "language", "fr"),
        (["--without-timestamps"], "without_timestamps", True),
        (["--no-speech-threshold", "off"], "no_speech_threshold", None),
        (["--vad", "silero"], "vad", "silero"),
    ],
)
def test_flag_values(cli, fake, wavs, flags, field, value):
    code, _, err = cli("transcribe", "-m", "m", "-f", wavs[0], *flags)
    assert code == 0, err
    options = fake.calls[0].options
    if hasattr(options, field):
        assert getattr(options, field) == value
    else:  # a Whisper flag: set, it makes the decoding section
        assert options.decoding is not None and getattr(options.decoding, field) == value


def test_whisper_flags_at_their_defaults_leave_the_family_defaults(cli, fake, wavs):
    # (--beam-size is no Whisper-only flag: given, even as 5, it asks every family for that beam; tests/cli/test_cli_decoder.py)
    code, _, err = cli("transcribe", "-m", "m", "-f", wavs[0], "--temperature", "0", "--best-of", "5", "-l", "en")
    assert code == 0, err
    assert fake.calls[0].options.decoding is None and fake.calls[0].options.language == "en"


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--beam-size", "0"], "--beam-size must be at least 1"),
        (["--word-timestamps", "--without-timestamps"], "drop --without-timestamps"),
        (["--hallucination-silence-threshold", "2"], "needs --word-timestamps"),
        (["--length-penalty", "-20"], "length_penalty must be at least 0"),  # no family takes it (3 is a speech LLM's)
        (["--logprob-threshold", "low"], "'low' is not a number"),
        (["--suppress-tokens", "1,x"], "not a comma-separated list of token ids"),
        (["--temperature-increment-on-fallback", "-0.2"], "must be positive"),
        (["--vad", "webrtc"], "'webrtc' is not one of"),
        (["--task", "summarise"], "'summarise' is not one of"),
        (["--device", "tpu"], "'tpu' is not one of"),
    ],
)
def test_bad_flag_values_are_usage_errors(cli, fake, wavs, flags, needle):
    code, out, err = cli("transcribe", "-m", "m", "-f", wavs[0], *flags)
    _usage_error(code, err, needle)
    assert out == "" and not fake.calls


# --- output routing ---------------------------------------------------------------------------------------------


def test_o_file_takes_the_format_from_its_extension(cli, fake, wavs, tmp_path):
    code, out, err = cli("transcribe", "-m", "m", "-f", wavs[0], "-o", tmp_path / "out.srt")
    assert code == 0 and out == "", err
    (cue,) = read_srt((tmp_path / "out.srt").read_text(encoding="utf-8"))
    assert cue.lines == ["Hello world, 1 seconds."]
    code, _, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "-o", tmp_path / "x.txt", "-F", "json")  # -F wins
    assert code == 0 and json.loads((tmp_path / "x.txt").read_text())["text"] == " Hello world, 1 seconds."


def test_o_dash_is_stdout(cli, fake, wavs):
    code, out, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "-o", "-", "-F", "vtt")
    assert code == 0 and read_vtt(out)[0].lines == ["Hello world, 1 seconds."]


def test_o_file_with_every_format(cli, fake, wavs, tmp_path):
    code, out, err = cli("transcribe", "-m", "m", "-f", wavs[0], "-o", tmp_path / "talk.srt", "-F", "all")
    assert code == 0 and out == "", err
    assert sorted(p.name for p in tmp_path.glob("talk.*")) == sorted(f"talk.{f}" for f in ("txt", "srt", "vtt", "json", "tsv", "lrc"))


def test_output_dir_batch(cli, fake, wavs, tmp_path):
    dst = tmp_path / "subs" / "deep"
    code, out, err = cli("transcribe", "-m", "m", *[a for w in wavs for a in ("-f", w)], "--output-dir", dst, "-F", "srt", "-F", "json")
    assert code == 0 and out == "", err
    assert sorted(p.name for p in dst.iterdir()) == sorted(f"{s}.{e}" for s in ("one", "two", "three") for e in ("srt", "json"))
    assert json.loads((dst / "three.json").read_text())["source"] == str(wavs[2])
    assert read_srt((dst / "two.srt").read_text())[0].lines == ["Hello world, 2 seconds."]
    code, _, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "--output-dir", dst)  # default format: txt
    assert code == 0 and (dst / "one.txt").read_text() == "Hello world, 1 seconds.\n"


def test_files_are_written_atomically(cli, fake, wavs, tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("previous\n")
    fake.fail_on[16000] = RuntimeError("boom")
    code, _, err = cli("transcribe", "-m", "m", "-f", wavs[0], "-o", target)
    assert code == 1 and "boom" in err
    assert target.read_text() == "previous\n"  # a failed run leaves the destination as it was
    fake.fail_on.clear()
    code, _, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "-o", target)
    assert code == 0 and target.read_text() == "Hello world, 1 seconds.\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp files left
    replaced = []
    monkeypatch.setattr("os.replace", lambda a, b: replaced.append((Path(a), Path(b))) or Path(a).rename(b))
    cli("transcribe", "-m", "m", "-f", wavs[0], "-o", target)
    assert replaced and replaced[0][1] == target and replaced[0][0].parent == target.parent


def test_several_inputs_on_stdout_are_separated(cli, fake, wavs):
    code, out, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "-f", wavs[1])
    assert code == 0
    assert out == f"==> {wavs[0]} <==\nHello world, 1 seconds.\n\n==> {wavs[1]} <==\nHello world, 2 seconds.\n"


def test_positional_inputs_follow_the_f_ones(cli, fake, wavs):
    code, out, _ = cli("transcribe", "-m", "m", wavs[2], "-f", wavs[0])
    assert code == 0 and out.index(str(wavs[0])) < out.index(str(wavs[2]))


def test_json_output(cli, fake, wavs):
    code, out, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "--json")
    data = json.loads(out)
    assert code == 0 and data["text"] == " Hello world, 1 seconds." and data["language_probability"] == 0.93
    assert {"text", "segments", "language", "provenance"} <= set(data) and data["source"] == str(wavs[0])
    code, out, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "-f", wavs[1], "--json")  # JSON Lines
    lines = out.splitlines()
    assert code == 0 and [json.loads(line)["duration"] for line in lines] == [1.0, 2.0]


def test_subtitle_line_limits_reach_the_writer(cli, fake, wavs):
    code, out, err = cli("transcribe", "-m", "m", "-f", wavs[0], "-F", "srt", "--word-timestamps", "--max-line-width", "12", "--max-line-count", "1")
    assert code == 0, err
    cues = read_srt(out)
    assert [c.lines for c in cues] == [["Hello world,"], ["1 seconds."]]
    code, out, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "-F", "vtt", "--word-timestamps", "--highlight-words")
    assert code == 0 and sum("<u>" in " ".join(c.lines) for c in read_vtt(out)) == 4


def test_stdin(cli, fake, monkeypatch, wavs):
    class Stdin:
        buffer = io.BytesIO(wavs[1].read_bytes())

        def isatty(self):
            return False

    monkeypatch.setattr(sys, "stdin", Stdin())
    code, out, err = cli("transcribe", "-m", "m", "-f", "-", "--json")
    assert code == 0, err
    assert json.loads(out)["source"] == "-" and len(fake.calls[0].audio) == 32000


@pytest.mark.parametrize(
    "args, needle",
    [
        ([], "no audio to transcribe: pass -f AUDIO"),
        (["-f", "{0}", "-f", "{1}", "-o", "{tmp}/out.txt"], "takes one input, not 2; use --output-dir"),
        (["-f", "{0}", "-F", "all", "-o", "-"], "cannot all go to stdout"),
        (["-f", "{0}", "-F", "txt", "-F", "srt", "-o", "-"], "cannot all go to stdout"),
        (["-f", "{0}", "-o", "{tmp}/a.txt", "--output-dir", "{tmp}"], "not both"),
        (["-f", "{0}", "--json", "-o", "{tmp}/a.json"], "--json prints JSON on stdout"),
        (["-f", "{0}", "--json", "-F", "srt"], "drop -F"),
        (["-f", "{0}", "-o", "{tmp}/a.docx"], "cannot tell the format from 'a.docx'"),
        (["-f", "{0}", "-o", "{tmp}"], "is a directory; use --output-dir"),
        (["-f", "{0}", "--output-dir", "{0}"], "is not a directory"),
        (["-f", "{0}", "--max-line-width", "30"], "applies to srt and vtt output"),
        (["-f", "{0}", "-F", "srt", "--max-line-count", "2"], "--max-line-count needs --max-line-width"),
        (["-f", "{0}", "-F", "srt", "--max-line-width", "0"], "must be at least 1"),
        (["-f", "{0}", "-F", "srt", "--highlight-words"], "--highlight-words needs --word-timestamps"),
        (["-f", "-", "-f", "-"], "stdin ('-') can be read only once"),
        (["-f", "{0}", "-f", "{tmp}/other/one.wav", "--output-dir", "{tmp}/o"], "would both write"),
    ],
)
def test_usage_errors(cli, fake, wavs, tmp_path, args, needle):
    args = [a.format(*wavs, tmp=tmp_path) for a in args]
    code, out, err = cli("transcribe", "-m", "m", *args)
    _usage_error(code, err, needle)
    assert out == "" and not fake.calls


# --- bad input and batches -------------------------------------------------------------------------------------------


def test_missing_file_is_one_line_and_the_model_never_loads(cli, fake, loader, tmp_path):
    code, out, err = cli("transcribe", "-m", "m", "-f", tmp_path / "nope.wav")
    _one_line_error(code, err, "no such file", "nope.wav")
    assert out == "" and not fake.calls and not loader.loads


def test_empty_file(cli, fake, tmp_path):
    (tmp_path / "blank.wav").write_bytes(b"")
    code, out, err = cli("transcribe", "-m", "m", "-f", tmp_path / "blank.wav")
    _one_line_error(code, err, "blank.wav", "is empty")
    assert out == ""


def test_non_audio_file(cli, fake, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no ffmpeg to fall back on
    (tmp_path / "notes.wav").write_text("not audio at all\n" * 50)
    code, out, err = cli("transcribe", "-m", "m", "-f", tmp_path / "notes.wav")
    _one_line_error(code, err, "cannot decode", "notes.wav")
    assert out == "" and not fake.calls


def test_a_broken_container_without_ffmpeg_is_one_line(cli, fake, tmp_path, monkeypatch):
    # Containers decode through PyAV (no ffmpeg binary needed); a broken one is still one line.
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (tmp_path / "talk.m4a").write_bytes(b"\x00\x00\x00\x20ftypM4A " + b"\x00" * 100)
    code, _, err = cli("transcribe", "-m", "m", "-f", tmp_path / "talk.m4a")
    _one_line_error(code, err, "talk.m4a", "cannot decode")


def test_silence_is_empty_output_and_success(cli, fake, tmp_path):
    fake.silent = True
    sf.write(tmp_path / "silence.wav", np.zeros(16000, dtype=np.float32), 16000)
    code, out, err = cli("transcribe", "-m", "m", "-f", tmp_path / "silence.wav")
    assert (code, out, err) == (0, "", "")


def test_batch_goes_on_past_bad_files(cli, fake, wavs, tmp_path):
    (tmp_path / "bad.wav").write_text("garbage " * 100)
    missing = tmp_path / "missing.wav"
    code, out, err = cli("transcribe", "-m", "m", "-f", wavs[0], "-f", tmp_path / "bad.wav", "-f", missing, "-f", wavs[2], "--output-dir", tmp_path / "out")
    assert code == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["one.txt", "three.txt"]
    lines = err.splitlines()
    assert len(lines) == 3, err
    assert lines[0].startswith("oasr: error: no such file") and "missing.wav" in lines[0]  # found before decoding
    assert lines[1].startswith("oasr: error: cannot decode") and "bad.wav" in lines[1]
    assert lines[2] == f"oasr: 2 of 4 file(s) failed: {missing}, {tmp_path / 'bad.wav'}"
    assert len(fake.calls) == 2


def test_fail_fast_stops_at_the_first_failure(cli, fake, wavs, tmp_path):
    fake.fail_on[32000] = InputError("cannot transcribe this")
    code, out, err = cli("transcribe", "-m", "m", "-f", wavs[0], "-f", wavs[1], "-f", wavs[2], "--fail-fast")
    assert code == 1
    assert len(fake.calls) == 2 and "3 seconds" not in out
    assert f"oasr: error: {wavs[1]}: cannot transcribe this" in err  # the file is named
    assert "1 of 3 file(s) failed" in err


def test_fail_fast_on_a_missing_file_stops_before_the_model(cli, fake, loader, wavs, tmp_path):
    code, _, err = cli("transcribe", "-m", "m", "-f", tmp_path / "nope.wav", "-f", wavs[0], "--fail-fast")
    assert code == 1 and not fake.calls and not loader.loads and "nope.wav" in err


def test_a_model_that_does_not_load_stops_everything(cli, fake, wavs):
    code, out, err = cli("transcribe", "-m", "bad-model", "-f", wavs[0], "-f", wavs[1])
    _one_line_error(code, err, "unknown model 'bad-model'")
    assert out == "" and not fake.calls


def test_a_model_error_stops_the_batch(cli, fake, wavs):
    fake.fail_on[16000] = CapabilityError("tiny.en transcribes English only; drop --language fr")
    code, out, err = cli("transcribe", "-m", "m", "-f", wavs[0], "-f", wavs[1])
    _one_line_error(code, err, "English only")
    assert len(fake.calls) == 1 and out == ""


def test_internal_error_in_one_file(cli, fake, wavs):
    fake.fail_on[16000] = ZeroDivisionError("division by zero")
    code, out, err = cli("transcribe", "-m", "m", "-f", wavs[0], "-f", wavs[1])
    assert code == 1 and "Hello world, 2 seconds." in out
    assert "oasr: internal error: ZeroDivisionError: division by zero" in err


@pytest.mark.parametrize("spec", ["auto", "{tmp}/bundle"])
def test_the_model_is_loaded_once_for_the_batch(cli, fake, loader, wavs, tmp_path, spec):
    spec = spec.format(tmp=tmp_path)
    code, _, err = cli("transcribe", "-m", spec, *wavs, "--device", "cpu", "--output-dir", tmp_path / "o", "-F", "json")
    assert code == 0, err
    assert loader.loads == [FakeModel(spec, "cpu", "auto", "transcribe")]
    assert [c.model for c in fake.calls] == loader.loads * 3
    # the provenance names the model as the user gave it
    assert json.loads((tmp_path / "o" / "one.json").read_text())["provenance"]["model"] == spec


# --- progress -------------------------------------------------------------------------------------------------


def test_progress_bar_only_on_a_terminal(cli, fake, wavs, monkeypatch):
    from oasr_cli import output

    monkeypatch.setattr(output, "on_terminal", lambda stream=None: True)
    code, out, _ = cli("transcribe", "-m", "m", "-f", wavs[0], "-f", wavs[1])
    assert code == 0 and all(callable(c.progress) for c in fake.calls)
    assert "Hello world, 2 seconds." in out
    fake.calls.clear()
    cli("transcribe", "-m", "m", "-f", wavs[0], "--quiet")
    assert fake.calls[0].progress is None


def test_verbose_logs_the_language(cli, fake, wavs):
    code, _, err = cli("transcribe", "-m", "m", "-f", wavs[0], "--verbose")
    assert code == 0 and re.search(r"oasr: info: .*one\.wav: 1\.0 s of audio .* language en \(detected, p=0\.93\)", err)


def test_help_does_not_import_torch():
    import subprocess

    code = "import sys; from oasr_cli.main import main; main(['transcribe', '--help']); assert 'torch' not in sys.modules, 'torch imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "--max-line-width" in proc.stdout


# --- real weights (slow) --------------------------------------------------------------------------------------------


def _pipeline_or_skip():
    try:
        return oasr.transcribe
    except AttributeError:
        pytest.skip("oasr.transcribe (the transcription pipeline) is not available yet")


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]", " ", text.lower()).split()


@pytest.mark.slow
def test_real_run_prints_the_text(cli, tiny_en_bundle, jfk_wav, data_dir):
    _pipeline_or_skip()
    code, out, err = cli("transcribe", "-m", tiny_en_bundle, "-f", jfk_wav, "--device", "cpu")
    assert code == 0, err
    reference = _words((data_dir / "asr" / "jfk.txt").read_text())
    hyp = _words(out)
    assert len(set(reference) - set(hyp)) <= 1, out
    assert out.endswith("\n")


@pytest.mark.slow
def test_real_run_on_silence_is_empty(cli, tiny_en_bundle, tmp_path):
    _pipeline_or_skip()
    sf.write(tmp_path / "silence.wav", np.zeros(16000 * 5, dtype=np.float32), 16000)
    code, out, err = cli("transcribe", "-m", tiny_en_bundle, "-f", tmp_path / "silence.wav", "--device", "cpu")
    assert (code, out) == (0, ""), err
