"""icefall model folders as its scripts write them: which weight file is taken, where tokens are
found, the refusals, the transducer asked for by name, hostile pickles read with nothing run."""

from __future__ import annotations

import os
import pickle
import shutil
import zipfile

import pytest

torch = pytest.importorskip("torch")

from oasr.conversion.detect import pick_converter  # noqa: E402
from oasr.conversion.run import convert  # noqa: E402
from oasr.errors import ConversionError, DetectionError, OasrError, UnsafeCheckpointError  # noqa: E402
from oasr.io.bundle import read_config as read_bundle_config  # noqa: E402

from icefall_folders import SMALL, export_folder, reference_model, training_checkpoint, write_tokens  # noqa: E402


@pytest.fixture(scope="module")
def models():
    return {
        "ctc": reference_model(SMALL, ctc=True, transducer=False, seed=1),
        "rnnt": reference_model(SMALL, ctc=False, transducer=True, seed=2),
        "hybrid": reference_model(SMALL, ctc=True, transducer=True, seed=3),
    }


def _source_of(bundle) -> str:
    return next(iter(read_bundle_config(bundle).provenance.source_files))


def test_export_layout_converts_with_tokens_from_data_lang(models, tmp_path):
    src = export_folder(tmp_path / "src", models["ctc"])
    converter, claims = pick_converter(src)
    assert converter.name == "icefall" and "tokens.txt" in claims[0].reason
    convert([src], tmp_path / "out")
    config = read_bundle_config(tmp_path / "out")
    assert config.architecture == "zipformer" and config.tokenizer.kind == "icefall_tokens"
    assert config.features.kind == "kaldi_fbank" and config.features.options["snip_edges"] is False
    assert config.decoding.family == "ctc" and config.decoding.blank_id == 0
    assert _source_of(tmp_path / "out") == "pretrained.pt"


def test_weight_file_rules(models, tmp_path):
    state = {"model": models["ctc"].state_dict()}
    folder = tmp_path / "m"
    write_tokens(folder)
    exp = folder / "exp"
    exp.mkdir()
    for n in (2, 10, 9):
        training_checkpoint(exp / f"epoch-{n}.pt", models["ctc"], epoch=n)
    convert([folder], tmp_path / "a")
    assert _source_of(tmp_path / "a") == "epoch-10.pt"  # the highest number, not the last by name
    torch.save(state, exp / "checkpoint.pt")
    convert([folder], tmp_path / "b")
    assert _source_of(tmp_path / "b") == "checkpoint.pt"  # a named file before the epochs
    torch.save(state, exp / "model.pt")
    torch.save(state, exp / "pretrained.pt")
    convert([folder], tmp_path / "c")
    assert _source_of(tmp_path / "c") == "pretrained.pt"
    convert([exp / "epoch-2.pt"], tmp_path / "d", architecture="icefall")  # a file named: that file
    assert _source_of(tmp_path / "d") == "epoch-2.pt"


def test_lone_pt_and_refusals(models, tmp_path):
    folder = tmp_path / "m"
    write_tokens(folder)
    torch.save({"model": models["ctc"].state_dict()}, folder / "averaged.pt")
    convert([folder], tmp_path / "a", architecture="icefall")
    assert _source_of(tmp_path / "a") == "averaged.pt"
    torch.save({"model": models["ctc"].state_dict()}, folder / "other.pt")
    with pytest.raises(ConversionError, match="several weight files .*averaged.pt, other.pt"):
        convert([folder], tmp_path / "b", architecture="icefall")
    empty = tmp_path / "empty"
    write_tokens(empty)
    with pytest.raises(ConversionError, match="holds no icefall weights"):
        convert([empty], tmp_path / "c", architecture="icefall")
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_weights_in_the_folder_and_tokens_beside_them(models, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    torch.save({"model": models["ctc"].state_dict()}, folder / "pretrained.pt")
    write_tokens(folder)
    # openai-whisper's converter claims any lone .pt at the same (asset-layout) level: a tie that
    # names both, and --architecture settles it
    with pytest.raises(DetectionError, match="icefall .*tokens.txt beside pretrained.pt"):
        pick_converter(folder)
    convert([folder], tmp_path / "out", architecture="icefall")
    no_tokens = tmp_path / "bare"
    no_tokens.mkdir()
    shutil.copy(folder / "pretrained.pt", no_tokens)
    assert pick_converter(no_tokens)[0].name != "icefall"  # a positive claim: weights alone are not icefall's


def test_epoch_checkpoint_is_read_without_its_optimizer(models, tmp_path, monkeypatch):
    folder = tmp_path / "m"
    write_tokens(folder / "data" / "lang_bpe_500")
    (folder / "exp").mkdir(parents=True)
    path = training_checkpoint(folder / "exp" / "epoch-3.pt", models["ctc"])
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)  # its params hold a PosixPath: torch's safe reader refuses it
    from oasr.io import closed_pickle

    read = []
    original = closed_pickle.Members.read
    monkeypatch.setattr(closed_pickle.Members, "read", lambda self, name, *a, **k: read.append(name) or original(self, name, *a, **k))
    convert([folder], tmp_path / "out")
    storages = [n for n in read if "/data/" in n]
    assert len(storages) == len(models["ctc"].state_dict())  # the model's tensors, no optimizer state


