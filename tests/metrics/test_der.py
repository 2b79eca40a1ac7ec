"""DER (oasr.metrics.der), RTTM/UEM reading and writing, and `oasr eval der`.

Known answers on hand-made turns, then agreement with pyannote.metrics' DiarizationErrorRate
(to 1e-6) on the AMI references against perturbed hypotheses. Real hypotheses are scored
against pyannote.metrics in test_diarize.py.
"""

from __future__ import annotations

import json
import random
import warnings

import pytest

from oasr.errors import InputError
from oasr.formats.rttm import read_rttm, read_uem, write_rttm
from oasr.formats.turns import render_turns
from oasr.metrics.der import diarization_error_rate, score_file
from oasr.results import SpeakerTurn, SpeakerTurns

T = SpeakerTurn


def test_known_answer_breakdown():
    ref = [T(0, 10, "a"), T(10, 20, "b"), T(15, 20, "c")]  # 5 s of overlap: 25 s of speech
    hyp = [T(0, 8, "x"), T(8, 12, "y"), T(12, 20, "y"), T(20, 22, "x")]
    c = score_file(ref, hyp, [(0, 25)])
    # x->a (8 s shared), y->b (10 s): confusion 8..10 (2 s), missed c (5 s), false alarm 20..22.
    assert c.mapping == {"x": "a", "y": "b"}
    assert (c.total, c.missed, c.false_alarm, c.confusion, c.correct) == pytest.approx((25, 5, 2, 2, 18))
    assert c.der == pytest.approx(9 / 25)


def test_collar_uem_and_skip_overlap():
    ref = [T(0, 10, "a"), T(10, 20, "b"), T(15, 20, "c")]
    hyp = [T(0, 10.1, "x"), T(10.1, 20, "y")]
    # A 0.5 s collar (0.25 s each side) hides the 0.1 s late change entirely.
    assert score_file(ref, hyp, [(0, 20)], collar=0.5).confusion == pytest.approx(0)
    assert score_file(ref, hyp, [(0, 20)]).confusion == pytest.approx(0.1)
    # Overlap skipped: c's 5 s are not scored, so nothing is missed.
    skipped = score_file(ref, hyp, [(0, 20)], skip_overlap=True)
    assert skipped.missed == pytest.approx(0) and skipped.total == pytest.approx(15)
    # Only inside the UEM.
    assert score_file(ref, hyp, [(0, 5)]).total == pytest.approx(5)


def test_edge_cases():
    assert score_file([], [], None).der == 0.0
    assert score_file([], [T(0, 1, "x")], None).der == 1.0  # errors on nothing to score
    assert score_file([T(0, 1, "a")], [], None).missed == pytest.approx(1)
    # A speaker's own overlapping turns count once.
    assert score_file([T(0, 2, "a"), T(1, 3, "a")], [T(0, 3, "x")], None).der == pytest.approx(0)
    with pytest.raises(InputError, match="collar"):
        score_file([], [], None, collar=-1)


def test_pooled_sums_seconds_and_lists_unscored():
    report = diarization_error_rate(
        {"f1": [T(0, 10, "a")], "f2": [T(0, 30, "b")]},
        {"f1": [T(0, 5, "x")], "f2": [T(0, 30, "y")], "other": [T(0, 1, "z")]},
    )
    assert [f.der for f in report.files] == pytest.approx([0.5, 0.0])
    assert report.pooled.der == pytest.approx(5 / 40)
    assert report.unscored == ("other",)
    data = report.to_dict()
    assert data["pooled"]["der"] == pytest.approx(5 / 40) and data["unscored"] == ["other"]
    with pytest.raises(InputError, match="not in the UEM"):
        diarization_error_rate({"f1": []}, {}, {"f2": [(0, 1)]})


def test_rttm_round_trip_and_errors(tmp_path):
    turns = SpeakerTurns(turns=(T(0.5, 1.25, "SPEAKER_00"), T(2.0, 3.5, "Jane Doe")), duration=4.0, source="/x/talk.wav")
    text = write_rttm(turns)
    assert text.splitlines()[0] == "SPEAKER talk 1 0.500 0.750 <NA> <NA> SPEAKER_00 <NA> <NA>"
    back = read_rttm(text)
    assert list(back) == ["talk"] and [t.speaker for t in back["talk"]] == ["SPEAKER_00", "Jane_Doe"]
    assert back["talk"][1].end == pytest.approx(3.5)
    assert render_turns(turns, "csv").splitlines() == ["start,end,speaker", "0.500,1.250,SPEAKER_00", "2.000,3.500,Jane Doe"]
    data = json.loads(render_turns(turns, "json"))
    assert data["speakers"] == ["SPEAKER_00", "Jane Doe"] and data["turns"][0] == {"start": 0.5, "end": 1.25, "speaker": "SPEAKER_00"}
    assert render_turns(SpeakerTurns((), 1.0), "rttm") == ""
    bad = tmp_path / "bad.rttm"
    bad.write_text("SPEAKER f 1 zero 1.0 <NA> <NA> a <NA> <NA>\n")
    with pytest.raises(InputError, match=r"bad.rttm:1: start 'zero' is not a number"):
        read_rttm(bad)
    with pytest.raises(InputError, match="no such RTTM file"):
        read_rttm(tmp_path / "missing.rttm")
    with pytest.raises(InputError, match="4 fields"):
        read_uem("f 1 0\n")
    assert read_uem(";; comment\nf NA 0.0 30.0\nf NA 40 50\n") == {"f": [(0.0, 30.0), (40.0, 50.0)]}


