"""SDR and SI-SDR against fast-bss-eval, window by window, and `oasr eval sdr` on folders of stems."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import soundfile as sf

fast_bss_eval = pytest.importorskip("fast_bss_eval", reason="fast-bss-eval is not installed (make install-test)")

RATE = 8000
TOL_DB = 0.01


def _synthetic(seed: int, n: int, sources: int = 3):
    """References and estimates: each estimate a filtered reference, a little of the others, noise."""
    rng = np.random.default_rng(seed)
    ref = rng.standard_normal((sources, n))
    ref[0] = np.convolve(ref[0], np.hanning(9), mode="same")  # one coloured source
    est = np.empty_like(ref)
    for j in range(sources):
        filtered = np.convolve(ref[j], [1.0, 0.4, -0.2], mode="same")
        est[j] = filtered + 0.3 * ref[(j + 1) % sources] + (0.1 + 0.2 * j) * rng.standard_normal(n)
    return ref, est


def test_sdr_matches_fast_bss_eval():
    from oasr.metrics.sdr import sdr

    ref, est = _synthetic(0, 3 * RATE)
    want = fast_bss_eval.sdr(ref, est, filter_length=512)  # the identity permutation is the best here
    got = [sdr(ref[j], est[j]) for j in range(3)]
    assert np.abs(np.asarray(got) - want).max() < TOL_DB


def test_framewise_median_matches_fast_bss_eval_per_window():
    from oasr.metrics.sdr import framewise_sdr, median_sdr

    ref, est = _synthetic(1, int(5.5 * RATE))  # five whole 1 s windows; the last half second is not scored
    frames = [framewise_sdr(ref[j], est[j], RATE) for j in range(3)]
    assert all(len(f) == 5 for f in frames)
    windows = [fast_bss_eval.sdr(ref[:, a : a + RATE], est[:, a : a + RATE], filter_length=512) for a in range(0, 5 * RATE, RATE)]
    want = np.median(np.stack(windows), axis=0)
    got = [median_sdr(f) for f in frames]
    assert np.abs(np.asarray(got) - want).max() < TOL_DB


def test_si_sdr_matches_fast_bss_eval():
    from oasr.metrics.sdr import si_sdr

    ref, est = _synthetic(2, 2 * RATE)
    want = fast_bss_eval.si_sdr(ref, est)
    got = [si_sdr(ref[j], est[j]) for j in range(3)]
    assert np.abs(np.asarray(got) - want).max() < TOL_DB


def test_silent_windows_are_left_out_of_the_median():
    from oasr.metrics.sdr import framewise_sdr

    ref, est = _synthetic(3, 3 * RATE, sources=1)
    ref[0, RATE : 2 * RATE] = 0.0
    frames = framewise_sdr(ref[0], est[0], RATE)
    assert math.isnan(frames[1]) and not math.isnan(frames[0])


def test_eval_sdr_scores_folders_of_stems(tmp_path, cli):
    ref, est = _synthetic(4, 3 * RATE, sources=2)
    names = ["vocals", "drums"]
    for track in ("t1", "t2"):
        (tmp_path / "ref" / track).mkdir(parents=True)
        (tmp_path / "est" / track).mkdir(parents=True)
        for j, name in enumerate(names):
            sf.write(tmp_path / "ref" / track / f"{name}.wav", (0.2 * ref[j]).astype(np.float32), RATE, subtype="FLOAT")
            sf.write(tmp_path / "est" / track / f"{name}.wav", (0.2 * est[j]).astype(np.float32), RATE, subtype="FLOAT")
    code, out, err = cli("eval", "sdr", "--ref", tmp_path / "ref", "--est", tmp_path / "est", "--json")
    assert code == 0, err
    report = json.loads(out)
    scaled_ref, scaled_est = ((0.2 * x).astype(np.float32).astype(np.float64) for x in (ref, est))
    windows = [fast_bss_eval.sdr(scaled_ref[:, a : a + RATE], scaled_est[:, a : a + RATE], filter_length=512) for a in range(0, 3 * RATE, RATE)]
    want = np.median(np.stack(windows), axis=0)
    by_name = {(s["track"], s["stem"]): s for s in report["stems"]}
    for j, name in enumerate(names):
        assert abs(by_name[("t1", name)]["sdr"] - want[j]) < TOL_DB
        assert by_name[("t1", name)]["frames"] == 3
    code, out, err = cli("eval", "sdr", "--ref", tmp_path / "ref", "--est", tmp_path / "est")
    assert code == 0 and "vocals" in out and "SI-SDR dB" in out


def test_eval_sdr_without_estimates_is_a_one_line_error(tmp_path, cli):
    from cli_checks import one_line_error

    (tmp_path / "ref").mkdir()
    (tmp_path / "est").mkdir()
    sf.write(tmp_path / "ref" / "vocals.wav", np.zeros(100, np.float32), RATE)
    code, _, err = cli("eval", "sdr", "--ref", tmp_path / "ref", "--est", tmp_path / "est")
    one_line_error(code, err, "holds no stems")