def test_transducer_needs_its_architecture(models, tmp_path):
    src = export_folder(tmp_path / "src", models["rnnt"])
    with pytest.raises(ConversionError, match="pass --architecture transducer"):
        convert([src], tmp_path / "a")
    convert([src], tmp_path / "b", architecture="transducer")
    config = read_bundle_config(tmp_path / "b")
    assert config.decoding.family == "rnnt" and config.decoding.options["context_size"] == 2
    assert config.model["head"] == "transducer"
    ctc_only = export_folder(tmp_path / "ctc", models["ctc"])
    with pytest.raises(ConversionError, match="no transducer head"):
        convert([ctc_only], tmp_path / "c", architecture="transducer")


def test_hybrid_is_what_architecture_says(models, tmp_path, caplog):
    src = export_folder(tmp_path / "src", models["hybrid"])
    with pytest.raises(ConversionError, match="--architecture icefall-ctc or --architecture transducer"):
        convert([src], tmp_path / "a")
    convert([src], tmp_path / "ctc", architecture="icefall-ctc")
    assert "transducer head is not converted" in caplog.text
    convert([src], tmp_path / "rnnt", architecture="transducer")
    assert "CTC head is not converted" in caplog.text
    assert "simple_am_proj" not in caplog.text  # the training heads go silently
    assert read_bundle_config(tmp_path / "ctc").model["head"] == "ctc"
    assert read_bundle_config(tmp_path / "rnnt").model["head"] == "transducer"


def test_an_incomplete_attention_decoder_is_refused_by_name(models, tmp_path):
    state = dict(models["ctc"].state_dict())
    state["attention_decoder.decoder.embed.weight"] = torch.zeros(20, 8)
    folder = tmp_path / "m"
    write_tokens(folder)
    (folder / "exp").mkdir()
    torch.save({"model": state}, folder / "exp" / "pretrained.pt")
    with pytest.raises(ConversionError, match="the attention decoder lacks attention_decoder.decoder.layers.0"):
        convert([folder], tmp_path / "out")


def test_other_icefall_encoders_are_refused_by_name(models, tmp_path):
    state = {k: v for k, v in models["rnnt"].state_dict().items() if not k.startswith("encoder")}
    state["encoder.encoder.layers.0.feed_forward.0.weight"] = torch.zeros(4, 4)
    folder = tmp_path / "m"
    write_tokens(folder)
    torch.save({"model": state}, folder / "pretrained.pt")
    with pytest.raises(ConversionError, match="Conformer encoder .* not supported"):
        convert([folder], tmp_path / "out", architecture="transducer")


class _Exploit:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ['OASR_EXPLOIT_MARK']}",))


@pytest.mark.parametrize("where", ["model", "params"])
def test_hostile_pickle_is_refused_with_nothing_run(models, tmp_path, monkeypatch, where):
    mark = tmp_path / "ran"
    monkeypatch.setenv("OASR_EXPLOIT_MARK", str(mark))
    checkpoint = {"model": dict(models["ctc"].state_dict())}
    if where == "model":
        checkpoint["model"]["encoder_embed.out.bias"] = _Exploit()
    else:
        checkpoint["sampler"] = _Exploit()
    folder = tmp_path / "m"
    write_tokens(folder)
    (folder / "exp").mkdir()
    torch.save(checkpoint, folder / "exp" / "epoch-1.pt")
    assert zipfile.is_zipfile(folder / "exp" / "epoch-1.pt")
    with pytest.raises(UnsafeCheckpointError, match="system"):
        convert([folder], tmp_path / "out")
    assert not mark.exists() and not (tmp_path / "out").exists()


def test_torchscript_export_is_read_as_data(models, tmp_path):
    """``export.py --jit``'s names: the encoder and its front wrapped as ``encoder.encoder*``."""
    from torch import nn

    class EncoderModel(nn.Module):
        def __init__(self, encoder, encoder_embed):
            super().__init__()
            self.encoder, self.encoder_embed = encoder, encoder_embed

        def forward(self, x):
            return x

    class Exported(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.encoder = EncoderModel(m.encoder, m.encoder_embed)
            self.ctc_output = m.ctc_output

        def forward(self, x):
            return x

    import copy

    exported = Exported(copy.deepcopy(models["ctc"]))
    folder = tmp_path / "m"
    write_tokens(folder)
    traced = torch.jit.trace(exported, torch.zeros(1))
    traced.save(str(folder / "cpu_jit.pt"))
    convert([folder], tmp_path / "jit", architecture="icefall")
    torch.save({"model": models["ctc"].state_dict()}, tmp_path / "pretrained.pt")
    shutil.copy(folder / "tokens.txt", tmp_path / "tokens.txt")
    from safetensors.torch import load_file

    jit = load_file(tmp_path / "jit" / "model.safetensors")
    plain = {k: v for k, v in models["ctc"].state_dict().items() if k in jit}
    assert set(jit) == set(plain) and all(torch.equal(jit[k], plain[k]) for k in jit)