# -- agreement with pyannote.metrics ------------------------------------------------------------


def _annotation(turns, uri):
    from pyannote.core import Annotation, Segment

    a = Annotation(uri=uri)
    for i, t in enumerate(turns):
        a[Segment(t.start, t.end), i] = t.speaker
    return a


def assert_agrees_with_pyannote(reference, hypothesis, uem, collar, skip_overlap):
    """oasr's per-file components and pooled DER equal pyannote.metrics' to 1e-6."""
    metrics = pytest.importorskip("pyannote.metrics.diarization")
    from pyannote.core import Segment, Timeline

    ours = diarization_error_rate(reference, hypothesis, uem, collar=collar, skip_overlap=skip_overlap)
    metric = metrics.DiarizationErrorRate(collar=collar, skip_overlap=skip_overlap)
    names = {"total": "total", "missed": "missed detection", "false_alarm": "false alarm", "confusion": "confusion"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyannote warns when it approximates a missing UEM
        for f in ours.files:
            timeline = None if uem is None else Timeline([Segment(a, b) for a, b in uem[f.file]])
            theirs = metric(_annotation(reference[f.file], f.file), _annotation(hypothesis.get(f.file, []), f.file), uem=timeline, detailed=True)
            for ours_name, their_name in names.items():
                assert getattr(f, ours_name) == pytest.approx(theirs[their_name], abs=1e-6), (f.file, ours_name)
            assert f.der == pytest.approx(theirs["diarization error rate"], abs=1e-6)
    assert ours.pooled.der == pytest.approx(abs(metric), abs=1e-6)
    return ours


def _perturbed(turns, rng):
    """Shifted boundaries, dropped and relabelled turns, a false alarm: every error kind."""
    names = sorted({t.speaker for t in turns}) + ["extra"]
    out = []
    ends: dict[str, float] = {}  # no speaker overlaps themselves (pyannote would count them twice)
    for t in sorted(turns, key=lambda t: t.start):
        if rng.random() < 0.1:
            continue
        speaker = rng.choice(names) if rng.random() < 0.2 else "h_" + t.speaker
        start = max(0.0, t.start + rng.uniform(-0.4, 0.4), ends.get(speaker, 0.0))
        end = max(start + 0.05, t.end + rng.uniform(-0.4, 0.4))
        out.append(T(start, end, speaker))
        ends[speaker] = end
    out.append(T(rng.uniform(0, 20), rng.uniform(20, 31), "fa"))
    return out


@pytest.fixture(scope="module")
def ami_reference(data_dir):
    ami = data_dir / "diarization" / "ami"
    reference = {**read_rttm(ami / "debug.train.rttm"), **read_rttm(ami / "debug.development.rttm")}
    uem = {**read_uem(ami / "debug.train.uem"), **read_uem(ami / "debug.development.uem")}
    return reference, uem


@pytest.mark.parametrize("collar,skip_overlap,with_uem", [(0.0, False, True), (0.25, False, True), (0.25, True, True), (0.5, False, False), (0.25, True, False)])
def test_agrees_with_pyannote_on_perturbed_ami(ami_reference, collar, skip_overlap, with_uem):
    reference, uem = ami_reference
    rng = random.Random(f"{collar}{skip_overlap}{with_uem}")
    hypothesis = {f: _perturbed(turns, rng) for f, turns in reference.items()}
    report = assert_agrees_with_pyannote(reference, hypothesis, uem if with_uem else None, collar, skip_overlap)
    assert 0.05 < report.pooled.der < 2.0  # the perturbation made errors of every kind
    assert min(report.pooled.missed, report.pooled.false_alarm, report.pooled.confusion) > 0


# -- the command ---------------------------------------------------------------------------------


def test_cli_eval_der(cli, tmp_path, ami_reference):
    reference, uem = ami_reference
    ref_file, hyp_file, uem_file = tmp_path / "ref.rttm", tmp_path / "hyp.rttm", tmp_path / "all.uem"
    ref_file.write_text("".join(write_rttm(SpeakerTurns(tuple(t), 30.0), f) for f, t in reference.items()))
    rng = random.Random(1)
    hyp = {f: _perturbed(t, rng) for f, t in reference.items()}
    hyp_file.write_text("".join(write_rttm(SpeakerTurns(tuple(t), 30.0), f) for f, t in hyp.items()))
    uem_file.write_text("".join(f"{f} 1 {a} {b}\n" for f, regions in uem.items() for a, b in regions))
    code, out, err = cli("eval", "der", "--ref", ref_file, "--hyp", hyp_file, "--uem", uem_file, "--json")
    assert code == 0, err
    data = json.loads(out)
    expected = diarization_error_rate(read_rttm(ref_file), read_rttm(hyp_file), uem, collar=0.25)
    assert data["collar"] == 0.25 and len(data["files"]) == len(reference)
    assert data["pooled"]["der"] == pytest.approx(expected.pooled.der, abs=1e-9)
    code, out, err = cli("eval", "der", "--ref", ref_file, "--hyp", hyp_file, "--collar", "0", "--skip-overlap")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["file", "DER%"] and lines[-1].startswith("pooled") and len(lines) == len(reference) + 2
    code, out, err = cli("eval", "der", "--ref", tmp_path / "nope.rttm", "--hyp", hyp_file)
    assert code == 1 and out == "" and err.count("\n") == 1 and "no such RTTM file" in err
    code, _, err = cli("eval", "der", "--ref", ref_file, "--hyp", hyp_file, "--collar", "-1")
    assert code == 2
