"""WeNet folders as its training scripts write them: detection, the files read, the refusals,
hostile pickles, and decoding through ``oasr transcribe`` with every mode."""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest
import torch
import yaml

import oasr
from oasr.conversion.detect import pick_converter
from oasr.errors import ConversionError, UnsafeCheckpointError
from tests.support import wenet_refs as wr

pytestmark = pytest.mark.usefixtures("one_torch_thread")

JFK = os.path.join(os.path.dirname(__file__), "..", "..", "data", "asr", "jfk.wav")


@pytest.fixture(scope="module")
def u2pp(tmp_path_factory):
    """A U2++ folder and its reference (written once; tests copy it before editing)."""
    folder = tmp_path_factory.mktemp("wenet") / "exp"
    ref = wr.write_folder(folder, wr.train_yaml())
    return folder, ref


def _copy(folder, tmp_path):
    dst = tmp_path / "exp"
    shutil.copytree(folder, dst)
    return dst


def _edit(folder, change):
    conf = yaml.safe_load((folder / "train.yaml").read_text())
    change(conf)
    (folder / "train.yaml").write_text(yaml.safe_dump(conf))


def test_wenet_claim_wins_over_openai_whisper(u2pp, tmp_path):
    """One final.pt beside train.yaml used to go to openai-whisper ("not an openai-whisper checkpoint")."""
    cls, claims = pick_converter(u2pp[0])
    assert cls.name == "wenet"
    assert [c.converter.name for c in claims][:2] == ["wenet", "openai-whisper"]
    folder = _copy(u2pp[0], tmp_path)
    (folder / "train.yaml").unlink()  # without WeNet's config nothing claims it as WeNet
    assert pick_converter(folder)[0].name != "wenet"


def test_avg_checkpoint_and_a_file_path(u2pp, tmp_path):
    folder = _copy(u2pp[0], tmp_path)
    (folder / "final.pt").rename(folder / "avg_10.pt")
    assert pick_converter(folder)[0].name == "wenet"
    assert pick_converter(folder / "avg_10.pt")[0].name == "wenet"
    oasr.convert([folder / "avg_10.pt"], tmp_path / "b")
    loaded = oasr.load_pretrained(str(tmp_path / "b"), device="cpu", dtype="float32")
    assert loaded.capabilities >= {"ctc", "ctc_aed_rescoring"}
    assert loaded.decoding.family == "aed" and loaded.decoding.options["decoder"] == "bitransformer"


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c.update(encoder="squeezeformer"), "encoder 'squeezeformer' is not implemented"),
        (lambda c: c.update(model="transducer"), "model 'transducer' is not built"),
        (lambda c: c["encoder_conf"].update(layer_norm_type="rms_norm"), "layer_norm_type: 'rms_norm' is not implemented"),
        (lambda c: c["encoder_conf"].update(input_layer="conv2d12"), "input_layer 'conv2d12'"),
        (lambda c: c["encoder_conf"].update(mystery_knob=3), "encoder_conf mystery_knob is not a setting"),
        (lambda c: c["encoder_conf"].update(pos_enc_layer_type="rope_pos"), "pos_enc_layer_type 'rope_pos'"),
        (lambda c: c["dataset_conf"].update(fbank_conf=None, mfcc_conf={"num_mel_bins": 20}), "only fbank features"),
    ],
)
def test_refusals_name_the_setting(u2pp, tmp_path, change, message):
    folder = _copy(u2pp[0], tmp_path)
    _edit(folder, change)
    with pytest.raises(ConversionError, match=message):
        oasr.convert([folder], tmp_path / "b", fail_fast=True)
    assert not (tmp_path / "b").exists()


def test_missing_global_cmvn_is_refused(u2pp, tmp_path, cli):
    folder = _copy(u2pp[0], tmp_path)
    (folder / "global_cmvn").unlink()
    code, _, err = cli("convert", folder, tmp_path / "b")
    assert code == 1 and "names the global CMVN data/train/global_cmvn; it is not in" in err
    assert not (tmp_path / "b").exists()


def test_cmvn_must_agree_with_the_checkpoint(u2pp, tmp_path):
    folder = _copy(u2pp[0], tmp_path)
    stats = json.loads((folder / "global_cmvn").read_text())
    stats["mean_stat"][0] += 50.0
    (folder / "global_cmvn").write_text(json.dumps(stats))
    with pytest.raises(ConversionError, match="differs from global_cmvn"):
        oasr.convert([folder], tmp_path / "b", fail_fast=True)


def _kaldi_stats(ref):
    count, mean, istd = 1000.0, ref.mean.double(), ref.istd.double()
    return (mean * count).tolist() + [count], ((1 / istd**2 + mean**2) * count).tolist() + [0.0]


