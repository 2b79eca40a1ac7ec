"""oasr quantize int8 --verify on the tiny Qwen2-Audio: the decoder's linear layers quantized,
the audio encoder kept float, logit cosine and token agreement reported, refused below the gates."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from qwen2_audio_refs import write_tiny_qwen2_audio  # noqa: E402

from oasr.conversion.run import convert_one  # noqa: E402
from oasr.errors import VerificationError  # noqa: E402
from oasr.quant.quantize import quantize  # noqa: E402
from oasr.quant.verify import check_gates, verify  # noqa: E402


def test_int8_verify_reports_and_gates(tmp_path, data_dir):
    write_tiny_qwen2_audio(tmp_path / "hf")
    convert_one(tmp_path / "hf", tmp_path / "b")
    result = quantize(tmp_path / "b", tmp_path / "q", scheme="int8")
    assert all(name.startswith(("language_model.", "lm_head")) for name in result.layers)
    assert any(k.startswith("audio_tower.") for k in result.kept) or not any(n.startswith("audio_tower") for n in result.layers)
    report = verify(tmp_path / "b", tmp_path / "q", data_dir / "asr" / "jfk.wav")
    assert 0.99 < report.cosine < 1.0 and 0.0 <= report.agreement <= 1.0
    assert report.gates == {"cosine": 0.999, "agreement": 0.9}
    # random weights flip near-tied tokens: this tiny model's int8 answer agrees on a quarter of
    # its tokens, which the gates refuse (a trained model's int8 is expected to pass them)
    if report.failures():
        with pytest.raises(VerificationError, match="token agreement|cosine"):
            check_gates(report)
    strict = type(report)(**{**report.to_dict(), "gates": {"cosine": 1.01, "agreement": 1.01}})
    assert len(strict.failures()) == 2