@pytest.mark.parametrize("binary", [False, True])
def test_kaldi_cmvn_text_and_binary(u2pp, tmp_path, binary):
    """Kaldi's stats as train.yaml points at them (is_json_cmvn false) fill a checkpoint without the buffers."""
    folder = _copy(u2pp[0], tmp_path)
    first, second = _kaldi_stats(u2pp[1])
    cols = len(first)
    if binary:
        data = b"\0BDM \x04" + struct.pack("<i", 2) + b"\x04" + struct.pack("<i", cols) + struct.pack(f"<{2 * cols}d", *first, *second)
        (folder / "cmvn.ark").write_bytes(data)
    else:
        (folder / "cmvn.ark").write_text("[\n " + " ".join(map(repr, first)) + "\n " + " ".join(map(repr, second)) + " ]\n")
    _edit(folder, lambda c: c.update(cmvn_conf={"cmvn_file": "cmvn.ark", "is_json_cmvn": False}))
    state = torch.load(folder / "final.pt")
    mean = state.pop("encoder.global_cmvn.mean")
    state.pop("encoder.global_cmvn.istd")
    torch.save(state, folder / "final.pt")
    oasr.convert([folder], tmp_path / "b")
    loaded = oasr.load_pretrained(str(tmp_path / "b"), device="cpu", dtype="float32")
    torch.testing.assert_close(loaded.model.encoder.global_cmvn.mean, mean, atol=1e-4, rtol=1e-5)


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_hostile_pickle_is_refused_with_nothing_run(u2pp, tmp_path, cli):
    folder = _copy(u2pp[0], tmp_path)
    marker = tmp_path / "executed"
    state = torch.load(folder / "final.pt")
    state["evil"] = _Payload(marker)
    torch.save(state, folder / "final.pt")
    with pytest.raises(UnsafeCheckpointError):
        oasr.convert([folder], tmp_path / "b", fail_fast=True)
    code, _, err = cli("convert", folder, tmp_path / "c")
    assert code == 1 and "refusing to unpickle" in err
    assert not marker.exists() and not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_unbuilt_decoder_is_dropped_with_a_named_warning(u2pp, tmp_path, caplog):
    folder = _copy(u2pp[0], tmp_path)
    _edit(folder, lambda c: c.update(decoder="fancy_decoder"))
    results = oasr.convert([folder], tmp_path / "b")
    assert any("ctc_aed_rescoring" in n for n in results[0].notes)
    loaded = oasr.load_pretrained(str(tmp_path / "b"), device="cpu", dtype="float32")
    assert "ctc_aed_rescoring" not in loaded.capabilities
    t = oasr.transcribe(JFK, loaded, oasr.TranscribeOptions(chunk_length=4.0, chunk_overlap=1.0))  # default: prefix beam
    assert t.provenance
    with pytest.raises(oasr.CapabilityError, match="no attention decoder"):
        oasr.transcribe(JFK, loaded, oasr.TranscribeOptions(decoding={"mode": "attention_rescoring"}))


@pytest.fixture(scope="module")
def bundle(u2pp, tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "b"
    oasr.convert([u2pp[0]], out)
    return out


def test_transcribe_every_mode_with_word_times(bundle, cli):
    """The CLI's modes decode, the default is attention rescoring, words are timed in order."""
    texts = {}
    for mode in ("auto", "ctc_greedy_search", "ctc_prefix_beam_search", "attention_rescoring"):
        code, out, err = cli("transcribe", "-m", bundle, "-f", JFK, "-F", "json", "--beam-size", "3",
                             "--decoding-option", f"mode={mode}", "--decoding-option", "reverse_weight=0.3", "--word-timestamps")
        assert code == 0, err
        data = json.loads(out)
        texts[mode] = data["text"]
        words = [w for s in data["segments"] for w in s["words"]]
        assert words and all(a["start"] <= b["start"] for a, b in zip(words, words[1:]))
        assert all(0 <= w["start"] <= w["end"] <= 11.1 for w in words)
    assert texts["auto"] == texts["attention_rescoring"]
    assert json.loads(out)["provenance"]["options"]["decoding"]["mode"] == "attention_rescoring"


def test_bad_mode_and_beam_are_usage_errors(bundle, cli):
    code, _, err = cli("transcribe", "-m", bundle, "-f", JFK, "--decoding-option", "mode=beam")
    assert code == 2 and "ctc_prefix_beam_search" in err
    code, _, err = cli("transcribe", "-m", bundle, "-f", JFK, "--beam-size", "100")
    assert code == 2 and "at most 64" in err
